"""Retries with back-off and their message; orphaned trials of dead workers on a shared journal."""

import os
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy.exc import OperationalError

from search import resilience
from search.storage import StorageError, open_default


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


def test_running_trials_of_a_dead_worker_are_failed(tmp_path):
    handle = open_default(tmp_path / "study.journal", shared=True)
    study = optuna.create_study(study_name="s", storage=handle.storage)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    orphan, alive = study.ask(), study.ask()
    orphan.set_user_attr(resilience.WORKER_ATTR, f"{os.uname().nodename}:{dead}")
    resilience.mark_alive(study, [alive])  # this process: alive
    assert resilience.fail_orphans(study, handle) == 1
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {orphan.number: TrialState.FAIL, alive.number: TrialState.RUNNING}
