"""The journal file itself, as the default storage writes it: Optuna's file format and lock
file, with the fault handling `search.study.storage` describes (each fault has its test in
tests/search/study/test_storage_faults.py):

- `SafeJournalFileBackend` appends whole batches or nothing: a stale lock file is reclaimed
  (`ReclaimingLock`), a partial last line is cut first, a failed write is cut back to where it
  began and reported as one StorageError, and a write that reached the file is never repeated;
- `BatchedJournalBackend` buffers a single writer's batch until `flush()`;
- the size record next to the journal: how many bytes were acknowledged, by the single owner
  or by shared writers (`shared`);
- a journal that is not one (undecodable lines, unknown op-codes, a foreign tail) is refused
  before anything changes.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from optuna.storages.journal import (
    BaseJournalBackend,
    JournalFileBackend,
    JournalFileSymlinkLock,
    JournalStorage,
)
from optuna.storages.journal._file import get_lock_file

from search.atomic import write_text_atomic
from search.study.errors import StorageError
from search.study.trial_index import IndexWriter, drop_beyond, last_line_end

SIZE_RECORD_NAME = "study.journal.size"  # bytes known durable: a shorter file was truncated
SHARED_MARK = "shared"  # in the size record: written by workers, other appends may follow


# An append holds Optuna's journal lock for milliseconds (one write and one fsync of one batch);
# a lock file older than this was left by a writer that died while holding it.
STALE_LOCK_S = 10.0
LOG_PREFIX = b'{"op_code":'  # how every journal line starts (Optuna's json.dumps of the log)


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
    start = last_line_end(fd, end)
    if not LOG_PREFIX.startswith(os.pread(fd, min(end - start, len(LOG_PREFIX)), start)):
        raise _corrupt(path, f"its last {end - start} bytes are not a journal line")
    cut = start
    if batch_start is not None and batch_start < start and _starts_a_line(fd, batch_start):
        cut = batch_start
    whole = os.pread(fd, start - cut, cut).count(b"\n")
    os.ftruncate(fd, cut)
    os.fsync(fd)
    drop_beyond(path, cut)  # index records of the lines that went
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

    def __init__(self, path: Path, create: bool = True, limit: int | None = None):
        """`limit` (readers): read only the first `limit` bytes, whole lines (see
        `acknowledged_end`); the rest is a batch its dead writer never acknowledged."""
        self._limit, self._capped = limit, None
        if create:
            try:  # Optuna's creates the file if it does not exist
                super().__init__(str(path), lock_obj=ReclaimingLock(str(path)))
            except OSError as exc:
                raise _io_error(path, exc) from None
        else:  # a reader: the file exists, and opening it for appending would be a write
            self._file_path, self._lock = str(path), ReclaimingLock(str(path))
            self._log_number_offset = {0: 0}
        self.path = path

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if self._limit is None:
            yield from super().read_logs(log_number_from)
            return
        if self._capped is None:
            with open(self._file_path, "rb") as f:
                self._capped = f.read(self._limit).splitlines(keepends=True)
        for line in self._capped[log_number_from:]:
            yield json.loads(line)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self.append(_encode(logs))

    def append(self, data: bytes, written: Callable[[], None] = lambda: None) -> int:
        """Append `data` (whole lines) and fsync; `written()` is called once the bytes are in
        the file, before the fsync (so an interrupted fsync never makes a caller write again).
        Returns the offset `data` starts at."""
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
        return end

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
    (an fsync interrupted after that is repeated by the next flush, the write never is). Each
    durable batch gets its record in the trial index (`search.study.trial_index`), unless the
    file is no study's journal (`indexed=False`: e.g. the dashboard's view, written to a
    temporary name and renamed, which an index beside it would outlive)."""

    def __init__(self, inner: SafeJournalFileBackend, file_logs: int, indexed: bool = True):
        self._inner = inner
        self._index = IndexWriter(inner.path) if indexed else None
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
            logs, data = self._pending, _encode(self._pending)
            start = self._inner.append(data, written=self._written)
            self._unsynced = False
            if self._index is not None:
                self._index.add_batch(start, data, logs)

    def _written(self) -> None:
        self._file_logs += len(self._pending)
        self._pending = []
        self._unsynced = True


def _record_size(path: Path, shared: bool = False) -> None:
    """Remember how many bytes of the journal are durable (atomically replaced). The single
    owner records the end of each batch it wrote; shared writers (workers) mark their record
    `shared`: bytes past it may be other workers' acknowledged appends."""
    record = path.with_name(SIZE_RECORD_NAME)
    size = path.stat().st_size if path.exists() else 0
    write_text_atomic(record, f"{size} {SHARED_MARK}" if shared else str(size),
                      make_parents=False, on_error=lambda exc: _io_error(record, exc))


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


def acknowledged_end(path: Path) -> int | None:
    """Where a reader should stop: the end of the single owner's last acknowledged batch when
    lines of an unfinished one follow it (a crash mid-write, not yet cut by the next owner, who
    will drop that whole batch); None when the file holds nothing unacknowledged."""
    batch_end = _owner_batch_end(path)
    if batch_end is None:
        return None
    with open(path, "rb") as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
            return None
        start = last_line_end(fd, end)
        return batch_end if batch_end < start and _starts_a_line(fd, batch_end) else None


def _owner_batch_end(path: Path) -> int | None:
    """Where the single owner's last acknowledged batch ended (None: unknown, or workers wrote
    after it)."""
    record = _read_size_record(path)
    return record[0] if record and not record[1] else None


def _journal(backend: BaseJournalBackend, path: Path) -> JournalStorage:
    """Optuna's JournalStorage replaying `backend`; a log that does not decode or that Optuna
    cannot apply (unknown op-code: an AssertionError inside Optuna) is one StorageError."""
    try:
        with _no_collection():
            return JournalStorage(backend)
    except StorageError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a malformed log makes Optuna raise
        raise _corrupt(path, _why_unreadable(exc)) from None


@contextmanager
def _no_collection():
    """The garbage collector paused while a journal is decoded: the replay allocates millions
    of objects without a cycle among them, and each full collection would walk everything
    decoded so far (a 20,000-trial journal took ~2x as long with it running)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
        start = last_line_end(f.fileno(), end)
        if not LOG_PREFIX.startswith(os.pread(f.fileno(), min(end - start, len(LOG_PREFIX)),
                                              start)):
            raise _corrupt(path, f"its last {end - start} bytes are not a journal line")


def _whole_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
