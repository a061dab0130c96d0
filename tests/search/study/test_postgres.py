"""Scale-out on a real PostgreSQL server and the faults around it: several worker processes on
one study, kill -9 of a worker, the database restarted mid-study, stale trials failed by
heartbeat. `.ci/run` installs and starts the server and sets ARCHSCOUT_TEST_POSTGRES_URL."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import moocore
import numpy as np
import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from search.cli.main import main
from search.study.report import pareto_document
from search.study.resilience import fail_orphans
from search.study.spec import load_spec
from search.study.storage import StorageHandle
from tests.fresh_database import fresh_database

REPO = Path(__file__).resolve().parents[3]
URL = os.environ.get("ARCHSCOUT_TEST_POSTGRES_URL")
if not URL and os.environ.get("CI"):
    raise RuntimeError("CI must provide ARCHSCOUT_TEST_POSTGRES_URL (see .ci/run)")
pytestmark = pytest.mark.skipif(not URL, reason="no PostgreSQL server (set "
                                 "ARCHSCOUT_TEST_POSTGRES_URL; .ci/run starts one)")
FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


def _study_file(tmp_path: Path, batch_size: int = 64) -> Path:
    """A copy of the quickstart under a fresh study name (one database, many tests)."""
    name = f"pg-{uuid.uuid4().hex[:10]}"
    text = (REPO / "studies" / "quickstart.toml").read_text()
    text = text.replace("batch_size = 64", f"batch_size = {batch_size}")
    target = tmp_path / f"{name}.toml"
    target.write_text(text.replace('name = "quickstart"', f'name = "{name}"'))
    return target


def _trials(study_path: Path) -> list:
    spec = load_spec(study_path)
    study = optuna.load_study(study_name=spec.name, storage=URL)
    return study.get_trials(deepcopy=False)


def test_workers_share_one_study(tmp_path, capsys):
    """Three workers, batches of 16, 160 trials requested: the study ends with exactly 160
    finished trials, numbered 0 … 159, none RUNNING (each worker reserves its batch's places
    under the study row's lock, counting the others' running trials, so none is asked beyond
    the target). Before, every worker asked whole batches: 192 finished of 160 (and up to
    (workers - 1) x batch over in general)."""
    study = _study_file(tmp_path, batch_size=16)
    argv = ["search", str(study), "--storage", URL, "--trials", "160", "--workers", "3",
            "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    trials = _trials(study)
    assert sum(t.state in FINISHED for t in trials) == 160
    assert all(t.state in (*FINISHED, TrialState.PRUNED) for t in trials)  # none RUNNING
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    finished = sorted(t.number for t in trials if t.state in FINISHED)
    assert finished == list(range(160))
    workers = {t.user_attrs.get("worker") for t in trials} - {None}
    assert len(workers) == 3  # every process contributed
    spec = load_spec(study)
    doc = pareto_document(spec, optuna.load_study(study_name=spec.name, storage=URL))
    _same_front_as_a_reader(spec, trials, doc)


@pytest.fixture
def fresh_database_url():
    """A database created for this test alone (no Optuna schema in it yet), dropped after."""
    with fresh_database(URL, "fresh") as url:
        yield url


def test_eight_workers_start_at_once_on_a_fresh_database(tmp_path, fresh_database_url):
    """Eight independent `archscout search` processes (as on eight machines) started together on
    a database that has no Optuna schema yet: all create-or-join the schema and the study, and
    every one of them finishes, having opened the study and read its Pareto set (before the fix
    7 of 8 died on pg_type_typname_nsp_index). Small batches keep it quick on 2 cores."""
    study = _study_file(tmp_path, batch_size=4)
    cmd = [sys.executable, "-m", "search.cli.main", "search", str(study), "--storage",
           fresh_database_url, "--trials", "16", "--no-progress"]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(8)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, "\n".join(errors)
    spec = load_spec(study)
    trials = optuna.load_study(study_name=spec.name, storage=fresh_database_url).get_trials()
    assert all(t.state in (*FINISHED, TrialState.PRUNED) for t in trials)  # none RUNNING
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    assert sum(t.state in FINISHED for t in trials) == 16  # no worker asked beyond the target


def _same_front_as_a_reader(spec, trials, doc):
    """A reader with nothing but the stored trials finds the same non-dominated set."""
    feasible = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs["feasible"]]
    values = np.array([t.values for t in feasible])
    keep = moocore.is_nondominated(values, maximise=[True, False], keep_weakly=True)
    front = {t.number for t, k in zip(feasible, keep) if k}
    reported = {item["trial"] for item in doc["pareto"]}
    assert reported <= front and reported


def _worker(study: Path, trials: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "search.cli.main", "search", str(study), "--storage", URL,
           "--trials", str(trials), "--no-progress"]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(study: Path, count: int, proc: subprocess.Popen, limit_s: float = 90.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if sum(t.state in FINISHED for t in _trials(study)) >= count:
                return
        except KeyError:  # the study is not created yet
            pass
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} trials after {limit_s} s")


def test_kill_9_of_a_worker_keeps_finished_trials(tmp_path, capsys):
    study = _study_file(tmp_path)
    proc = _worker(study, 100_000)
    _wait_for(study, 64, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {t.number: t.values for t in _trials(study) if t.state == TrialState.COMPLETE}
    target = len(_trials(study)) + 64
    assert main(["search", str(study), "--storage", URL, "--trials", str(target),
                 "--no-progress"]) == 0
    after = {t.number: t.values for t in _trials(study) if t.state == TrialState.COMPLETE}
    assert {n: after[n] for n in before} == before


def test_stale_trials_are_failed_by_heartbeat(tmp_path):
    """A trial whose worker stopped beating is failed by the next worker's batch."""
    storage = optuna.storages.RDBStorage(URL, heartbeat_interval=1, grace_period=1)
    name = f"stale-{uuid.uuid4().hex[:10]}"
    study = optuna.create_study(study_name=name, storage=storage)
    orphan = study.ask()
    storage.record_heartbeat(orphan._trial_id)
    time.sleep(2.5)
    fail_orphans(study, StorageHandle(storage, "test"))  # the study wraps it in Optuna's cache
    assert storage.get_trial(orphan._trial_id).state == TrialState.FAIL


@pytest.mark.skipif(shutil.which("pg_ctlcluster") is None or os.geteuid() != 0,
                    reason="restarting the server needs Debian's pg_ctlcluster as root")
def test_database_restart_mid_study(tmp_path):
    study = _study_file(tmp_path)
    proc = _worker(study, 192)
    _wait_for(study, 64, proc)
    version = sorted(os.listdir("/usr/lib/postgresql"))[-1]
    subprocess.run(["pg_ctlcluster", version, "main", "stop"], check=True)
    time.sleep(3.0)  # an outage long enough that the worker meets it
    subprocess.run(["pg_ctlcluster", version, "main", "start"], check=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    trials = _trials(study)
    assert sum(t.state in FINISHED for t in trials) == 192
    # the batch the outage cut short: its asked trials were abandoned (PRUNED) on retry, not
    # left RUNNING for good
    assert not [t.number for t in trials if t.state == TrialState.RUNNING]
    assert "Traceback" not in err  # an outage the worker met is one retry line per attempt
    for noise in ("[SQL", "invalid data", "max length", "Background on this error"):
        assert noise not in err, err


def test_unreachable_database_is_one_clear_line(tmp_path, capsys):
    study = _study_file(tmp_path)
    bad = "postgresql://archscout:wrong@127.0.0.1:1/archscout"
    assert main(["search", str(study), "--storage", bad, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "`--storage`" in err and "wrong" not in err


def test_workers_record_heartbeats(tmp_path, capsys):
    """Every trial a worker asks carries a heartbeat row (the study's storage is Optuna's cache
    around RDBStorage, which must still be recognised)."""
    study = _study_file(tmp_path)
    assert main(["search", str(study), "--storage", URL, "--trials", "32", "--no-progress"]) == 0
    storage = optuna.storages.RDBStorage(URL)
    loaded = optuna.load_study(study_name=load_spec(study).name, storage=storage)
    ids = [t._trial_id for t in loaded.get_trials(deepcopy=False)]
    with storage.engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text(
            "SELECT count(*) FROM trial_heartbeats WHERE trial_id = ANY(:ids)"), {"ids": ids})
        assert rows.scalar() == len(ids)


def test_a_long_batch_keeps_beating(tmp_path):
    """Trials of a batch that outlasts the grace period are not failed while it runs."""
    from search.study.resilience import BatchHeartbeat

    storage = optuna.storages.RDBStorage(URL, heartbeat_interval=1, grace_period=2)
    name = f"beat-{uuid.uuid4().hex[:10]}"
    study = optuna.create_study(study_name=name, storage=storage)
    trial = study.ask()
    storage.record_heartbeat(trial._trial_id)
    with BatchHeartbeat(study, [trial]):
        time.sleep(4.0)
        fail_orphans(study, StorageHandle(storage, "test"))
        assert storage.get_trial(trial._trial_id).state == TrialState.RUNNING
    study.tell(trial, 1.0)


KILL_AT_FIFTH_ASK = """
import os, signal, sys
import optuna
from search.cli.main import main

real_ask, asked = optuna.Study.ask, []

def ask(self, *args, **kwargs):
    asked.append(1)
    if len(asked) == 5:  # mid-way through asking the first batch
        os.kill(os.getpid(), signal.SIGKILL)
    return real_ask(self, *args, **kwargs)

optuna.Study.ask = ask
sys.exit(main(sys.argv[1:]))
"""


def test_a_worker_killed_while_asking_leaves_no_running_trial(tmp_path, capsys):
    """A worker killed during the ask phase (its fifth ask, in its own copy of the study): the
    batch's 8 places it reserved carry a heartbeat row and its name from the transaction that
    created them (before, asked trials had neither and stayed RUNNING for good), so the next
    worker settles them and the study ends with exactly the requested finished trials, none
    RUNNING."""
    study = _study_file(tmp_path, batch_size=8)
    proc = subprocess.run([sys.executable, "-c", KILL_AT_FIFTH_ASK, "search", str(study),
                           "--storage", URL, "--trials", "16", "--no-progress"],
                          check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    orphans = _trials(study)
    assert [t.state for t in orphans] == [TrialState.RUNNING] * 8
    assert all(t.user_attrs.get("worker", "").endswith(f":{proc_pid(t)}") for t in orphans)
    storage = optuna.storages.RDBStorage(URL)
    with storage.engine.connect() as conn:
        beats = conn.execute(sqlalchemy.text(
            "SELECT count(*) FROM trial_heartbeats WHERE trial_id = ANY(:ids)"),
            {"ids": [t._trial_id for t in orphans]}).scalar()
    assert beats == 8
    assert main(["search", str(study), "--storage", URL, "--trials", "16",
                 "--no-progress"]) == 0
    capsys.readouterr()
    trials = _trials(study)
    assert not [t.number for t in trials if t.state == TrialState.RUNNING]
    assert sum(t.state in FINISHED for t in trials) == 16


def proc_pid(trial) -> str:
    return trial.user_attrs["worker"].rpartition(":")[2]


def test_trials_without_heartbeat_rows_go_stale(tmp_path):
    """RUNNING trials without any heartbeat row (asked by a client that never beat, as
    archscout's workers did when they died before their first beat) are abandoned (PRUNED,
    never counted) once they started longer than the grace period ago; a fresh one is left
    alone."""
    from search.study.storage import WorkerRDBStorage

    name = f"nobeat-{uuid.uuid4().hex[:10]}"
    plain = optuna.create_study(study_name=name, storage=URL)
    old, young = plain.ask(), plain.ask()
    engine = sqlalchemy.create_engine(URL, poolclass=sqlalchemy.pool.NullPool)
    with engine.begin() as conn:  # `old` started two minutes ago
        conn.execute(sqlalchemy.text("UPDATE trials SET datetime_start = datetime_start - "
                                     "interval '2 minutes' WHERE trial_id = :id"),
                     {"id": old._trial_id})
    engine.dispose()
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        storage = WorkerRDBStorage(URL, heartbeat_interval=10, grace_period=60)
    study = optuna.load_study(study_name=name, storage=storage)
    fail_orphans(study, StorageHandle(storage, "test"))
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {old.number: TrialState.PRUNED, young.number: TrialState.RUNNING}
    assert study.trials[old.number].user_attrs["abandoned"] == "no heartbeat for 60 s"


def _stored(trial) -> tuple:
    """What a trial records, less the worker's name (only shared storages carry it)."""
    attrs = {k: v for k, v in trial.user_attrs.items() if k != "worker"}
    return trial.number, trial.state, trial.params, trial.values, attrs, trial.system_attrs


def test_one_worker_records_what_the_journal_records(tmp_path):
    """The same study, seed and trials run once on PostgreSQL (a worker sampling in its own
    copy, two transactions per batch) and once on the default journal: every trial's number,
    state, params, values, attributes and constraints are equal."""
    from search.study.runner import run_study
    from search.study.storage import open_default, open_url

    spec = load_spec(_study_file(tmp_path, batch_size=16))
    journal = open_default(tmp_path / "j" / "study.journal", shared=False)
    run_study(spec, journal, 48, 3, show_progress=False)
    journal.close()
    run_study(spec, open_url(URL), 48, 3, show_progress=False)
    on_journal = optuna.load_study(study_name=spec.name, storage=journal.storage).get_trials()
    on_pg = optuna.load_study(study_name=spec.name, storage=URL).get_trials()
    assert [_stored(t) for t in on_pg] == [_stored(t) for t in on_journal]
    assert len(on_pg) == 48 and all(t.user_attrs["worker"] for t in on_pg)


def test_a_worker_reads_the_others_trials_after_each_batch(tmp_path):
    """Two workers on one study: after its next batch, each one's own copy holds the other's
    finished trials too, and each worker's trials reached the database once."""
    from search.study.runner import RemoteWorkspace, RunSummary, make_sampler, open_study
    from search.study.evaluation import hard_constraints
    from search.study.storage import open_url

    spec = load_spec(_study_file(tmp_path, batch_size=8))
    a, b = (RemoteWorkspace(open_study(spec, open_url(URL), 0), None) for _ in range(2))
    for ws, seed in ((a, 1), (b, 2)):
        ws.study.sampler = make_sampler(spec, seed)
    hard = hard_constraints(spec)
    a.run(spec, 8, hard, RunSummary(), 100)
    b.run(spec, 8, hard, RunSummary(), 100)  # reads a's first batch after its own
    a.run(spec, 8, hard, RunSummary(), 100)  # reads b's
    assert len(b.study.trials) == 16 and len(a.study.trials) == 24
    # a's copy: its batch, its second batch, then b's batch; b's: its batch, then a's first
    assert [t.params for t in a.study.trials[16:]] == [t.params for t in b.study.trials[:8]]
    assert [t.values for t in b.study.trials[8:]] == [t.values for t in a.study.trials[:8]]
    stored = _trials_of(spec)
    assert len(stored) == 24 and sorted(t.number for t in stored) == list(range(24))
    assert len({t.user_attrs["worker"] for t in stored}) == 1  # one process, two workspaces


def _trials_of(spec):
    return optuna.load_study(study_name=spec.name, storage=URL).get_trials()


def _outage(url: str, down_s: float) -> threading.Thread:
    """What a server restart does to the clients of the database at `url`, on that database
    alone (the suite's server is shared): every connection to it is closed
    (pg_terminate_backend) and new ones are refused ("not currently accepting connections")
    for `down_s`, then accepted again. Returns the thread that ends the outage."""
    name = url.rsplit("/", 1)[1]
    admin = sqlalchemy.create_engine(URL, isolation_level="AUTOCOMMIT",
                                     poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
        conn.execute(sqlalchemy.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE datname = :name"), {"name": name})

    def back() -> None:
        time.sleep(down_s)
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()

    thread = threading.Thread(target=back)
    thread.start()
    return thread


def _outage_on_first_call(monkeypatch, module, name: str, url: str,
                          down_s: float = 1.5) -> list[threading.Thread]:
    """Patch `module.name` so that its first call starts a `down_s` outage of the server at
    `url` (then runs as before); the returned list holds the outage's thread once started."""
    real, outages = getattr(module, name), []

    def first_call_cuts(*args, **kwargs):
        if not outages:
            outages.append(_outage(url, down_s))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, first_call_cuts)
    return outages


def _evaluated(trial) -> bool:
    return "details" in trial.user_attrs


def test_a_restart_during_a_batch_write_keeps_the_batch(tmp_path, fresh_database_url,
                                                         monkeypatch, capsys):
    """The database goes away in the middle of a batch's write (inside `finish_trials`'
    transaction, its rows locked) and refuses connections for 1.5 s: the worker retries, and
    the batch it evaluated is written into its own reserved places; the study ends with the 32
    requested trials, every one evaluated, none abandoned, failed unevaluated or RUNNING."""
    from search.study import storage

    outages = _outage_on_first_call(monkeypatch, storage, "_trial_rows", fresh_database_url)
    study = _study_file(tmp_path, batch_size=16)
    assert main(["search", str(study), "--storage", fresh_database_url, "--trials", "32",
                 "--no-progress"]) == 0
    outages[0].join()
    err = capsys.readouterr().err
    assert "storage unavailable during a batch" in err and "Traceback" not in err
    trials = optuna.load_study(study_name=load_spec(study).name,
                               storage=fresh_database_url).get_trials()
    assert sorted(t.number for t in trials) == list(range(32))
    assert all(t.state in FINISHED and _evaluated(t) for t in trials)


def test_a_restart_during_the_closing_report_is_retried(tmp_path, fresh_database_url,
                                                         monkeypatch, capsys):
    """The database goes away for 1.5 s just as `search` reads the study for its closing
    Pareto table (after its last batch): the read is retried as the batches are (one line per
    attempt) and the table is printed. Before, every worker died there with a 31-155-line
    traceback (AdminShutdown; "Can't reconnect until invalid transaction is rolled back")."""
    from search.cli import study as cli_study

    outages = _outage_on_first_call(monkeypatch, cli_study, "pareto_document",
                                    fresh_database_url)
    study = _study_file(tmp_path, batch_size=16)
    assert main(["search", str(study), "--storage", fresh_database_url, "--trials", "16",
                 "--no-progress"]) == 0
    outages[0].join()
    out, err = capsys.readouterr()
    assert "Pareto-optimal architectures" in out
    lines = err.strip().splitlines()
    assert lines and all("storage unavailable during the closing report" in line
                         for line in lines), err


def test_a_killed_worker_not_yet_reaped_is_settled_at_once(tmp_path, capsys):
    """A worker killed while asking, whose parent has not reaped it yet (a zombie: it still
    answers kill(pid, 0)): the next worker abandons its 8 reserved places at once (PRUNED,
    the reason in `abandoned`) and redoes them. Before, they stayed RUNNING for the 60 s
    heartbeat grace and were then failed unevaluated, counting toward `--trials`
    (bench_faults: 512 finished of 512, 480 evaluated)."""
    study = _study_file(tmp_path, batch_size=8)
    proc = subprocess.Popen([sys.executable, "-c", KILL_AT_FIFTH_ASK, "search", str(study),
                             "--storage", URL, "--trials", "16", "--no-progress"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # killed, left unreaped
    try:
        assert [t.state for t in _trials(study)] == [TrialState.RUNNING] * 8
        start = time.monotonic()
        assert main(["search", str(study), "--storage", URL, "--trials", "16",
                     "--no-progress"]) == 0
        assert time.monotonic() - start < 30  # not the 60 s grace
    finally:
        proc.wait()
    capsys.readouterr()
    trials = _trials(study)
    abandoned = [t for t in trials if t.state == TrialState.PRUNED]
    assert len(abandoned) == 8 and all(
        f":{proc.pid} ended before telling it" in t.user_attrs["abandoned"] for t in abandoned)
    assert sum(t.state in FINISHED and _evaluated(t) for t in trials) == 16
    assert not [t for t in trials if t.state in FINISHED and not _evaluated(t)]


def test_workers_children_report_one_line_each(tmp_path, fresh_database_url, capfd):
    """`--workers 2` on a study whose name the database already holds with other objectives:
    each child says why in one line, the parent sums up in one more; no traceback."""
    study = _study_file(tmp_path)
    optuna.create_study(study_name=load_spec(study).name, storage=fresh_database_url,
                        directions=["minimize"])
    assert main(["search", str(study), "--storage", fresh_database_url, "--trials", "16",
                 "--workers", "2", "--no-progress"]) == 2
    lines = capfd.readouterr().err.strip().splitlines()  # the children write to fd 2
    assert len(lines) == 3, lines
    assert sorted(line.split(":")[1] for line in lines[:2]) == [" worker 1", " worker 2"]
    assert all("exists with other objectives" in line for line in lines[:2])
    assert "2 of 2 workers failed" in lines[2]
