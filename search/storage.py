"""Where a study lives. The embedded default is an Optuna journal file under the study's output
folder, written through a batching backend: Optuna's `JournalFileBackend` fsyncs every append,
so the batch's log lines are buffered and appended (one write, one fsync) when the batch is
done. The runner samples in an in-memory copy and writes each finished trial as one record
(`search.runner.Workspace`). Finished trials are durable per batch; a killed run loses only its
unfinished batch, whose asked trials never reach the disk (no zombie RUNNING trials). Batching
needs a single writer: the default storage takes an exclusive lock; `--workers N` and
`--storage URL` use Optuna's storages as they are (journal files fsync per operation, RDB per
transaction).
"""

from __future__ import annotations

import fcntl
import os
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import optuna
import sqlalchemy
from optuna.storages.journal import BaseJournalBackend, JournalFileBackend, JournalStorage

from cost_model.errors import ConfigError

OUTPUT_DIR = "out"  # beside the study file; git-ignored (studies/out/)
JOURNAL_NAME = "study.journal"
OWNER_LOCK_NAME = "study.journal.owner"
SIZE_RECORD_NAME = "study.journal.size"  # bytes known durable: a shorter file was truncated
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
    journal_path: Path | None = None
    _closed: bool = field(default=False, repr=False)

    def flush(self) -> None:
        if self.backend is not None:
            self.backend.flush()
        if self.journal_path is not None:
            _record_size(self.journal_path)

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


def _record_size(path: Path) -> None:
    """Remember how many bytes of the journal are durable (atomically replaced)."""
    record = path.with_name(SIZE_RECORD_NAME)
    tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")  # one per writer process
    tmp.write_text(str(path.stat().st_size if path.exists() else 0))
    os.replace(tmp, record)


def _check_not_truncated(path: Path) -> None:
    record = path.with_name(SIZE_RECORD_NAME)
    if not record.exists():
        return
    expected = int(record.read_text() or 0)
    actual = path.stat().st_size if path.exists() else 0
    if actual < expected:
        raise StorageError(f"`storage` {path} is truncated: {actual} bytes, {expected} were "
                           "written; restore it from a backup or remove its folder to start anew")


def _drop_partial_line(path: Path) -> None:
    """Cut an unfinished last line (a write interrupted by a crash, never acknowledged), so the
    next append does not glue onto it. Only the owner of the journal may do this."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)
        f.flush()
        os.fsync(f.fileno())


def _journal(backend: BaseJournalBackend, path: Path) -> JournalStorage:
    try:
        return JournalStorage(backend)
    except (ValueError, KeyError, TypeError) as exc:  # malformed log lines
        raise StorageError(f"`storage` {path} is corrupt ({exc}); restore it from a backup or "
                           "remove its folder to start anew") from None


def open_default(path: Path, shared: bool) -> StorageHandle:
    """The journal file at `path`: batched with an owner lock, or shared between processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_not_truncated(path)
    file_backend = JournalFileBackend(str(path))
    if shared:
        return StorageHandle(_journal(file_backend, path), f"journal {path} (shared)",
                             url=f"journal:{path}", journal_path=path)
    fd = _take_owner_lock(path)
    _drop_partial_line(path)
    backend = BatchedJournalBackend(file_backend)
    return StorageHandle(_journal(backend, path), f"journal {path}", backend=backend, lock_fd=fd,
                         shared=False, url=f"journal:{path}", journal_path=path)


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
        storage = _open_rdb(url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many types; report one line
        raise StorageError(f"`--storage` {_redact(url)!r} cannot be opened: "
                           f"{_first_line(exc)}") from None
    return StorageHandle(storage, _redact(url), url=url)


def _new_rdb(url: str) -> optuna.storages.RDBStorage:
    with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna 5.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
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
