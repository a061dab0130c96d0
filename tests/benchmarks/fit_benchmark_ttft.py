"""Fit the benchmark-TTFT terms (cost_model/benchmark_ttft.py) on published end-to-end rows.

benchmark TTFT = t_request + T_steady + q · Q, with T_steady (the engine's steady-state TTFT) and
Q (draining the other prompts of the request's group) from the cost model, and the two free
terms t_request (s) and q (share of those prompts waited for) fitted here on the measured TTFTs
of every published row that `validate_serving.py` scores (its `--json` rows; never kernel
tables, never aiconfigurator's silicon_sample.csv). The objective is the median |log(pred/meas)|
over a grid (t_request 0…300 ms by 1 ms, q 0…1 by 0.01): robust to the outliers of a mixed set,
and exactly reproducible.

Declared split (to avoid fitting to the test): `validate_serving.split_half` divides the rows by a
hash of their configuration (model, GPU, deployment, ISL, OSL, concurrency; one configuration
measured on several dates stays on one side). The terms are fitted on the `fit` half only and
scored on the `holdout` half; a fit on all rows is printed beside them for comparison.

Usage: python tests/benchmarks/fit_benchmark_ttft.py [--write]
  --write  store the terms fitted on the `fit` half in cost_model/data/serving/benchmark.toml
"""

from __future__ import annotations

import argparse
import contextlib
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


def _summary(errors: np.ndarray) -> str:
    rel = np.exp(errors) - 1.0
    return f"median |error| {np.median(np.abs(rel)):.0%}, bias {np.median(rel):+.0%}"


def write_terms(overhead_s: float, share: float, fit_rows: list[dict],
                holdout_rows: list[dict]) -> None:
    fitted = (f"fitted by tests/benchmarks/fit_benchmark_ttft.py on the {len(fit_rows)} published "
              f"TTFT rows of the declared fit half of tests/data (validate_serving.split_half): "
              f"{_summary(log_errors(fit_rows, overhead_s, share))}; holdout "
              f"{len(holdout_rows)} rows: {_summary(log_errors(holdout_rows, overhead_s, share))}")
    TOML.write_text(
        "# What a benchmark client adds to the engine's own TTFT (cost_model/benchmark_ttft.py).\n"
        "# Fitted by `python tests/benchmarks/fit_benchmark_ttft.py --write` on published "
        "end-to-end rows\n# in tests/data (never on kernel tables); a rerun reproduces these "
        "values.\n"
        f"[request]\noverhead_ms = {{ value = {overhead_s * 1e3:.1f}, source = \"{fitted}\" }}\n\n"
        f"[queue]\nshare_frac = {{ value = {share:.2f}, source = \"{fitted}\" }}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fit-half terms to the TOML")
    args = parser.parse_args(argv)
    rows = ttft_rows()
    fit_rows = [r for r in rows if r["half"] == validate_serving.HALVES[0]]
    holdout = [r for r in rows if r["half"] != validate_serving.HALVES[0]]
    overhead, share, _ = fit(fit_rows)
    print(f"{len(rows)} rows with a measured TTFT: {len(fit_rows)} fit, {len(holdout)} holdout")
    print(f"fit on the fit half: t_request {overhead * 1e3:.0f} ms, q {share:.2f}")
    for name, part in (("fit half", fit_rows), ("holdout", holdout), ("all rows", rows)):
        print(f"  {name} ({len(part)} rows): {_summary(log_errors(part, overhead, share))}")
        for kind in ("dense", "moe"):
            sub = [r for r in part if r["is_moe"] == (kind == "moe")]
            if sub:
                print(f"    {kind}: {len(sub)} rows, {_summary(log_errors(sub, overhead, share))}")
    o_all, q_all, _ = fit(rows)
    print(f"for comparison, fitted on all rows: t_request {o_all * 1e3:.0f} ms, q {q_all:.2f}: "
          f"{_summary(log_errors(rows, o_all, q_all))}")
    if args.write:
        write_terms(overhead, share, fit_rows, holdout)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
