"""Scale-out on a real PostgreSQL server and the faults around it: several worker processes on
one study, eight starting at once on a new database, kill -9 of a worker (also mid-ask), the
database restarted mid-study and mid-write, RUNNING trials an earlier version left.
`.ci/run` installs and starts the server and sets ARCHSCOUT_TEST_POSTGRES_URL."""

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
from search.study.spec import load_spec
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
    assert all(t.state in FINISHED for t in trials)  # none RUNNING, none abandoned
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
    assert all(t.state in FINISHED for t in trials)  # none RUNNING, none abandoned
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
    # the batch the outage cut short was written once the server was back: nothing RUNNING
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


def test_a_worker_killed_while_asking_leaves_nothing_in_the_database(tmp_path, capsys):
    """A worker killed during the ask phase (its fifth ask): it asks in its own copy of the
    study and writes finished trials only, so the database holds nothing of that batch (it
    held 8 RUNNING trials, settled after a heartbeat grace period), and the next worker runs
    the study to exactly the requested finished trials."""
    study = _study_file(tmp_path, batch_size=8)
    proc = subprocess.run([sys.executable, "-c", KILL_AT_FIFTH_ASK, "search", str(study),
                           "--storage", URL, "--trials", "16", "--no-progress"],
                          check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _trials(study) == []
    assert main(["search", str(study), "--storage", URL, "--trials", "16",
                 "--no-progress"]) == 0
    capsys.readouterr()
    trials = _trials(study)
    assert len(trials) == 16 and all(t.state in FINISHED for t in trials)


def test_running_trials_an_earlier_version_left_are_settled(tmp_path, capsys):
    """RUNNING trials an earlier archscout's workers reserved (named by their `worker`
    attribute) are settled as PRUNED by the next run to open the study; a RUNNING trial of
    another Optuna client (unnamed) is left to it."""
    study = _study_file(tmp_path, batch_size=16)
    assert main(["search", str(study), "--storage", URL, "--trials", "16",
                 "--no-progress"]) == 0
    plain = optuna.load_study(study_name=load_spec(study).name, storage=URL)
    named, unnamed = plain.ask(), plain.ask()
    named.set_user_attr("worker", "elsewhere:1")
    capsys.readouterr()
    assert main(["search", str(study), "--storage", URL, "--trials", "32",
                 "--no-progress"]) == 0
    assert "1 trials an interrupted run left RUNNING" in capsys.readouterr().err
    states = {t.number: t.state for t in _trials(study)}
    assert states[named.number] == TrialState.PRUNED
    assert states[unnamed.number] == TrialState.RUNNING
    assert sum(state in FINISHED for state in states.values()) == 32


def _stored(trial) -> tuple:
    """What a trial records, less the worker's name (only shared storages carry it)."""
    attrs = {k: v for k, v in trial.user_attrs.items() if k != "worker"}
    return trial.number, trial.state, trial.params, trial.values, attrs, trial.system_attrs


def test_one_worker_records_what_the_journal_records(tmp_path):
    """The same study, seed and trials run once on PostgreSQL (a worker sampling in its own
    copy, one locked write per batch) and once on the default journal: every trial's number,
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


def test_a_worker_reads_the_others_trials_after_each_batch(tmp_path, monkeypatch):
    """Two workers on one study: after its next batch, each one's own copy holds the other's
    finished trials too, and each worker's trials reached the database once."""
    from search.study import runner
    from search.study.evaluation import hard_constraints
    from search.study.runner import LocalRun, RunSummary, make_sampler, open_study, run_batch
    from search.study.storage import open_url

    spec = load_spec(_study_file(tmp_path, batch_size=8))
    runs = []
    for name in ("a:1", "b:2"):  # two workers in one process: each its own name
        monkeypatch.setattr(runner, "worker_id", lambda name=name: name)
        handle = open_url(URL)
        runs.append(LocalRun(open_study(spec, handle, 0), handle, spec))
    a, b = runs
    hard = hard_constraints(spec)

    def batch(run: LocalRun, seed: int) -> None:
        run.study.sampler = make_sampler(spec, seed)
        run.persist(run_batch(run.study, spec, 8, hard, RunSummary(), run.attrs()), 100)

    batch(a, 1)
    batch(b, 2)  # reads a's first batch after its own
    batch(a, 3)  # reads b's
    assert len(b.study.trials) == 16 and len(a.study.trials) == 24
    # a's copy: its batch, its second batch, then b's batch; b's: its batch, then a's first
    assert [t.params for t in a.study.trials[16:]] == [t.params for t in b.study.trials[:8]]
    assert [t.values for t in b.study.trials[8:]] == [t.values for t in a.study.trials[:8]]
    stored = _trials_of(spec)
    assert len(stored) == 24 and sorted(t.number for t in stored) == list(range(24))
    assert sorted(t.user_attrs["worker"] for t in stored) == ["a:1"] * 16 + ["b:2"] * 8


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


def _outage_on_call(monkeypatch, owner, name: str, url: str, call: int = 1,
                    down_s: float = 1.5) -> list[threading.Thread]:
    """Patch `owner.name` so that its `call`-th call starts a `down_s` outage of the server at
    `url` (then runs as before); the returned list holds the outage's thread once started."""
    real, calls, outages = getattr(owner, name), [], []

    def cut_on_call(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            outages.append(_outage(url, down_s))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, cut_on_call)
    return outages


def _evaluated(trial) -> bool:
    return "details" in trial.user_attrs


def test_a_restart_during_a_batch_write_keeps_the_batch(tmp_path, fresh_database_url,
                                                         monkeypatch, capsys):
    """The database goes away in the middle of a batch's write (inside its transaction, the
    study row locked) and refuses connections for 1.5 s: the worker retries, and the batch it
    evaluated is added once the server is back, once; the study ends with the 32 requested
    trials, each stored once, every one evaluated, none RUNNING."""
    from search.study import optuna_adapter

    outages = _outage_on_call(monkeypatch, optuna_adapter, "_trial_rows", fresh_database_url)
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
    starts = [t.datetime_start for t in trials]
    assert len(set(starts)) == 32  # none written twice


def test_a_restart_during_the_closing_report_is_retried(tmp_path, fresh_database_url,
                                                         monkeypatch, capsys):
    """The database goes away for 1.5 s just as `search` reads the study for its closing
    Pareto table (after its last batch): the read is retried as the batches are (one line per
    attempt) and the table is printed. Before, every worker died there with a 31-155-line
    traceback (AdminShutdown; "Can't reconnect until invalid transaction is rolled back")."""
    from search.cli import study as cli_study

    outages = _outage_on_call(monkeypatch, cli_study, "pareto_document", fresh_database_url)
    study = _study_file(tmp_path, batch_size=16)
    assert main(["search", str(study), "--storage", fresh_database_url, "--trials", "16",
                 "--no-progress"]) == 0
    outages[0].join()
    out, err = capsys.readouterr()
    assert "Pareto-optimal architectures" in out
    lines = [line for line in err.strip().splitlines()
             if not line.startswith("proposals: ")]  # the sampler's summary (proposals.describe)
    assert lines and all("storage unavailable during the closing report" in line
                         for line in lines), err


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


# ---- a storage URL's password is never shown ---------------------------------------------------

SECRET = "Zq9-s3cr3t-Pa55"
SECRET_ROLE = "archscout_secret_tester"


@pytest.fixture
def secret_database_url():
    """A new database owned by a role whose password is SECRET (created once per server)."""
    admin = sqlalchemy.create_engine(URL, isolation_level="AUTOCOMMIT",
                                     poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        exists = conn.execute(sqlalchemy.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                              {"r": SECRET_ROLE}).scalar()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(sqlalchemy.text(f"{verb} ROLE {SECRET_ROLE} LOGIN PASSWORD '{SECRET}'"))
    with fresh_database(URL, "secret") as url:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" OWNER TO '
                                         f"{SECRET_ROLE}"))
        admin.dispose()
        yield url.replace("archscout:archscout@", f"{SECRET_ROLE}:{SECRET}@", 1)


def _every_command(study: Path, url: str, out: Path) -> list[list[str]]:
    s = str(study)
    return [["search", s, "--storage", url, "--trials", "16", "--no-progress"],
            ["search", s, "--storage", url, "--trials", "32", "--workers", "2", "--no-progress"],
            ["search", s, "--storage", url, "--trials", "32", "--json", "--no-progress"],
            ["pareto", s, "--storage", url],
            ["pareto", s, "--storage", url, "--json", "--csv", str(out / "p.csv"),
             "--parquet", str(out / "p.parquet")],
            ["show", s, "0", "--storage", url], ["show", s, "0", "--storage", url, "--json"],
            ["show", s, "99999", "--storage", url],
            *[["export", s, "0", "--storage", url, "--format", f, "--force",
               "-o", str(out / f"e.{f}")] for f in ("json", "hf", "vllm")],
            ["plot", s, "--storage", url, "-o", str(out / "front.png")],
            ["dashboard", s, "--storage", url, "-o", str(out / "view.journal")]]


@pytest.mark.parametrize("form", ["authority", "query string"])
def test_no_command_shows_the_storage_password(tmp_path, capfd, secret_database_url, form):
    """Every command that takes `--storage`, the password given in the URL's authority or in
    its query string (`?password=`): it appears in no output, error, export, table, plot,
    dashboard view or `--json` document; also when the server is unreachable or the password
    wrong (one line each)."""
    url = secret_database_url
    if form == "query string":
        url = url.replace(f":{SECRET}@", "@", 1) + f"?password={SECRET}"
    study, out = _study_file(tmp_path, batch_size=8), tmp_path / "out"
    out.mkdir()
    unreachable = url.replace("127.0.0.1:5432", "127.0.0.1:1", 1)
    wrong = url.replace(SECRET, SECRET + "x")
    codes = [main(argv) for argv in _every_command(study, url, out)]
    assert codes == [0] * len(codes[:7]) + [2] + [0] * (len(codes) - 8)
    for bad in (unreachable, wrong):
        for argv in _every_command(study, bad, out)[:2]:
            assert main(argv) == 2
    printed = capfd.readouterr()
    for text in (printed.out, printed.err):
        assert SECRET not in text and "Traceback" not in text
    assert "***" in printed.err  # the URL was named, without its password
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
