"""Where a study lives: Optuna's public storages, opened for archscout.

- The embedded default: Optuna's `JournalStorage` on a journal file under the study's output
  folder (`search.study.journal_file.JournalFile`: Optuna's journal backend interface, appends
  batched under a file lock). A single `archscout search` owns it (an exclusive owner lock); the
  processes of `--workers N` share that lock, so no single run starts beside them.
- `--storage URL`: `journal:PATH` (a journal file anyone may share), or any Optuna RDB URL
  (`RDBStorage`: PostgreSQL for many machines), opened safely when many workers create the
  schema of a new database at once.

Runs write only finished trials, a batch at a time (`search.study.runner`), so no storage ever
holds a trial RUNNING that a dead process left behind: nothing needs a heartbeat. A batch is
written under `StorageHandle.write_batch()`: the journal's exclusive lock, or on PostgreSQL an
advisory lock of the study (SQLite: a file lock), so that the writer who counts the study's
finished trials is the one who adds to them and a study never exceeds its `--trials`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy

from search.study.errors import StorageError
from search.study.journal_file import (
    SIZE_RECORD_NAME,  # noqa: F401 - re-exported for tests and tools
    JournalFile,
    check_readable,
    first_line,
    open_journal,
)
from search.study.resilience import settle_running
from search.study.secrets import redact, redact_text

OUTPUT_DIR = "out"  # beside the study file; git-ignored (studies/out/)
JOURNAL_NAME = "study.journal"
OWNER_LOCK_NAME = "study.journal.owner"
# Schema creation on a new database (see _open_rdb): a fixed advisory-lock key (any 64-bit value
# no other application on the server uses; this is "archscou" in ASCII) and retries for backends
# without advisory locks.
SCHEMA_LOCK_KEY = 0x6172636873636F75
SCHEMA_RETRY_ATTEMPTS = 5
SCHEMA_RETRY_WAIT_S = 0.2


@dataclass
class StorageHandle:
    """An opened storage: `storage` for Optuna, `description` for messages (no password)."""

    storage: Any  # an Optuna storage object or URL
    description: str
    journal: JournalFile | None = None
    shared: bool = True  # other processes may write meanwhile
    url: str | None = None
    lock_fd: int | None = None  # the owner lock of a default journal
    batch_lock: Any = field(default=None, repr=False)  # a callable: the lock of a batch write
    _closed: bool = field(default=False, repr=False)

    @contextmanager
    def write_batch(self, study: str) -> Iterator[JournalFile | None]:
        """The exclusive right to add trials to `study` (see the module's docstring); on a
        journal, its writes are buffered and appended (one write, one fsync) when the block
        ends, and the journal is yielded (to declare what it writes: `trials_of`)."""
        if self.journal is not None:
            with self.journal.batch() as batch:
                yield batch
            return
        with self.batch_lock(study) if self.batch_lock else nullcontext():
            yield None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.journal is not None:
                self.journal.close()
            if self.lock_fd is not None:
                os.close(self.lock_fd)


def default_journal_path(spec_path: Path, study_name: str) -> Path:
    return spec_path.resolve().parent / OUTPUT_DIR / study_name / JOURNAL_NAME


# ---- the default journal ------------------------------------------------------------------------


def _take_owner_lock(path: Path, mode: int) -> int:
    """The owner lock: exclusive for a single run (and the parent of `--workers` while it
    checks the journal), shared by the workers of one `--workers` run."""
    _make_folder(path)
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


def open_default(path: Path, shared: bool = False, *, read_only: bool = False,
                 worker: bool = False) -> StorageHandle:
    """The study's journal at `path`: owned by this run (an exclusive owner lock), one of the
    workers of a `--workers` run (`worker`: the owner lock shared), a writer beside anyone
    (`shared`: no owner lock, as a `journal:PATH` URL), or only read (`read_only`: nothing is
    written, locked or repaired)."""
    if read_only:
        check_readable(path)
        journal = JournalFile(path, read_only=True)
        return StorageHandle(open_journal(journal), f"journal {path}", journal,
                             url=f"journal:{path}")
    fd = None
    if worker or not shared:
        fd = _take_owner_lock(path, fcntl.LOCK_SH if worker else fcntl.LOCK_EX)
    try:
        _make_folder(path)
        journal = JournalFile(path, sidecars=True)
        with journal.batch():  # the checks and repairs of a writer, before the replay
            pass
        return StorageHandle(open_journal(journal), f"journal {path}", journal,
                             shared=shared or worker, url=f"journal:{path}", lock_fd=fd)
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"`storage` {path} cannot be created ({exc.strerror or exc})") from None


def prepare_for_workers(path: Path, study_name: str) -> int:
    """For `search --workers N` on the default journal: own it while checking it (a partial last
    line cut; RUNNING trials an earlier version left settled: `settle_running`), then hold the
    owner lock shared, as each worker does, so that no single run starts beside them; returns
    the lock's descriptor."""
    fd = _take_owner_lock(path, fcntl.LOCK_EX)
    try:
        journal = JournalFile(path, sidecars=True)
        with journal.batch():
            storage = open_journal(journal)
            if study_name in optuna.get_all_study_names(storage):
                settle_running(optuna.load_study(study_name=study_name, storage=storage),
                               owner=True)
        journal.close()
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


# ---- --storage URL ------------------------------------------------------------------------------


def open_url(url: str, read_only: bool = False) -> StorageHandle:
    """`journal:PATH` (or a path ending in .journal), or any Optuna RDB URL. `read_only`: a
    journal that does not exist is an error, and nothing is created or written for it."""
    if url.startswith("journal:") or url.endswith(".journal"):
        return _open_journal_url(Path(url.removeprefix("journal:")), url, read_only)
    if "://" not in url:
        raise StorageError(f"`--storage` must be an Optuna storage URL (sqlite:///…, "
                           f"postgresql://…) or journal:PATH; got {redact(url)!r}")
    try:
        storage = _open_rdb(url)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many types; report one line
        raise StorageError(f"`--storage` {redact(url)!r} cannot be opened: "
                           f"{redact_text(first_line(exc), url)}") from None
    lock_engine = _lock_engine(url)
    return StorageHandle(storage, redact(url), url=url,
                         batch_lock=lambda study: _batch_lock(lock_engine, url, study))


def _open_journal_url(path: Path, url: str, read_only: bool) -> StorageHandle:
    if read_only:
        if not path.is_file():
            raise StorageError(f"`--storage` {url!r}: no journal at {path}")
        check_readable(path, sized=False)
        journal = JournalFile(path, read_only=True)
    else:
        _make_folder(path)
        journal = JournalFile(path)
    return StorageHandle(open_journal(journal), f"journal {path}", journal, url=f"journal:{path}")


def _new_rdb(url: str) -> optuna.storages.RDBStorage:
    return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})  # restarts


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
        engine = _lock_engine(url)
        try:
            with _advisory_lock(engine, SCHEMA_LOCK_KEY):
                return _new_rdb(url)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == SCHEMA_RETRY_ATTEMPTS:
                raise
            time.sleep(SCHEMA_RETRY_WAIT_S * attempt)
        finally:
            if engine is not None:
                engine.dispose()
    raise AssertionError("unreachable")


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgresql", "postgres"))


def _lock_engine(url: str) -> sqlalchemy.Engine | None:
    if not _is_postgres(url):
        return None
    return sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)


@contextmanager
def _advisory_lock(engine: sqlalchemy.Engine | None, key: int) -> Iterator[None]:
    """A PostgreSQL session-level advisory lock on a connection of its own for the time of the
    block (released by the server if this process dies); nothing for other backends."""
    if engine is None:
        yield
        return
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": key})
        try:
            yield
        finally:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": key})


@contextmanager
def _batch_lock(engine: sqlalchemy.Engine | None, url: str, study: str) -> Iterator[None]:
    """The lock a batch of `study` is written under: on PostgreSQL an advisory lock keyed by
    the study's name, on SQLite the database file locked with flock; none elsewhere (a study
    may then exceed `--trials` by up to a batch per concurrent worker)."""
    if engine is not None:
        digest = hashlib.blake2b(f"archscout batch {study}".encode(), digest_size=8).digest()
        with _advisory_lock(engine, int.from_bytes(digest, "big", signed=True)):
            yield
        return
    database = sqlalchemy.engine.make_url(url).database if url.startswith("sqlite") else None
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.archscout-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
