"""Study throughput with 1, 2 and 4 worker processes, on PostgreSQL and on the embedded default
(journal file), measured in one run (issue: scale out on PostgreSQL).

Run: python tests/benchmarks/bench_scaling.py --postgres URL [--trials 256] [--workers 1 2 4]
Each configuration searches a fresh copy of the quickstart study for the same number of trials
through the CLI (`archscout search … --workers N`) and reports trials/s and the speed-up over one
worker on the same storage. One worker on the default storage uses the batching journal; several
workers share the journal file unbatched (fsync per operation), as Optuna does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _study(folder: Path) -> Path:
    name = f"scale-{uuid.uuid4().hex[:8]}"
    text = (REPO / "studies" / "quickstart.toml").read_text()
    path = folder / f"{name}.toml"
    path.write_text(text.replace('name = "quickstart"', f'name = "{name}"'))
    return path


def run_once(storage: str | None, workers: int, trials: int) -> float:
    """Trials per second of one `archscout search` run."""
    with tempfile.TemporaryDirectory() as folder:
        study = _study(Path(folder))
        cmd = [sys.executable, "-m", "search.cli.main", "search", str(study),
               "--trials", str(trials),
               "--workers", str(workers), "--no-progress"]
        if storage:
            cmd += ["--storage", storage]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        return trials / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="PostgreSQL URL (skip PostgreSQL rows when absent)")
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--default-trials", type=int, default=2048)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    storages = [("default (journal file)", None, args.default_trials)]
    if args.postgres:
        storages.append(("postgresql", args.postgres, args.trials))
    print(f"{'storage':24} {'workers':>7} {'trials':>7} {'trials/s':>9} {'speed-up':>9}")
    for label, url, trials in storages:
        base = None
        for workers in args.workers:
            rate = run_once(url, workers, trials)
            base = base or rate
            print(f"{label:24} {workers:7d} {trials:7d} {rate:9.1f} {rate / base:8.2f}×")


if __name__ == "__main__":
    main()
