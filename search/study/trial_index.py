"""A trial-number -> byte-offset index beside the default journal (`study.journal.index`), so
`show` and `export` decode one trial's line instead of replaying the whole journal.

The default storage writes each finished trial as one create-trial line (`Workspace`): a trial
created finished can never change afterwards (Optuna's replay ignores every update of a finished
trial that another process logs), so that line, with its trial id and number, is the whole
trial. The single owner appends one record per batch (`IndexWriter`, called by
`search.study.journal_file.BatchedJournalBackend.flush`): the journal offset it covers, the
replay's counters there, and the batch's finished trials as (study id, number, trial id, offset,
length, CRC-32 of the line). Lines other writers appended in between (`--workers`, foreign
tools) are scanned, decoded, when the next record is written, and by a reader when they follow
the last record.

It can never give a wrong trial: the first record names the journal's first line by its CRC
(its worker id is a fresh UUID per process), the last one the line it ends at, every entry the
line it points to; a record that does not decode or reaches past what a reader may read ends
the index there; a cut of the journal drops the records beyond it (`drop_beyond`). A trial the
index does not hold whole (created unfinished, by `--workers`), a study it does not know or an
index that does not match returns None: the caller replays the journal as before.
"""

from __future__ import annotations

import json
import os
import zlib
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from optuna.distributions import json_to_distribution
from optuna.trial import FrozenTrial, TrialState

INDEX_SUFFIX = ".index"  # study.journal -> study.journal.index
INDEX_VERSION = 1
# Optuna 5.0's journal op-codes (optuna/storages/journal/_storage.py, JournalOperation).
CREATE_STUDY, DELETE_STUDY, SET_STUDY_USER_ATTR, SET_STUDY_SYSTEM_ATTR, CREATE_TRIAL = range(5)
TRIAL_UPDATES = range(5, 10)  # SET_TRIAL_*: no-ops on a trial created finished
DISCARD_TRIALS = 10  # skipped by Optuna's replay ("only supported by Rustuna")
FIRST_LINE_MAX_BYTES = 1 << 16  # the journal's first line (a study creation) is ~200 bytes
BACKWARD_CHUNK_BYTES = 1 << 16  # read backwards from the end for the last newline


def index_path(journal: Path) -> Path:
    return journal.with_name(journal.name + INDEX_SUFFIX)


@dataclass
class ReplayState:
    """What Optuna's replay (JournalStorageReplayResult) knows that the index needs: live study
    names, study and trial counters, and where each study user attribute was last set."""

    names: dict[str, int] = field(default_factory=dict)
    next_study: int = 0
    trials: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # study id -> its trials
    attrs: dict[int, dict[str, list[int]]] = field(default_factory=dict)  # -> key -> line

    def to_json(self) -> dict:
        return {"names": self.names, "next_study": self.next_study, "trials": self.trials,
                "counts": {str(k): v for k, v in self.counts.items()},
                "attrs": {str(k): v for k, v in self.attrs.items()}}

    @classmethod
    def from_json(cls, doc: dict) -> ReplayState:
        return cls(dict(doc["names"]), int(doc["next_study"]), int(doc["trials"]),
                   {int(k): int(v) for k, v in doc["counts"].items()},
                   {int(k): dict(v) for k, v in doc["attrs"].items()})


class NotReplayable(ValueError):
    """A log line the index cannot follow as Optuna's replay would (an unknown op-code)."""


def _line_ref(offset: int, line: bytes) -> list[int]:
    return [offset, len(line), zlib.crc32(line)]


def apply_log(state: ReplayState, log: dict, offset: int, line: bytes,
              entries: list[list[int]]) -> None:
    """Follow one log line as Optuna's replay does; a trial created finished is appended to
    `entries` as [study id, number, trial id, offset, length, crc]."""
    op = log["op_code"]
    if op == CREATE_STUDY:
        if log["study_name"] not in state.names:
            state.names[log["study_name"]] = state.next_study
            state.counts[state.next_study] = 0
            state.next_study += 1
    elif op == DELETE_STUDY:
        _delete_study(state, log["study_id"])
    elif op == SET_STUDY_USER_ATTR:
        if log["study_id"] in state.counts:
            (key,) = log["user_attr"]
            state.attrs.setdefault(log["study_id"], {})[key] = _line_ref(offset, line)
    elif op == CREATE_TRIAL:
        _create_trial(state, log, offset, line, entries)
    elif op not in (SET_STUDY_SYSTEM_ATTR, DISCARD_TRIALS, *TRIAL_UPDATES):
        raise NotReplayable(f"op-code {op!r}")


def _delete_study(state: ReplayState, study_id: int) -> None:
    if study_id in state.counts:
        state.names = {n: i for n, i in state.names.items() if i != study_id}
        del state.counts[study_id]
        state.attrs.pop(study_id, None)


def _create_trial(state: ReplayState, log: dict, offset: int, line: bytes,
                  entries: list[list[int]]) -> None:
    study_id = log["study_id"]
    if study_id not in state.counts:
        return  # Optuna's replay skips a trial of a study that does not exist
    number, trial_id = state.counts[study_id], state.trials
    state.counts[study_id] += 1
    state.trials += 1
    if TrialState(log.get("state", TrialState.RUNNING.value)).is_finished():
        entries.append([study_id, number, trial_id, *_line_ref(offset, line)])


def scan(state: ReplayState, f, start: int, end: int, entries: list[list[int]]) -> bytes:
    """Follow the journal's whole lines between offsets `start` and `end` (`f`: the journal,
    open in binary); returns the last of them (b"" for none)."""
    f.seek(start)
    offset, line = start, b""
    while offset < end:
        line = f.readline(end - offset)
        if not line.endswith(b"\n"):
            raise ValueError("a line of the journal ends before its newline")
        apply_log(state, json.loads(line), offset, line, entries)
        offset += len(line)
    return line


def first_line_crc(fd: int) -> int | None:
    head = os.pread(fd, FIRST_LINE_MAX_BYTES, 0)
    end = head.find(b"\n")
    return None if end < 0 else zlib.crc32(head[:end + 1])


def _ends_with(fd: int, end: int, ref: list[int]) -> bool:
    """The journal's line ending at `end` is the line `ref` ([length, crc]) names."""
    length, crc = ref
    return end >= length and zlib.crc32(os.pread(fd, length, end - length)) == crc


@dataclass
class Loaded:
    """An index as far as it matches the journal: the state at `end` and every entry."""

    state: ReplayState
    end: int
    head: int | None
    entries: list[list[int]]
    good_bytes: int  # the index file's valid prefix


def load(journal: Path, fd: int, readable_end: int) -> Loaded:
    """The index of `journal` (open as `fd`) up to the last record that matches it and ends at
    or before `readable_end`; an empty one (end 0) when it has none that does."""
    empty = Loaded(ReplayState(), 0, first_line_crc(fd), [], 0)
    try:
        text = index_path(journal).read_bytes()
    except OSError:
        return empty
    found, entries, good = None, [], 0
    for line in text.splitlines(keepends=True):
        record = _record(line)
        if (record is None or record["head"] != empty.head
                or record["end"] <= (found["end"] if found else 0)
                or record["end"] > readable_end):
            break
        found, good = record, good + len(line)
        entries += record["trials"]
    if found is None or not _ends_with(fd, found["end"], found["last"]):
        return empty
    return Loaded(ReplayState.from_json(found["state"]), found["end"], empty.head, entries,
                  good)


def _record(line: bytes) -> dict | None:
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    ok = isinstance(record, dict) and record.get("v") == INDEX_VERSION
    return record if ok else None


def _last_line_ref(data: bytes) -> list[int]:
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    return [len(data) - start, zlib.crc32(data[start:])]


class IndexWriter:
    """The single owner's side: one record per appended batch (see the module docstring).
    Once writing the index fails (a full disk), it is removed and this writer stops: readers
    replay until the next owner rebuilds it."""

    def __init__(self, journal: Path):
        self.journal, self._loaded, self._stopped = journal, None, False

    def add_batch(self, start: int, data: bytes, logs: list[dict[str, Any]]) -> None:
        """`data` (the lines of `logs`) was appended to the journal at offset `start`."""
        if self._stopped:
            return
        try:
            self._add(start, data, logs)
        except (OSError, ValueError, KeyError, TypeError):  # a cache: readers can replay
            self._stopped = True
            with suppress(OSError):
                index_path(self.journal).unlink(missing_ok=True)

    def _add(self, start: int, data: bytes, logs: list[dict[str, Any]]) -> None:
        at = self._catch_up(start)
        entries, offset = [], start
        for log, line in zip(logs, data.splitlines(keepends=True), strict=True):
            apply_log(at.state, log, offset, line, entries)
            offset += len(line)
        self._append_record(at, offset, _last_line_ref(data), entries)

    def _catch_up(self, start: int) -> Loaded:
        """The index in memory (its file cut to the part that matches the journal), and the
        lines before `start` it does not cover yet followed, as a record of their own."""
        with open(self.journal, "rb") as f:
            if self._loaded is None:
                self._loaded = load(self.journal, f.fileno(), start)
                with open(index_path(self.journal), "ab") as index:
                    index.truncate(self._loaded.good_bytes)
            at = self._loaded
            if at.head is None:
                at.head = first_line_crc(f.fileno())
            if at.end < start:  # lines this writer did not write (or a record that was lost)
                entries: list[list[int]] = []
                last = scan(at.state, f, at.end, start, entries)
                self._append_record(at, start, [len(last), zlib.crc32(last)], entries)
        return at

    def _append_record(self, at: Loaded, end: int, last: list[int],
                       entries: list[list[int]]) -> None:
        record = {"v": INDEX_VERSION, "head": at.head, "end": end, "last": last,
                  "state": at.state.to_json(), "trials": entries}
        with open(index_path(self.journal), "ab") as f:
            f.write((json.dumps(record, separators=(",", ":")) + "\n").encode())
        at.end = end


def drop_beyond(journal: Path, end: int) -> None:
    """The journal was cut to `end` bytes: records reaching past it go (with all after them)."""
    path = index_path(journal)
    try:
        text = path.read_bytes()
    except OSError:
        return
    keep = 0
    for line in text.splitlines(keepends=True):
        record = _record(line)
        if record is None or record["end"] > end:
            break
        keep += len(line)
    with suppress(OSError):
        os.truncate(path, keep)


# ---- the reader --------------------------------------------------------------------------------


@dataclass
class IndexedTrial:
    """What `show`/`export` need of a study, read through the index: the trial (None when the
    number is not a trial of the study), the study's user attributes and its trial count."""

    trial: FrozenTrial | None
    user_attrs: dict[str, Any]
    trials: int


def last_line_end(fd: int, end: int) -> int:
    """The offset just past the last newline before `end` (0 if there is none): the end of the
    whole lines, read backwards in chunks (also `search.study.journal_file`'s tail check)."""
    pos = end
    while pos > 0:
        start = max(pos - BACKWARD_CHUNK_BYTES, 0)
        found = os.pread(fd, pos - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


def whole_lines_end(fd: int) -> int:
    """Where the journal's last whole line ends (what Optuna's replay reads of it)."""
    return last_line_end(fd, os.fstat(fd).st_size)


def read_trial(journal: Path, study_name: str, number: int,
               limit: int | None = None) -> IndexedTrial | None:
    """Trial `number` of `study_name` as Optuna's replay of the journal's first `limit` bytes
    (None: all its whole lines) gives it, read through the index; None when the index cannot
    answer (no index, one that does not match, a trial it does not hold whole)."""
    with open(journal, "rb") as f:
        fd = f.fileno()
        end = whole_lines_end(fd) if limit is None else limit
        at = load(journal, fd, end)
        if at.end == 0:
            return None
        if at.end < end:  # lines appended after the last record: follow them
            scan(at.state, f, at.end, end, at.entries)
        return _answer(fd, at, study_name, number)


def _answer(fd: int, at: Loaded, study_name: str, number: int) -> IndexedTrial | None:
    study_id = at.state.names.get(study_name)
    if study_id is None:
        return None
    attrs = {key: _read_line(fd, ref)["user_attr"][key]
             for key, ref in at.state.attrs.get(study_id, {}).items()}
    count = at.state.counts[study_id]
    if not 0 <= number < count:
        return IndexedTrial(None, attrs, count)
    entry = next((e for e in at.entries if e[0] == study_id and e[1] == number), None)
    if entry is None:
        return None  # created unfinished (a shared writer): only the replay has it whole
    log = _read_line(fd, entry[3:])
    if log["op_code"] != CREATE_TRIAL or log["study_id"] != study_id:
        raise ValueError("the index points at another line")
    return IndexedTrial(frozen_trial(log, trial_id=entry[2], number=number), attrs, count)


def _read_line(fd: int, ref: list[int]) -> dict:
    offset, length, crc = ref
    line = os.pread(fd, length, offset)
    if len(line) != length or not line.endswith(b"\n") or zlib.crc32(line) != crc:
        raise ValueError("the journal line the index names has changed")
    return json.loads(line)


def _local(stamp: str | None) -> datetime | None:
    """A journal timestamp as Optuna's replay reads it (local time, naive)."""
    return None if stamp is None else datetime.fromisoformat(stamp).astimezone().replace(
        tzinfo=None)


def frozen_trial(log: dict, trial_id: int, number: int) -> FrozenTrial:
    """The trial a create-trial log makes (JournalStorageReplayResult._apply_create_trial,
    Optuna 5.0, without the per-process bookkeeping)."""
    distributions = {k: json_to_distribution(v) for k, v in log.get("distributions", {}).items()}
    params = {k: distributions[k].to_external_repr(p) for k, p in log.get("params", {}).items()}
    return FrozenTrial(
        trial_id=trial_id, number=number,
        state=TrialState(log.get("state", TrialState.RUNNING.value)),
        params=params, distributions=distributions,
        user_attrs=log.get("user_attrs", {}), system_attrs=log.get("system_attrs", {}),
        value=log.get("value", None),
        intermediate_values={int(k): v for k, v in log.get("intermediate_values", {}).items()},
        datetime_start=_local(log["datetime_start"]),
        datetime_complete=_local(log.get("datetime_complete")),
        values=log.get("values", None),
    )
