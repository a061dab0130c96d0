"""Writes tests/data/gemm_format_order.csv: per engine, GPU and kind of kernel, the measured time of
each number format on a decode-like and a prefill-like set of shapes, as the geometric mean over
the set. `tests/cost_model/test_gemm_properties.py` checks that the model ranks the formats the
same way per engine, GPU and regime.

Kinds: `gemm` (dense GEMM ops, BF16 activations quantized inside the timed op: BF16, FP8, FP8
block-scaled, NVFP4; M 1-64 or 4096-16384 × N, K 2048-16384), `moe` (fused MoE layers of
DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B and gpt-oss-120b shapes at EP 8 or moe-TP 8, 1-64 or
1024-4096 tokens, balanced routing; the formats every such shape was measured in) and
`attention` (the KV-cache format, BF16 or FP8: decode at 1-64 sequences × 1k-8k context, prefill
of 1-4 × 1k-4k-token prompts; 32 query / 8 KV heads of 128). Where a table times several kernels
on one shape, the fastest (`search.calibration`): what the fits use.
Source: aiconfigurator-core's tables (systems/data/<gpu>/<op>/<engine>/<version>/), each
engine's version as the calibration reads it (`search.calibration.tables.engine_version`).
The FP8 GEMM rows carry the kernel alone too (`measured_geomean_kernel_us`: the op minus the
engine's own quantize tables, computescale_perf + scale_matrix_perf; BF16's kernel is its op).
Run: pip install aiconfigurator-core; python tests/benchmarks/gemm_format_order.py
"""

from __future__ import annotations

import csv
import sys
from itertools import product
from pathlib import Path

import numpy as np

from search.calibration.attention import attention_tables, measured_attention
from search.calibration.gemm import gemm_table, measured_gemms, read_table
from search.calibration.moe import measured_moe, moe_table
from search.calibration.tables import (
    AIC_SYSTEMS,
    ENGINES,
    aic_source,
    aiconfigurator_data_dir,
    read_parquet,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import TEST_DATA

OUTPUT = TEST_DATA / "gemm_format_order.csv"
NK_VALUES = (2048, 4096, 8192, 16384)  # GEMM N and K: model widths
GEMM_REGIMES = {"decode": (1, 2, 4, 8, 16, 32, 64), "prefill": (4096, 8192, 16384)}  # M
MOE_LAYERS = ((7168, 2048, 256, 8), (4096, 1536, 128, 8), (2048, 768, 128, 8),
              (2880, 2880, 128, 4))  # hidden, expert H', experts, top-k
MOE_SPLITS = ((1, 8), (8, 1))  # (moe_tp, moe_ep)
MOE_REGIMES = {"decode": (1, 4, 16, 64), "prefill": (1024, 4096)}  # tokens
MIN_SHAPES = 4  # a format joins a MoE set only if the set keeps at least this many shapes
ATTENTION_HEADS = (32, 8, 128)
ATTENTION_REGIMES = {"decode": ((1, 8, 64), (1024, 8192)), "prefill": ((1, 4), (1024, 4096))}
COLUMNS = ("kind", "engine", "hardware", "regime", "dtype", "shapes", "shape_list",
           "measured_geomean_op_us", "measured_geomean_kernel_us", "source")


def _geomean_us(times_s) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(times_s))))) * 1e6


def _row(kind, engine, hardware, regime, dtype, shapes, times_s, source, kernel_us=None):
    return {"kind": kind, "engine": engine, "hardware": hardware, "regime": regime,
            "dtype": dtype, "shapes": len(shapes),
            "shape_list": " ".join(",".join(str(int(v)) for v in s) for s in shapes),
            "measured_geomean_op_us": f"{_geomean_us(times_s):.4g}",
            "measured_geomean_kernel_us": "" if kernel_us is None else f"{kernel_us:.4g}",
            "source": source}


def gemm_rows(engine: str, hardware: str) -> list[dict]:
    path, version = gemm_table(hardware, engine)
    source = aic_source(hardware, "gemm", engine, version) + "/gemm_perf.parquet"
    rows = []
    for data in measured_gemms(read_table(path), hardware, source)[0]:
        lookup = {(int(m), int(n), int(k)): t for m, n, k, t in
                  zip(data.m, data.n, data.k, data.time_s)}
        for regime, m_values in GEMM_REGIMES.items():
            shapes = [s for s in product(m_values, NK_VALUES, NK_VALUES) if s in lookup]
            if len(shapes) < MIN_SHAPES:
                continue
            times = np.array([lookup[s] for s in shapes])
            kernel = _kernel_us(engine, hardware, version, data.dtype, shapes, times)
            extra = QUANTIZE_SOURCE if data.dtype == "fp8" and kernel is not None else ""
            rows.append(_row("gemm", engine, hardware, regime, data.dtype, shapes, times,
                             source + extra, kernel))
    return rows


QUANTIZE_SOURCE = "; FP8 kernel: minus quantize computescale_perf + scale_matrix_perf"


def _kernel_us(engine, hardware, version, dtype, shapes, op_s) -> float | None:
    """Geometric mean of the kernel alone where the tables measure everything else: BF16 (no
    quantization) and FP8 (its scale and quantization kernels are tables of their own)."""
    if dtype == "bf16":
        return _geomean_us(op_s)
    if dtype != "fp8":
        return None
    scale = _quantize_table_s(engine, hardware, version, "computescale_perf")
    quant = _quantize_table_s(engine, hardware, version, "scale_matrix_perf")
    if not all((m, k) in scale and (m, k) in quant for m, _, k in shapes):
        return None
    kernel = op_s - np.array([scale[(m, k)] + quant[(m, k)] for m, _, k in shapes])
    return _geomean_us(kernel) if np.all(kernel > 0) else None


def _quantize_table_s(engine, hardware, version, table) -> dict[tuple[int, int], float]:
    path = (aiconfigurator_data_dir() / AIC_SYSTEMS[hardware] / "quantize" / engine / version
            / f"{table}.parquet")
    if not path.is_file():
        return {}
    t = read_parquet(path).select(["m", "k", "latency"]).to_pydict()
    return {(m, k): ms / 1e3 for m, k, ms in zip(t["m"], t["k"], t["latency"])}


def moe_rows(engine: str, hardware: str) -> list[dict]:
    path, version = moe_table(hardware, engine)
    source = aic_source(hardware, "moe", engine, version) + "/moe_perf.parquet balanced"
    tables, _ = measured_moe(read_parquet(path))
    lookups = {fmt: {tuple(int(v) for v in key): t for *key, t in zip(
        d.hidden, d.inter, d.experts, d.top_k, d.moe_tp, d.moe_ep, d.tokens, d.time_s)}
        for fmt, d in tables.items()}
    rows = []
    for regime, tokens in MOE_REGIMES.items():
        wanted = [(*layer, *split, t) for layer in MOE_LAYERS for split in MOE_SPLITS
                  for t in tokens]
        formats, shapes = _common(lookups, wanted)
        for fmt in formats:
            times = np.array([lookups[fmt][s] for s in shapes])
            rows.append(_row("moe", engine, hardware, regime, fmt, shapes, times, source))
    return rows


def _common(lookups: dict, wanted: list[tuple]) -> tuple[list[str], list[tuple]]:
    """The largest set of formats that share at least MIN_SHAPES measured shapes of `wanted`,
    dropping the format with the fewest first; (formats, their common shapes)."""
    formats = list(lookups)
    while formats:
        shapes = [s for s in wanted if all(s in lookups[f] for f in formats)]
        if len(shapes) >= MIN_SHAPES and len(formats) > 1:
            return formats, shapes
        formats.remove(min(formats, key=lambda f: sum(s in lookups[f] for s in wanted)))
    return [], []


def attention_rows(engine: str, hardware: str) -> list[dict]:
    paths, version = attention_tables(hardware, engine)
    rows = []
    heads, kv_heads, width = ATTENTION_HEADS
    for regime, (batches, tokens) in ATTENTION_REGIMES.items():
        phase = "prefill" if regime == "prefill" else "decode"
        data = measured_attention(read_parquet(paths[phase]), phase)
        source = aic_source(hardware, "attention", engine, version) + f"/{paths[phase].name}"
        for kv_bytes, dtype in ((2.0, "bf16"), (1.0, "fp8")):
            lookup = {(int(b), int(t)): s for b, t, h, kv, w, win, kb, s in zip(
                *data.keys(), data.time_s) if (h, kv, w, win, kb) == (heads, kv_heads, width,
                                                                        0.0, kv_bytes)}
            shapes = [s for s in product(batches, tokens) if s in lookup]
            if len(shapes) >= MIN_SHAPES:
                rows.append(_row("attention", engine, hardware, regime, dtype, shapes,
                                 np.array([lookup[s] for s in shapes]), source))
    return rows


def main() -> None:
    rows = []
    for engine in ENGINES:
        for hardware in AIC_SYSTEMS:
            rows += gemm_rows(engine, hardware) + moe_rows(engine, hardware) \
                + attention_rows(engine, hardware)
    with OUTPUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUTPUT}")


if __name__ == "__main__":
    main()
