"""`archscout search` end to end: the quickstart through the CLI, resume after a real kill -9,
two workers on one storage, every shipped study, and bad input."""

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from search.cli.main import main
from search.study.report import pareto_document
from search.study.resilience import WORKER_ATTR
from search.study.runner import run_study
from search.study.spec import load_spec
from search.study.storage import StorageHandle
from search.cli.study import load_study, open_storage
from search.records.tables import plain
from tests.search.study.test_pareto_set import check_pareto_set

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))


def _copy_study(tmp_path: Path, name: str = "quickstart") -> Path:
    target = tmp_path / f"{name}.toml"
    shutil.copy(REPO / "studies" / f"{name}.toml", target)
    return target


def _finished(study_path: Path) -> dict[int, tuple]:
    """trial number -> (params, values) of every finished trial in the study's storage."""
    spec = load_spec(study_path)
    study = load_study(spec, open_storage(study_path, spec, None, shared=True))
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
    return {t.number: (t.params, t.values) for t in study.get_trials(deepcopy=False,
                                                                      states=states)}


def _pareto_json(capsys, study_path: Path) -> dict:
    assert main(["pareto", str(study_path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_quickstart_end_to_end(tmp_path, capsys):
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "128", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Pareto-optimal architectures" in out and "frontier_area" in out
    doc = _pareto_json(capsys, study)
    assert doc["study"] == "quickstart" and doc["trials"] == 128 and doc["feasible"] > 0
    areas = [item["frontier_area"] for item in doc["pareto"]]
    assert areas == sorted(areas, reverse=True) and areas[0] > 0
    first = doc["pareto"][0]
    for key in ("trial", "frontier_area", "loss_proxy", "params_total", "params_active",
                "architecture", "deployment", "frontier"):
        assert key in first
    assert 0.9e9 <= first["params_total"] <= 1.5e9  # the study's budget, ±25 %


def test_same_seed_same_trials(tmp_path):
    runs = []
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        study = _copy_study(tmp_path / sub)
        assert main(["search", str(study), "--trials", "96", "--seed", "3", "--no-progress"]) == 0
        runs.append(_finished(study))
    assert runs[0] == runs[1]


def _wait_for_trials(study: Path, count: int, proc: subprocess.Popen, limit_s: float = 60.0):
    journal = study.parent / "out" / "quickstart" / "study.journal"
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"state":1') >= count:
            return
        assert proc.poll() is None, "the search ended before it could be killed"
        time.sleep(0.05)
    raise AssertionError("no trials appeared")


def test_resume_after_kill_9_keeps_every_finished_trial(tmp_path):
    study = _copy_study(tmp_path)
    cmd = [sys.executable, "-m", "search.cli.main", "search", str(study), "--trials", "100000",
           "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for_trials(study, 200, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _finished(study)
    assert len(before) >= 128 and len(before) % 64 == 0  # whole batches only, nothing partial
    target = len(before) + 64
    assert main(["search", str(study), "--trials", str(target), "--no-progress"]) == 0
    after = _finished(study)
    assert len(after) == target
    assert {n: after[n] for n in before} == before  # nothing finished was lost or changed


def _trial_record(t: optuna.trial.FrozenTrial) -> tuple:
    attrs = {k: v for k, v in t.user_attrs.items() if k != WORKER_ATTR}
    return (t.number, t.state, t.params, t.values, attrs,
            {k: v for k, v in t.system_attrs.items() if k.startswith("constraints")})


def test_default_journal_holds_what_a_direct_run_samples(tmp_path):
    """The default journal samples in an in-memory copy and persists one record per finished
    trial: the stored trials equal those of a run asking and telling directly on Optuna's
    InMemoryStorage (the shared-storage path) with the same seed."""
    study = _copy_study(tmp_path)
    spec = load_spec(study)
    run_study(spec, open_storage(study, spec, None, shared=False), 192, 5, show_progress=False)
    memory = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=True)
    run_study(spec, memory, 192, 5, show_progress=False)
    reference = optuna.load_study(study_name=spec.name, storage=memory.storage)
    stored = load_study(spec, open_storage(study, spec, None, shared=True))
    assert [_trial_record(t) for t in stored.get_trials()] == \
        [_trial_record(t) for t in reference.get_trials()]
    journal = study.parent / "out" / spec.name / "study.journal"
    trial_records = [line for line in journal.read_text().splitlines() if '"trial_id"' not in line
                     and '"datetime_start"' in line]
    assert len(trial_records) == 192  # one record per trial, nothing else about trials


def test_resumed_run_continues_the_sampler_from_the_journal(tmp_path):
    """Stopping after 128 trials and resuming to 192 gives every trial its params and values
    (the in-memory copy is rebuilt from the journal), with numbers 0…191 and no gaps."""
    study = _copy_study(tmp_path)
    for trials in ("128", "192"):
        assert main(["search", str(study), "--trials", trials, "--no-progress"]) == 0
    trials = _finished(study)
    assert sorted(trials) == list(range(192))
    assert all(params for params, _ in trials.values())


def test_two_workers_share_one_study(tmp_path, capsys):
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "192", "--workers", "2", "--no-progress"]) == 0
    capsys.readouterr()
    trials = _finished(study)
    assert len(trials) >= 192 and sorted(trials) == list(range(len(trials)))
    first, second = _pareto_json(capsys, study), _pareto_json(capsys, study)
    assert first == second
    spec = load_spec(study)
    reader = pareto_document(spec, load_study(spec, open_storage(study, spec, None, True)))
    assert [i["trial"] for i in reader["pareto"]] == [i["trial"] for i in first["pareto"]]


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_shipped_study_runs(tmp_path, capsys, path):
    """256 trials of each shipped study; its Pareto set is one (one entry per design, none
    dominated by another, exactly the non-dominated designs: `check_pareto_set`)."""
    target = tmp_path / path.name
    shutil.copy(path, target)
    assert main(["search", str(target), "--trials", "256", "--no-progress"]) == 0
    capsys.readouterr()
    doc = _pareto_json(capsys, target)
    assert doc["feasible"] > 0 and doc["pareto"]
    spec = load_spec(target)
    checked = check_pareto_set(spec, load_study(spec, open_storage(target, spec, None, True)))
    assert json.loads(json.dumps(plain(checked))) == doc  # the document the command printed


def _bad(capsys, argv, code, *fragments):
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err


def test_impossible_budget_says_which_constraints_rejected(tmp_path, capsys):
    """No design of the space is inside a 900B budget: the sampler draws 65,536 uniform
    proposals, all outside it (`proposals.UNIFORM_DRAWS`), and the search says so in one line
    naming the rule, scoring nothing."""
    study = _copy_study(tmp_path)
    study.write_text(study.read_text().replace("total_params = 1.2e9", "total_params = 9.0e11"))
    _bad(capsys, ["search", str(study), "--trials", "64", "--no-progress"], 1,
         "no feasible candidate in 0 trials", "0 accepted of 65,536 drawn",
         "rejected: params_budget 65,536")


def test_bad_spec_writes_nothing(tmp_path, capsys):
    study = _copy_study(tmp_path)
    study.write_text("colour = 'red'\n" + study.read_text())
    _bad(capsys, ["search", str(study), "--no-progress"], 2, "`colour` is not a known key")
    assert not (tmp_path / "out").exists()


def test_locked_storage_is_a_clear_error(tmp_path, capsys):
    study = _copy_study(tmp_path)
    folder = tmp_path / "out" / "quickstart"
    folder.mkdir(parents=True)
    with open(folder / "study.journal.owner", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _bad(capsys, ["search", str(study), "--no-progress"], 2, "locked by another")


def test_pareto_of_a_study_never_run(tmp_path, capsys):
    _bad(capsys, ["pareto", str(_copy_study(tmp_path))], 2, "no study `quickstart`")


def test_changed_spec_is_refused_on_resume(tmp_path, capsys):
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "64", "--no-progress"]) == 0
    capsys.readouterr()
    study.write_text(study.read_text().replace("max = 3072", "max = 4096"))
    _bad(capsys, ["search", str(study), "--trials", "128", "--no-progress"], 2,
         "different spec", "space")


def test_bad_storage_url(tmp_path, capsys):
    _bad(capsys, ["search", str(_copy_study(tmp_path)), "--storage", "nonsense"], 2,
         "`--storage`")


def test_crash_mid_append_is_repaired_on_resume(tmp_path, capsys):
    """A write cut by a crash leaves half a line; the next run drops it (it was never
    acknowledged) instead of gluing new logs onto it."""
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "64", "--no-progress"]) == 0
    journal = tmp_path / "out" / "quickstart" / "study.journal"
    with open(journal, "ab") as f:
        f.write(b'{"op_code":5,"worker_id":"x","study_id":0,"datetime_sta')
    assert main(["search", str(study), "--trials", "128", "--no-progress"]) == 0
    assert len(_finished(study)) == 128


def test_truncated_journal_is_a_clear_error(tmp_path, capsys):
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "64", "--no-progress"]) == 0
    capsys.readouterr()
    journal = tmp_path / "out" / "quickstart" / "study.journal"
    journal.write_bytes(journal.read_bytes()[: journal.stat().st_size // 2])
    _bad(capsys, ["search", str(study), "--trials", "128", "--no-progress"], 2, "is truncated")
    _bad(capsys, ["pareto", str(study)], 2, "is truncated")


def test_corrupt_journal_is_a_clear_error(tmp_path, capsys):
    study = _copy_study(tmp_path)
    assert main(["search", str(study), "--trials", "64", "--no-progress"]) == 0
    capsys.readouterr()
    journal = tmp_path / "out" / "quickstart" / "study.journal"
    lines = journal.read_bytes().split(b"\n")
    lines[3] = b"{" + b"x" * (len(lines[3]) - 1)  # same size: corrupt, not truncated
    journal.write_bytes(b"\n".join(lines))
    _bad(capsys, ["pareto", str(study)], 2, "is corrupt")


def test_a_resumed_run_copies_the_study_without_deep_copies(tmp_path):
    """The run's in-memory copy (`LocalRun.study`, filled through Optuna's `Study.add_trials`)
    holds every finished trial of the journal with the same number, state, params, values and
    attributes, sharing them (no deep copy); a trial asked in it afterwards is created as
    Optuna creates one."""
    from search.study.runner import LocalRun, add_finished, open_study
    from search.study.storage import open_default

    spec = load_spec(_copy_study(tmp_path))
    handle = open_default(tmp_path / "j" / "study.journal", shared=False)
    run_study(spec, handle, 64, 0, show_progress=False)
    handle.close()
    handle = open_default(tmp_path / "j" / "study.journal", shared=False)
    run = LocalRun(open_study(spec, handle, 0), handle, spec)
    durable = run.durable.get_trials(deepcopy=False)
    local = run.study.get_trials(deepcopy=False)
    assert [(t.number, t.state, t.params, t.values, t.user_attrs, t.system_attrs)
            for t in local] == [(t.number, t.state, t.params, t.values, t.user_attrs,
                                 t.system_attrs) for t in durable]
    assert all(a.user_attrs is b.user_attrs for a, b in zip(local, durable))
    other = optuna.create_study(directions=spec.objectives.directions)
    add_finished(other, durable[:3])
    assert [t.number for t in other.get_trials()] == [0, 1, 2]
    asked = other.ask()
    assert asked.number == 3 and other.get_trials()[3].state == optuna.trial.TrialState.RUNNING
    handle.close()
