"""Faults of the default journal, each injected: an interrupted fsync, a partial last line under
`--workers`, a single run and `--workers` at once, a stale Optuna lock, corrupt or foreign
journals and size records, readers that must not write, a full disk (a real small tmpfs where
the test may mount one, else a write that fails with ENOSPC); plus `--workers` child errors,
the `--trials`/`--workers` bounds and the metric names the dashboard shows."""

import errno
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from search.study import journal_file

from search.study import storage
from search.cli.main import main
from search.study.spec import load_spec
from search.study.errors import StorageError

REPO = Path(__file__).resolve().parents[3]
FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


def _study(folder: Path, batch_size: int = 64) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "quickstart.toml"
    text = (REPO / "studies" / "quickstart.toml").read_text()
    target.write_text(text.replace("batch_size = 64", f"batch_size = {batch_size}"))
    return target


def _journal(study: Path) -> Path:
    return study.parent / "out" / "quickstart" / "study.journal"


def _search(study: Path, trials: int, *extra: str) -> int:
    return main(["search", str(study), "--trials", str(trials), "--no-progress", *extra])


def _trials(study: Path) -> list[optuna.trial.FrozenTrial]:
    """Every trial of the study, read straight from the journal with Optuna's own classes."""
    backend = optuna.storages.journal.JournalFileBackend(str(_journal(study)))
    loaded = optuna.load_study(study_name="quickstart",
                               storage=optuna.storages.JournalStorage(backend))
    return loaded.get_trials(deepcopy=False)


def _one_line(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Name -> (content, inode) of every file in `folder` (a replaced file changes inode) but
    the empty owner-lock file, which an attempt to run may create."""
    return {p.name: (p.read_bytes(), p.stat().st_ino) for p in sorted(folder.iterdir())
            if p.is_file() and p.name != storage.OWNER_LOCK_NAME}


# --- an interrupted batch is written once -------------------------------------------------------


def test_ctrl_c_during_a_batch_fsync_writes_the_batch_once(tmp_path, monkeypatch):
    """fsync #1 writes the study, #2-#4 the first three batches: Ctrl-C in the 4th (the third
    batch is in the file, not yet synced) must not append that batch again on the way out
    (it did: 256 trials, 64 of them duplicates), and the resumed run continues from 192."""
    study = _study(tmp_path)
    calls, real_fsync = [], os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 4:
            raise KeyboardInterrupt
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert _search(study, 320) == 130  # the CLI's exit code for Ctrl-C
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert len(_trials(study)) == 192
    assert _search(study, 320) == 0
    trials = _trials(study)
    assert len(trials) == 320 and all(t.state in FINISHED for t in trials)
    starts = [t.datetime_start for t in trials]
    assert len(set(starts)) == len(starts)  # no trial stored twice


def test_a_failed_flush_is_not_repeated_on_close(tmp_path, capsys):
    """The full-disk error is raised once: closing the handle does not try the batch again."""
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    capsys.readouterr()
    handle = storage.open_default(_journal(study), shared=False)
    attempts = []

    def fail(fd, data):
        attempts.append(len(data))
        raise OSError(errno.ENOSPC, "No space left on device")

    backend = handle.backend
    backend.append_logs([{"op_code": 2, "worker_id": "w", "study_id": 0,
                          "user_attr": {"k": 1}}])
    original = journal_file._write_all
    journal_file._write_all = fail
    try:
        with pytest.raises(StorageError, match="no space left"):
            handle.flush()
        handle.close()
    finally:
        journal_file._write_all = original
    assert len(attempts) == 1


# --- partial last line, owner lock and --workers ------------------------------------------------


def test_a_batch_cut_by_a_crash_goes_whole(tmp_path, capsys):
    """kill -9 in the middle of a batch's write leaves some of its lines whole and one cut: the
    next run drops the whole unacknowledged batch (the size record says where the last
    acknowledged one ended), so a batch is kept whole or not at all (it kept the whole lines:
    a resumed study held e.g. 244 trials, not a multiple of the batch)."""
    study = _study(tmp_path)
    assert _search(study, 128) == 0
    capsys.readouterr()
    path = _journal(study)
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "ab") as f:  # 30 trial records of a batch, and the start of the 31st
        f.write(b"".join(lines[-30:]) + lines[-31][:100])
    before = _snapshot(path.parent)
    assert main(["pareto", str(study), "--json"]) == 0  # a reader sees what will be kept
    assert json.loads(capsys.readouterr().out)["trials"] == 128
    assert _snapshot(path.parent) == before
    assert _search(study, 192) == 0
    assert "cut the unfinished batch (30 whole lines and a partial one)" in \
        capsys.readouterr().err
    trials = _trials(study)
    assert len(trials) == 192
    starts = [t.datetime_start for t in trials]
    assert len(set(starts)) == len(starts)  # none of the 30 copies stayed


def test_a_shared_opener_drops_a_dead_owners_batch_too(tmp_path, capsys):
    """Opening the journal shared (as journal tools and benchmarks do) while nobody owns it
    drops the dead owner's unfinished batch as the owner would: every view agrees."""
    study = _study(tmp_path)
    assert _search(study, 128) == 0
    capsys.readouterr()
    path = _journal(study)
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "ab") as f:
        f.write(b"".join(lines[-10:]) + lines[-11][:50])
    handle = storage.open_default(path, shared=True)
    assert "cut the unfinished batch (10 whole lines" in capsys.readouterr().err
    assert len(optuna.load_study(study_name="quickstart", storage=handle.storage).trials) == 128


def test_workers_repair_a_partial_last_line_first(tmp_path, capsys):
    """A crash left half a line: `--workers 2` cuts it before any worker appends (it used to
    append onto it, and the journal could no longer be read)."""
    study = _study(tmp_path, batch_size=32)
    assert _search(study, 32) == 0
    with open(_journal(study), "ab") as f:
        f.write(b'{"op_code":5,"worker_id":"x","study_id":0,"datetime_sta')
    capsys.readouterr()
    assert _search(study, 96, "--workers", "2") == 0
    assert "unfinished last line" in capsys.readouterr().err
    trials = _trials(study)
    assert sum(t.state in FINISHED for t in trials) == 96


def test_workers_refuse_a_journal_a_single_run_holds(tmp_path, capsys):
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    capsys.readouterr()
    folder = _journal(study).parent
    before = _snapshot(folder)
    with open(folder / storage.OWNER_LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert _search(study, 128, "--workers", "2") == 2
        _one_line(capsys, "locked by another")
    assert _snapshot(folder) == before


def test_a_single_run_refuses_a_journal_workers_hold(tmp_path, capsys):
    """Workers hold the owner lock shared: a single (batching) run cannot start beside them."""
    study = _study(tmp_path)
    path = _journal(study)
    path.parent.mkdir(parents=True)
    handle = storage.open_default(path, shared=True, worker=True)
    try:
        assert _search(study, 64) == 2
        _one_line(capsys, "locked by another")
    finally:
        handle.close()


# --- a stale lock ------------------------------------------------------------------------------


def _leave_optuna_lock(path: Path, age_s: float = 0.0) -> Path:
    """The symlink Optuna's JournalFileSymlinkLock holds while appending, as a kill -9 leaves
    it (optionally dated `age_s` seconds back)."""
    lock = path.with_name(path.name + ".lock")
    os.symlink(path, lock)
    if age_s:
        then = time.time() - age_s
        os.utime(lock, (then, then), follow_symlinks=False)
    return lock


def test_a_stale_lock_is_cleared_at_once_by_the_owner(tmp_path, capsys):
    """kill -9 during an append left Optuna's lock file: every later start used to wait 30 s."""
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    capsys.readouterr()
    lock = _leave_optuna_lock(_journal(study))
    started = time.monotonic()
    assert _search(study, 128) == 0
    assert time.monotonic() - started < 10.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stale journal lock" in err[0], err
    assert not os.path.lexists(lock) and len(_trials(study)) == 128


def test_the_lock_of_a_dead_appender_is_reclaimed_by_age(tmp_path, capsys):
    """Shared writers (workers, journal:PATH) own nothing exclusive: a lock older than any
    append is taken as stale, one line on stderr; a fresh one is waited for."""
    path = tmp_path / "study.journal"
    path.write_bytes(b"")
    lock = _leave_optuna_lock(path, age_s=storage.STALE_LOCK_S + 5)
    backend = storage.SafeJournalFileBackend(path)
    backend.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}])
    _one_line(capsys, "stale journal lock")
    assert not os.path.lexists(lock) and path.read_bytes().count(b"\n") == 1

    _leave_optuna_lock(path)  # fresh: someone is appending right now
    released = []

    def release():
        time.sleep(0.3)
        os.unlink(lock)
        released.append(time.monotonic())

    import threading

    thread = threading.Thread(target=release)
    thread.start()
    backend.append_logs([{"op_code": 2, "worker_id": "w", "study_id": 0, "user_attr": {}}])
    done = time.monotonic()
    thread.join()
    assert released and done >= released[0]
    assert capsys.readouterr().err == ""


# --- corrupt journals and size records: one line, exit 2, nothing changed -----------------------


def _ran_once(tmp_path: Path, capsys) -> Path:
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    capsys.readouterr()
    return study


@pytest.mark.parametrize("command", ["search", "pareto", "show"])
def test_an_unknown_op_code_is_one_line(tmp_path, capsys, command):
    study = _ran_once(tmp_path, capsys)
    with open(_journal(study), "ab") as f:
        f.write(b'{"op_code":99,"worker_id":"x"}\n')
    folder = _journal(study).parent
    before = _snapshot(folder)
    argv = {"search": ["search", str(study), "--trials", "128", "--no-progress"],
            "pareto": ["pareto", str(study)], "show": ["show", str(study), "0"]}[command]
    assert main(argv) == 2
    _one_line(capsys, "is corrupt")
    assert _snapshot(folder) == before


@pytest.mark.parametrize("command", ["search", "pareto"])
def test_random_bytes_are_refused_untouched(tmp_path, capsys, command):
    """A journal of random bytes has no last newline: `search` used to 'repair' it by cutting
    everything after the last newline it found."""
    study = _study(tmp_path)
    path = _journal(study)
    path.parent.mkdir(parents=True)
    path.write_bytes(os.urandom(5000).replace(b"\n", b"\r")[:-1] + b"\x00")
    before = _snapshot(path.parent)
    argv = ["search", str(study), "--trials", "64", "--no-progress"] if command == "search" \
        else ["pareto", str(study)]
    assert main(argv) == 2
    _one_line(capsys, "is corrupt")
    assert _snapshot(path.parent) == before


def test_random_bytes_with_newlines_are_refused_untouched(tmp_path, capsys):
    study = _study(tmp_path)
    path = _journal(study)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xb8\x01garbage\n" * 50 + b"\xff\xfe tail")
    before = _snapshot(path.parent)
    assert _search(study, 64) == 2
    _one_line(capsys, "is corrupt")
    assert _snapshot(path.parent) == before


def test_a_foreign_text_file_is_refused(tmp_path, capsys):
    study = _study(tmp_path)
    path = _journal(study)
    path.parent.mkdir(parents=True)
    path.write_text("these are my notes, not a journal\nsecond line\n")
    before = _snapshot(path.parent)
    assert _search(study, 64) == 2
    _one_line(capsys, "is corrupt")
    assert _snapshot(path.parent) == before


@pytest.mark.parametrize("command", ["search", "pareto"])
def test_a_non_numeric_size_record_is_one_line(tmp_path, capsys, command):
    study = _ran_once(tmp_path, capsys)
    folder = _journal(study).parent
    (folder / storage.SIZE_RECORD_NAME).write_text("abc\n")
    before = _snapshot(folder)
    argv = ["search", str(study), "--trials", "128", "--no-progress"] if command == "search" \
        else ["pareto", str(study)]
    assert main(argv) == 2
    _one_line(capsys, storage.SIZE_RECORD_NAME, "'abc")
    assert _snapshot(folder) == before


def test_readers_never_write(tmp_path, capsys):
    """pareto, show (also when it fails), export and plot only read: the size record keeps its
    inode and every file its bytes (they used to replace the size record on every call)."""
    study = _ran_once(tmp_path, capsys)
    folder = _journal(study).parent
    before = _snapshot(folder)
    assert main(["pareto", str(study), "--json"]) == 0
    best = str(json.loads(capsys.readouterr().out)["pareto"][0]["trial"])
    assert main(["show", str(study), best]) == 0
    assert main(["show", str(study), "9999"]) == 2
    assert main(["export", str(study), best, "--format", "json", "-o",
                 str(tmp_path / "one.json")]) == 0
    assert main(["plot", str(study), "-o", str(tmp_path / "front.png")]) == 0
    capsys.readouterr()
    assert _snapshot(folder) == before


def test_readers_of_a_journal_url_create_nothing(tmp_path, capsys):
    study = _study(tmp_path)
    url = f"journal:{tmp_path / 'elsewhere' / 'study.journal'}"
    assert main(["pareto", str(study), "--storage", url]) == 2
    _one_line(capsys, "no journal at")
    assert not (tmp_path / "elsewhere").exists()
    assert _search(study, 64, "--storage", url) == 0
    capsys.readouterr()
    assert main(["pareto", str(study), "--storage", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 64


# --- a full disk --------------------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs (room for the study and one batch of 64 trials, not two); skipped where
    this process may not mount one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
            check=False, capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_is_one_line_and_resumes_once_freed(small_tmpfs, capsys):
    study = _study(small_tmpfs)
    assert _search(study, 256) == 2
    _one_line(capsys, "no space left")
    folder = _journal(study).parent
    assert not [p.name for p in small_tmpfs.rglob("*.tmp")]
    kept = len(_trials(study))
    assert kept == 64  # the batch that fit; the one that did not left no byte behind
    assert _journal(study).read_bytes().endswith(b"\n")
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_tmpfs)], check=True)
    assert _search(study, 256) == 0
    capsys.readouterr()
    assert len(_trials(study)) == 256
    assert not list(folder.glob("*.tmp"))


def test_full_disk_while_writing_the_size_record_leaves_no_tmp(tmp_path, capsys, monkeypatch):
    """Where no tmpfs can be mounted: the size record's temp file is removed when it cannot be
    written, and the error is one line."""
    study = _study(tmp_path)
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".tmp"):
            real(self, "")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    assert _search(study, 64) == 2
    _one_line(capsys, "no space left")
    assert not list(_journal(study).parent.glob("*.tmp"))


def test_full_disk_mid_batch_is_undone(tmp_path, capsys, monkeypatch):
    """A batch that only partly reached the disk is cut back to the last whole batch."""
    study = _ran_once(tmp_path, capsys)
    size = _journal(study).stat().st_size
    real = journal_file._write_all

    def half(fd, data):
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_file, "_write_all", half)
    assert _search(study, 128) == 2
    _one_line(capsys, "no space left")
    assert _journal(study).stat().st_size == size
    monkeypatch.setattr(journal_file, "_write_all", real)
    assert _search(study, 128) == 0
    assert len(_trials(study)) == 128


# --- --workers children, bounds, dashboard names ------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_unusable_study_folder_is_one_line(tmp_path, capsys, workers):
    study = _study(tmp_path, batch_size=16)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "quickstart").write_text("a file where the study folder should be")
    assert _search(study, 32, "--workers", workers) == 2
    _one_line(capsys, "`storage`")


def test_worker_errors_are_one_line_each(tmp_path, capfd):
    """The spawned workers themselves fail (a study name that only they meet): each prints one
    line on stderr, no traceback."""
    study = _study(tmp_path, batch_size=16)
    assert _search(study, 16) == 0
    journal = _journal(study)
    lines = journal.read_bytes().splitlines(keepends=True)
    spec_line = json.loads(lines[1])
    spec_line["user_attr"]["archscout_spec"]["space"] = {"changed": True}
    lines[1] = json.dumps(spec_line, separators=(",", ":")).encode() + b"\n"
    journal.write_bytes(b"".join(lines))
    (journal.parent / storage.SIZE_RECORD_NAME).unlink()
    capfd.readouterr()
    assert _search(study, 64, "--workers", "2") == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    worker_lines = [line for line in err.splitlines() if "worker" in line]
    assert len(worker_lines) == 3, err  # one per worker, one from the parent


@pytest.mark.parametrize("flag,value", [("--trials", "0"), ("--trials", "-3"),
                                        ("--workers", "0"), ("--workers", "-1"),
                                        ("--trials", "many")])
def test_trials_and_workers_must_be_positive(tmp_path, capsys, flag, value):
    study = _study(tmp_path)
    assert main(["search", str(study), flag, value, "--no-progress"]) == 2
    _one_line(capsys, flag, value)
    assert not (tmp_path / "out").exists()


def test_every_study_names_its_metrics(tmp_path):
    """optuna-dashboard labels objectives by the study's metric names (it showed "0" and "1");
    each trial carries its feasibility as the `feasible` user attribute."""
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    spec = load_spec(study)
    backend = optuna.storages.journal.JournalFileBackend(str(_journal(study)))
    loaded = optuna.load_study(study_name="quickstart",
                               storage=optuna.storages.JournalStorage(backend))
    assert loaded.metric_names == spec.objectives.names
    assert all(isinstance(t.user_attrs.get("feasible"), bool) for t in loaded.trials)
