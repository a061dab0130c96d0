"""Start-up of `archscout gemm` and `archscout evaluate` next to bare Python (issue 14: "under 3×
the time of a bare `python -c "import numpy, pydantic"`").

Measures, in the same run and interleaved (so that a busy machine slows all three alike), the
wall time of fresh processes:
  bare      python -c "import numpy, pydantic"
  gemm      archscout gemm 4096 4096 4096 --hardware h200 --dtype fp8
  evaluate  archscout evaluate Llama-3.1-8B.json --hardware h200 --concurrency 1
and prints the median of each over --repeat runs (default 5) and the two ratios to bare.
Run: python tests/benchmarks/bench_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import MODEL_CONFIGS

TARGET_RATIO = 3.0  # issue 14
ARCHSCOUT = shutil.which("archscout") or "archscout"
COMMANDS = {
    "bare": [sys.executable, "-c", "import numpy, pydantic"],
    "gemm": [ARCHSCOUT, "gemm", "4096", "4096", "4096", "--hardware", "h200", "--dtype", "fp8"],
    "evaluate": [ARCHSCOUT, "evaluate", str(MODEL_CONFIGS / "Llama-3.1-8B.json"),
                 "--hardware", "h200", "--concurrency", "1"],
}


def wall_s(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache; not counted
        wall_s(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            times[name].append(wall_s(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        runs = ", ".join(f"{t:.3f}" for t in times[name])
        print(f"{name:9s} median {value:.3f} s of {args.repeat} ({runs})")
    for name in ("gemm", "evaluate"):
        ratio = median[name] / median["bare"]
        verdict = "met" if ratio < TARGET_RATIO else "NOT met"
        print(f"{name} / bare = {ratio:.2f}x (target < {TARGET_RATIO:g}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
