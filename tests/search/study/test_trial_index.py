"""The trial index beside the default journal (search/study/trial_index.py): read through it,
every trial equals what Optuna's replay of the journal gives (number, state, params,
distributions, values, user and system attributes, datetimes), after a resume, after `--workers`,
after a kill left whole lines and a partial one, after a record was lost and after a writer that
keeps no index appended; an index that does not match its journal answers None (or refuses),
and `show` then replays."""

import contextlib
import io
import json
import os
from pathlib import Path

import optuna
import pytest

from search.cli import inspect
from search.cli.main import main
from search.study import storage
from search.study.runner import run_study
from search.study.spec import load_spec
from search.study.trial_index import index_path, read_trial

from tests.search.study.test_storage_faults import _journal
from tests.search.study.test_storage_faults import _study as quickstart_copy

BATCH = 16


def _study(folder: Path) -> Path:
    return quickstart_copy(folder, BATCH)


def _search(study: Path, trials: int, *extra: str) -> None:
    assert main(["search", str(study), "--trials", str(trials), "--no-progress", *extra]) == 0


def _replayed(study: Path) -> optuna.Study:
    """The study as archscout's readers replay it (`open_default(read_only=True)`)."""
    handle = storage.open_default(_journal(study), read_only=True)
    return optuna.load_study(study_name="quickstart", storage=handle.storage)


def _fields(t: optuna.trial.FrozenTrial) -> tuple:
    return (t.number, t.state, t.params, t.distributions, t.values, t.user_attrs,
            t.system_attrs, t.datetime_start, t.datetime_complete, t.intermediate_values)


def _check_every_trial(study: Path) -> None:
    """Each trial read through the index is the replay's trial; the study's attributes and
    trial count match."""
    replayed = _replayed(study)
    trials = replayed.get_trials(deepcopy=False)
    for trial in trials:
        found = read_trial(_journal(study), "quickstart", trial.number)
        assert found is not None, trial.number
        assert _fields(found.trial) == _fields(trial), trial.number
        assert found.user_attrs == replayed.user_attrs and found.trials == len(trials)


def _show(study: Path, number: int) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["show", str(study), str(number), "--json"])
    return code, out.getvalue()


def _show_replayed(study: Path, number: int, monkeypatch) -> tuple[int, str]:
    with monkeypatch.context() as m:
        m.setattr(inspect, "indexed_trial", lambda *args: None)
        return _show(study, number)


def test_every_trial_equals_the_replay_after_a_resume_and_workers(tmp_path):
    study = _study(tmp_path)
    _search(study, 3 * BATCH)
    _check_every_trial(study)
    _search(study, 5 * BATCH)  # a resume: a second writer appends to the index
    _check_every_trial(study)
    _search(study, 9 * BATCH, "--workers", "2")  # two writers, records interleaved
    _check_every_trial(study)
    missing = read_trial(_journal(study), "quickstart", 9 * BATCH)
    assert missing.trial is None and missing.trials == 9 * BATCH
    assert read_trial(_journal(study), "another study", 0) is None


def test_show_reads_through_the_index_and_prints_what_the_replay_prints(tmp_path, monkeypatch):
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    number = next(t.number for t in _replayed(study).get_trials() if t.state.name == "COMPLETE")
    replayed = _show_replayed(study, number, monkeypatch)
    export = ["export", str(study), str(number), "--format", "json", "--force", "-o"]
    with monkeypatch.context() as m:
        m.setattr(inspect, "indexed_trial", lambda *args: None)
        assert main([*export, str(tmp_path / "replayed.json")]) == 0
    with monkeypatch.context() as m:  # the fast path must not replay the study at all
        m.setattr(inspect, "opened_study", None)
        assert _show(study, number) == replayed
        assert main(["show", str(study), str(10 * BATCH)]) == 2  # not a trial: same error
        assert main([*export, str(tmp_path / "indexed.json")]) == 0
    assert (tmp_path / "indexed.json").read_text() == (tmp_path / "replayed.json").read_text()


def _lines_of_a_longer_run(tmp_path: Path, start: int, count: int) -> list[bytes]:
    """Trial lines `start` … `start + count - 1` of another run of the study (valid trials of
    study 0 that this journal does not hold yet: what a writer killed mid-batch wrote)."""
    other = _study(tmp_path / "longer")
    _search(other, start + count)
    lines = _journal(other).read_bytes().splitlines(keepends=True)
    return lines[-count:]


def test_lines_a_kill_left_are_indexed_by_the_next_writer(tmp_path):
    """A kill mid-write leaves two whole trial lines and half of a third: the index does not
    cover them, so readers replay (None); the next writer cuts the partial line, indexes the
    two whole lines (decoded by Optuna: finished trials) and then its own batch."""
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    extra = _lines_of_a_longer_run(tmp_path, 2 * BATCH, 3)
    with open(_journal(study), "ab") as f:
        f.write(extra[0] + extra[1] + extra[2][: len(extra[2]) // 2])
    assert read_trial(_journal(study), "quickstart", 0) is None
    assert len(_replayed(study).get_trials()) == 2 * BATCH + 2  # whole lines are trials
    _search(study, 3 * BATCH)
    _check_every_trial(study)


def test_a_lost_record_and_a_writer_without_index_are_followed(tmp_path):
    """Lines the index does not cover (a record lost in a crash between the journal's fsync and
    the index append; a writer that keeps no index: `--storage journal:PATH` on the same file)
    are answered by the replay until the next indexing writer decodes and records them."""
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    index = index_path(_journal(study))
    records = index.read_bytes().splitlines(keepends=True)
    index.write_bytes(b"".join(records[:-1]))  # the last batch's record never written
    assert read_trial(_journal(study), "quickstart", 0) is None
    spec = load_spec(study)
    handle = storage.open_url(f"journal:{_journal(study)}")  # keeps no index
    run_study(spec, handle, 3 * BATCH, seed=1, show_progress=False)
    handle.close()
    assert read_trial(_journal(study), "quickstart", 0) is None
    _search(study, 4 * BATCH)  # records the lines it did not write, then its own batch
    _check_every_trial(study)


def test_trials_asked_over_several_lines_end_the_index(tmp_path):
    """A trial asked and told operation by operation (plain Optuna, or an earlier archscout's
    workers) cannot be answered from one line: the index ends there for good (`broken`), and
    every reader replays."""
    study = _study(tmp_path)
    _search(study, BATCH)
    plain = optuna.load_study(study_name="quickstart", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(_journal(study)))))
    asked = plain.ask()
    plain.tell(asked, state=optuna.trial.TrialState.FAIL)
    _search(study, 2 * BATCH)
    assert b'"broken":true' in index_path(_journal(study)).read_bytes()
    assert read_trial(_journal(study), "quickstart", 0) is None


@pytest.mark.parametrize("damage", ["garbage", "foreign", "line changed", "journal cut"])
def test_an_index_that_does_not_match_its_journal_is_not_used(tmp_path, monkeypatch, damage):
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    path, index = _journal(study), index_path(_journal(study))
    number = next(t.number for t in _replayed(study).get_trials() if t.state.name == "COMPLETE")
    if damage == "garbage":
        index.write_bytes(os.urandom(4096))
    elif damage == "foreign":  # the index of another journal (another run's own lines)
        other = _study(tmp_path / "other")
        _search(other, BATCH)
        index.write_bytes(index_path(_journal(other)).read_bytes())
    elif damage == "line changed":  # the trial's line edited in place, same length
        _rewrite_in_place(path, index, number)
    else:  # the journal cut back behind the index's back (size record too), then re-grown
        first = json.loads(index.read_bytes().splitlines()[1])
        end = first["start"] + sum(length for length, _ in first["lines"])
        os.truncate(path, end)
        path.with_name(storage.SIZE_RECORD_NAME).write_text(str(end))
        assert read_trial(path, "quickstart", 0) is None
        _search(study, 2 * BATCH)
        _check_every_trial(study)
    replayed = _show_replayed(study, number, monkeypatch)
    assert _show(study, number) == replayed
    if damage in ("garbage", "foreign"):
        assert read_trial(path, "quickstart", number) is None
    if damage == "line changed":
        with pytest.raises(ValueError):
            read_trial(path, "quickstart", number)


def _rewrite_in_place(path: Path, index: Path, number: int) -> None:
    """Change one digit of trial `number`'s start time in its line (found through the index)."""
    records = [json.loads(line) for line in index.read_bytes().splitlines()]
    record = next(r for r in records if r["study"] and r["first"] <= number
                  < r["first"] + len(r["lines"]))
    position = number - record["first"]
    offset = record["start"] + sum(length for length, _ in record["lines"][:position])
    length = record["lines"][position][0]
    data = bytearray(path.read_bytes())
    line = bytes(data[offset:offset + length])
    at = line.index(b'"datetime_start":"') + len(b'"datetime_start":"') + 3
    data[offset + at] = ord("1") if line[at:at + 1] != b"1" else ord("2")
    path.write_bytes(bytes(data))
