"""Attention fidelity per serving engine (issue 23: "attention fit per engine").

Prints, per engine, GPU and phase, the median and 90th-percentile |predicted / measured − 1| over
every modeled row of that engine's aiconfigurator-core context/generation attention tables (the
fastest kernel per call, as the fit reads them), before (the priors the efficiency files shipped
until the calibration: 60% of BF16 peak for flash attention, 80% of HBM for KV streaming, the
catalog's kernel launch as the only fixed time, no per-sequence, per-tile, per-token or
dequantization cost) and after (the shipped coefficients of that engine). With --held-out it
refits each GPU on four fifths of the head configurations (a hash of query heads, KV heads, head
width, window and KV format: every batch and length of one configuration goes together) and
scores the rest: the headline.
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_attention_fit.py
     [--engine trtllm|vllm|sglang ...] [--held-out] [--sample N]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import zlib

import numpy as np

from cost_model.efficiency import get_efficiency
from cost_model.hardware import get_hardware
from search.calibration.attention import (
    attention_tables,
    fit_attention,
    measured_attention,
    predicted_s,
    with_coefficients,
)
from search.calibration.fitting import abs_error_quantiles
from search.calibration.tables import AIC_PACKAGE, AIC_SYSTEMS, ENGINES, read_parquet
from search.records.tables import format_table

HELD_OUT_SHARE = 5
SAMPLE = 4000  # as the shipped calibration
PRIOR = {  # the [attention] entries every efficiency file shipped before the calibration
    "prefill_compute_frac": 0.6,  # FlashAttention-3 (arXiv 2407.08608), ~75% of peak at long S
    "decode_bandwidth_frac": 0.8,  # paged decode attention streams KV at ~75-85% of HBM peak
    "decode_per_sequence_us": 0.0, "prefill_per_tile_us": 0.0, "prefill_per_token_us": 0.0,
    "kv_dequant_g_per_s": float("inf"), "prefill_quantized_kv_frac": 1.0,
}


def _prior(hardware: str, engine: str):
    launch_us = get_hardware(hardware).kernel_launch_s * 1e6
    return with_coefficients(get_efficiency(hardware, engine), {
        **PRIOR, "fixed_overhead_us": launch_us, "prefill_fixed_overhead_us": launch_us})


def _tables(engine: str, hardware: str) -> dict:
    paths, _ = attention_tables(hardware, engine)
    return {phase: measured_attention(read_parquet(p), phase) for phase, p in paths.items()}


def shipped_rows(engine: str) -> list[dict]:
    rows = []
    for hardware in AIC_SYSTEMS:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for phase, data in _tables(engine, hardware).items():
            before = abs_error_quantiles(predicted_s(data, hw, _prior(hardware, engine)),
                                         data.time_s)
            after = abs_error_quantiles(predicted_s(data, hw, eff), data.time_s)
            rows.append({"engine": engine, "hardware": hardware, "phase": phase,
                         "rows": len(data), "prior_median": before[0], "median": after[0],
                         "p90": after[1]})
    return rows


def _mask(data) -> np.ndarray:
    keys = zip(data.heads, data.kv_heads, data.head_dim, data.window, data.kv_bytes)
    hashes = [zlib.crc32(",".join(str(float(v)) for v in key).encode()) for key in keys]
    return np.array(hashes) % HELD_OUT_SHARE == 0


def held_out_rows(engine: str, sample: int) -> tuple[list[dict], dict[str, list]]:
    rows, pooled = [], {}
    for hardware in AIC_SYSTEMS:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        tables = _tables(engine, hardware)
        masks = {phase: _mask(data) for phase, data in tables.items()}
        kept = {p: d.subset(np.flatnonzero(~masks[p])) for p, d in tables.items()}
        fit = fit_attention(kept, hw, eff, hardware, "held out", sample)
        fitted = with_coefficients(eff, fit.coefficients)
        for phase, data in tables.items():
            test = data.subset(np.flatnonzero(masks[phase]))
            error = np.abs(predicted_s(test, hw, fitted) / test.time_s - 1.0)
            rows.append({"engine": engine, "hardware": hardware, "phase": phase,
                         "held_out_rows": len(test), "median": float(np.median(error)),
                         "p90": float(np.quantile(error, 0.9)),
                         "in_sample_median": fit.errors[phase][0]})
            pooled.setdefault(phase, []).append(error)
    return rows, pooled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", choices=ENGINES)
    parser.add_argument("--held-out", action="store_true")
    parser.add_argument("--sample", type=int, default=SAMPLE)
    args = parser.parse_args()
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("pip install aiconfigurator-core to compare with its measured attention tables")
        return
    for engine in args.engine or ENGINES:
        start = time.perf_counter()
        rows = shipped_rows(engine)
        print(f"\n{engine}: attention |predicted/measured - 1|, prior vs shipped\n")
        print(format_table(rows))
        for phase in ("prefill", "decode"):
            medians = [r["median"] for r in rows if r["phase"] == phase]
            print(f"{engine} {phase}: median of the per-GPU medians {np.median(medians):.1%}")
        if args.held_out:
            rows, pooled = held_out_rows(engine, args.sample)
            print(f"\n{engine}: held out 1 in {HELD_OUT_SHARE} head configurations\n")
            print(format_table(rows))
            for phase, errors in pooled.items():
                joined = np.concatenate(errors)
                print(f"{engine} {phase} held out: {len(joined):,} rows, median "
                      f"{np.median(joined):.1%}, p90 {np.quantile(joined, 0.9):.1%}")
        print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
