"""Retries with back-off and their message; orphaned trials of dead workers on a shared journal."""

import os
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy.exc import OperationalError, PendingRollbackError

from search.study import resilience
from search.study.storage import open_default
from search.study.errors import StorageError


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(resilience.time, "sleep", lambda s: None)


def test_retries_until_the_database_is_back(capsys):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return "done"

    assert resilience.with_retries(flaky, "a batch") == "done"
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2
    assert "storage unavailable during a batch" in lines[0] and "retrying in 1 s (1/7)" in lines[0]
    assert "retrying in 2 s (2/7)" in lines[1]  # exponential back-off


def test_gives_up_with_one_clear_error():
    def down():
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    with pytest.raises(StorageError, match="storage unreachable after 8 attempts"):
        resilience.with_retries(down, "a batch")


def test_running_trials_of_a_dead_worker_are_abandoned(tmp_path):
    """Between batches: a dead worker's trial is abandoned (PRUNED, its reason in `abandoned`,
    never counted), a live worker's runs on, and this process's own RUNNING trial (a batch a
    storage error cut short) is abandoned too."""
    handle = open_default(tmp_path / "study.journal", shared=True)
    study = optuna.create_study(study_name="s", storage=handle.storage)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    orphan, alive, mine = study.ask(), study.ask(), study.ask()
    orphan.set_user_attr(resilience.WORKER_ATTR, f"{os.uname().nodename}:{dead}")
    alive.set_user_attr(resilience.WORKER_ATTR, f"{os.uname().nodename}:{os.getppid()}")
    resilience.mark_alive(study, [mine])  # this process
    assert resilience.fail_orphans(study, handle) == 2
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {orphan.number: TrialState.PRUNED, alive.number: TrialState.RUNNING,
                      mine.number: TrialState.PRUNED}
    reasons = {t.number: t.user_attrs.get(resilience.ABANDONED_ATTR) for t in study.trials}
    assert f"{dead} ended before telling it" in reasons[orphan.number]
    assert "cut short" in reasons[mine.number] and reasons[alive.number] is None


def test_a_killed_worker_not_yet_reaped_is_dead(tmp_path):
    """A worker killed while its parent has not reaped it yet (a zombie: `--workers` joins its
    children in order; a benchmark reads its victim's exit code at the end) still answers
    kill(pid, 0): before, its RUNNING trials stayed until the 60 s heartbeat grace passed and
    were then failed unevaluated, counting toward `--trials` (bench_faults: 32 of 512). Its
    trials are abandoned at once."""
    handle = open_default(tmp_path / "study.journal", shared=True)
    study = optuna.create_study(study_name="s", storage=handle.storage)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, left unreaped
    try:
        assert resilience._process_state(child.pid) == "Z"
        assert not resilience._pid_alive(child.pid)
        orphan = study.ask()
        orphan.set_user_attr(resilience.WORKER_ATTR, f"{os.uname().nodename}:{child.pid}")
        assert resilience.fail_orphans(study, handle) == 1
    finally:
        child.wait()
    assert study.trials[orphan.number].state == TrialState.PRUNED


def test_a_reused_pid_is_not_the_worker(tmp_path, monkeypatch):
    """A worker killed long ago whose pid a newer process now holds: its trial is abandoned (that
    process started after the trial did), while a worker older than its trial is alive."""
    started = resilience._process_start(os.getpid())  # from /proc (to about a second)
    assert started is not None and time.time() - 3600 < started <= time.time() + 1
    handle = open_default(tmp_path / "study.journal", shared=True)
    study = optuna.create_study(study_name="s", storage=handle.storage)
    reused, alive = study.ask(), study.ask()
    newer, older = os.getppid(), 1
    for trial, pid in ((reused, newer), (alive, older)):
        trial.set_user_attr(resilience.WORKER_ATTR, f"{os.uname().nodename}:{pid}")
    later = time.time() + 60
    monkeypatch.setattr(resilience, "_process_start",
                        lambda pid: later if pid == newer else started)
    assert resilience.fail_orphans(study, handle) == 1
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {reused.number: TrialState.PRUNED, alive.number: TrialState.RUNNING}


def test_unnamed_trials_are_abandoned_once_the_grace_period_passed(tmp_path, monkeypatch):
    """A worker killed between asking a trial and naming itself on it leaves a RUNNING trial
    without an owner: it is abandoned (PRUNED, never counted) once it started longer than the
    grace period ago (it stayed RUNNING for good)."""
    handle = open_default(tmp_path / "study.journal", shared=True)
    study = optuna.create_study(study_name="s", storage=handle.storage)
    unnamed = study.ask()
    assert resilience.fail_orphans(study, handle) == 0  # young: perhaps about to be named
    monkeypatch.setattr(resilience, "HEARTBEAT_GRACE_S", -1)
    assert resilience.fail_orphans(study, handle) == 1
    assert study.trials[unnamed.number].state == TrialState.PRUNED
    assert "no worker named it" in study.trials[unnamed.number].user_attrs["abandoned"]


def test_the_retry_line_names_the_drivers_error_without_sql(capsys):
    """Optuna wraps a failed commit in StorageInternalError ("invalid data ... exceeding max
    length") and SQLAlchemy's text carries the SQL: the retry line shows neither."""
    driver = ConnectionError("server closed the connection unexpectedly\n\tThis probably "
                             "means the server terminated abnormally")
    calls = []

    def restart():
        calls.append(1)
        if len(calls) == 1:
            try:
                try:
                    raise driver
                except ConnectionError as exc:
                    raise OperationalError("INSERT INTO trials (number) VALUES (%(n)s)",
                                           {"n": 1}, exc) from exc
            except OperationalError as exc:
                raise optuna.exceptions.StorageInternalError(
                    "An exception is raised during the commit. This typically happens due to "
                    "invalid data in the commit, e.g. exceeding max length. ") from exc
        return "done"

    assert resilience.with_retries(restart, "a batch") == "done"
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "ConnectionError: server closed the connection unexpectedly" in err
    for noise in ("invalid data", "max length", "INSERT", "SQL", "Background"):
        assert noise not in err, err


def test_a_session_cut_mid_transaction_is_named_plainly():
    """SQLAlchemy's PendingRollbackError ("Can't reconnect until invalid transaction is rolled
    back") is what a retry meets right after a restart: the line says what happened."""
    try:
        try:
            raise PendingRollbackError("Can't reconnect until invalid transaction is rolled back")
        except PendingRollbackError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the "
                                                         "commit.") from exc
    except optuna.exceptions.StorageInternalError as exc:
        assert resilience.describe_error(exc) == "the connection to the database was lost"
