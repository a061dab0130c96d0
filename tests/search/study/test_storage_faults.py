"""Faults of the default journal, each injected: an interrupted fsync, a write a crash cut, a
partial last line under `--workers`, a single run and `--workers` at once, a writer killed
while holding the journal's lock, corrupt or foreign journals and size records, readers that
must not write, a full disk (a real small tmpfs where the test may mount one, else a write that
fails with ENOSPC), a worker killed right after asking, RUNNING trials an earlier version left;
plus `--workers` child errors, the `--trials`/`--workers` bounds and the metric names the
dashboard shows."""

import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from search.study import journal_file, storage
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


def test_a_failed_write_is_not_repeated_on_close(tmp_path, capsys):
    """The full-disk error is raised once: closing the handle does not try the batch again."""
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    capsys.readouterr()
    handle = storage.open_default(_journal(study), shared=False)
    attempts = []

    def fail(fd, data):
        attempts.append(len(data))
        raise OSError(errno.ENOSPC, "No space left on device")

    original = journal_file._write_all
    journal_file._write_all = fail
    try:
        with pytest.raises(StorageError, match="no space left"):
            with handle.journal.batch():
                handle.journal.append_logs([{"op_code": 2, "worker_id": "w", "study_id": 0,
                                             "user_attr": {"k": 1}}])
        handle.close()
    finally:
        journal_file._write_all = original
    assert len(attempts) == 1


# --- partial last line, owner lock and --workers ------------------------------------------------


def _lines_of_a_longer_run(folder: Path, trials: int, count: int) -> list[bytes]:
    """The last `count` trial lines of another run of the study to `trials` trials: finished
    trials of study 0 that a journal of `trials - count` trials does not hold (what a writer
    killed mid-batch had written of its batch)."""
    other = _study(folder)
    assert _search(other, trials) == 0
    return _journal(other).read_bytes().splitlines(keepends=True)[-count:]


def test_a_write_a_crash_cut_keeps_its_whole_lines(tmp_path, capsys):
    """kill -9 in the middle of a batch's write leaves some of its lines whole and one cut.
    Each whole line is a finished, evaluated trial (runs write nothing else): readers see
    them, write nothing and skip the partial line; the next run cuts that line and resumes
    with the whole ones, nothing stored twice."""
    study = _study(tmp_path)
    assert _search(study, 128) == 0
    extra = _lines_of_a_longer_run(tmp_path / "longer", 192, 31)
    capsys.readouterr()
    path = _journal(study)
    with open(path, "ab") as f:  # 30 trial lines of a batch, and the start of the 31st
        f.write(b"".join(extra[:30]) + extra[30][:100])
    before = _snapshot(path.parent)
    assert main(["pareto", str(study), "--json"]) == 0  # a reader: the whole lines count
    assert json.loads(capsys.readouterr().out)["trials"] == 158
    assert _snapshot(path.parent) == before
    assert _search(study, 192) == 0
    assert "cut the unfinished last line" in capsys.readouterr().err
    trials = _trials(study)
    assert len(trials) == 192 and all(t.state in FINISHED for t in trials)
    starts = [t.datetime_start for t in trials]
    assert len(set(starts)) == len(starts)


def test_a_shared_opener_cuts_a_dead_writers_partial_line_too(tmp_path, capsys):
    """Opening the journal as a writer beside others (`journal:PATH`, benchmarks) cuts what a
    dead writer left unfinished before anything is read: every view agrees."""
    study = _study(tmp_path)
    assert _search(study, 128) == 0
    capsys.readouterr()
    path = _journal(study)
    with open(path, "ab") as f:
        f.write(path.read_bytes().splitlines(keepends=True)[-1][:50])
    handle = storage.open_default(path, shared=True)
    assert "cut the unfinished last line" in capsys.readouterr().err
    assert len(optuna.load_study(study_name="quickstart", storage=handle.storage).trials) == 128
    handle.close()


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


# --- the journal's lock ---------------------------------------------------------------------


HOLD_THE_LOCK = """
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b'{"op_code":4,"worker_id":"dying","study_id":0,"datetime_st')  # mid-write
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_holding_the_lock_leaves_nothing_to_wait_for(tmp_path, capsys):
    """kill -9 of a writer in the middle of an append (the journal's flock held, half a line
    written): the kernel releases the lock with the process, so the next run starts at once
    (Optuna's own symlink lock would be left behind, and waited for: 30 s), cuts the half line
    and resumes. A symlink lock Optuna's writers left is not archscout's and is ignored."""
    study = _study(tmp_path)
    assert _search(study, 64) == 0
    path = _journal(study)
    done = subprocess.run([sys.executable, "-c", HOLD_THE_LOCK, str(path)], check=False)
    assert done.returncode == -signal.SIGKILL
    os.symlink(path, path.with_name(path.name + ".lock"))  # Optuna's JournalFileSymlinkLock
    capsys.readouterr()
    assert _search(study, 128) == 0
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("proposals: ")]  # the sampler's summary (proposals.describe)
    assert len(err) == 1 and "cut the unfinished last line" in err[0], err
    assert len(_trials(study)) == 128


def test_a_live_writer_is_waited_for(tmp_path):
    """A writer holding the journal's lock (another process appending right now) is waited
    for: the append starts once the lock is released, never in the middle of theirs."""
    path = tmp_path / "study.journal"
    backend = journal_file.JournalFile(path)
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    released = []

    def release():
        time.sleep(0.3)
        released.append(time.monotonic())
        os.close(holder)

    thread = threading.Thread(target=release)
    thread.start()
    backend.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}])
    done = time.monotonic()
    thread.join()
    assert released and done >= released[0] and path.read_bytes().count(b"\n") == 1


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


# --- a worker killed after asking; RUNNING trials an earlier version left ----------------------


KILL_AFTER_FIFTH_ASK = """
import os, signal, sys
import optuna
from pathlib import Path
from search.study import storage
from search.study.runner import run_study
from search.study.spec import load_spec

real_ask, asked = optuna.Study.ask, []

def ask(self, *args, **kwargs):
    trial = real_ask(self, *args, **kwargs)
    asked.append(1)
    if len(asked) == 5:  # right after an ask, before the trial could be named or told
        os.kill(os.getpid(), signal.SIGKILL)
    return trial

optuna.Study.ask = ask
study = Path(sys.argv[1])
spec = load_spec(study)
handle = storage.open_default(storage.default_journal_path(study, spec.name), worker=True)
run_study(spec, handle, int(sys.argv[2]), 0, show_progress=False)
"""


def test_a_worker_killed_right_after_asking_leaves_nothing_running(tmp_path, capsys):
    """A `--workers` worker killed between asking a trial and telling it: its batch was asked
    in its own copy of the study, so the journal holds nothing of it, no RUNNING trial, and the
    next `--workers` run has nothing to wait for (it waited out a 60 s grace period when the
    asked trial was RUNNING in the journal, unnamed)."""
    study = _study(tmp_path, batch_size=16)
    assert _search(study, 32) == 0
    done = subprocess.run([sys.executable, "-c", KILL_AFTER_FIFTH_ASK, str(study), "64"],
                          check=False, cwd=REPO, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    trials = _trials(study)
    assert len(trials) == 32 and all(t.state in FINISHED for t in trials)
    capsys.readouterr()
    assert _search(study, 64, "--workers", "2") == 0
    trials = _trials(study)
    assert len(trials) == 64 and all(t.state in FINISHED for t in trials)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_running_trials_an_earlier_version_left_are_settled_on_any_resume(tmp_path, capsys,
                                                                          workers):
    """RUNNING trials in the journal (asked by an earlier archscout's workers, named or not, or
    by plain Optuna) are settled as PRUNED by the next run to own the journal, a single run or
    `--workers` alike (a single run used to leave them to the next `--workers` run), and never
    count toward `--trials`."""
    study = _study(tmp_path, batch_size=16)
    assert _search(study, 32) == 0
    plain = optuna.load_study(study_name="quickstart", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(_journal(study)))))
    named, unnamed = plain.ask(), plain.ask()
    named.set_user_attr("worker", "elsewhere:1")
    capsys.readouterr()
    assert _search(study, 64, "--workers", workers) == 0
    assert "2 trials an interrupted run left RUNNING were settled" in capsys.readouterr().err
    states = {t.number: t.state for t in _trials(study)}
    assert states[named.number] == states[unnamed.number] == TrialState.PRUNED
    assert sum(state in FINISHED for state in states.values()) == 64
    assert TrialState.RUNNING not in states.values()


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


@pytest.mark.parametrize("count", ["1000000000000", str(10**40)])
def test_a_workers_count_no_machine_holds_is_refused(tmp_path, capsys, count):
    """`--workers` far above what the machine's memory holds is one line, exit 2, at once (it
    started processes until the machine hung); nothing is written."""
    study = _study(tmp_path)
    assert _search(study, 64, "--workers", count) == 2
    _one_line(capsys, "`--workers`", count, "at most")
    assert not (tmp_path / "out").exists()


def test_more_workers_than_cores_warns_once(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    study = _study(tmp_path, batch_size=16)
    assert _search(study, 32, "--workers", "2") == 0
    err = capfd.readouterr().err
    assert err.count("warning: --workers 2 is more than this machine's 1 cores") == 1, err


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


SECRET = "Zq9-s3cr3t-Pa55"


@pytest.mark.parametrize("url", [f"postgresql://someone:{SECRET}@127.0.0.1:1/db",
                                 f"postgresql://someone@127.0.0.1:1/db?password={SECRET}",
                                 f"postgresql://someone@127.0.0.1:1/db?sslmode=disable&"
                                 f"PassWord={SECRET}"], ids=["authority", "query", "query-case"])
def test_an_unreachable_storage_never_shows_its_password(tmp_path, capfd, url):
    """Every command that takes `--storage`, on a server that refuses connections: one line,
    exit 2, the URL named with *** for its password (the query-string one was echoed). With a
    reachable server: tests/search/study/test_postgres.py."""
    study = str(_study(tmp_path))
    commands = [["search", study, "--trials", "16", "--no-progress"],
                ["search", study, "--trials", "16", "--workers", "2", "--no-progress"],
                ["pareto", study, "--json"], ["show", study, "0"],
                ["export", study, "0", "--format", "json", "-o", str(tmp_path / "e.json")],
                ["plot", study, "-o", str(tmp_path / "f.png")],
                ["dashboard", study, "-o", str(tmp_path / "v.journal")]]
    for argv in commands:
        assert main([*argv, "--storage", url]) == 2, argv
        out, err = capfd.readouterr()
        assert SECRET not in out + err and "***" in err, argv
        lines = 3 if "--workers" in argv else 1  # --workers: one per worker, one summing up
        assert len(err.strip().splitlines()) == lines and "Traceback" not in err, err
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in
                p.read_bytes()]
