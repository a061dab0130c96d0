"""Keeping a study healthy when processes die and databases restart.

- Runs write only finished trials (`search.study.runner`), so a process that dies leaves nothing
  RUNNING. RUNNING trials an earlier archscout left (its workers asked trials in the storage)
  are settled by the next run to open the study (`settle_running`): PRUNED through Optuna's
  `Study.tell`, so they never count toward `--trials`. On a default journal its owner settles
  every one (no other process can be running them); on a shared storage only those an
  archscout worker named (`worker` attribute: no archscout of this version is running them).
- Database errors (a restart, a dropped connection) are retried with exponential back-off and
  one clean line on stderr naming the driver's error (no SQL); a batch's write is retried
  without writing twice what reached the database (`search.study.runner.LocalRun.persist`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import optuna
from optuna.trial import TrialState
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, PendingRollbackError

from search.study.errors import StorageError

# Optuna re-raises a failed commit as StorageInternalError (with the driver error as its cause).
RETRYABLE = (OperationalError, InterfaceError, DBAPIError, optuna.exceptions.StorageInternalError)
RETRY_ATTEMPTS = 8
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0
T = TypeVar("T")
WORKER_ATTR = "worker"  # user attribute of a trial on a shared storage: the host:pid that ran it


def worker_id() -> str:
    """This process, as the `worker` attribute of the trials it runs on a shared storage."""
    return f"{socket.gethostname()}:{os.getpid()}"


def settle_running(study: optuna.Study, owner: bool) -> int:
    """Settle the study's RUNNING trials nobody will tell (see the module's docstring) as
    PRUNED; `owner`: this process owns the storage (all of them). Returns how many."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    stale = [t.number for t in running if owner or WORKER_ATTR in t.user_attrs]
    for number in stale:
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):  # told meanwhile
            study.tell(number, state=TrialState.PRUNED, skip_if_finished=True)
    if stale:
        print(f"archscout: {len(stale)} trials an interrupted run left RUNNING were settled "
              "as PRUNED (they never count toward --trials)", file=sys.stderr)
    return len(stale)


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
