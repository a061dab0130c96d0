"""Where a study lives. The embedded default is an Optuna journal file under the study's output
folder, written through a batching backend: Optuna's `JournalFileBackend` fsyncs every append,
so the batch's log lines are buffered and appended (one write, one fsync) when the batch is
done. The runner samples in an in-memory copy and writes each finished trial as one record
(`search.study.runner.Workspace`). Finished trials are durable per batch; a killed run loses
only its unfinished batch, whose asked trials never reach the disk (no zombie RUNNING trials).
Batching needs a single writer: the default storage takes an exclusive lock; `--workers N` and
`--storage URL` use Optuna's storages as they are (journal files fsync per operation, RDB per
transaction).

Faults the journal survives (tests/search/study/test_storage_faults.py):
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

import fcntl
import functools
import json
import os
import socket
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.distributions import distribution_to_json
from optuna.storages._rdb import models as rdb_models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.storages.journal._file import LOCK_FILE_SUFFIX
from optuna.trial import FrozenTrial, TrialState

from search.study.errors import StorageError  # noqa: F401 - re-exported
from search.study.journal_file import (  # noqa: F401 - the names are re-exported
    SHARED_MARK,
    SIZE_RECORD_NAME,
    STALE_LOCK_S,
    BatchedJournalBackend,
    ReclaimingLock,
    SafeJournalFileBackend,
    _check_not_truncated,
    _check_tail,
    _first_line,
    _journal,
    _owner_batch_end,
    _record_size,
    _remove_stale_lock,
    _whole_lines,
    acknowledged_end,
)

OUTPUT_DIR = "out"  # beside the study file; git-ignored (studies/out/)
JOURNAL_NAME = "study.journal"
OWNER_LOCK_NAME = "study.journal.owner"
WORKER_ATTR = "worker"  # user attribute of a trial on a shared storage: host:pid that asked it
# user attribute of a trial asked and never evaluated, settled as PRUNED so that it never
# counts toward `--trials`: why it was abandoned (search.study.resilience.abandon)
ABANDONED_ATTR = "abandoned"
# RDB heartbeats (Optuna RDBStorage): a worker records one per asked trial; trials of a worker
# silent for the grace period are abandoned (PRUNED) by the next batch of any worker.
# Batches take < 1 s.
HEARTBEAT_INTERVAL_S = 10
HEARTBEAT_GRACE_S = 60
# Schema creation on a new database (see _open_rdb): a fixed advisory-lock key (any 64-bit value
# no other application on the server uses; this is "archscou" in ASCII) and retries for backends
# without advisory locks.
SCHEMA_LOCK_KEY = 0x6172636873636F75
SCHEMA_RETRY_ATTEMPTS = 5
SCHEMA_RETRY_WAIT_S = 0.2


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


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"`storage` {path} cannot be created ({exc.strerror or exc})") from None


def _repair_if_unowned(path: Path) -> None:
    """A shared writer outside `--workers` (journal tools, benchmarks): if no archscout run owns
    the journal now, cut what a dead owner left unfinished, as an owner would."""
    try:
        fd = os.open(path.parent / OWNER_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if path.exists():
            _check_tail(path)
            SafeJournalFileBackend(path).repair_tail(_owner_batch_end(path))
    except BlockingIOError:
        pass  # owned (a run or its workers write it): theirs to repair
    finally:
        os.close(fd)


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
        check_readable(path)
        backend = SafeJournalFileBackend(path, create=False, limit=acknowledged_end(path))
        return StorageHandle(_journal(backend, path), f"journal {path}", url=f"journal:{path}")
    if shared:
        _make_folder(path)
        fd = _take_owner_lock(path, fcntl.LOCK_SH) if worker else None
        try:
            _check_not_truncated(path)
            if not worker:
                _repair_if_unowned(path)
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


def check_readable(path: Path) -> None:
    """A reader's checks of the journal at `path` before it uses anything derived from it: the
    size record is a byte count the file reaches, and its tail is the start of a journal line
    (what `open_default(read_only=True)` checks before decoding)."""
    _check_not_truncated(path)
    _check_tail(path)


def open_url(url: str, read_only: bool = False) -> StorageHandle:
    """`journal:PATH` (or a path ending in .journal), or any Optuna RDB URL. `read_only`: a
    journal that does not exist is an error, and nothing is created or written for it."""
    if url.startswith("journal:") or url.endswith(".journal"):
        path = Path(url.removeprefix("journal:"))
        if read_only:
            if not path.is_file():
                raise StorageError(f"`--storage` {url!r}: no journal at {path}")
            _check_tail(path)
            return StorageHandle(_journal(SafeJournalFileBackend(path, create=False), path),
                                 f"journal {path}", url=f"journal:{path}")
        _make_folder(path)
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

    def trial_counts(self, study_id: int) -> tuple[int, int]:
        """(finished, finished or running) trials of the study: one counting query."""
        with sqlalchemy.orm.Session(self.engine) as session:
            counts = _state_counts(session, study_id)
        finished = counts.get(TrialState.COMPLETE, 0) + counts.get(TrialState.FAIL, 0)
        return finished, finished + counts.get(TrialState.RUNNING, 0)

    def reserve_trials(self, study_id: int, count: int, target: int
                       ) -> tuple[int, list[tuple[int, int]]]:
        """Up to `count` new RUNNING trials of this worker (heartbeat row and worker name
        included) such that finished and running trials never exceed `target`, in one
        transaction under the study row's lock (the lock Optuna's trial creation takes, so
        numbers stay dense and no two workers claim the same place). Returns the finished
        trials the study held and the (trial_id, number) of each reserved trial."""
        model = rdb_models.TrialModel
        with _create_scoped_session(self.scoped_session) as session:
            rdb_models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
            counts = _state_counts(session, study_id)
            finished = counts.get(TrialState.COMPLETE, 0) + counts.get(TrialState.FAIL, 0)
            room = max(target - finished - counts.get(TrialState.RUNNING, 0), 0)
            first, now = sum(counts.values()), datetime.now()
            rows = [model(study_id=study_id, number=first + i, state=TrialState.RUNNING,
                          datetime_start=now) for i in range(min(count, room))]
            session.add_all(rows)
            session.flush()  # assigns the trial ids
            if rows:
                me = json.dumps(worker_id())
                session.execute(sqlalchemy.insert(rdb_models.TrialHeartbeatModel),  # beat: now
                                [{"trial_id": r.trial_id} for r in rows])
                session.execute(sqlalchemy.insert(rdb_models.TrialUserAttributeModel),
                                [{"trial_id": r.trial_id, "key": WORKER_ATTR, "value_json": me}
                                 for r in rows])
            return finished, [(row.trial_id, row.number) for row in rows]

    def abandon_trials(self, trial_ids: list[int], reason: str) -> list[int]:
        """Settle those of `trial_ids` still RUNNING as PRUNED, with `reason` as their
        `abandoned` attribute, in one transaction (rows locked, so a worker writing its batch
        at the same moment either finds them settled or settles first). Returns the ids
        settled here."""
        model = rdb_models.TrialModel
        with _create_scoped_session(self.scoped_session) as session:
            rows = session.query(model).filter(model.trial_id.in_(trial_ids),
                                               model.state == TrialState.RUNNING
                                               ).with_for_update().all()
            now = datetime.now()
            for row in rows:
                row.state, row.datetime_complete = TrialState.PRUNED, now
            if rows:
                session.execute(sqlalchemy.insert(rdb_models.TrialUserAttributeModel),
                                [{"trial_id": row.trial_id, "key": ABANDONED_ATTR,
                                  "value_json": json.dumps(reason)} for row in rows])
            return [row.trial_id for row in rows]

    def record_heartbeats(self, trial_ids: list[int]) -> None:
        """`record_heartbeat` of every trial in `trial_ids` (rows made at reservation), one
        statement."""
        beat = rdb_models.TrialHeartbeatModel
        with _create_scoped_session(self.scoped_session, True) as session:
            session.execute(sqlalchemy.update(beat).where(beat.trial_id.in_(trial_ids))
                            .values(heartbeat=sqlalchemy.func.now()))

    def finish_trials(self, done: list[tuple[int, FrozenTrial]]) -> list[int]:
        """Write each finished trial (`done`: a reserved trial id and the trial as sampled and
        told in the worker's own copy) into its reserved row, all in one transaction. Returns
        the ids that are not RUNNING any more (failed as stale by another worker): not ours."""
        model = rdb_models.TrialModel
        with _create_scoped_session(self.scoped_session) as session:
            rows = {row.trial_id: row for row in session.query(model).filter(
                model.trial_id.in_([trial_id for trial_id, _ in done])).with_for_update()}
            lost, tables = [], {}
            for trial_id, trial in done:
                row = rows.get(trial_id)
                if row is None or row.state != TrialState.RUNNING:
                    lost.append(trial_id)
                    continue
                for table, values in _trial_rows(trial_id, trial):
                    tables.setdefault(table, []).append(values)
                row.state, row.datetime_complete = trial.state, trial.datetime_complete
            for table, values in tables.items():  # one multi-row INSERT per table
                session.execute(sqlalchemy.insert(table), values)
            return lost

    def read_trials(self, study_id: int, pending: set[int], after_id: int,
                    skip: set[int] = frozenset()) -> tuple[int, list[FrozenTrial], set[int]]:
        """What changed since the last read: trials created after trial id `after_id` and
        those of `pending` (ids not finished when last read), less the ids in `skip` (this
        worker's own). Returns the largest trial id seen, the finished trials (read whole) and
        the ids still unfinished; one light query, then one for the finished trials only."""
        if after_id < 0:  # the first read: every trial, whole
            every = self._get_trials(study_id, None, set(), -1)
            seen = [(t._trial_id, t.state) for t in every]  # noqa: SLF001
        else:
            model = rdb_models.TrialModel
            with sqlalchemy.orm.Session(self.engine) as session:
                seen = session.execute(sqlalchemy.select(model.trial_id, model.state).where(
                    model.study_id == study_id,
                    sqlalchemy.or_(model.trial_id > after_id, model.trial_id.in_(pending)))).all()
        last = max((trial_id for trial_id, _ in seen), default=after_id)
        others = [(i, state) for i, state in seen if i not in skip]
        done = {i for i, state in others if state in (TrialState.COMPLETE, TrialState.FAIL)}
        running = {i for i, state in others if not state.is_finished()}
        if after_id >= 0:
            every = self._get_trials(study_id, None, done, max(done)) if done else []
        return last, [t for t in every if t._trial_id in done], running  # noqa: SLF001

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


def _state_counts(session: sqlalchemy.orm.Session, study_id: int) -> dict[TrialState, int]:
    model = rdb_models.TrialModel
    return dict(session.execute(sqlalchemy.select(model.state, sqlalchemy.func.count())
                                .where(model.study_id == study_id).group_by(model.state)).all())


@functools.lru_cache(maxsize=1024)
def _distribution_json(distribution) -> str:
    """Optuna's distribution_to_json, once per distinct distribution (equal ones hash alike)."""
    return distribution_to_json(distribution)


def _trial_rows(trial_id: int, trial: FrozenTrial) -> list[tuple[type, dict]]:
    """(table, row) of a finished trial's params, values and attributes (Optuna's tables)."""
    m = rdb_models
    rows: list[tuple[type, dict]] = [
        (m.TrialParamModel, {"trial_id": trial_id, "param_name": name,
                             "param_value": trial.distributions[name].to_internal_repr(v),
                             "distribution_json": _distribution_json(trial.distributions[name])})
        for name, v in trial.params.items()]
    for objective, value in enumerate(trial.values or ()):
        stored, kind = m.TrialValueModel.value_to_stored_repr(value)
        rows.append((m.TrialValueModel, {"trial_id": trial_id, "objective": objective,
                                         "value": stored, "value_type": kind}))
    for table, attrs in ((m.TrialUserAttributeModel, trial.user_attrs),
                         (m.TrialSystemAttributeModel, trial.system_attrs)):
        rows += [(table, {"trial_id": trial_id, "key": k, "value_json": json.dumps(v)})
                 for k, v in attrs.items()]
    return rows


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


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
