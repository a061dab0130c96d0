"""Fit the serving engine's host time per scheduled sequence per step (cost_model/host.py), per
host CPU kind, on published end-to-end rows.

The term h_cpu · n (n: the sequences the busiest rank's step schedules) is the only free number;
everything else is the cost model as shipped. For each host CPU kind (x86, grace) the rows on GPUs
of that kind (`HardwareSpec.host_cpu`) are scored by `validate_serving.py`'s row evaluation (its
published CSV and development set, never kernel tables, never aiconfigurator's
silicon_sample.csv) at every h on a grid (0 … 60 µs by 1 µs), and h minimizes the mean
|log(pred/meas)| of the rows' TPOT and output tokens/s/GPU pooled (the L1 loss: robust to the
outliers of a mixed set, smooth in h, exactly reproducible). Not the median: over the few dozen
Grace rows of a half it jumps between neighbouring h (9.0%, 10.6%, 9.7%, 12.8% at 8, 12, 17,
22 µs) and picked 8 µs for Grace against 32 µs for x86, a host the published tables show
faster. The kinds share no rows, so each is a one-dimensional fit.

Declared split (to avoid fitting to the test): fitted on `validate_serving.split_half`'s `fit`
half only and scored on the `holdout` half. The benchmark-TTFT terms
(tests/benchmarks/fit_benchmark_ttft.py) are fitted on top of these step times: rerun that fit
after this one.

Usage: python tests/benchmarks/fit_host_overhead.py [--write]
  --write  store the terms fitted on the `fit` half in cost_model/data/serving/host.toml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_serving  # noqa: E402

from cost_model import host  # noqa: E402
from cost_model.units import US_PER_S  # noqa: E402

TOML = REPO / "cost_model" / "data" / "serving" / "host.toml"
GRID_US = np.arange(0.0, 60.5, 1.0)
METRICS = ("tpot", "tokens_per_s_per_gpu")


def _csv_rows() -> list[dict[str, str]]:
    """The published CSV's rows and the development set's, read as validate_serving reads them."""
    return [row for path, option in ((validate_serving.DEFAULT_DATA_DIR /
                                      validate_serving.CSV_NAME, "--data"),
                                     (validate_serving.DEV_SET_CSV, "--dev-set"))
            for row in validate_serving._read_rows(path, option) or []]


def _host_cpu(row: dict[str, str]) -> str | None:
    try:
        return validate_serving._hardware(row).host_cpu
    except validate_serving.Skip:
        return None


def scored(rows: list[dict[str, str]], request_step_us: float) -> list:
    """validate_serving's results for `rows` with h = `request_step_us` for every host kind."""
    shipped = host.request_step_s
    host.request_step_s = lambda cpu: request_step_us / US_PER_S
    try:
        results, _ = validate_serving.evaluate_all(rows, validate_serving.DEFAULT_DATA_DIR)
    finally:
        host.request_step_s = shipped
    return results


def log_errors(results: list) -> np.ndarray:
    return np.array([np.log1p(r.error_frac[m]) for r in results for m in METRICS
                     if r.error_frac[m] is not None])


def _summary(errors: np.ndarray) -> str:
    return (f"{errors.size} errors, mean |log error| {np.mean(np.abs(errors)):.3f}, "
            f"{validate_serving.log_error_summary(errors, decimals=1)}")


def fit(rows: list[dict[str, str]]) -> tuple[float, dict[str, list]]:
    """(h in µs minimizing the fit half's mean |log error|, results by half at that h)."""
    best = (np.inf, 0.0, {})
    for h_us in GRID_US:
        results = scored(rows, float(h_us))
        halves = {half: [r for r in results if r.half == half] for half in validate_serving.HALVES}
        cost = float(np.mean(np.abs(log_errors(halves[validate_serving.HALVES[0]]))))
        if cost < best[0]:
            best = (cost, float(h_us), halves)
    return best[1], best[2]


def _table(cpu: str, h_us: float, halves: dict[str, list]) -> str:
    fit_half, holdout = (halves[h] for h in validate_serving.HALVES)
    source = (f"fitted by tests/benchmarks/fit_host_overhead.py on the {len(fit_half)} published "
              f"rows on {cpu} hosts of the declared fit half of tests/data "
              f"(validate_serving.split_half; TPOT and tokens/s/GPU): "
              f"{_summary(log_errors(fit_half))}; holdout {len(holdout)} rows: "
              f"{_summary(log_errors(holdout))}")
    return f'[{cpu}]\nrequest_step_us = {{ value = {h_us:.1f}, source = "{source}" }}\n'


def write_terms(tables: list[str]) -> None:
    TOML.write_text(
        "# The serving engine's host (CPU) seconds per scheduled sequence per forward step, by "
        "host CPU\n# kind (cost_model/host.py; a GPU's kind is `system.host_cpu` in its catalog "
        "file). Fitted by\n# `python tests/benchmarks/fit_host_overhead.py --write` on published "
        "end-to-end rows in\n# tests/data (never on kernel tables); a rerun reproduces these "
        "values.\n" + "\n".join(tables))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fit-half terms to the TOML")
    args = parser.parse_args(argv)
    rows = _csv_rows()
    tables = []
    for cpu in host.HOST_CPUS:
        mine = [r for r in rows if _host_cpu(r) == cpu]
        h_us, halves = fit(mine)
        print(f"[{cpu}] h = {h_us:.1f} us per sequence per step")
        for half, part in halves.items():
            print(f"    {half}: {len(part)} rows, {_summary(log_errors(part))}")
        tables.append(_table(cpu, h_us, halves))
    if args.write:
        write_terms(tables)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
