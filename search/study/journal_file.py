"""The default storage's file: Optuna's journal log lines (one JSON object per line, the format
Optuna's own `JournalFileBackend` reads and writes), behind Optuna's public extension point for
journal backends (`optuna.storages.journal.BaseJournalBackend`: `read_logs` and `append_logs`).

Every writer appends under an exclusive `flock` of the journal file itself (released by the
kernel when a writer dies, so a lock can never be left stale); readers read under a shared one,
so nobody ever sees half of a batch. Inside `batch()` the logs are buffered and appended at the
end in one write and one fsync (a run's batch of finished trials, the study's creation);
outside it each append is written at once. Faults (each tested in
tests/search/study/test_storage_faults.py):

- a batch is appended at most once: once its bytes are in the file it is never written again,
  also when the fsync after it is interrupted (Ctrl-C) and the handle is closed on the way out;
- a write that fails part-way (a full disk, an interrupt) is cut back to where it started and
  reported in one line; the journal resumes once space is freed;
- a partial last line (a writer killed mid-write: only a dead writer leaves one, a live one holds
  the lock while writing) is cut by the next writer before it appends, and skipped by readers;
- the size record beside the journal (bytes written, updated under the lock after each append):
  a journal shorter than it was truncated, and is refused, as is a record that is no number;
- a journal that does not decode, names an operation Optuna does not know or is no journal at
  all is refused in one line and left exactly as it is;
- readers (pareto, show, export, plot) never write: no size record, no repair, no new file.

Plain Optuna writers take another lock (a symlink) and are not excluded: archscout studies are
written by archscout. Like Optuna's, the lock does not hold across hosts (no NFS).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalStorage

from search.atomic import write_text_atomic
from search.study.errors import StorageError
from search.study.trial_index import IndexWriter, last_line_end

SIZE_RECORD_NAME = "study.journal.size"  # bytes written: a shorter journal was truncated
LEGACY_SHARED_MARK = "shared"  # earlier versions marked records written by workers
LINE_START = b'{"'  # every journal line is a JSON object


def _encode(logs: list[dict[str, Any]]) -> bytes:
    """Log lines as Optuna's JournalFileBackend writes them."""
    return ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode()


def _io_error(path: Path, exc: OSError, what: str = "written") -> StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"`storage` {path}: no space left on device; nothing of the batch in "
                            "progress was kept (finished batches are): free space and run the "
                            "same command again to resume")
    return StorageError(f"`storage` {path} cannot be {what} ({exc.strerror or exc})")


def corrupt(path: Path, why: str) -> StorageError:
    return StorageError(f"`storage` {path} is corrupt ({why}); it was left as it is: restore it "
                        "from a backup or remove its folder to start anew")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class JournalFile(BaseJournalBackend):
    """The journal at `path` for Optuna's `JournalStorage`: appends under an exclusive flock (in
    `batch()`: buffered, one write and one fsync at its end), reads under a shared one.
    `read_only`: the file must exist and nothing is ever written. `sidecars`: a study's default
    journal, with its size record and trial index (`search.study.trial_index`) beside it."""

    def __init__(self, path: Path, *, read_only: bool = False, sidecars: bool = False):
        self.path = Path(path)
        self._read_only, self._sidecars = read_only, sidecars and not read_only
        flags = os.O_RDONLY if read_only else os.O_RDWR | os.O_APPEND | os.O_CREAT
        try:
            self._fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise _io_error(self.path, exc, "opened") from None
        self._index = IndexWriter(self.path) if self._sidecars else None
        self._marks = {0: 0}  # log number -> byte offset of its line (where reads resume)
        self._pending: list[dict[str, Any]] | None = None  # logs of the open batch
        self._batch_trials: tuple[str, int, int] | None = None  # (study, first, count)
        self._exclusive = False
        self._unsynced = False

    def close(self) -> None:
        """Stop writing; the storage stays readable (a reader's descriptor is opened)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd, self._read_only, self._index = -1, True, None

    # ---- reading ---------------------------------------------------------------------------

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY)
        logs = max((n for n in self._marks if n <= log_number_from), default=0)
        with self._shared_lock():
            end = last_line_end(self._fd, os.fstat(self._fd).st_size)
            offset = self._marks[logs]
            data = os.pread(self._fd, end - offset, offset) if end > offset else b""
        found = []
        for line in data.splitlines():
            if logs >= log_number_from:
                found.append(self._decode(line))
            logs += 1
        self._marks = {0: 0, logs: end}
        pending = self._pending or []
        return found + pending[max(log_number_from - logs, 0):]

    def _decode(self, line: bytes) -> dict[str, Any]:
        try:
            log = json.loads(line)
        except ValueError:
            raise corrupt(self.path, "a line is not JSON") from None
        if not isinstance(log, dict):
            raise corrupt(self.path, "a line is not a JSON object")
        return log

    @contextmanager
    def _shared_lock(self) -> Iterator[None]:
        if self._exclusive:
            yield
            return
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    # ---- writing ---------------------------------------------------------------------------

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        if self._read_only:
            raise StorageError(f"`storage` {self.path} is open for reading only")
        if self._pending is not None:
            self._pending.extend(logs)
            return
        with self.batch():
            self._pending.extend(logs)

    @contextmanager
    def batch(self) -> Iterator[JournalFile]:
        """Hold the exclusive lock; logs appended meanwhile are written when the block ends
        (discarded if it raises). Reads inside see the file and then the buffered logs."""
        if self._pending is not None:  # nested: part of the open batch
            yield self
            return
        self._lock_exclusive()
        self._pending, self._batch_trials = [], None
        try:
            yield self
            self._flush()
        finally:
            self._pending, self._batch_trials = None, None
            self._exclusive = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def trials_of(self, study: str, first: int, count: int) -> None:
        """This batch's lines are `count` finished trials of `study`, numbered from `first`
        (for the trial index, which checks the count against the lines written)."""
        self._batch_trials = (study, first, count)

    def _lock_exclusive(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._exclusive = True
        try:
            if self._sidecars:
                check_not_truncated(self.path)
            cut_partial_tail(self._fd, self.path)
        except BaseException:
            self._exclusive = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            raise

    def _flush(self) -> None:
        if self._unsynced:  # an fsync interrupted after its write reached the file
            self._fsync()
        if not self._pending:
            return
        logs, data = self._pending, _encode(self._pending)
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            _write_all(self._fd, data)
        except BaseException as exc:
            os.ftruncate(self._fd, start)  # none of this write stays behind
            if isinstance(exc, OSError):
                raise _io_error(self.path, exc) from None
            raise
        self._pending, self._unsynced = [], True  # in the file: never written again
        self._fsync()
        read = max(self._marks)
        if self._marks[read] == start:  # the replay read the file up to this write
            self._marks = {0: 0, read + len(logs): start + len(data)}
        if self._sidecars:
            record_size(self.path, start + len(data))
            self._index.add(start, data, self._batch_trials)

    def _fsync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise _io_error(self.path, exc) from None
        self._unsynced = False


def cut_partial_tail(fd: int, path: Path) -> None:
    """Cut an unfinished last line (a writer killed mid-write; call with the exclusive lock
    held, when no live writer can be writing). A tail that is not the start of a JSON object
    line is refused: the file is no journal."""
    end = os.lseek(fd, 0, os.SEEK_END)
    start = last_line_end(fd, end)
    if start == end:
        return
    check_tail(fd, path, start, end)
    try:
        os.ftruncate(fd, start)
        os.fsync(fd)
    except OSError as exc:
        raise _io_error(path, exc) from None
    print(f"archscout: cut the unfinished last line of {path}: {end - start} bytes of a write "
          "that a crash interrupted", file=sys.stderr)


def check_tail(fd: int, path: Path, start: int, end: int) -> None:
    if not LINE_START.startswith(os.pread(fd, min(end - start, len(LINE_START)), start)):
        raise corrupt(path, f"its last {end - start} bytes are not a journal line")


def record_size(path: Path, size: int) -> None:
    """Remember how many bytes of the journal were written (atomically replaced)."""
    record = path.with_name(SIZE_RECORD_NAME)
    write_text_atomic(record, str(size), make_parents=False,
                      on_error=lambda exc: _io_error(record, exc))


def _recorded_size(path: Path) -> int:
    record = path.with_name(SIZE_RECORD_NAME)
    try:
        text = record.read_text(errors="replace")
    except FileNotFoundError:
        return 0
    number, _, mark = text.strip().partition(" ")
    try:
        if mark not in ("", LEGACY_SHARED_MARK):
            raise ValueError(mark)
        return int(number or 0)
    except ValueError:
        raise StorageError(f"`storage` size record {record} is not a byte count ({text[:24]!r}); "
                           "both files were left as they are: if the journal is intact remove "
                           "the record, else restore both from a backup") from None


def check_not_truncated(path: Path) -> None:
    expected = _recorded_size(path)
    actual = path.stat().st_size if path.exists() else 0
    if actual < expected:
        raise StorageError(f"`storage` {path} is truncated: {actual} bytes, {expected} were "
                           "written; restore it from a backup or remove its folder to start anew")


def check_readable(path: Path, sized: bool = True) -> None:
    """A reader's checks before it uses anything derived from the journal at `path`: not
    truncated (`sized`: a study's default journal, with its size record), and a partial last
    line that is the start of a journal line."""
    if sized:
        check_not_truncated(path)
    with open(path, "rb") as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        start = last_line_end(fd, end)
        if start < end:
            check_tail(fd, path, start, end)


def open_journal(backend: JournalFile) -> JournalStorage:
    """Optuna's JournalStorage replaying `backend`; a log that does not decode or that Optuna
    cannot apply (an unknown op-code is an AssertionError inside Optuna) is one StorageError."""
    paused = gc.isenabled()
    gc.disable()  # the replay allocates millions of objects without a cycle among them
    try:
        return JournalStorage(backend)
    except StorageError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a malformed log makes Optuna raise
        raise corrupt(backend.path, _why_unreadable(exc)) from None
    finally:
        if paused:
            gc.enable()


def _why_unreadable(exc: Exception) -> str:
    if isinstance(exc, AssertionError):  # Optuna's replay meets an op-code it does not know
        return "a line names an operation Optuna does not know"
    if isinstance(exc, KeyError):
        return f"a line lacks the field {exc}"
    return f"{type(exc).__name__}: {first_line(exc)}"


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
