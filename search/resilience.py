"""Keeping a study healthy when workers die and databases restart.

- RDB storages (PostgreSQL…): every asked trial gets a heartbeat; before each batch, trials of
  workers silent for the grace period are failed (Optuna's `fail_stale_trials`).
- A shared journal file (several processes on one machine): every asked trial names its worker
  (host:pid); before each batch, RUNNING trials of workers that no longer exist are failed.
- Database errors (a restart, a dropped connection) are retried with exponential back-off and a
  clear message on stderr; the batch in flight is asked anew (its orphans fail as stale).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import warnings
from typing import Callable, TypeVar

import optuna
from optuna.trial import TrialState
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from search.storage import StorageError, StorageHandle

# Optuna re-raises a failed commit as StorageInternalError (with the driver error as its cause).
RETRYABLE = (OperationalError, InterfaceError, DBAPIError, optuna.exceptions.StorageInternalError)
RETRY_ATTEMPTS = 8
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0
WORKER_ATTR = "worker"
T = TypeVar("T")


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _dead_worker(trial: optuna.trial.FrozenTrial, host: str) -> bool:
    owner = str(trial.user_attrs.get(WORKER_ATTR, ""))
    name, _, pid = owner.rpartition(":")
    return name == host and pid.isdigit() and not _pid_alive(int(pid))


def heartbeats_enabled(storage) -> bool:
    """True for storages that keep trial heartbeats (RDB with a heartbeat interval, also when
    wrapped in Optuna's cache)."""
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None and hasattr(storage, "record_heartbeat")


def fail_orphans(study: optuna.Study, handle: StorageHandle) -> int:
    """Fail RUNNING trials whose worker is gone; returns how many."""
    if heartbeats_enabled(study._storage):  # noqa: SLF001 - the study's own storage
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        return 0
    if not handle.shared:
        return 0  # the batching journal never writes RUNNING trials
    host, failed = socket.gethostname(), 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _dead_worker(t, host):
            study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)  # noqa: SLF001
            failed += 1
    return failed


def ask_batch(study: optuna.Study, size: int) -> list[optuna.Trial]:
    """`size` new trials; heartbeats are ours to record in ask-and-tell (Optuna warns that they
    are meant for Study.optimize), so that warning is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        return [study.ask() for _ in range(size)]


def mark_alive(study: optuna.Study, trials: list[optuna.Trial]) -> None:
    """Heartbeat (RDB) or owner name (journal) for each freshly asked trial."""
    storage = study._storage  # noqa: SLF001
    me = worker_id()
    beating = heartbeats_enabled(storage)
    for trial in trials:
        if beating:
            storage.record_heartbeat(trial._trial_id)  # noqa: SLF001
        trial.set_user_attr(WORKER_ATTR, me)


class BatchHeartbeat:
    """Keeps every RUNNING trial of a batch beating while the batch is evaluated and told (a
    batch on a busy database can outlast the grace period); a context manager."""

    def __init__(self, study: optuna.Study, trials: list[optuna.Trial]):
        self._storage = study._storage  # noqa: SLF001
        self._ids = [t._trial_id for t in trials]  # noqa: SLF001
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BatchHeartbeat:
        if heartbeats_enabled(self._storage):
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        interval = self._storage.get_heartbeat_interval()
        while not self._stop.wait(timeout=interval):
            for trial_id in self._ids:
                try:
                    self._storage.record_heartbeat(trial_id)
                except Exception:  # noqa: BLE001 - a missed beat is retried next interval
                    break


def with_retries(action: Callable[[], T], what: str) -> T:
    """Run `action`, retrying database errors with exponential back-off."""
    wait_s = FIRST_WAIT_S
    for attempt in range(1, RETRY_ATTEMPTS + 1):
        try:
            return action()
        except RETRYABLE as exc:
            if attempt == RETRY_ATTEMPTS:
                raise StorageError(f"storage unreachable after {attempt} attempts ({what}): "
                                   f"{_first_line(exc)}") from None
            print(f"archscout: storage unavailable during {what} ({_first_line(exc)}); "
                  f"retrying in {wait_s:.0f} s ({attempt}/{RETRY_ATTEMPTS - 1})", file=sys.stderr)
            time.sleep(wait_s)
            wait_s = min(wait_s * 2.0, MAX_WAIT_S)
    raise AssertionError("unreachable")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
