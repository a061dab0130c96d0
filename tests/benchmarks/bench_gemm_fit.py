"""GEMM fidelity (issue: calibrate the efficiency layer; "median ≤ 10% over all shapes, and no
GPU/dtype above 15%").

Prints, per GPU and format, the median and 90th-percentile |predicted / measured − 1| over every
measured shape of aiconfigurator-core's tables, before (the seeds' roofline at peak) and after
calibration (the shipped coefficients: kernel + activation quantization, both inside the timed
op); then the same pooled over all shapes, by token-count band, and the goal check.
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_gemm_fit.py
     [--framework trtllm|sglang|vllm] [--framework-version V]
Without the package it prints the errors the calibration recorded in the shipped files.
"""

from __future__ import annotations

import argparse
import importlib.util

import numpy as np

from cost_model.efficiency import get_efficiency
from cost_model.hardware import get_hardware
from cost_model.precision import get_precision
from search.calibration import (
    AIC_PACKAGE,
    AIC_SYSTEMS,
    aiconfigurator_table,
    measured_gemms,
    predicted_s,
    read_table,
    roofline_s,
    shipped_points,
)
from search.tables import format_table

GOAL_OVERALL_MEDIAN_FRAC = 0.10
GOAL_WORST_MEDIAN_FRAC = 0.15
M_BANDS = ((1, 64, "decode M<=64"), (65, 1024, "65..1024"), (1025, 1 << 30, "prefill M>1024"))


def _errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(predicted / measured - 1.0)


def _row(hardware: str, fmt: str, points: int, before: np.ndarray, after: np.ndarray) -> dict:
    return {"hardware": hardware, "dtype": fmt, "points": points,
            "roofline_median": float(np.median(before)),
            "roofline_p90": float(np.quantile(before, 0.9)),
            "median": float(np.median(after)), "p90": float(np.quantile(after, 0.9))}


def measure(framework: str, version: str | None) -> tuple[list[dict], dict[str, list]]:
    """Rows per GPU and format, and every shape's (format, M, error before, error after)."""
    rows, pooled = [], {"dtype": [], "m": [], "before": [], "after": []}
    for name in AIC_SYSTEMS:
        recorded = shipped_points().get(name, {})
        fitted_to = recorded.get("framework_version") if framework == recorded.get("framework") \
            else None
        path, _ = aiconfigurator_table(name, framework, version or fitted_to)
        hw, eff = get_hardware(name), get_efficiency(name)
        for data in measured_gemms(read_table(path), name, str(path))[0]:
            after = _errors(predicted_s(data, hw, eff.for_precision(get_precision(data.dtype))), data.time_s)
            before = _errors(roofline_s(data, hw), data.time_s)
            rows.append(_row(name, data.dtype, len(data), before, after))
            for key, value in (("dtype", [data.dtype] * len(data)), ("m", data.m),
                               ("before", before), ("after", after)):
                pooled[key].append(np.asarray(value))
    return rows, {key: np.concatenate(parts) for key, parts in pooled.items()}


def band_rows(pooled: dict[str, np.ndarray]) -> list[dict]:
    """Median |error| after calibration per format and token-count band, over every GPU."""
    rows = []
    for fmt in dict.fromkeys(pooled["dtype"].tolist()):
        row = {"dtype": fmt}
        for low, high, label in M_BANDS:
            mask = (pooled["dtype"] == fmt) & (pooled["m"] >= low) & (pooled["m"] <= high)
            row[label] = float(np.median(pooled["after"][mask])) if mask.any() else float("nan")
        rows.append(row)
    return rows


def recorded_rows() -> list[dict]:
    rows = []
    for name in AIC_SYSTEMS:
        for fmt, fit in get_efficiency(name).gemm_fits.items():
            rows.append({"hardware": name, "dtype": fmt, "points": fit.points,
                         "roofline_median": fit.roofline_median_abs_error_frac,
                         "roofline_p90": fit.roofline_p90_abs_error_frac,
                         "median": fit.median_abs_error_frac, "p90": fit.p90_abs_error_frac})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="trtllm")
    parser.add_argument("--framework-version")
    args = parser.parse_args()
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("aiconfigurator-core is not installed: errors recorded by the calibration "
              "(pip install aiconfigurator-core to measure them here)\n")
        print(format_table(recorded_rows()))
        return 0
    rows, pooled = measure(args.framework, args.framework_version)
    print(f"|predicted/measured - 1| per GPU and format ({args.framework} tables; "
          "roofline = the seeds' max(math, read + write) at peak)\n")
    print(format_table(rows))
    overall_before, overall_after = (float(np.median(pooled[k])) for k in ("before", "after"))
    worst = max(rows, key=lambda r: r["median"])
    print(f"\nall {len(pooled['after']):,} shapes: median roofline {overall_before:.1%} -> "
          f"calibrated {overall_after:.1%}; p90 {np.quantile(pooled['before'], 0.9):.1%} -> "
          f"{np.quantile(pooled['after'], 0.9):.1%}")
    print("\nmedian |error| after calibration by tokens M (all GPUs):\n")
    print(format_table(band_rows(pooled)))
    met = overall_after <= GOAL_OVERALL_MEDIAN_FRAC and worst["median"] <= GOAL_WORST_MEDIAN_FRAC
    print(f"\ngoal (median <= {GOAL_OVERALL_MEDIAN_FRAC:.0%} over all shapes, no GPU/format above "
          f"{GOAL_WORST_MEDIAN_FRAC:.0%}): {'met' if met else 'NOT met'}; worst "
          f"{worst['hardware']} {worst['dtype']} {worst['median']:.1%}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
