"""Attention fidelity (issue "Fidelity": calibrate the attention model on measured kernels).

Prints, per GPU and phase, the median and 90th-percentile |predicted / measured − 1| over every
modeled row of aiconfigurator-core's context/generation attention tables, before (the priors the
efficiency files shipped until the calibration: 60% of BF16 peak for flash attention, 80% of HBM
for KV streaming, the catalog's kernel launch as the only fixed time, no per-sequence, per-tile,
per-token or dequantization cost) and after (the shipped, fitted coefficients).
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_attention_fit.py
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow.parquet as pq

from cost_model import get_efficiency, get_hardware
from search.calibration.gemm import AIC_PACKAGE, AIC_SYSTEMS, abs_error_quantiles
from search.calibration.attention import (
    aiconfigurator_attention_tables,
    measured_attention,
    predicted_s,
    with_coefficients,
)
from search.records.tables import format_table

PRIOR = {  # the [attention] entries every efficiency file shipped before the calibration
    "prefill_compute_frac": 0.6,  # FlashAttention-3 (arXiv 2407.08608), ~75% of peak at long S
    "decode_bandwidth_frac": 0.8,  # paged decode attention streams KV at ~75-85% of HBM peak
    "decode_per_sequence_us": 0.0, "prefill_per_tile_us": 0.0, "prefill_per_token_us": 0.0,
    "kv_dequant_g_per_s": float("inf"),
}


def _prior(hardware: str):
    hw = get_hardware(hardware)
    launch_us = hw.kernel_launch_s * 1e6
    return with_coefficients(get_efficiency(hardware), {
        **PRIOR, "fixed_overhead_us": launch_us, "prefill_fixed_overhead_us": launch_us})


def _row(hardware: str, phase: str, data) -> dict:
    hw = get_hardware(hardware)
    before = abs_error_quantiles(predicted_s(data, hw, _prior(hardware)), data.time_s)
    after = abs_error_quantiles(predicted_s(data, hw, get_efficiency(hardware)), data.time_s)
    return {"hardware": hardware, "phase": phase, "rows": len(data),
            "before_median": f"{before[0]:.1%}", "before_p90": f"{before[1]:.1%}",
            "after_median": f"{after[0]:.1%}", "after_p90": f"{after[1]:.1%}"}


def main() -> None:
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("pip install aiconfigurator-core to compare with its measured attention tables")
        return
    rows = []
    for hardware in AIC_SYSTEMS:
        paths, _ = aiconfigurator_attention_tables(hardware)
        for phase, path in paths.items():
            rows.append(_row(hardware, phase, measured_attention(pq.read_table(path), phase)))
    print(format_table(rows))
    for phase in ("prefill", "decode"):
        after = [float(r["after_median"][:-1]) for r in rows if r["phase"] == phase]
        print(f"{phase}: median of the per-GPU medians after {np.median(after):.1f}%")


if __name__ == "__main__":
    main()
