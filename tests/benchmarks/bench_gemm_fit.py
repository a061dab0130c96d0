"""GEMM fidelity (issue: calibrate the efficiency layer; "median ≤ 10% over all shapes, and no
GPU/dtype above 15%").

Prints, per GPU and format, the median and 90th-percentile |predicted / measured − 1| over every
measured shape of aiconfigurator-core's tables, before (NVIDIA, AI Model Co-Design (2026): roofline
at peak) and after calibration (the shipped coefficients: kernel + activation quantization, both
inside the timed op); then the same pooled over all shapes, by token-count band, and the goal check.
With --held-out shape|nk it also refits every GPU and format (as `archscout calibrate` does) on a
split of its table and reports the op error (kernel + quantization, `archscout gemm`'s `op_us`) on
the rest: `shape` holds out a fifth of the shapes by a hash of (M, N, K), `nk` every M of a fifth of
the (N, K) pairs (model widths the fit never saw). The fitted coefficients are checked to keep GEMM
time non-decreasing in M, N and K.
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_gemm_fit.py
     [--framework trtllm|sglang|vllm] [--framework-version V] [--held-out shape|nk]
Without the package it prints the errors the calibration recorded in the shipped files.
"""

from __future__ import annotations

import argparse
import importlib.util
import zlib

import numpy as np

from cost_model import GemmRates, gemm_time_s, get_efficiency, get_hardware, get_precision
from search.calibration.measured_lookup import shipped_points
from search.calibration.gemm import (
    AIC_PACKAGE,
    AIC_SYSTEMS,
    MeasuredGemms,
    aiconfigurator_table,
    efficiency_of,
    fit_hardware,
    measured_gemms,
    predicted_s,
    read_table,
    roofline_s,
)
from search.records.tables import format_table

HELD_OUT_SHARE = 5  # one in five shapes (or (N, K) pairs) is held out of the fit
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


def tables_of(name: str, framework: str, version: str | None) -> list[MeasuredGemms]:
    """The measured tables of one GPU, every format (the version the shipped fit used)."""
    recorded = shipped_points().get(name, {})
    fitted_to = recorded.get("framework_version") if framework == recorded.get("framework") \
        else None
    path, _ = aiconfigurator_table(name, framework, version or fitted_to)
    return measured_gemms(read_table(path), name, str(path))[0]


def measure(framework: str, version: str | None) -> tuple[list[dict], dict[str, list]]:
    """Rows per GPU and format, and every shape's (format, M, error before, error after)."""
    rows, pooled = [], {"dtype": [], "m": [], "before": [], "after": []}
    for name in AIC_SYSTEMS:
        hw, eff = get_hardware(name), get_efficiency(name)
        for data in tables_of(name, framework, version):
            after = _errors(
                predicted_s(data, hw, eff.for_precision(get_precision(data.dtype))), data.time_s
            )
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


def held_out_mask(data: MeasuredGemms, split: str) -> np.ndarray:
    """True for the rows held out of the fit: a stable hash of (M, N, K), or of (N, K)."""
    keys = zip(data.m, data.n, data.k) if split == "shape" else zip(data.n, data.k)
    hashes = [zlib.crc32(",".join(str(int(v)) for v in key).encode()) for key in keys]
    return np.array(hashes) % HELD_OUT_SHARE == 0


def monotone(data: MeasuredGemms, fitted, hw) -> bool:
    """Fitted coefficients keep time non-decreasing along every integer M, N and K up to 4,608."""
    rates = GemmRates.of(hw, get_precision(data.dtype), eff=fitted)
    sweep = np.arange(1.0, 4609.0)
    for m, n, k in ((sweep, 4096.0, 4096.0), (64.0, sweep, 7168.0), (1.0, 2048.0, sweep)):
        if np.any(np.diff(gemm_time_s(m, n, k, 1.0, hw, rates)) < 0):
            return False
    return True


def held_out_rows(framework: str, version: str | None, split: str) -> list[dict]:
    """Per GPU and format: refit on the kept rows, op |error| on the held-out ones, next to the
    shipped coefficients' error (fitted on every row) on the same held-out rows."""
    rows = []
    for name in AIC_SYSTEMS:
        hw, shipped = get_hardware(name), get_efficiency(name)
        tables = tables_of(name, framework, version)
        masks = [held_out_mask(d, split) for d in tables]
        kept = [d.subset(np.flatnonzero(~mask)) for d, mask in zip(tables, masks)]
        for data, mask, fit in zip(tables, masks, fit_hardware(kept, hw)):
            test = data.subset(np.flatnonzero(mask))
            fitted = efficiency_of(fit.coefficients)
            error = _errors(predicted_s(test, hw, fitted), test.time_s)
            full = _errors(predicted_s(test, hw, shipped.for_precision(get_precision(data.dtype))),
                           test.time_s)
            rows.append({"hardware": name, "dtype": data.dtype, "fit_rows": len(data) - len(test),
                         "held_out_rows": len(test), "median": float(np.median(error)),
                         "p90": float(np.quantile(error, 0.9)),
                         "shipped_median": float(np.median(full)),
                         "monotone": monotone(data, fitted, hw)})
    return rows


def print_held_out(framework: str, version: str | None, split: str) -> None:
    rows = held_out_rows(framework, version, split)
    what = "shapes (hash of M, N, K)" if split == "shape" else "(N, K) pairs, every M"
    print(f"\nheld out: 1 in {HELD_OUT_SHARE} {what}; op |predicted/measured - 1| on them after "
          "a fit on the rest (shipped_median: the shipped fit, which saw them)\n")
    print(format_table(rows))
    medians = [r["median"] for r in rows]
    print(f"\nheld-out median of the per-GPU/format medians {np.median(medians):.1%}, worst "
          f"{max(medians):.1%}; monotone for every fit: {all(r['monotone'] for r in rows)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="trtllm")
    parser.add_argument("--framework-version")
    parser.add_argument("--held-out", choices=("shape", "nk"),
                        help="also refit on a split of the tables and report the rest")
    args = parser.parse_args()
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("aiconfigurator-core is not installed: errors recorded by the calibration "
              "(pip install aiconfigurator-core to measure them here)\n")
        print(format_table(recorded_rows()))
        return 0
    rows, pooled = measure(args.framework, args.framework_version)
    print(f"|predicted/measured - 1| per GPU and format ({args.framework} tables; "
          "roofline = the co-design post's max(math, read + write) at peak)\n")
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
    if args.held_out:
        print_held_out(args.framework, args.framework_version, args.held_out)
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
