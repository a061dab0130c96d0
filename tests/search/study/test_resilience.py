"""Retries with back-off and their message; RUNNING trials an earlier version left, settled."""

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


@pytest.mark.parametrize("owner", [True, False])
def test_running_trials_left_behind_are_settled_as_pruned(tmp_path, capsys, owner):
    """RUNNING trials an earlier version left: the journal's owner settles every one (nobody
    else can be running them); a writer beside others only those an archscout worker named.
    Settled trials are PRUNED (never counted toward `--trials`); finished ones stay as they
    are; one line on stderr says how many."""
    study = optuna.create_study(study_name="s", storage=open_default(
        tmp_path / "study.journal", shared=not owner).storage)
    named, unnamed, done = study.ask(), study.ask(), study.ask()
    named.set_user_attr(resilience.WORKER_ATTR, "elsewhere:1")
    study.tell(done, 1.0)
    assert resilience.settle_running(study, owner) == (2 if owner else 1)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {named.number: TrialState.PRUNED, done.number: TrialState.COMPLETE,
                      unnamed.number: TrialState.PRUNED if owner else TrialState.RUNNING}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{2 if owner else 1} trials an interrupted run left" in err[0]


def test_a_trial_told_meanwhile_is_left_as_told(tmp_path, monkeypatch):
    """Another process tells a RUNNING trial between the read and the settling: it keeps its
    values (no error)."""
    study = optuna.create_study(study_name="s", storage=open_default(
        tmp_path / "study.journal").storage)
    trial = study.ask()
    real_tell = optuna.Study.tell

    def told_first(self, number, **kwargs):
        real_tell(self, number, 2.0)
        return real_tell(self, number, **kwargs)

    monkeypatch.setattr(optuna.Study, "tell", told_first)
    resilience.settle_running(study, owner=True)
    assert study.get_trials()[trial.number].values == [2.0]


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
