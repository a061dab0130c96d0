"""Where a study lives. The embedded default is an Optuna journal file under the study's output
folder, written through a batching backend: Optuna's `JournalFileBackend` fsyncs every append,
so the batch's log lines are buffered and appended (one write, one fsync) when the batch is
done. The runner samples in an in-memory copy and writes each finished trial as one record
(`search.runner.Workspace`). Finished trials are durable per batch; a killed run loses only its
unfinished batch, whose asked trials never reach the disk (no zombie RUNNING trials). Batching
needs a single writer: the default storage takes an exclusive lock; `--workers N` and
`--storage URL` use Optuna's storages as they are (journal files fsync per operation, RDB per
transaction).

Faults the journal survives (tests/search/test_storage_faults.py):
- a batch is appended at most once: once its bytes are in the file it is never written again,
  also when the fsync after it is interrupted (Ctrl-C) and the handle is closed on the way out;
- a write that fails part-way (a full disk, an interrupt) is cut back to where it started, and
  reported in one line; the journal resumes once space is freed;
- a partial last line (a crash mid-write) is cut before the next append, under Optuna's journal
  lock, by whichever writer comes next: no appender can be mid-write while that lock is held;
- a lock file left by a killed appender is removed at once by the owner of the journal (the
  exclusive owner lock proves no other archscout writer exists) and by anyone else when it is
  older than any append takes (STALE_LOCK_S);
- a journal that does not decode, names an unknown operation or is no journal at all, and a size
  record that is not a number, are refused in one line and left exactly as they are;
- readers (pareto, show, export, plot) never write: no size record, no lock, no repair.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
import uuid
import warnings
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.storages._rdb import models as rdb_models
from optuna.trial import TrialState
from optuna.storages.journal import (
    BaseJournalBackend,
    JournalFileBackend,
    JournalFileSymlinkLock,
    JournalStorage,
)
from optuna.storages.journal._file import LOCK_FILE_SUFFIX, get_lock_file

from cost_model.errors import ConfigError

OUTPUT_DIR = "out"  # beside the study file; git-ignored (studies/out/)
JOURNAL_NAME = "study.journal"
OWNER_LOCK_NAME = "study.journal.owner"
SIZE_RECORD_NAME = "study.journal.size"  # bytes known durable: a shorter file was truncated
SHARED_MARK = "shared"  # in the size record: written by workers, other appends may follow
WORKER_ATTR = "worker"  # user attribute of a trial on a shared storage: host:pid that asked it
# RDB heartbeats (Optuna RDBStorage): a worker records one per asked trial; trials of a worker
# silent for the grace period are failed by the next batch of any worker. Batches take < 1 s.
HEARTBEAT_INTERVAL_S = 10
HEARTBEAT_GRACE_S = 60
# Schema creation on a new database (see _open_rdb): a fixed advisory-lock key (any 64-bit value
# no other application on the server uses; this is "archscou" in ASCII) and retries for backends
# without advisory locks.
SCHEMA_LOCK_KEY = 0x6172636873636F75
SCHEMA_RETRY_ATTEMPTS = 5
SCHEMA_RETRY_WAIT_S = 0.2


class StorageError(ConfigError):
    """A storage that cannot be used: locked, unreadable, malformed URL (exit code 2)."""


# An append holds Optuna's journal lock for milliseconds (one write and one fsync of one batch);
# a lock file older than this was left by a writer that died while holding it.
STALE_LOCK_S = 10.0
LOG_PREFIX = b'{"op_code":'  # how every journal line starts (Optuna's json.dumps of the log)
TAIL_CHUNK_BYTES = 1 << 16


def _encode(logs: list[dict[str, Any]]) -> bytes:
    """Log lines exactly as Optuna's JournalFileBackend writes them."""
    return ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode()


def _io_error(path: Path, exc: OSError) -> StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"`storage` {path}: no space left on device; nothing of the batch in "
                            "progress was kept (finished batches are): free space and run the "
                            "same command again to resume")
    return StorageError(f"`storage` {path} cannot be written ({exc.strerror or exc})")


def _corrupt(path: Path, why: str) -> StorageError:
    return StorageError(f"`storage` {path} is corrupt ({why}); it was left as it is: restore it "
                        "from a backup or remove its folder to start anew")


def _remove_stale_lock(lock: str, why: str, fresh_s: float = 0.0) -> None:
    """Remove Optuna's lock file `lock` (renamed first, so of several removers one wins); with
    `fresh_s`, a lock that another writer took meanwhile (younger than that) is put back."""
    grave = f"{lock}.{uuid.uuid4().hex}.stale"
    try:
        os.rename(lock, grave)
    except FileNotFoundError:
        return  # someone else removed it
    if fresh_s and _lock_age_s(grave) < fresh_s:
        _put_back(grave, lock)
        return
    os.unlink(grave)
    print(f"archscout: removed a stale journal lock {lock} ({why})", file=sys.stderr)


def _put_back(grave: str, lock: str) -> None:
    """Restore a lock file renamed to `grave`, unless a new lock exists by now (no clobbering)."""
    with suppress(OSError):
        os.link(grave, lock, follow_symlinks=False)
    os.unlink(grave)


class ReclaimingLock(JournalFileSymlinkLock):
    """Optuna's symlink lock on the same lock file (so plain Optuna writers are excluded too),
    which takes a lock file older than STALE_LOCK_S as left by a dead appender and removes it
    (one line on stderr) instead of waiting Optuna's 30 s for it. It releases only its own
    lock (Optuna's would remove whichever lock file is there)."""

    def __init__(self, filepath: str):
        super().__init__(filepath, grace_period=None)
        self._inode: int | None = None

    def acquire(self) -> bool:
        wait_s = 0.001
        while True:
            try:
                os.symlink(self._lock_target_file, self._lock_file)
                self._inode = os.lstat(self._lock_file).st_ino
                return True
            except FileExistsError:
                if _lock_age_s(self._lock_file) > STALE_LOCK_S:
                    _remove_stale_lock(self._lock_file, f"older than {STALE_LOCK_S:.0f} s",
                                       fresh_s=STALE_LOCK_S)
                    continue
                time.sleep(wait_s)
                wait_s = min(wait_s * 2, 0.1)

    def release(self) -> None:
        grave = f"{self._lock_file}.{uuid.uuid4().hex}.release"
        try:
            os.rename(self._lock_file, grave)
        except FileNotFoundError:
            return  # removed as stale by another writer meanwhile: nothing left to release
        if os.lstat(grave).st_ino != self._inode:  # not ours: another writer's, put it back
            _put_back(grave, self._lock_file)
        else:
            os.unlink(grave)


def _lock_age_s(lock: str) -> float:
    try:
        return time.time() - os.lstat(lock).st_mtime  # the link itself, not the journal
    except FileNotFoundError:
        return 0.0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _last_line_end(fd: int, end: int) -> int:
    """The offset just past the last newline before `end` (0 if there is none)."""
    pos = end
    while pos > 0:
        start = max(pos - TAIL_CHUNK_BYTES, 0)
        found = os.pread(fd, pos - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


def _cut_partial_tail(fd: int, path: Path, batch_start: int | None = None) -> tuple[int, int]:
    """Cut an unfinished last line (a write a crash interrupted, never acknowledged) so the next
    append does not glue onto it; returns the file's end. With `batch_start` (where the single
    owner's last acknowledged batch ended, from the size record) the whole unacknowledged batch
    goes, so a batch is kept whole or not at all. Returns the new end and how many whole lines
    went. Call with the journal lock held. A tail that is not the start of a journal line is
    refused (the file is no journal)."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return end, 0
    start = _last_line_end(fd, end)
    if not LOG_PREFIX.startswith(os.pread(fd, min(end - start, len(LOG_PREFIX)), start)):
        raise _corrupt(path, f"its last {end - start} bytes are not a journal line")
    cut = start
    if batch_start is not None and batch_start < start and _starts_a_line(fd, batch_start):
        cut = batch_start
    whole = os.pread(fd, start - cut, cut).count(b"\n")
    os.ftruncate(fd, cut)
    os.fsync(fd)
    what = f"batch ({whole} whole lines and a partial one)" if whole else "last line"
    print(f"archscout: cut the unfinished {what} of {path}: {end - cut} bytes of a write that a "
          "crash interrupted", file=sys.stderr)
    return cut, whole


def _starts_a_line(fd: int, offset: int) -> bool:
    return offset == 0 or os.pread(fd, 1, offset - 1) == b"\n"


class SafeJournalFileBackend(JournalFileBackend):
    """Optuna's journal file backend (same file format, same lock file) whose appends survive
    faults: a stale lock is reclaimed, a partial last line is cut first, a failed write is cut
    back to where it began and reported as one StorageError."""

    def __init__(self, path: Path, create: bool = True):
        if create:
            super().__init__(str(path), lock_obj=ReclaimingLock(str(path)))
        else:  # a reader: the file exists, and opening it for appending would be a write
            self._file_path, self._lock = str(path), ReclaimingLock(str(path))
            self._log_number_offset = {0: 0}
        self.path = path

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self.append(_encode(logs))

    def append(self, data: bytes, written: Callable[[], None] = lambda: None) -> None:
        """Append `data` (whole lines) and fsync; `written()` is called once the bytes are in
        the file, before the fsync (so an interrupted fsync never makes a caller write again)."""
        try:
            with get_lock_file(self._lock):
                fd = os.open(self._file_path, os.O_RDWR | os.O_APPEND)
                try:
                    end, _ = _cut_partial_tail(fd, self.path)
                    try:
                        _write_all(fd, data)
                    except BaseException:
                        os.ftruncate(fd, end)  # none of this write stays behind
                        raise
                    written()
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise _io_error(self.path, exc) from None

    def sync(self) -> None:
        try:
            fd = os.open(self._file_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _io_error(self.path, exc) from None

    def repair_tail(self, batch_start: int | None = None) -> int:
        """Cut a partial last line (with `batch_start`: the whole unacknowledged batch) now, as
        the owner before anyone appends, and record the new size; returns how many whole lines
        went with it (their logs were read before: replay again)."""
        try:
            with get_lock_file(self._lock):
                fd = os.open(self._file_path, os.O_RDWR)
                try:
                    end = os.lseek(fd, 0, os.SEEK_END)
                    cut, whole = _cut_partial_tail(fd, self.path, batch_start)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise _io_error(self.path, exc) from None
        if cut < end:
            _record_size(self.path)  # the record must not claim bytes that are gone
        return whole


class BatchedJournalBackend(BaseJournalBackend):
    """Buffers appended logs in memory until `flush()`; reads see file + buffer. One writer.
    A batch is appended at most once: it leaves the buffer as soon as its bytes are in the file
    (an fsync interrupted after that is repeated by the next flush, the write never is)."""

    def __init__(self, inner: SafeJournalFileBackend, file_logs: int):
        self._inner = inner
        self._pending: list[dict[str, Any]] = []
        self._file_logs = file_logs  # whole lines in the file
        self._unsynced = False

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if log_number_from < self._file_logs:
            yield from self._inner.read_logs(log_number_from)
        yield from self._pending[max(log_number_from - self._file_logs, 0):]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._pending.extend(logs)

    def flush(self) -> None:
        if self._unsynced:
            self._inner.sync()
            self._unsynced = False
        if self._pending:
            self._inner.append(_encode(self._pending), written=self._written)
            self._unsynced = False

    def _written(self) -> None:
        self._file_logs += len(self._pending)
        self._pending = []
        self._unsynced = True


@dataclass
class StorageHandle:
    storage: Any  # an Optuna storage object or URL
    description: str
    backend: BatchedJournalBackend | None = None
    lock_fd: int | None = None
    shared: bool = True  # several processes may write (no batching)
    url: str | None = None
    journal_path: Path | None = None  # a journal whose size record this handle keeps
    _closed: bool = field(default=False, repr=False)
    _failed: bool = field(default=False, repr=False)

    def flush(self) -> None:
        try:
            if self.backend is not None:
                self.backend.flush()
            if self.journal_path is not None:
                _record_size(self.journal_path, shared=self.shared)
        except StorageError:
            self._failed = True  # reported once: closing does not try again
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                if not self._failed:
                    self.flush()
            finally:
                if self.lock_fd is not None:
                    os.close(self.lock_fd)


def default_journal_path(spec_path: Path, study_name: str) -> Path:
    return spec_path.resolve().parent / OUTPUT_DIR / study_name / JOURNAL_NAME


def _take_owner_lock(path: Path, mode: int = fcntl.LOCK_EX) -> int:
    """The owner lock: exclusive for a single batching run (and the parent of `--workers`
    while it checks and repairs the journal), shared by the workers of one `--workers` run."""
    try:
        fd = os.open(path.parent / OWNER_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StorageError(f"`storage` {path} cannot be opened ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(f"`storage` {path} is locked by another archscout search; wait for "
                           "it to finish (several workers on one study: --workers N)") from None
    return fd


def _record_size(path: Path, shared: bool = False) -> None:
    """Remember how many bytes of the journal are durable (atomically replaced). The single
    owner records the end of each batch it wrote; shared writers (workers) mark their record
    `shared`: bytes past it may be other workers' acknowledged appends."""
    record = path.with_name(SIZE_RECORD_NAME)
    tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")  # one per writer process
    size = path.stat().st_size if path.exists() else 0
    try:
        tmp.write_text(f"{size} {SHARED_MARK}" if shared else str(size))
        os.replace(tmp, record)
    except OSError as exc:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise _io_error(record, exc) from None


def _read_size_record(path: Path) -> tuple[int, bool] | None:
    """(bytes, written by shared writers) of the journal's size record; None if it has none."""
    record = path.with_name(SIZE_RECORD_NAME)
    try:
        text = record.read_text(errors="replace")
    except FileNotFoundError:
        return None
    number, _, mark = text.strip().partition(" ")
    try:
        if mark not in ("", SHARED_MARK):
            raise ValueError(mark)
        return int(number or 0), mark == SHARED_MARK
    except ValueError:
        raise StorageError(f"`storage` size record {record} is not a byte count ({text[:24]!r}); "
                           "both files were left as they are: if the journal is intact remove "
                           "the record, else restore both from a backup") from None


def _check_not_truncated(path: Path) -> None:
    record = _read_size_record(path)
    expected = record[0] if record else 0
    actual = path.stat().st_size if path.exists() else 0
    if actual < expected:
        raise StorageError(f"`storage` {path} is truncated: {actual} bytes, {expected} were "
                           "written; restore it from a backup or remove its folder to start anew")


def _owner_batch_end(path: Path) -> int | None:
    """Where the single owner's last acknowledged batch ended (None: unknown, or workers wrote
    after it)."""
    record = _read_size_record(path)
    return record[0] if record and not record[1] else None


def _journal(backend: BaseJournalBackend, path: Path) -> JournalStorage:
    """Optuna's JournalStorage replaying `backend`; a log that does not decode or that Optuna
    cannot apply (unknown op-code: an AssertionError inside Optuna) is one StorageError."""
    try:
        return JournalStorage(backend)
    except StorageError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a malformed log makes Optuna raise
        raise _corrupt(path, _why_unreadable(exc)) from None


def _why_unreadable(exc: Exception) -> str:
    if isinstance(exc, AssertionError):  # Optuna's replay meets an op-code it does not know
        return "a line names an operation Optuna does not know"
    if isinstance(exc, KeyError):
        return f"a line lacks the field {exc}"
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _check_tail(path: Path) -> None:
    """A last line without its newline must be the start of a journal line (else: no journal)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return
        start = _last_line_end(f.fileno(), end)
        if not LOG_PREFIX.startswith(os.pread(f.fileno(), min(end - start, len(LOG_PREFIX)),
                                              start)):
            raise _corrupt(path, f"its last {end - start} bytes are not a journal line")


def _whole_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"`storage` {path} cannot be created ({exc.strerror or exc})") from None


def claim_journal(path: Path) -> tuple[int, SafeJournalFileBackend]:
    """Own the journal at `path`: the exclusive owner lock, then the checks (size record, a
    decodable tail) and a stale lock removed; the caller replays it before repairing."""
    _make_folder(path)
    fd = _take_owner_lock(path)
    try:
        _check_not_truncated(path)
        if path.exists():
            _check_tail(path)
        lock = f"{path}{LOCK_FILE_SUFFIX}"
        if os.path.lexists(lock):
            _remove_stale_lock(lock, "left by a process that died while appending; this run "
                                     "owns the journal")
        return fd, SafeJournalFileBackend(path)
    except BaseException:
        os.close(fd)
        raise


def prepare_for_workers(path: Path) -> int:
    """For `search --workers N` on the default journal: own it, check that it replays, cut a
    partial last line, then hold the owner lock shared (as each worker does) so that no single
    run starts beside them; returns the lock's descriptor."""
    fd, backend = claim_journal(path)
    try:
        _journal(backend, path)
        backend.repair_tail(_owner_batch_end(path))
        _record_size(path, shared=True)  # from here on several processes append
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def finish_workers(path: Path, fd: int) -> None:
    """After the workers of `prepare_for_workers` have exited: cut a partial last line one of
    them may have left (killed mid-append), record the journal's size as its owner, and let
    go of the owner lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # only this process holds it now
        SafeJournalFileBackend(path).repair_tail()
        _record_size(path)
    except BlockingIOError:
        pass  # a worker outlived its parent's wait (cannot happen with joined workers)
    finally:
        os.close(fd)


def open_default(path: Path, shared: bool, *, read_only: bool = False,
                 worker: bool = False) -> StorageHandle:
    """The journal file at `path`: batched with an exclusive owner lock (`shared=False`), or
    shared between processes (`worker=True`: a worker of `--workers`, holding the owner lock
    shared), or only read (`read_only=True`: nothing is written, locked or repaired)."""
    if read_only:
        _check_not_truncated(path)
        _check_tail(path)
        return StorageHandle(_journal(SafeJournalFileBackend(path, create=False), path),
                             f"journal {path}", url=f"journal:{path}")
    if shared:
        _make_folder(path)
        fd = _take_owner_lock(path, fcntl.LOCK_SH) if worker else None
        try:
            _check_not_truncated(path)
            return StorageHandle(_journal(SafeJournalFileBackend(path), path),
                                 f"journal {path} (shared)", lock_fd=fd, url=f"journal:{path}",
                                 journal_path=path)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
    fd, file_backend = claim_journal(path)
    try:
        batch_end = _owner_batch_end(path)
        backend = BatchedJournalBackend(file_backend, _whole_lines(path))
        storage = _journal(backend, path)  # refuses a corrupt journal before anything changes
        if file_backend.repair_tail(batch_end):  # whole lines of a cut batch were replayed
            file_backend = SafeJournalFileBackend(path)
            backend = BatchedJournalBackend(file_backend, _whole_lines(path))
            storage = _journal(backend, path)
    except BaseException:
        os.close(fd)
        raise
    return StorageHandle(storage, f"journal {path}", backend=backend, lock_fd=fd, shared=False,
                         url=f"journal:{path}", journal_path=path)


def open_url(url: str) -> StorageHandle:
    """`journal:PATH` (or a path ending in .journal), or any Optuna RDB URL."""
    if url.startswith("journal:") or url.endswith(".journal"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return StorageHandle(_journal(SafeJournalFileBackend(path), path), f"journal {path}",
                             url=f"journal:{path}")
    if "://" not in url:
        raise StorageError(f"`--storage` must be an Optuna storage URL (sqlite:///…, "
                           f"postgresql://…) or journal:PATH; got {url!r}")
    try:
        storage = _open_rdb(url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many types; report one line
        raise StorageError(f"`--storage` {_redact(url)!r} cannot be opened: "
                           f"{_first_line(exc)}") from None
    return StorageHandle(storage, _redact(url), url=url)


def worker_id() -> str:
    """This process, as the `worker` attribute of the trials it asks names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerRDBStorage(optuna.storages.RDBStorage):
    """Optuna's RDBStorage whose asked trials carry their heartbeat row and their worker's name
    from the transaction that creates them: a worker that dies (or meets a database restart)
    while asking leaves no RUNNING trial that nobody can recognize as stale. Trials without a
    heartbeat row (asked by other clients, or by archscout before this) are stale once they
    started longer than the grace period ago, on the clock of the process that checks."""

    MARKS_TRIALS_AT_ASK = True

    def _get_prepared_new_trial(self, study_id, template_trial, session):
        trial = super()._get_prepared_new_trial(study_id, template_trial, session)
        if template_trial is None:  # asked (RUNNING), not a finished trial being copied in
            session.add(rdb_models.TrialHeartbeatModel(trial_id=trial.trial_id))
            session.add(rdb_models.TrialUserAttributeModel(
                trial_id=trial.trial_id, key=WORKER_ATTR, value_json=json.dumps(worker_id())))
        return trial

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        grace = timedelta(seconds=self.grace_period or 2 * (self.heartbeat_interval or 0))
        trial, beat = rdb_models.TrialModel, rdb_models.TrialHeartbeatModel
        with sqlalchemy.orm.Session(self.engine) as session:
            now = session.execute(sqlalchemy.select(sqlalchemy.func.now())).scalar()
            rows = session.execute(
                sqlalchemy.select(trial.trial_id, trial._datetime_start_utc, beat.heartbeat)
                .outerjoin(beat, beat.trial_id == trial.trial_id)
                .where(trial.study_id == study_id, trial.state == TrialState.RUNNING)).all()
        now = now.replace(tzinfo=None)  # as Optuna compares heartbeats (the server's clock)
        utc_now = datetime.now(timezone.utc).replace(tzinfo=None)  # Optuna stores naive UTC
        return [trial_id for trial_id, started_utc, last in rows
                if (now - last if last is not None else utc_now - (started_utc or utc_now))
                > grace]


def _new_rdb(url: str) -> optuna.storages.RDBStorage:
    with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna 5.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return WorkerRDBStorage(
            url, heartbeat_interval=HEARTBEAT_INTERVAL_S, grace_period=HEARTBEAT_GRACE_S,
            engine_kwargs={"pool_pre_ping": True})  # reconnect after a database restart


def _open_rdb(url: str) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage, safe when many workers open a new database at once.

    Opening creates Optuna's schema (tables, sequences, the version row, alembic's stamp) when it
    is missing; on PostgreSQL two processes doing that at the same moment collide on the
    catalog's unique indexes (`pg_type_typname_nsp_index`) and one of them dies. So on
    PostgreSQL the opening is serialized by a session-level advisory lock held on a connection
    of its own (released when that connection closes, also if the process dies). On every
    backend a schema-creation collision (IntegrityError/ProgrammingError: the other process won)
    is retried, and by then the schema exists and creation is a no-op.
    """
    for attempt in range(1, SCHEMA_RETRY_ATTEMPTS + 1):
        try:
            with _schema_lock(url):
                return _new_rdb(url)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == SCHEMA_RETRY_ATTEMPTS:
                raise
            time.sleep(SCHEMA_RETRY_WAIT_S * attempt)
    raise AssertionError("unreachable")


@contextmanager
def _schema_lock(url: str):
    """An exclusive PostgreSQL advisory lock for the time of the block; nothing elsewhere."""
    if not url.startswith(("postgresql", "postgres")):
        yield
        return
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"),
                         {"key": SCHEMA_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"),
                             {"key": SCHEMA_LOCK_KEY})
    finally:
        engine.dispose()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
