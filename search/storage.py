"""Where a study lives. The embedded default is an Optuna journal file under the study's output
folder, written through a batching backend: Optuna's `JournalFileBackend` fsyncs every append,
so the batch's log lines are buffered and appended (one write, one fsync) when the batch is
done. Finished trials are durable per batch; a killed run loses only its unfinished batch, whose
asked trials never reach the disk (no zombie RUNNING trials). Batching needs a single writer:
the default storage takes an exclusive lock; `--workers N` and `--storage URL` use Optuna's
storages as they are (journal files fsync per operation, RDB per transaction).
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import optuna
from optuna.storages.journal import BaseJournalBackend, JournalFileBackend, JournalStorage

from cost_model.errors import ConfigError

OUTPUT_DIR = "out"  # beside the study file; git-ignored (studies/out/)
JOURNAL_NAME = "study.journal"
OWNER_LOCK_NAME = "study.journal.owner"


class StorageError(ConfigError):
    """A storage that cannot be used: locked, unreadable, malformed URL (exit code 2)."""


class BatchedJournalBackend(BaseJournalBackend):
    """Buffers appended logs in memory until `flush()`; reads see file + buffer. One writer."""

    def __init__(self, inner: JournalFileBackend):
        self._inner = inner
        self._pending: list[dict[str, Any]] = []
        self._file_logs = sum(1 for _ in inner.read_logs(0))

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if log_number_from < self._file_logs:
            yield from self._inner.read_logs(log_number_from)
        yield from self._pending[max(log_number_from - self._file_logs, 0):]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._pending.extend(logs)

    def flush(self) -> None:
        if self._pending:
            self._inner.append_logs(self._pending)
            self._file_logs += len(self._pending)
            self._pending = []


@dataclass
class StorageHandle:
    storage: Any  # an Optuna storage object or URL
    description: str
    backend: BatchedJournalBackend | None = None
    lock_fd: int | None = None
    shared: bool = True  # several processes may write (no batching)
    url: str | None = None
    _closed: bool = field(default=False, repr=False)

    def flush(self) -> None:
        if self.backend is not None:
            self.backend.flush()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            if self.lock_fd is not None:
                os.close(self.lock_fd)
            self._closed = True


def default_journal_path(spec_path: Path, study_name: str) -> Path:
    return spec_path.resolve().parent / OUTPUT_DIR / study_name / JOURNAL_NAME


def _take_owner_lock(path: Path) -> int:
    fd = os.open(path.parent / OWNER_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(f"`storage` {path} is locked by another archscout process; wait for "
                           "it, or run several workers with --workers N") from None
    return fd


def open_default(path: Path, shared: bool) -> StorageHandle:
    """The journal file at `path`: batched with an owner lock, or shared between processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    file_backend = JournalFileBackend(str(path))
    if shared:
        return StorageHandle(JournalStorage(file_backend), f"journal {path} (shared)",
                             url=f"journal:{path}")
    fd = _take_owner_lock(path)
    backend = BatchedJournalBackend(file_backend)
    return StorageHandle(JournalStorage(backend), f"journal {path}", backend=backend, lock_fd=fd,
                         shared=False, url=f"journal:{path}")


def open_url(url: str) -> StorageHandle:
    """`journal:PATH` (or a path ending in .journal), or any Optuna RDB URL."""
    if url.startswith("journal:") or url.endswith(".journal"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return StorageHandle(JournalStorage(JournalFileBackend(str(path))), f"journal {path}",
                             url=f"journal:{path}")
    if "://" not in url:
        raise StorageError(f"`--storage` must be an Optuna storage URL (sqlite:///…, "
                           f"postgresql://…) or journal:PATH; got {url!r}")
    try:
        return StorageHandle(optuna.storages.get_storage(url), url.split("@")[-1], url=url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many types; report one line
        raise StorageError(f"`--storage` {url!r} cannot be opened: {exc}".splitlines()[0]) from None
