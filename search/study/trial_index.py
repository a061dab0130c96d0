"""A trial-number -> line index beside the default journal (`study.journal.index`), so `show` and
`export` decode one trial's line instead of replaying the whole journal (a 20,000-trial journal
is ~60 MB: 4.4 s replayed, 0.1 s through the index; tests/benchmarks/bench_search_speed.py
--scale).

It knows nothing of Optuna's log format. The journal's writer (`JournalFile`, under its lock)
appends a record per write: where the write starts, each line's length and CRC, and, when the
runner declared the write to be finished trials of a study (`trials_of`), the study and the
number of its first trial. A line is decoded by Optuna itself: a `JournalStorage` replaying the
header lines (the study's creation, its attributes) and that one line gives the trial. Any other
write, and lines a writer did not index (an older archscout, a writer killed between its write
and its record), are classified line by line the same way: a line that makes a finished trial is
one; one that makes no trial is a header line; anything else (a trial asked and told over several
lines) ends the index for good (a `broken` record).

It can never give a wrong trial: records must chain from byte 0 to the journal's last whole line
(else readers replay), and every line read is checked against its length and CRC.
"""

from __future__ import annotations

import fcntl
import json
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import BaseJournalBackend, JournalStorage
from optuna.trial import FrozenTrial

INDEX_SUFFIX = ".index"  # study.journal -> study.journal.index
INDEX_VERSION = 2  # version 1 decoded Optuna's log format by hand
BACKWARD_CHUNK_BYTES = 1 << 16  # read backwards from the end for the last newline


def index_path(journal: Path) -> Path:
    return journal.with_name(journal.name + INDEX_SUFFIX)


def last_line_end(fd: int, end: int) -> int:
    """The offset just past the last newline before `end` (0 if there is none)."""
    pos = end
    while pos > 0:
        start = max(pos - BACKWARD_CHUNK_BYTES, 0)
        found = os.pread(fd, pos - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


class _Logs(BaseJournalBackend):
    """A journal held in memory: the logs Optuna decodes one trial from."""

    def __init__(self, logs: list[dict[str, Any]]):
        self._logs = logs

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        return self._logs[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise RuntimeError("a decoded line is read only")


def decoded_trials(header: list[dict], line: dict) -> dict[str, list[FrozenTrial]]:
    """Study name -> the trials Optuna's replay of the header logs and `line` makes."""
    storage = JournalStorage(_Logs([*header, line]))
    return {name: optuna.load_study(study_name=name, storage=storage,
                                    sampler=optuna.samplers.RandomSampler()
                                    ).get_trials(deepcopy=False)
            for name in optuna.get_all_study_names(storage)}


@dataclass
class Chain:
    """The index as far as it chains from byte 0: where it ends, the header lines (offset,
    length, crc), each study's trial count and where its trials' records are."""

    end: int = 0
    header: list[tuple[int, int, int]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)  # records of trials
    good_bytes: int = 0  # the index file's valid prefix
    broken: bool = False


def _record(line: bytes) -> dict | None:
    try:
        record = json.loads(line) if line.endswith(b"\n") else None
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("v") == INDEX_VERSION else None


def load_chain(journal: Path, chain: Chain | None = None) -> Chain:
    """The index of `journal` as far as it chains; with `chain`: that one, followed on through
    the records appended after it (by other writers)."""
    chain = chain or Chain()
    try:
        with open(index_path(journal), "rb") as f:
            f.seek(chain.good_bytes)
            text = f.read()
    except OSError:
        return chain
    for line in text.splitlines(keepends=True):
        record = _record(line)
        if chain.broken or record is None or record["start"] != chain.end:
            break
        chain.good_bytes += len(line)
        if record.get("broken"):
            chain.broken = True
            break
        _follow(chain, record)
    return chain


def _follow(chain: Chain, record: dict) -> None:
    offset = record["start"]
    if record.get("study") is None:
        for length, crc in record["lines"]:
            chain.header.append((offset, length, crc))
            offset += length
    else:
        study = record["study"]
        if record["first"] != chain.counts.get(study, 0):
            raise ValueError("the index numbers a study's trials with a gap")
        chain.counts[study] = record["first"] + len(record["lines"])
        chain.records.append(record)
    chain.end = record["start"] + sum(length for length, _ in record["lines"])


def _read_line(fd: int, offset: int, length: int, crc: int) -> dict:
    line = os.pread(fd, length, offset)
    if len(line) != length or zlib.crc32(line) != crc:
        raise ValueError("a journal line the index names has changed")
    return json.loads(line)


def _lines(data: bytes) -> list[list[int]]:
    return [[len(line), zlib.crc32(line)] for line in data.splitlines(keepends=True)]


class IndexWriter:
    """A writer's side: one record per write, appended under the journal's lock."""

    def __init__(self, journal: Path):
        self.journal, self._chain = journal, None

    def add(self, start: int, data: bytes, trials: tuple[str, int, int] | None) -> None:
        """`data` was appended at `start`; `trials`: (study, first number, count) when it is
        that many finished trials of the study."""
        try:
            chain = self._loaded()
            if chain.end > start:  # records of lines cut since (a journal restored): anew
                chain = self._reset()
            lines = _lines(data)
            if not trials or trials[2] != len(lines):  # a write of anything: decode each line
                self._catch_up(chain, start + len(data))
            elif not chain.broken and self._catch_up(chain, start):
                study, first, _ = trials
                if first != chain.counts.get(study, 0):
                    self._append(chain, {"start": start, "lines": [], "broken": True})
                    return
                self._append(chain, {"start": start, "lines": lines, "study": study,
                                     "first": first})
        except (OSError, ValueError, KeyError, TypeError):  # a cache: readers replay instead
            self._chain = Chain(broken=True)

    def _loaded(self) -> Chain:
        """The chain, followed through what other writers appended since; the index file cut
        to it (a record that does not chain is no use to anyone)."""
        self._chain = load_chain(self.journal, self._chain)
        with open(index_path(self.journal), "ab") as f:
            f.truncate(self._chain.good_bytes)
        return self._chain

    def _reset(self) -> Chain:
        self._chain = Chain()
        os.truncate(index_path(self.journal), 0)
        return self._chain

    def _append(self, chain: Chain, record: dict) -> None:
        line = (json.dumps({"v": INDEX_VERSION, **record}, separators=(",", ":")) + "\n")
        with open(index_path(self.journal), "ab") as f:
            f.write(line.encode())
        chain.good_bytes += len(line)
        if record.get("broken"):
            chain.broken = True
        else:
            _follow(chain, record)

    def _catch_up(self, chain: Chain, start: int) -> bool:
        """Index the lines between the chain's end and `start`, one record each, each decoded
        by Optuna (see the module's docstring); False when one of them cannot be indexed."""
        if chain.broken:
            return False
        with open(self.journal, "rb") as f:
            fd = f.fileno()
            header = [_read_line(fd, *ref) for ref in chain.header]
            f.seek(chain.end)
            data = f.read(start - chain.end)
        offset = chain.end
        for line in data.splitlines(keepends=True):
            log = json.loads(line)
            made = {name: trials for name, trials in decoded_trials(header, log).items()
                    if trials}
            trials = [t for ts in made.values() for t in ts]
            if len(trials) > 1 or any(not t.state.is_finished() for t in trials):
                self._append(chain, {"start": offset, "lines": [], "broken": True})
                return False
            study = next(iter(made), None)
            self._append(chain, {"start": offset, "lines": _lines(line), "study": study,
                                 "first": chain.counts.get(study, 0) if study else None})
            if study is None:
                header.append(log)
            offset += len(line)
        return True


# ---- the reader --------------------------------------------------------------------------------


@dataclass
class IndexedTrial:
    """What `show`/`export` need of a study, read through the index: the trial (None when the
    number is not a trial of the study), the study's user attributes and its trial count."""

    trial: FrozenTrial | None
    user_attrs: dict[str, Any]
    trials: int


def read_trial(journal: Path, study_name: str, number: int) -> IndexedTrial | None:
    """Trial `number` of `study_name` as Optuna's replay of the journal gives it, read through
    the index; None when the index cannot answer (none, one that does not reach the journal's
    last whole line, a study it does not know)."""
    with open(journal, "rb") as f:
        fd = f.fileno()
        fcntl.flock(fd, fcntl.LOCK_SH)  # no writer mid-write meanwhile
        chain = load_chain(journal)
        if chain.broken or chain.end != last_line_end(fd, os.fstat(fd).st_size):
            return None
        try:
            header = [_read_line(fd, *ref) for ref in chain.header]
        except ValueError:  # the index of another journal
            return None
        storage = JournalStorage(_Logs(header))
        if study_name not in optuna.get_all_study_names(storage):
            return None
        study = optuna.load_study(study_name=study_name, storage=storage,
                                  sampler=optuna.samplers.RandomSampler())
        count = chain.counts.get(study_name, 0)
        if not 0 <= number < count:
            return IndexedTrial(None, study.user_attrs, count)
        record = next(r for r in reversed(chain.records)
                      if r["study"] == study_name and r["first"] <= number)
        position = number - record["first"]
        offset = record["start"] + sum(length for length, _ in record["lines"][:position])
        line = _read_line(fd, offset, *record["lines"][position])
    [trial] = decoded_trials(header, line)[study_name]
    trial.number = number
    return IndexedTrial(trial, study.user_attrs, count)
