"""Faults, measured (issue 17, item 7): kill `archscout search` at random moments, kill a
PostgreSQL worker and restart the server under a run, fill the disk; check the study each time.

(a) journal: `archscout search STUDY --trials N` (the default journal) is SIGKILLed at `--tries`
    random moments (uniform in [0, `--kill-window-s`] after the start: imports, opening and
    repairing the journal, sampling, scoring, appending, fsync, the size record). After each
    kill the journal is read as `pareto` reads it (read-only) and checked: it loads, no trial
    number appears twice, no trial is stored twice (same start time, params and values), every
    COMPLETE trial has its objective values and attributes, no RUNNING trial, and every trial
    finished before the kill is still there. The same command then resumes; a last run without
    a kill must end with exactly N finished trials.
(b) PostgreSQL: a fresh database; 4 workers (`archscout search --storage URL`, separate
    processes, as on 4 machines) plus a fifth that is SIGKILLed when the study reaches a random
    10-30% of the requested trials, and one server restart (`pg_ctlcluster 15 main restart`) at
    a random 35-60%. The parent reads the study every second; at the end: finished vs
    requested, RUNNING trials left, trials lost (finished once, gone later), duplicates, FAIL
    trials never evaluated (they would count toward `--trials`), abandoned (PRUNED) trials by
    their `abandoned` reason (the killed worker's pid shown as KILLED), and each surviving
    worker's exit code and stderr (the longest, its first lines). The database is dropped
    afterwards.
(c) a full disk: the study's out/ folder on a small tmpfs (`mount -t tmpfs -o size=4m`) half
    taken by a filler file; the search must stop with exit code 2 and one line on stderr,
    leave no temporary file and a journal that loads; after the filler is deleted the same
    command resumes to exactly N trials.

(d) `--workers 2` on the default journal, the whole process group SIGKILLed at `--worker-tries`
    random moments (within `--after-growth-s` of the run's first durable batch: start-up is
    slow here), checked as in (a); a last run without a kill must end with exactly N.
(e) SIGTERM and SIGINT (`--signal-tries` each) at random moments of a single run (timed as in
    (d)): the exit code, stderr lines, and the study checked as in (a); the same command then
    resumes.
(f) a `--workers 2` run killed (its whole process group) right after a worker's `Study.ask`
    returns, before it could name itself on a shared storage: the next `--workers 2` run (the
    resume, +`--resume-trials`) is timed next to the same resume of a study that saw no kill
    (goal: within 2x); the kill is injected by a `sitecustomize.py` patch of `optuna.Study.ask`
    (the first process to reach its 5th ask).
(g) corrupt journals (random bytes appended, a line garbled in the middle, a foreign file, the
    journal shorter than its size record): `search` and `pareto` must exit 2 with one line and
    leave every file as it was.

Prints per part: tries, recoveries, trials lost, duplicates, RUNNING trials left, finished vs
requested (and the details behind them). Needs root for (b)'s restart and (c)'s mount.
Run: python tests/benchmarks/bench_faults.py [--tries 30] [--trials 2000] [--skip-postgres]
     [--skip-disk] [--skip-workers] [--skip-signals] [--skip-ask-kill] [--skip-corrupt]
     [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import optuna
from optuna.trial import TrialState

from search.cli.study import load_study, open_for_reading
from search.study.evaluation import COLUMN_ATTRS, DETAILS_ATTR
from search.study.spec import load_spec

QUICKSTART = ROOT / "studies" / "quickstart.toml"
PG_ADMIN_URL = "postgresql://archscout:archscout@127.0.0.1:5432/archscout"
PG_CLUSTER = ("15", "main")  # pg_ctlcluster VERSION NAME (this machine's server)
FILLER_BYTES = 5 * 2**19  # 2.5 MiB of the 4 MiB tmpfs: ~1.5 MiB (~500 trials) left for the journal
TMPFS_SIZE = "4m"
RUN_TIMEOUT_S = 900  # any one search process (the final runs finish the study)
DUPLICATES_SHOWN = 5
SNAPSHOT_EVERY_S = 1.0  # (b): how often the parent reads the study


# ---- the study and what a check of it finds ---------------------------------------------------


def write_study(folder: Path, trials: int, batch_size: int, name: str = "faults") -> Path:
    """The quick-start study with `trials` and `batch_size`, as folder/NAME.toml (its journal
    goes to folder/out/)."""
    text = QUICKSTART.read_text(encoding="utf-8")
    for key, value in (("trials", trials), ("batch_size", batch_size), ("name", f'"{name}"')):
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def search_command(study: Path, trials: int, storage: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "search.cli.main", "search", str(study), "--trials", str(trials),
           "--no-progress"]
    return cmd + (["--storage", storage] if storage else [])


def trial_key(t) -> tuple:
    """What makes a stored trial itself: written twice, a trial has the same key twice (two
    trials of one batch may share a start time and, NSGA-II repeating a design, their params
    and values; they are told at different moments)."""
    return (t.datetime_start, t.datetime_complete, tuple(sorted(t.params.items())),
            tuple(t.values or ()), t.state.name)


def evaluated(t) -> bool:
    """The runner recorded an outcome (`details`, also for a shape that is not a model); a
    trial failed or pruned without one was asked and never evaluated."""
    return DETAILS_ATTR in t.user_attrs


@dataclass
class Check:
    loads: bool = True
    error: str = ""
    trials: int = 0
    finished: int = 0  # COMPLETE + FAIL (what --trials counts)
    complete: int = 0
    running: int = 0
    numbers_repeated: int = 0
    duplicates: int = 0
    duplicate_numbers: list = field(default_factory=list)  # each copy: number, state, start
    incomplete_records: int = 0  # COMPLETE without its values or attributes
    keys: set = field(default_factory=set, repr=False)  # of finished trials


def read_trials(study: Path, storage: str | None) -> list:
    spec = load_spec(study)
    handle = open_for_reading(study, spec, storage)
    try:
        return load_study(spec, handle).get_trials(deepcopy=False)
    finally:
        handle.close()


def check_study(study: Path, storage: str | None = None) -> Check:
    try:
        trials = read_trials(study, storage)
    except Exception as exc:  # noqa: BLE001 - a journal that does not load is what we count
        return Check(loads=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    objectives = len(load_spec(study).objectives.names)
    needed = {*COLUMN_ATTRS, DETAILS_ATTR}
    done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
    complete = [t for t in done if t.state == TrialState.COMPLETE]
    keys = [trial_key(t) for t in trials if evaluated(t)]
    numbers = [t.number for t in trials]
    copies: dict = {}
    for key, t in zip(keys, filter(evaluated, trials)):
        copies.setdefault(key, []).append(f"#{t.number} {t.state.name} {t.datetime_start} "
                                          f"{t.user_attrs.get('worker', '')}".strip())
    return Check(
        trials=len(trials), finished=len(done), complete=len(complete),
        running=sum(t.state == TrialState.RUNNING for t in trials),
        numbers_repeated=len(numbers) - len(set(numbers)), duplicates=len(keys) - len(set(keys)),
        duplicate_numbers=[n for n in copies.values() if len(n) > 1][:DUPLICATES_SHOWN],
        incomplete_records=sum(len(t.values or ()) != objectives
                               or not needed <= t.user_attrs.keys() for t in complete),
        keys={trial_key(t) for t in done})


def healthy(check: Check) -> bool:
    return check.loads and not (check.running or check.numbers_repeated or check.duplicates
                                or check.incomplete_records)


# ---- (a) SIGKILL at random moments on the default journal -------------------------------------


@dataclass
class KillReport:
    tries: int = 0
    killed: int = 0  # the process was still running at the kill moment
    ended_before_kill: int = 0
    during_batches: int = 0  # kills after the journal had grown in that try
    loads_after_kill: int = 0
    healthy_after_kill: int = 0
    recoveries: int = 0  # kills after which the next run (the next try's, or the last) ran
    pending_kill: bool = False  # the last try ended in a kill
    trials_lost: int = 0
    duplicates: int = 0
    running_left: int = 0
    tmp_files_left: int = 0
    lock_files_seen: int = 0
    slowest_start_s: float = 0.0  # longest time from a run's start to its first new trial
    requested: int = 0
    finished: int = 0
    errors: list = field(default_factory=list)


def _journal(study: Path) -> Path:
    return study.parent / "out" / load_spec(study).name / "study.journal"


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _first_growth_s(proc: subprocess.Popen, journal: Path, start: float, limit_s: float) -> float:
    """Seconds until `journal` grows (the run's first batch is durable), or until it ends."""
    before = _size(journal)
    while time.monotonic() - start < limit_s and proc.poll() is None:
        if _size(journal) > before:
            break
        time.sleep(0.02)
    return time.monotonic() - start


def _settle(report: KillReport, ran: bool, err: str) -> None:
    """Count a recovery when the run after a kill ran (was not refused or crashed)."""
    if not ran:
        report.errors.append(f"{err.strip().splitlines()[-1:]}")
    elif report.pending_kill:
        report.recoveries += 1


def kill_once(study: Path, trials: int, moment_s: float, report: KillReport) -> None:
    journal = _journal(study)
    before = _size(journal)
    start = time.monotonic()
    proc = subprocess.Popen(search_command(study, trials), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    report.slowest_start_s = max(report.slowest_start_s,
                                 _first_growth_s(proc, journal, start, moment_s))
    time.sleep(max(0.0, moment_s - (time.monotonic() - start)))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        report.killed += 1
        report.during_batches += _size(journal) > before
    else:
        report.ended_before_kill += 1
    _, err = proc.communicate()
    _settle(report, proc.returncode in (0, -signal.SIGKILL), err)
    report.pending_kill = proc.returncode == -signal.SIGKILL
    report.lock_files_seen += journal.with_name(journal.name + ".lock").exists()


def run_kills(folder: Path, tries: int, trials: int, window_s: float, seed: int) -> KillReport:
    rng = random.Random(seed)
    study = write_study(folder, trials, batch_size=32)
    report, seen = KillReport(tries=tries, requested=trials), set()
    for i in range(tries):
        kill_once(study, trials, rng.uniform(0.0, window_s), report)
        check = check_study(study)
        report.tmp_files_left += len(list((folder / "out").rglob("*.tmp")))
        if not check.loads:
            report.errors.append(f"try {i}: {check.error}")
            continue
        report.loads_after_kill += 1
        report.healthy_after_kill += healthy(check)
        report.trials_lost += len(seen - check.keys)
        report.duplicates = max(report.duplicates, check.duplicates)
        report.running_left = max(report.running_left, check.running)
        seen |= check.keys
        print(f"  try {i + 1:2d}/{tries}: {check.finished} finished, healthy {healthy(check)}",
              file=sys.stderr)
    final = subprocess.run(search_command(study, trials), cwd=ROOT, capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S, check=False)
    _settle(report, final.returncode == 0, final.stderr)
    check = check_study(study)
    report.trials_lost += len(seen - check.keys)
    report.duplicates = max(report.duplicates, check.duplicates)
    report.running_left, report.finished = check.running, check.finished
    return report


# ---- (b) PostgreSQL: 4 workers, one killed worker, one server restart -------------------------


@dataclass
class PostgresReport:
    workers: int = 4
    killed_worker_at: tuple = ()  # (finished trials, seconds into the run)
    restart_at: tuple = ()
    restart_s: float = 0.0  # how long `pg_ctlcluster restart` took
    workers_ok: int = 0
    worker_errors: list = field(default_factory=list)
    stderr_lines_max: int = 0  # the longest stderr of a surviving worker, in lines
    snapshots: int = 0
    snapshot_errors: list = field(default_factory=list)  # reads that failed (server down)
    trials_lost: int = 0
    duplicates: int = 0
    duplicate_numbers: list = field(default_factory=list)
    numbers_repeated: int = 0
    running_left: int = 0
    running_left_after_resume: int | None = None
    failed_unevaluated: int = 0  # FAIL trials never evaluated (asked, then settled as failed)
    pruned: int = 0  # asked and abandoned (a batch cut by the restart, asked anew; surplus)
    abandoned: dict = field(default_factory=dict)  # why (`abandoned`, the killed worker's pid
    # shown as KILLED) -> PRUNED trials
    stderr_longest: list = field(default_factory=list)  # a surviving worker's longest stderr
    requested: int = 0
    finished: int = 0
    finished_after_resume: int | None = None
    wall_s: float = 0.0


def _psql(sql: str) -> None:
    subprocess.run(["su", "postgres", "-c", f'psql -qc "{sql}"'], check=True,
                   capture_output=True, timeout=120)


def _restart_server(report: PostgresReport) -> None:
    start = time.monotonic()
    subprocess.run(["pg_ctlcluster", *PG_CLUSTER, "restart"], check=True, timeout=120)
    report.restart_s = time.monotonic() - start


def _settled_unevaluated(study: Path, url: str, victim_pid: int, report: PostgresReport) -> None:
    """FAIL trials never evaluated, and the abandoned (PRUNED) ones by their reason."""
    trials = read_trials(study, url)
    report.failed_unevaluated = sum(t.state == TrialState.FAIL and not evaluated(t)
                                    for t in trials)
    report.pruned = sum(t.state == TrialState.PRUNED for t in trials)
    reasons = [str(t.user_attrs.get("abandoned", "no reason recorded")).replace(
        f":{victim_pid} ", ":KILLED ") for t in trials if t.state == TrialState.PRUNED]
    report.abandoned = {why: reasons.count(why) for why in sorted(set(reasons))}


def _watch(procs, victim, study, url, report, rng, seen: set) -> None:
    """Until the 4 workers end, read the study every SNAPSHOT_EVERY_S (what was finished must
    stay); kill the victim and restart the server when the study reaches random shares of the
    requested trials (so both land inside the run, however fast it goes)."""
    start, kill_at, restart_at = time.monotonic(), rng.uniform(0.1, 0.3), rng.uniform(0.35, 0.6)
    killed = restarted = False
    while any(p.poll() is None for p in procs) and time.monotonic() - start < RUN_TIMEOUT_S:
        check = check_study(study, url)
        report.snapshots += 1
        if not check.loads:
            if seen or "no study" not in check.error:  # not the moments before it exists
                report.snapshot_errors.append(check.error)
            continue
        report.trials_lost += len(seen - check.keys)
        seen |= check.keys
        progress = check.finished / report.requested
        if not killed and progress >= kill_at:
            victim.send_signal(signal.SIGKILL)
            killed, report.killed_worker_at = True, (check.finished, time.monotonic() - start)
        if not restarted and progress >= restart_at:
            _restart_server(report)
            restarted, report.restart_at = True, (check.finished, time.monotonic() - start)
        time.sleep(SNAPSHOT_EVERY_S)


def run_postgres(folder: Path, trials: int, seed: int) -> PostgresReport:
    rng = random.Random(seed)
    db = f"archscout_faults_{os.getpid()}"
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{db}"
    _psql(f"CREATE DATABASE {db} OWNER archscout")
    report = PostgresReport(requested=trials)
    study = write_study(folder, trials, batch_size=32, name="faults_pg")
    start = time.monotonic()
    try:
        procs = [subprocess.Popen(search_command(study, trials, url), cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(report.workers + 1)]
        victim, survivors = procs[-1], procs[:-1]
        seen: set = set()
        _watch(survivors, victim, study, url, report, rng, seen)
        for p in procs:
            _, err = p.communicate(timeout=RUN_TIMEOUT_S)
            if p is victim:
                continue
            lines = err.strip().splitlines()
            if len(lines) > report.stderr_lines_max:
                report.stderr_lines_max, report.stderr_longest = len(lines), lines[:6]
            if p.returncode == 0:
                report.workers_ok += 1
            else:
                report.worker_errors.append(f"exit {p.returncode}: {err.strip()[-3000:]}")
        report.wall_s = time.monotonic() - start
        check = check_study(study, url)
        report.trials_lost += len(seen - check.keys)
        report.duplicates, report.numbers_repeated = check.duplicates, check.numbers_repeated
        report.duplicate_numbers = check.duplicate_numbers
        report.running_left, report.finished = check.running, check.finished
        _settled_unevaluated(study, url, victim.pid, report)
        if check.running or check.finished != trials:  # what one more run of the command does
            subprocess.run(search_command(study, trials, url), cwd=ROOT, capture_output=True,
                           timeout=RUN_TIMEOUT_S, check=False)
            again = check_study(study, url)
            report.running_left_after_resume = again.running
            report.finished_after_resume = again.finished
    finally:
        _psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    return report


# ---- (c) a full disk on a small tmpfs ---------------------------------------------------------


@dataclass
class DiskReport:
    mounted: bool = False
    why_not: str = ""
    exit_code: int | None = None
    stderr_lines: int = 0
    stderr: str = ""
    tmp_files_left: int = 0
    loads_when_full: bool = False
    finished_when_full: int = 0
    resume_exit_code: int | None = None
    trials_lost: int = 0
    duplicates: int = 0
    running_left: int = 0
    requested: int = 0
    finished: int = 0


def _run_disk(folder: Path, trials: int, report: DiskReport) -> None:
    study = write_study(folder, trials, batch_size=32)
    (folder / "out").mkdir()
    filler = folder / "out" / "filler"
    filler.write_bytes(b"\0" * FILLER_BYTES)
    full = subprocess.run(search_command(study, trials), cwd=ROOT, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=False)
    report.exit_code, report.stderr = full.returncode, full.stderr.strip()
    report.stderr_lines = len(report.stderr.splitlines())
    report.tmp_files_left = len(list((folder / "out").rglob("*.tmp")))
    check = check_study(study)
    report.loads_when_full, report.finished_when_full = check.loads, check.finished
    filler.unlink()  # space is freed
    resumed = subprocess.run(search_command(study, trials), cwd=ROOT, capture_output=True,
                             text=True, timeout=RUN_TIMEOUT_S, check=False)
    report.resume_exit_code = resumed.returncode
    after = check_study(study)
    report.trials_lost = len(check.keys - after.keys)
    report.duplicates, report.running_left = after.duplicates, after.running
    report.finished = after.finished


def run_disk(folder: Path, trials: int) -> DiskReport:
    report = DiskReport(requested=trials)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs",
                            str(folder)], capture_output=True, text=True, check=False)
    if mount.returncode != 0:
        report.why_not = mount.stderr.strip() or f"mount exit {mount.returncode}"
        return report
    report.mounted = True
    try:
        _run_disk(folder, trials, report)
    finally:
        subprocess.run(["umount", str(folder)], check=False)
    return report


# ---- (d) --workers 2, the whole process group SIGKILLed ---------------------------------------


def workers_command(study: Path, trials: int, workers: int = 2) -> list[str]:
    return search_command(study, trials) + ["--workers", str(workers)]


def run_worker_kills(folder: Path, tries: int, trials: int, window_s: float,
                     seed: int) -> KillReport:
    """(a) with `--workers 2`: each try's run is SIGKILLed with its workers (the process group)."""
    rng = random.Random(seed + 1)
    study = write_study(folder, trials, batch_size=32)
    report, seen = KillReport(tries=tries, requested=trials), set()
    for i in range(tries):
        start = time.monotonic()
        proc = subprocess.Popen(workers_command(study, trials), cwd=ROOT, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _first_growth_s(proc, _journal(study), start, RUN_TIMEOUT_S)  # start-up is slow here
        time.sleep(rng.uniform(0.0, window_s))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            report.killed += 1
        else:
            report.ended_before_kill += 1
        _, err = proc.communicate()
        _settle(report, proc.returncode in (0, -signal.SIGKILL), err)
        report.pending_kill = proc.returncode == -signal.SIGKILL
        check = check_study(study)
        if not check.loads:
            if "no study" not in check.error:
                report.errors.append(f"try {i}: {check.error}")
            continue
        report.loads_after_kill += 1
        report.healthy_after_kill += healthy(check)
        report.trials_lost += len(seen - check.keys)
        report.duplicates = max(report.duplicates, check.duplicates)
        seen |= check.keys
        print(f"  workers try {i + 1:2d}/{tries}: {check.finished} finished, "
              f"{check.running} running", file=sys.stderr)
    final = subprocess.run(workers_command(study, trials), cwd=ROOT, capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S, check=False)
    _settle(report, final.returncode == 0, final.stderr)
    check = check_study(study)
    report.trials_lost += len(seen - check.keys)
    report.duplicates = max(report.duplicates, check.duplicates)
    report.running_left, report.finished = check.running, check.finished
    return report


# ---- (e) SIGTERM and SIGINT --------------------------------------------------------------------


@dataclass
class SignalReport:
    tries: int = 0
    exit_codes: dict = field(default_factory=dict)  # "SIGTERM -> 143" -> count
    stderr_lines_max: int = 0
    tracebacks: int = 0
    trials_lost: int = 0
    duplicates: int = 0
    running_left: int = 0
    requested: int = 0
    finished: int = 0


def _default_sigint() -> None:
    """A background benchmark's children inherit SIGINT ignored (the shell's job rule), and
    Python then installs no KeyboardInterrupt handler: restore the default as a terminal has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_signals(folder: Path, tries: int, trials: int, window_s: float, seed: int
                ) -> SignalReport:
    rng = random.Random(seed + 2)
    study = write_study(folder, trials, batch_size=32)
    report, seen = SignalReport(requested=trials), set()
    for _ in range(tries):
        for sig in (signal.SIGTERM, signal.SIGINT):
            start = time.monotonic()
            proc = subprocess.Popen(search_command(study, trials), cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    preexec_fn=_default_sigint)
            _first_growth_s(proc, _journal(study), start, RUN_TIMEOUT_S)
            time.sleep(rng.uniform(0.0, window_s))
            if proc.poll() is None:
                proc.send_signal(sig)
            _, err = proc.communicate()
            report.tries += 1
            key = f"{sig.name} -> {proc.returncode}"
            report.exit_codes[key] = report.exit_codes.get(key, 0) + 1
            report.stderr_lines_max = max(report.stderr_lines_max, len(err.strip().splitlines()))
            report.tracebacks += "Traceback" in err
            check = check_study(study)
            report.trials_lost += len(seen - check.keys)
            report.duplicates = max(report.duplicates, check.duplicates)
            report.running_left = max(report.running_left, check.running)
            seen |= check.keys
    subprocess.run(search_command(study, trials), cwd=ROOT, capture_output=True, text=True,
                   timeout=RUN_TIMEOUT_S, check=False)
    check = check_study(study)
    report.trials_lost += len(seen - check.keys)
    report.finished = check.finished
    report.running_left = max(report.running_left, check.running)
    return report


# ---- (f) a worker killed right after an ask: the resume's time --------------------------------


KILL_HOOK = '''
import os, signal
token = os.environ.get("ARCHSCOUT_BENCH_KILL_TOKEN")
if token:
    import optuna
    real_ask, asked = optuna.Study.ask, []

    def ask(self, *args, **kwargs):
        trial = real_ask(self, *args, **kwargs)
        asked.append(1)
        if len(asked) == 5:
            try:  # the first process to get here is the victim, once per run
                os.close(os.open(token, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return trial
            os.killpg(0, signal.SIGKILL)  # the whole run, as a power cut would
        return trial

    optuna.Study.ask = ask
'''


@dataclass
class AskKillReport:
    first_trials: int = 0
    resume_trials: int = 0
    killed_run_exit: int | None = None
    killed_run_s: float = 0.0
    clean_resume_s: float = 0.0
    resume_after_kill_s: float = 0.0
    ratio: float = 0.0  # resume after the kill / clean resume (goal <= 2)
    running_left: int = 0
    duplicates: int = 0
    finished: int = 0
    requested: int = 0


def _timed(cmd: list[str], env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=RUN_TIMEOUT_S, check=False, start_new_session=True)
    return time.monotonic() - start, done


def run_ask_kill(folder: Path, first: int, more: int) -> AskKillReport:
    hook = folder / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_HOOK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), str(ROOT),
                                                                      os.environ.get("PYTHONPATH")])),
           "ARCHSCOUT_BENCH_KILL_TOKEN": str(folder / "killed")}
    report = AskKillReport(first_trials=first, resume_trials=first + more,
                           requested=first + more)
    clean = write_study(folder, first, batch_size=32, name="clean")
    faulty = write_study(folder, first, batch_size=32, name="faulty")
    for study in (clean, faulty):
        _timed(workers_command(study, first))
    report.killed_run_s, killed = _timed(workers_command(faulty, first + more), env)
    report.killed_run_exit = killed.returncode
    report.resume_after_kill_s, _ = _timed(workers_command(faulty, first + more))  # at once
    report.clean_resume_s, _ = _timed(workers_command(clean, first + more))
    report.ratio = report.resume_after_kill_s / report.clean_resume_s
    check = check_study(faulty)
    report.running_left, report.duplicates = check.running, check.duplicates
    report.finished = check.finished
    return report


# ---- (g) corrupt journals ----------------------------------------------------------------------


@dataclass
class CorruptReport:
    cases: int = 0
    refused_in_one_line: int = 0  # exit 2, one stderr line, files unchanged
    outcomes: dict = field(default_factory=dict)  # case/command -> "exit E, N lines, unchanged"


def _files(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith(".owner")}


def _corruptions(journal: Path) -> dict:
    rng = random.Random(7)
    lines = journal.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    garbled = lines[:middle] + [b'{"op_code":5,"worker' + bytes(rng.randrange(256)
                                                                 for _ in range(40)) + b"\n"] \
        + lines[middle + 1:]
    return {"random bytes appended": b"".join(lines) + bytes(rng.randrange(1, 256)
                                                             for _ in range(300)),
            "a line garbled mid-file": b"".join(garbled),
            "a foreign file": b"these are my notes\nnot a journal\n",
            "shorter than its size record": b"".join(lines[:middle])}


def run_corrupt(folder: Path) -> CorruptReport:
    study = write_study(folder, 64, batch_size=32)
    subprocess.run(search_command(study, 64), cwd=ROOT, capture_output=True, check=True,
                   timeout=RUN_TIMEOUT_S)
    journal = _journal(study)
    pristine = _files(journal.parent)
    report = CorruptReport()
    for case, data in _corruptions(journal).items():
        for command in (search_command(study, 128),
                        [sys.executable, "-m", "search.cli.main", "pareto", str(study)]):
            for name, content in pristine.items():
                (journal.parent / name).write_bytes(content)
            journal.write_bytes(data)
            before = _files(journal.parent)
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S, check=False)
            lines = len(done.stderr.strip().splitlines())
            unchanged = _files(journal.parent) == before
            report.cases += 1
            report.refused_in_one_line += done.returncode == 2 and lines == 1 and unchanged
            report.outcomes[f"{case} / {command[3]}"] = (
                f"exit {done.returncode}, {lines} lines, "
                f"{'unchanged' if unchanged else 'CHANGED'}: {done.stderr.strip()[:140]}")
    return report


# ---- main -------------------------------------------------------------------------------------


def _print(title: str, report) -> None:
    print(f"\n{title}")
    for key, value in asdict(report).items():
        if key != "pending_kill":
            print(f"  {key}: {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=30)
    parser.add_argument("--trials", type=int, default=2000, help="(a) trials requested")
    parser.add_argument("--kill-window-s", type=float, default=10.0)
    parser.add_argument("--pg-trials", type=int, default=512)
    parser.add_argument("--disk-trials", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-kills", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-disk", action="store_true")
    parser.add_argument("--worker-tries", type=int, default=16)
    parser.add_argument("--after-growth-s", type=float, default=4.0,
                        help="(d), (e): the kill lands this long at most after a first batch")
    parser.add_argument("--signal-tries", type=int, default=4, help="(e) of each signal")
    parser.add_argument("--resume-trials", type=int, default=32, help="(f) trials a resume adds")
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-signals", action="store_true")
    parser.add_argument("--skip-ask-kill", action="store_true")
    parser.add_argument("--skip-corrupt", action="store_true")
    parser.add_argument("--json", metavar="PATH", default=None)
    args = parser.parse_args()
    # this process's own reads during a server restart: one line each, not Optuna's SQL dumps
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_faults_") as tmp:
        base = Path(tmp)
        if not args.skip_kills:
            (base / "kills").mkdir()
            results["kills"] = run_kills(base / "kills", args.tries, args.trials,
                                         args.kill_window_s, args.seed)
            _print("(a) SIGKILL at random moments, default journal", results["kills"])
        if not args.skip_postgres:
            (base / "pg").mkdir()
            results["postgres"] = run_postgres(base / "pg", args.pg_trials, args.seed)
            _print("(b) PostgreSQL: 4 workers + 1 killed, 1 server restart", results["postgres"])
        if not args.skip_disk:
            (base / "disk").mkdir()
            results["disk"] = run_disk(base / "disk", args.disk_trials)
            _print(f"(c) full disk (tmpfs {TMPFS_SIZE}, {FILLER_BYTES} bytes of filler)",
                   results["disk"])
        parts = [("workers", "(d) --workers 2, process group SIGKILLed at random moments",
                  lambda f: run_worker_kills(f, args.worker_tries, args.trials,
                                             args.after_growth_s, args.seed)),
                 ("signals", "(e) SIGTERM and SIGINT at random moments",
                  lambda f: run_signals(f, args.signal_tries, args.trials,
                                        args.after_growth_s, args.seed)),
                 ("ask_kill", "(f) a --workers 2 worker killed right after an ask: resume time",
                  lambda f: run_ask_kill(f, 64, args.resume_trials)),
                 ("corrupt", "(g) corrupt journals", run_corrupt)]
        for key, title, run in parts:
            if not getattr(args, f"skip_{key}"):
                (base / key).mkdir()
                results[key] = run(base / key)
                _print(title, results[key])
    if args.json:
        Path(args.json).write_text(json.dumps({k: asdict(v) for k, v in results.items()},
                                              indent=2, default=str))


if __name__ == "__main__":
    main()
