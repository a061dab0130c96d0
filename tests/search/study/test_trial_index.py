"""The trial index beside the default journal (search/study/trial_index.py): read through it,
every trial equals what Optuna's replay of the journal gives (params, values, user and system
attributes, state, datetimes, ids: FrozenTrial's equality compares all of them), after a resume,
after a kill leaves a partial batch, after a record was lost and after other writers appended;
an index that does not match its journal answers None (or refuses), and `show` then replays."""

import contextlib
import io
import json
import os
from pathlib import Path

import optuna
import pytest

from search.cli import inspect
from search.cli.main import main
from search.study import journal_file, storage
from search.study.runner import run_study
from search.study.spec import load_spec
from search.study.trial_index import index_path, read_trial

from tests.search.study.test_storage_faults import _journal
from tests.search.study.test_storage_faults import _study as quickstart_copy

BATCH = 16


def _study(folder: Path) -> Path:
    return quickstart_copy(folder, BATCH)


def _search(study: Path, trials: int) -> None:
    assert main(["search", str(study), "--trials", str(trials), "--no-progress"]) == 0


def _replayed(study: Path) -> optuna.Study:
    """The study as archscout's readers replay it (`open_default(read_only=True)`)."""
    handle = storage.open_default(_journal(study), shared=True, read_only=True)
    return optuna.load_study(study_name="quickstart", storage=handle.storage)


def _check_every_trial(study: Path, indexed_at_least: int) -> None:
    """Each trial read through the index is the replay's trial (or None: not held whole);
    at least `indexed_at_least` of them are answered; the study's attributes match."""
    replayed = _replayed(study)
    trials = replayed.get_trials(deepcopy=False)
    answered = 0
    for trial in trials:
        found = read_trial(_journal(study), "quickstart", trial.number,
                           limit=journal_file.acknowledged_end(_journal(study)))
        if found is None:
            continue
        answered += 1
        assert found.trial == trial, trial.number  # every field, the datetimes and ids too
        assert (found.trial.params, found.trial.values, found.trial.state) == (
            trial.params, trial.values, trial.state)
        assert found.user_attrs == replayed.user_attrs and found.trials == len(trials)
    assert answered >= indexed_at_least


def _show(study: Path, number: int) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["show", str(study), str(number), "--json"])
    return code, out.getvalue()


def _show_replayed(study: Path, number: int, monkeypatch) -> tuple[int, str]:
    with monkeypatch.context() as m:
        m.setattr(inspect, "indexed_trial", lambda *args: None)
        return _show(study, number)


def test_every_trial_equals_the_replay_and_after_a_resume(tmp_path):
    study = _study(tmp_path)
    _search(study, 3 * BATCH)
    _check_every_trial(study, 3 * BATCH)
    _search(study, 5 * BATCH)  # a resume: a second owner appends to the index
    _check_every_trial(study, 5 * BATCH)
    missing = read_trial(_journal(study), "quickstart", 5 * BATCH)
    assert missing.trial is None and missing.trials == 5 * BATCH
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


def test_a_partial_batch_a_kill_left_then_its_cut(tmp_path):
    """A kill mid-write leaves whole lines and a partial one past the last acknowledged batch
    (the size record): readers stop before them, as the index does; the next owner cuts the
    batch (and drops index records beyond the cut) and the index follows on."""
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    path = _journal(study)
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "ab") as f:  # an unacknowledged batch: 2 whole lines and half of one
        f.write(lines[-3] + lines[-2] + lines[-1][: len(lines[-1]) // 2])
    assert journal_file.acknowledged_end(path) is not None
    _check_every_trial(study, 2 * BATCH)
    _search(study, 3 * BATCH)  # cuts the partial batch, then appends a new one
    _check_every_trial(study, 3 * BATCH)


def test_a_lost_record_and_other_writers_lines_are_followed(tmp_path):
    """Lines the index does not cover (a record lost in a crash between the journal's fsync
    and the index append; trials a shared writer logged operation by operation) are decoded
    by the reader, and by the next owner; trials created unfinished are not answered."""
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    index = index_path(_journal(study))
    records = index.read_bytes().splitlines(keepends=True)
    index.write_bytes(b"".join(records[:-1]))  # the last batch's record never written
    _check_every_trial(study, 2 * BATCH)
    spec = load_spec(study)
    handle = storage.open_default(_journal(study), shared=True)  # as a `--workers` worker
    run_study(spec, handle, 2 * BATCH + 8, seed=1, show_progress=False)
    handle.close()
    _check_every_trial(study, 2 * BATCH)
    assert read_trial(_journal(study), "quickstart", 2 * BATCH) is None  # only replayed
    _search(study, 4 * BATCH)  # the owner records the others' lines, then its own batches
    _check_every_trial(study, 4 * BATCH - 8)


@pytest.mark.parametrize("damage", ["garbage", "foreign", "line changed", "journal cut"])
def test_an_index_that_does_not_match_its_journal_is_not_used(tmp_path, monkeypatch, damage):
    study = _study(tmp_path)
    _search(study, 2 * BATCH)
    path, index = _journal(study), index_path(_journal(study))
    number = next(t.number for t in _replayed(study).get_trials() if t.state.name == "COMPLETE")
    if damage == "garbage":
        index.write_bytes(os.urandom(4096))
    elif damage == "foreign":  # the index of another journal (another run's first line)
        other = _study(tmp_path / "other")
        _search(other, BATCH)
        index.write_bytes(index_path(_journal(other)).read_bytes())
    elif damage == "line changed":  # the trial's line edited in place, same length
        _rewrite_in_place(path, number)
    else:  # the journal cut back behind the index's back (size record too), then re-grown
        first_end = json.loads(index.read_bytes().splitlines()[1])["end"]
        os.truncate(path, first_end)
        path.with_name(storage.SIZE_RECORD_NAME).write_text(str(first_end))
        _search(study, 2 * BATCH)
        _check_every_trial(study, 2 * BATCH)
    replayed = _show_replayed(study, number, monkeypatch)
    assert _show(study, number) == replayed
    if damage in ("garbage", "foreign"):
        assert read_trial(path, "quickstart", number) is None
    if damage == "line changed":
        with pytest.raises(ValueError):
            read_trial(path, "quickstart", number)


def _rewrite_in_place(path: Path, number: int) -> None:
    """Change one digit of trial `number`'s start time in its create-trial line."""
    data = path.read_bytes()
    trials = [i for i, line in enumerate(data.splitlines(keepends=True))
              if line.startswith(b'{"op_code":4,')]
    lines = data.splitlines(keepends=True)
    line = lines[trials[number]]
    at = line.index(b'"datetime_start":"') + len(b'"datetime_start":"') + 3
    lines[trials[number]] = line[:at] + (b"1" if line[at:at + 1] != b"1" else b"2") + \
        line[at + 1:]
    path.write_bytes(b"".join(lines))
