"""Fit the benchmark-TTFT terms (cost_model/benchmark_ttft.py) on published end-to-end rows.

benchmark TTFT = t_request + T_steady + q · Q, with T_steady (the engine's steady-state TTFT) and
Q (draining the other prompts of the request's group) from the cost model, and the two free
terms t_request (s) and q (share of those prompts waited for) fitted here on the measured TTFTs
of every published row that `validate_serving.py` scores (its `--json` rows; never kernel
tables, never aiconfigurator's silicon_sample.csv). The objective is the median |log(pred/meas)|
over a grid (t_request 0…300 ms by 1 ms, q 0…1 by 0.01): robust to the outliers of a mixed set,
and exactly reproducible.

Validation: the rows are split in two by a hash of (model, GPU, deployment, ISL, OSL, concurrency);
terms fitted on one half are scored on the other, both ways.

Usage: python tests/benchmarks/fit_benchmark_ttft.py [--write]
  --write  store the terms fitted on all rows in cost_model/data/serving/benchmark.toml
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_serving  # noqa: E402

TOML = REPO / "cost_model" / "data" / "serving" / "benchmark.toml"
OVERHEAD_GRID_S = np.arange(0.0, 0.3005, 0.001)
SHARE_GRID = np.round(np.arange(0.0, 1.0001, 0.01), 2)


def ttft_rows() -> list[dict]:
    """validate_serving's scored rows that carry a measured TTFT."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        validate_serving.main(["--json"])
    doc = json.loads(out.getvalue())
    rows = doc["rows"] + doc.get("dev_set", {}).get("rows", [])  # published + development set
    return [r for r in rows if (r["measured"].get("ttft_s") or 0) > 0]


def _arrays(rows: list[dict]):
    get = lambda key: np.array([r["predicted"][key] for r in rows])  # noqa: E731
    measured = np.array([r["measured"]["ttft_s"] for r in rows])
    return get("steady_ttft"), get("prompt_queue"), measured


def log_errors(rows: list[dict], overhead_s: float, share: float) -> np.ndarray:
    steady, queue, measured = _arrays(rows)
    return np.log((overhead_s + steady + share * queue) / measured)


def fit(rows: list[dict]) -> tuple[float, float, float]:
    """(t_request s, q, median |log error|) minimizing the median |log error| on the grid."""
    steady, queue, measured = _arrays(rows)
    pred = (OVERHEAD_GRID_S[:, None, None] + steady[None, None, :]
            + SHARE_GRID[None, :, None] * queue[None, None, :])
    cost = np.median(np.abs(np.log(pred / measured)), axis=2)
    i, j = np.unravel_index(np.argmin(cost), cost.shape)
    return float(OVERHEAD_GRID_S[i]), float(SHARE_GRID[j]), float(cost[i, j])


def _half(row: dict) -> int:
    key = f"{row['model']}|{row['gpu']}|{row['deployment']}|{row['isl_tokens']}|" \
          f"{row['osl_tokens']}|{row['concurrency']}"
    return hashlib.sha256(key.encode()).digest()[0] % 2


def _summary(errors: np.ndarray) -> str:
    rel = np.exp(errors) - 1.0
    return f"median |error| {np.median(np.abs(rel)):.0%}, bias {np.median(rel):+.0%}"


def write_terms(overhead_s: float, share: float, rows: int, error: float) -> None:
    fitted = (f"fitted by tests/benchmarks/fit_benchmark_ttft.py on {rows} published TTFT rows "
              f"of tests/data (median |log error| {error:.3f})")
    TOML.write_text(
        "# What a benchmark client adds to the engine's own TTFT (cost_model/benchmark_ttft.py).\n"
        "# Fitted by `python tests/benchmarks/fit_benchmark_ttft.py --write` on published "
        "end-to-end rows\n# in tests/data (never on kernel tables); a rerun reproduces these "
        "values.\n"
        f"[request]\noverhead_ms = {{ value = {overhead_s * 1e3:.1f}, source = \"{fitted}\" }}\n\n"
        f"[queue]\nshare_frac = {{ value = {share:.2f}, source = \"{fitted}\" }}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the all-row fit to the TOML")
    args = parser.parse_args(argv)
    rows = ttft_rows()
    overhead, share, error = fit(rows)
    print(f"{len(rows)} rows with a measured TTFT")
    print(f"fit on all rows: t_request {overhead * 1e3:.0f} ms, q {share:.2f}: "
          f"{_summary(log_errors(rows, overhead, share))}")
    for half in (0, 1):
        train = [r for r in rows if _half(r) == half]
        test = [r for r in rows if _half(r) != half]
        if train and test:
            o, q, _ = fit(train)
            print(f"fit on half {half} ({len(train)} rows: t_request {o * 1e3:.0f} ms, q {q:.2f})"
                  f" -> the other {len(test)} rows: {_summary(log_errors(test, o, q))}")
    for kind in ("dense", "moe"):
        part = [r for r in rows if r["is_moe"] == (kind == "moe")]
        if part:
            print(f"  {kind}: {len(part)} rows, {_summary(log_errors(part, overhead, share))}")
    if args.write:
        write_terms(overhead, share, len(rows), error)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
