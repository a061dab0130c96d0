"""MoE fidelity (issue "Fidelity": compare the MoE layer with measured fused-MoE kernels).

Prints, per GPU and format, the median and 90th-percentile |predicted / measured − 1| over the
balanced, gated rows of aiconfigurator-core's moe_perf tables in the formats the model has,
before (the two grouped expert GEMMs alone, timed by the calibrated GEMM model), after (plus the
shipped [moe] terms: fixed floor, per routed token copy, per scanned routed index: what a
TensorRT-LLM serving step pays, the engine of these tables) and with the floor alone (what a
step of another engine, or a generic one, pays: `cost_model.efficiency.Efficiency.for_engine`),
and the rows left out by reason.
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_moe_fit.py
"""

from __future__ import annotations

import importlib.util

import pyarrow.parquet as pq

from cost_model import get_efficiency, get_hardware
from search.calibration.gemm import AIC_PACKAGE, AIC_SYSTEMS, abs_error_quantiles
from search.calibration.moe import (
    COEFFICIENTS,
    aiconfigurator_moe_table,
    measured_moe,
    predicted_s,
    prior_coefficients,
    with_coefficients,
)
from search.records.tables import format_table

FLOOR = "fixed_overhead_us"  # the one [moe] term other engines' serving steps pay


def _rows(hardware: str) -> tuple[list[dict], dict[str, int]]:
    path, _ = aiconfigurator_moe_table(hardware)
    tables, skipped = measured_moe(pq.read_table(path))
    hw, eff = get_hardware(hardware), get_efficiency(hardware)
    gemms_only = with_coefficients(eff, dict.fromkeys(COEFFICIENTS, 0.0))
    floor_only = with_coefficients(eff, {**dict.fromkeys(COEFFICIENTS, 0.0),
                                         FLOOR: prior_coefficients(eff)[FLOOR]})
    rows = []
    for fmt, data in tables.items():
        before = abs_error_quantiles(predicted_s(data, hw, gemms_only), data.time_s)
        after = abs_error_quantiles(predicted_s(data, hw, eff), data.time_s)
        floor = abs_error_quantiles(predicted_s(data, hw, floor_only), data.time_s)
        rows.append({"hardware": hardware, "format": fmt, "rows": len(data),
                     "before_median": f"{before[0]:.1%}", "before_p90": f"{before[1]:.1%}",
                     "after_median": f"{after[0]:.1%}", "after_p90": f"{after[1]:.1%}",
                     "floor_only_median": f"{floor[0]:.1%}",
                     "floor_only_p90": f"{floor[1]:.1%}"})
    return rows, skipped


def main() -> None:
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("pip install aiconfigurator-core to compare with its measured MoE tables")
        return
    rows, left_out = [], []
    for hardware in AIC_SYSTEMS:
        fits, skipped = _rows(hardware)
        rows += fits
        left_out.append({"hardware": hardware, **skipped})
    print(format_table(rows))
    print("\nrows left out by reason")
    print(format_table(left_out))


if __name__ == "__main__":
    main()
