"""Study throughput with 1, 2, 4 and 8 worker processes on PostgreSQL next to one process on the
embedded default (the batching journal file), measured in one run (issue 17: distributed search
that pays). Goal: 4 workers on PostgreSQL >= 50% of the single-process journal rate.

Run: python tests/benchmarks/bench_scaling.py --postgres URL [--trials 512] [--workers 1 2 4 8]
     [--default-trials 1024] [--journal-workers 1] [--repo PATH]
Each configuration searches a fresh copy of the quickstart study for the given number of
trials through the CLI (`archscout search … --workers N`, the server on this machine) and
reports trials/s (wall time of the command: process start-up and the final Pareto table
included), the ratio to the single-process journal, and on PostgreSQL what the database did per
trial: committed transactions and rows inserted or updated (`pg_stat_database` before and after
the run, of a database created for that run alone: other users of the server are not counted).
`--repo PATH` runs another checkout's CLI (e.g. `git archive` of an older commit) for a
before/after comparison in the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fresh_database import fresh_database  # noqa: E402

STATS_FLUSH_S = 1.5  # PostgreSQL publishes a backend's statistics at most once a second


@dataclass
class Run:
    storage: str
    workers: int
    trials: int
    wall_s: float
    commits: int | None = None  # transactions committed in the database during the run
    rows: int | None = None  # rows inserted + updated

    @property
    def rate(self) -> float:
        return self.trials / self.wall_s


def _study(folder: Path, repo: Path) -> Path:
    name = f"scale-{uuid.uuid4().hex[:8]}"
    text = (repo / "studies" / "quickstart.toml").read_text()
    path = folder / f"{name}.toml"
    path.write_text(text.replace('name = "quickstart"', f'name = "{name}"'))
    return path


def _db_stats(url: str) -> tuple[int, int]:
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            row = conn.execute(sqlalchemy.text(
                "SELECT xact_commit, tup_inserted + tup_updated FROM pg_stat_database "
                "WHERE datname = current_database()")).one()
    finally:
        engine.dispose()
    return int(row[0]), int(row[1])


def run_once(repo: Path, url: str | None, workers: int, trials: int) -> Run:
    """One `archscout search` run on a fresh study (on PostgreSQL: in a fresh database)."""
    if url:
        with fresh_database(url, "bench") as fresh:
            return _run(repo, fresh, workers, trials)
    return _run(repo, None, workers, trials)


def _run(repo: Path, url: str | None, workers: int, trials: int) -> Run:
    with tempfile.TemporaryDirectory() as folder:
        study = _study(Path(folder), repo)
        cmd = [sys.executable, "-m", "search.cli.main", "search", str(study),
               "--trials", str(trials), "--workers", str(workers), "--no-progress"]
        if url:
            cmd += ["--storage", url]
            time.sleep(STATS_FLUSH_S)
            before = _db_stats(url)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=repo, check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONPATH": str(repo)})
        wall_s = time.perf_counter() - start
        run = Run("postgresql" if url else "default (journal file)", workers, trials, wall_s)
        if url:
            time.sleep(STATS_FLUSH_S)
            after = _db_stats(url)
            run.commits, run.rows = after[0] - before[0], after[1] - before[1]
        return run


HEADER = (f"{'storage':24} {'workers':>7} {'trials':>7} {'wall s':>7} {'trials/s':>9} "
          f"{'vs journal':>10} {'commits/trial':>13} {'rows/trial':>10}")


def print_run(r: Run, base: Run) -> None:
    commits = f"{r.commits / r.trials:.2f}" if r.commits is not None else "-"
    rows = f"{r.rows / r.trials:.1f}" if r.rows is not None else "-"
    print(f"{r.storage:24} {r.workers:7d} {r.trials:7d} {r.wall_s:7.1f} {r.rate:9.1f} "
          f"{r.rate / base.rate:10.0%} {commits:>13} {rows:>10}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="PostgreSQL URL (skip PostgreSQL rows when absent)")
    parser.add_argument("--trials", type=int, default=512, help="trials per PostgreSQL run")
    parser.add_argument("--default-trials", type=int, default=1024,
                        help="trials of the journal run")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--journal-workers", type=int, nargs="+", default=[1],
                        help="worker counts on the default journal (1: the batching journal)")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose CLI runs")
    args = parser.parse_args()
    print(f"{args.repo}: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(HEADER)
    base = None
    configs = [(None, n, args.default_trials) for n in args.journal_workers]
    configs += [(args.postgres, n, args.trials) for n in args.workers if args.postgres]
    for url, workers, trials in configs:
        run = run_once(args.repo, url, workers, trials)
        base = base or run
        print_run(run, base)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
