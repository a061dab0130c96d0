"""Keeping a study healthy when workers die and databases restart.

- Every trial asked on a shared storage names its worker (host:pid); on RDB storages it also
  has a heartbeat row, both written by the transaction that creates it
  (`search.study.storage.WorkerRDBStorage`), so a worker dying mid-ask leaves nothing
  unrecognizable.
- Before each batch (`fail_orphans`), RUNNING trials are settled: a trial of this very process
  (it has nothing in flight between batches: a batch cut by a database error) is PRUNED, i.e.
  abandoned and never counted; a trial of a worker on this machine that no longer exists is
  failed at once; on RDB, trials of workers silent for the grace period are failed (Optuna's
  `fail_stale_trials`, widened to trials without heartbeat rows that started that long ago);
  on a shared journal, trials without a worker name that started that long ago are failed.
- Database errors (a restart, a dropped connection) are retried with exponential back-off and
  one clean line on stderr naming the driver's error (no SQL); the batch in flight is asked
  anew.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

import optuna
from optuna.trial import TrialState
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, PendingRollbackError

from search.study.errors import StorageError
from search.study.storage import HEARTBEAT_GRACE_S, WORKER_ATTR, StorageHandle, worker_id

# Optuna re-raises a failed commit as StorageInternalError (with the driver error as its cause).
RETRYABLE = (OperationalError, InterfaceError, DBAPIError, optuna.exceptions.StorageInternalError)
RETRY_ATTEMPTS = 8
# /proc gives a process's start to about a second (boot time in whole seconds): a worker that
# started this much after its own trial is taken as another process reusing the pid.
PID_START_SLACK_S = 5.0
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0
T = TypeVar("T")


def _pid_alive(pid: int, since: datetime | None = None) -> bool:
    """Whether process `pid` exists (and, on Linux, already existed at `since`: a process that
    started later only reuses the number of the worker that died)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    started = _process_start(pid)
    return since is None or started is None or started <= since.timestamp() + PID_START_SLACK_S


def _process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        boot_s = next(float(line.split()[1]) for line in Path("/proc/stat").read_text()
                      .splitlines() if line.startswith("btime "))
        return boot_s + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _dead_worker(trial: optuna.trial.FrozenTrial, host: str) -> bool:
    owner = str(trial.user_attrs.get(WORKER_ATTR, ""))
    name, _, pid = owner.rpartition(":")
    return name == host and pid.isdigit() and not _pid_alive(int(pid), trial.datetime_start)


def _started_long_ago(trial: optuna.trial.FrozenTrial) -> bool:
    started = trial.datetime_start
    return started is not None and datetime.now() - started > timedelta(
        seconds=HEARTBEAT_GRACE_S)


def heartbeats_enabled(storage) -> bool:
    """True for storages that keep trial heartbeats (RDB with a heartbeat interval, also when
    wrapped in Optuna's cache)."""
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None and hasattr(storage, "record_heartbeat")


def _marks_at_ask(storage) -> bool:
    """True if the storage names the worker and records the heartbeat as it creates a trial."""
    return getattr(getattr(storage, "_backend", storage), "MARKS_TRIALS_AT_ASK", False)


def fail_orphans(study: optuna.Study, handle: StorageHandle) -> int:
    """Settle the RUNNING trials nobody will tell (see the module's docstring); returns how many
    were failed or abandoned. Call it between batches only (this process's own RUNNING trials
    are taken as abandoned)."""
    if not handle.shared:
        return 0  # the batching journal never writes RUNNING trials
    storage = study._storage  # noqa: SLF001 - the study's own storage
    beating = heartbeats_enabled(storage)
    if beating:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
    host, me, settled = socket.gethostname(), worker_id(), 0
    for t in running_trials(study):
        if t.user_attrs.get(WORKER_ATTR) == me:
            state = TrialState.PRUNED  # ours, from a batch a storage error cut short
        elif _dead_worker(t, host) or (not beating and WORKER_ATTR not in t.user_attrs
                                       and _started_long_ago(t)):
            state = TrialState.FAIL
        else:
            continue
        try:
            storage.set_trial_state_values(t._trial_id, state=state)  # noqa: SLF001
            settled += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another worker settled it first
    return settled


def running_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's RUNNING trials; on RDB one query for those rows only (Optuna's cached
    storage would first copy and sort every trial of the study)."""
    backend = getattr(study._storage, "_backend", None)  # noqa: SLF001
    if isinstance(backend, optuna.storages.RDBStorage):
        return backend._get_trials(study._study_id, (TrialState.RUNNING,), set(), -1)  # noqa: SLF001
    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))


def ask_batch(study: optuna.Study, size: int, shared: bool = False) -> list[optuna.Trial]:
    """`size` new trials. On a shared storage each is marked (worker name, heartbeat) right as
    it is asked, unless the storage did so in the asking transaction. Heartbeats are ours to
    record in ask-and-tell (Optuna warns that they are meant for Study.optimize), so that
    warning is silenced."""
    marked_by_storage = _marks_at_ask(study._storage)  # noqa: SLF001
    trials = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        for _ in range(size):
            trials.append(study.ask())
            if shared and not marked_by_storage:
                mark_alive(study, trials[-1:])
    return trials


def mark_alive(study: optuna.Study, trials: list[optuna.Trial]) -> None:
    """Heartbeat (RDB) and owner name for each freshly asked trial."""
    storage = study._storage  # noqa: SLF001
    me = worker_id()
    beating = heartbeats_enabled(storage)
    for trial in trials:
        if beating:
            storage.record_heartbeat(trial._trial_id)  # noqa: SLF001
        trial.set_user_attr(WORKER_ATTR, me)


def drop_surplus(study: optuna.Study, trials: list[optuna.Trial],
                 target: int) -> list[optuna.Trial]:
    """The freshly asked `trials` that fit in the study's `target`: counting finished and
    RUNNING trials by number, those beyond the target (other workers asked the last ones at
    the same moment) are PRUNED unevaluated, so a study never holds more than `target`
    finished trials."""
    counted = [t.number for t in study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING))]
    rank = {number: i for i, number in enumerate(sorted(counted))}
    keep = [t for t in trials if rank.get(t.number, 0) < target]
    for t in trials:
        if rank.get(t.number, 0) >= target:
            try:
                study._storage.set_trial_state_values(t._trial_id,  # noqa: SLF001
                                                      state=TrialState.PRUNED)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # settled by another worker meanwhile: not ours to drop any more
    return keep


class BatchHeartbeat:
    """Keeps every RUNNING trial of a batch beating while the batch is evaluated and told (a
    batch on a busy database can outlast the grace period); a context manager."""

    def __init__(self, study: optuna.Study, trials: list[optuna.Trial] | list[int]):
        """`trials`: the batch's trials, or their ids in the study's storage."""
        self._storage = study._storage  # noqa: SLF001
        self._ids = [t if isinstance(t, int) else t._trial_id for t in trials]  # noqa: SLF001
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
        together = getattr(getattr(self._storage, "_backend", None), "record_heartbeats", None)
        while not self._stop.wait(timeout=interval):
            try:
                if together is not None:  # WorkerRDBStorage: the whole batch in one statement
                    together(self._ids)
                    continue
                for trial_id in self._ids:
                    self._storage.record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 - a missed beat is retried next interval
                continue


def with_retries(action: Callable[[], T], what: str) -> T:
    """Run `action`, retrying database errors with exponential back-off."""
    wait_s = FIRST_WAIT_S
    for attempt in range(1, RETRY_ATTEMPTS + 1):
        try:
            return action()
        except RETRYABLE as exc:
            if attempt == RETRY_ATTEMPTS:
                raise StorageError(f"storage unreachable after {attempt} attempts ({what}): "
                                   f"{describe_error(exc)}") from None
            print(f"archscout: storage unavailable during {what} ({describe_error(exc)}); "
                  f"retrying in {wait_s:.0f} s ({attempt}/{RETRY_ATTEMPTS - 1})", file=sys.stderr)
            time.sleep(wait_s)
            wait_s = min(wait_s * 2.0, MAX_WAIT_S)
    raise AssertionError("unreachable")


def describe_error(exc: BaseException) -> str:
    """The root cause of a storage error in one line: the database driver's own message (Optuna
    wraps every failed commit in StorageInternalError, whose text blames "invalid data ...
    exceeding max length"; SQLAlchemy appends the SQL and a link), e.g. "OperationalError:
    server closed the connection unexpectedly"."""
    root = exc
    while root.__cause__ is not None:  # StorageInternalError <- SQLAlchemy's <- the driver's
        root = root.__cause__
    root = getattr(root, "orig", None) or root  # SQLAlchemy's DBAPIError: the driver's error
    if isinstance(root, PendingRollbackError):  # the session's connection died mid-transaction
        return "the connection to the database was lost"
    text = str(root).split("[SQL:")[0].split("(Background on this error")[0]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return f"{type(root).__name__}: {lines[0]}" if lines else type(root).__name__
