"""`archscout evaluate --batch` speed (issue 14: "a CSV of 1,000 rows in under 10 s on 2 cores").

Writes a CSV of N rows (default 1,000) to a temporary folder — five real models (dense, MoE,
MLA, gpt-oss), three GPUs, TP 1…8 with EP, BF16 / FP8 / NVFP4 / weight-only formats with and
without a separate expert format, three ISL/OSL pairs and concurrencies 1…512, every row valid —
then times the whole command (`archscout evaluate --batch FILE`, a fresh process: start-up,
config loading and evaluation) and prints the time, the rows per second and the rows it wrote.
Run: python tests/benchmarks/bench_evaluate_batch.py [--rows 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

TARGET_S = 10.0  # issue 14
# (config, (tp, ep) choices, (precision, moe_precision) choices per GPU kind)
MODELS = [
    (MODEL_CONFIGS / "Llama-3.1-8B.json", [(1, 1), (2, 1), (4, 1), (8, 1)], False),
    (MODEL_CONFIGS / "Qwen3-30B-A3B.json", [(1, 1), (2, 2), (4, 4), (8, 8)], True),
    (MODEL_CONFIGS / "Mixtral-8x7B-v0.1.json", [(2, 2), (4, 4), (8, 8)], True),
    (MODEL_CONFIGS / "DeepSeek-V3.json", [(8, 8)], True),
    (HF_CONFIGS / "gpt-oss-120b.json", [(1, 1), (2, 2), (4, 4), (8, 8)], True),
]
FORMATS = {  # GPU -> (precision, moe_precision) pairs it supports
    "h200": [("bf16", ""), ("fp8", ""), ("bf16", "w4a16"), ("fp8", "w4a16"), ("w8a16", "")],
    "h100-sxm": [("fp8", ""), ("bf16", "w4a16")],
    "b200": [("fp8", "nvfp4"), ("nvfp4", ""), ("fp8", ""), ("bf16", "w4a16")],
}
WORKLOADS = [(1024, 1024), (1024, 8192), (8192, 1024)]
CONCURRENCIES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def rows(count: int) -> list[dict]:
    """`count` valid rows cycling through every combination above."""
    combos = [
        dict(model=str(path), hardware=hw, tp=tp, ep=ep, pp=1, dp=1, precision=prec,
             kv_precision="", moe_precision=moe if is_moe else "", isl=isl, osl=osl,
             concurrency=c)
        for (path, degrees, is_moe), (hw, formats) in itertools.product(MODELS, FORMATS.items())
        for (tp, ep), (prec, moe), (isl, osl), c in itertools.product(
            degrees, formats, WORKLOADS, CONCURRENCIES)
        if not (moe and not is_moe)
    ]
    step = max(len(combos) // count, 1)
    picked = (combos[::step] + combos)[:count]
    return picked


def write_csv(path: Path, table: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def time_command(path: Path) -> tuple[float, int, str]:
    """(wall seconds, output rows, stderr) of one `archscout evaluate --batch` process."""
    command = [shutil.which("archscout") or "archscout", "evaluate", "--batch", str(path)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"archscout exited {done.returncode}: {done.stderr.strip()}")
    return elapsed, len(done.stdout.splitlines()) - 1, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.csv"
        table = rows(args.rows)
        write_csv(path, table)
        runs = sorted(time_command(path) for _ in range(args.repeat))
    elapsed, written, stderr = runs[len(runs) // 2]
    models = len({r["model"] for r in table})
    print(f"{len(table)} rows ({models} models, {len(FORMATS)} GPUs), {written} evaluated, "
          f"{len(stderr.splitlines())} reported on stderr")
    print(f"archscout evaluate --batch: {elapsed:.2f} s median of {args.repeat} "
          f"({', '.join(f'{r[0]:.2f}' for r in runs)}), {len(table) / elapsed:,.0f} rows/s; "
          f"target < {TARGET_S:g} s: {'met' if elapsed < TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
