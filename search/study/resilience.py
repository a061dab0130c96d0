"""Keeping a study healthy when workers die and databases restart.

- Every trial asked on a shared storage names its worker (host:pid); on RDB storages it also
  has a heartbeat row, both written by the transaction that creates it
  (`search.study.storage.WorkerRDBStorage`), so a worker dying mid-ask leaves nothing
  unrecognizable.
- A trial asked and never evaluated is abandoned (`abandon`): PRUNED, with why in its
  `abandoned` attribute, so it never counts toward `--trials` and its place is asked anew
  (FAIL is kept for trials that were evaluated: a shape that is no model).
- Before each batch (`fail_orphans`), RUNNING trials are settled that way: a trial of this
  very process (it has nothing in flight between batches: a batch cut by a database error); a
  trial of a worker on this machine that no longer exists (a killed worker its parent has not
  reaped yet, a zombie, included); on RDB, trials of workers silent for the grace period
  (trials without heartbeat rows that started that long ago included); on a shared journal,
  trials without a worker name that started that long ago. (Trials of a plain Optuna RDB
  storage are failed as Optuna's `fail_stale_trials` fails them.)
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
from search.study.storage import (
    ABANDONED_ATTR,
    HEARTBEAT_GRACE_S,
    WORKER_ATTR,
    StorageHandle,
    WorkerRDBStorage,
    worker_id,
)

# Optuna re-raises a failed commit as StorageInternalError (with the driver error as its cause).
RETRYABLE = (OperationalError, InterfaceError, DBAPIError, optuna.exceptions.StorageInternalError)
RETRY_ATTEMPTS = 8
# /proc gives a process's start to about a second (boot time in whole seconds): a worker that
# started this much after its own trial is taken as another process reusing the pid.
PID_START_SLACK_S = 5.0
# proc(5), /proc/PID/stat field 3: a process that ended and waits for its parent to reap it.
EXITED_STATES = ("Z", "X")
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
    if _process_state(pid) in EXITED_STATES:
        return False  # killed or exited, not yet reaped by its parent
    started = _process_start(pid)
    return since is None or started is None or started <= since.timestamp() + PID_START_SLACK_S


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: [state, ppid, ...] (proc(5), fields 3 on)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _process_state(pid: int) -> str | None:
    """The one-letter state of process `pid` (proc(5): R, S, D, Z zombie, X dead, ...); None
    where unknown."""
    try:
        return _stat_fields(pid)[0]
    except (OSError, IndexError):
        return None


def _process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where unknown."""
    try:
        fields = _stat_fields(pid)
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
    were abandoned. Call it between batches only (this process's own RUNNING trials are taken
    as abandoned)."""
    if not handle.shared:
        return 0  # the batching journal never writes RUNNING trials
    beating = heartbeats_enabled(study._storage)  # noqa: SLF001 - the study's own storage
    settled = _settle_stale(study) if beating else 0
    host, me, orphans = socket.gethostname(), worker_id(), {}
    for t in running_trials(study):
        reason = _orphan_reason(t, host, me, beating)
        if reason:
            orphans.setdefault(reason, []).append(t._trial_id)  # noqa: SLF001
    return settled + sum(abandon(study, ids, reason) for reason, ids in orphans.items())


def _orphan_reason(t: optuna.trial.FrozenTrial, host: str, me: str, beating: bool) -> str:
    """Why the RUNNING trial `t` is abandoned, or "" when it is someone's work in progress."""
    owner = t.user_attrs.get(WORKER_ATTR)
    if owner == me:
        return "its batch was cut short by a storage error (asked anew)"
    if _dead_worker(t, host):
        return f"worker {owner} ended before telling it"
    if not beating and owner is None and _started_long_ago(t):
        return f"no worker named it within {HEARTBEAT_GRACE_S} s"
    return ""


def _settle_stale(study: optuna.Study) -> int:
    """Trials whose worker stopped beating: abandoned on archscout's RDB storage, failed as
    Optuna fails them (`fail_stale_trials`) on a plain one."""
    backend = getattr(study._storage, "_backend", study._storage)  # noqa: SLF001
    if isinstance(backend, WorkerRDBStorage):
        stale = backend._get_stale_trial_ids(study._study_id)  # noqa: SLF001
        return abandon(study, stale, f"no heartbeat for {HEARTBEAT_GRACE_S} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return 0


def abandon(study: optuna.Study, trial_ids: list[int], reason: str) -> int:
    """Settle the RUNNING trials of `trial_ids` (asked, never evaluated) as PRUNED with `reason`
    in their `abandoned` attribute: they never count toward `--trials`, so their places are
    asked anew. A trial another worker settled or told first is left as it is. Returns how
    many were settled here."""
    if not trial_ids:
        return 0
    storage = study._storage  # noqa: SLF001
    backend = getattr(storage, "_backend", storage)
    if isinstance(backend, WorkerRDBStorage):  # one transaction, rows locked
        return len(backend.abandon_trials(list(trial_ids), reason))
    settled = 0
    for trial_id in trial_ids:
        try:
            storage.set_trial_user_attr(trial_id, ABANDONED_ATTR, reason)
            storage.set_trial_state_values(trial_id, state=TrialState.PRUNED)
            settled += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another worker settled or told it first
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
    the same moment) are abandoned unevaluated, so a study never holds more than `target`
    finished trials."""
    counted = [t.number for t in study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING))]
    rank = {number: i for i, number in enumerate(sorted(counted))}
    keep = [t for t in trials if rank.get(t.number, 0) < target]
    surplus = [t._trial_id for t in trials if rank.get(t.number, 0) >= target]  # noqa: SLF001
    abandon(study, surplus, "asked beyond the study's trials (another worker asked the last "
                            "ones at the same moment)")
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
