"""Calibration of the attention coefficients on measured attention kernels.

A measured table has one row per kernel call: `batch_size`, `isl`, `num_heads`,
`num_key_value_heads`, `head_dim`, `window_size` (0: none), `attn_dtype`, `kv_cache_dtype`,
`step` and `latency` (ms) — the columns of aiconfigurator-core's `context_attention_perf.parquet`
(prefill: `isl` new tokens per sequence, causal) and `generation_attention_perf.parquet` (decode:
one token per sequence over `isl + step` cached tokens). Heads are per GPU (TP already applied).
The rows are mapped onto `cost_model.attention` (one layer, TP = 1) and the nine coefficients
of COEFFICIENTS are fitted jointly by robust least squares on log time, like the GEMM fit: the
rooflines' `prefill_compute_frac` and `decode_bandwidth_frac`, each phase's fixed floor, the SM
time per decode (sequence, KV head), per prefill (sequence, head, 128-query tile) and per prefill
(token, head), the FP8 KV dequantization rate and the prefill time ratio with an FP8 KV cache
(`cost_model/efficiency.py` documents them).
Where an engine's table times several kernels on one call (TensorRT-LLM's and FlashInfer's, SGLang's
TensorRT-LLM MHA, Triton and FlashInfer backends), the fastest is the engine's. Left out: prefill
rows with FP8 attention math (the model computes attention in BF16) and decode
rows with more than 32 query heads per KV head (TensorRT-LLM then leaves its grouped kernel for a
per-head one that re-reads the KV cache per query head; the model assumes a grouped kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pyarrow as pa

from cost_model.attention import decode_attention_s, prefill_attention_s
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.efficiency import Efficiency
from cost_model.hardware import HardwareSpec
from cost_model.precision import get_precision
from cost_model.units import GIGA, MS_PER_S, US_PER_S
from search.calibration.errors import CalibrationError
from search.calibration.fitting import (
    FIT_SAMPLE_POINTS,
    abs_error_quantiles,
    check_fit_rows,
    coefficients_in,
    fastest_per_key,
    fit_log_time,
    fitted_source,
    replace_coefficients,
)
from search.calibration.tables import (
    DEFAULT_ENGINE,
    aiconfigurator_table,
    numeric_column,
    string_column,
)

PHASES = {
    "prefill": "context_attention_perf.parquet",
    "decode": "generation_attention_perf.parquet",
}
KV_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}  # table dtype -> our format
MAX_GROUPED_HEADS = 32  # TensorRT-LLM's grouped decode kernel (XQA) takes query groups up to 32
MATH_FORMAT = "bfloat16"  # the model's attention math (Env.high)
COLUMNS = ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "window_size",
           "step", "latency")
# name: (lower bound, upper bound, start) in TOML units
COEFFICIENTS = {
    "prefill_compute_frac": (0.05, 1.0, 0.6),
    "decode_bandwidth_frac": (0.05, 1.0, 0.8),
    "fixed_overhead_us": (0.0, 100.0, 5.0),
    "prefill_fixed_overhead_us": (0.0, 100.0, 5.0),
    "decode_per_sequence_us": (0.0, 100.0, 1.0),
    "prefill_per_tile_us": (0.0, 100.0, 1.0),
    "prefill_per_token_us": (0.0, 10.0, 0.05),
    "kv_dequant_g_per_s": (100.0, 1e5, 1500.0),
    "prefill_quantized_kv_frac": (0.5, 2.0, 1.0),
}
EFFICIENCY_FIELDS = {  # coefficient -> (Efficiency field, TOML units per SI unit)
    "prefill_compute_frac": ("prefill_attention_compute_frac", 1.0),
    "decode_bandwidth_frac": ("decode_attention_bandwidth_frac", 1.0),
    "fixed_overhead_us": ("attention_fixed_overhead_s", US_PER_S),
    "prefill_fixed_overhead_us": ("prefill_attention_fixed_overhead_s", US_PER_S),
    "decode_per_sequence_us": ("decode_attention_per_sequence_s", US_PER_S),
    "prefill_per_tile_us": ("prefill_attention_per_tile_s", US_PER_S),
    "prefill_per_token_us": ("prefill_attention_per_token_s", US_PER_S),
    "kv_dequant_g_per_s": ("decode_kv_dequant_elements_per_s", 1.0 / GIGA),
    "prefill_quantized_kv_frac": ("prefill_quantized_kv_frac", 1.0),
}


@dataclass(frozen=True)
class MeasuredAttention:
    """Measured attention kernels of one GPU and phase (1-D arrays of equal length)."""

    phase: str  # prefill | decode
    batch: np.ndarray
    tokens: np.ndarray  # new tokens per sequence (prefill) or cached context (decode)
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    window: np.ndarray  # 0: none
    kv_bytes: np.ndarray  # per cached value
    time_s: np.ndarray

    def __len__(self) -> int:
        return len(self.time_s)

    def subset(self, index: np.ndarray) -> MeasuredAttention:
        return MeasuredAttention(self.phase, **{f.name: getattr(self, f.name)[index]
                                                for f in fields(self) if f.name != "phase"})

    def keys(self) -> list[np.ndarray]:
        """The columns that make a measured call distinct."""
        return [self.batch, self.tokens, self.heads, self.kv_heads, self.head_dim, self.window,
                self.kv_bytes]


@dataclass(frozen=True)
class AttentionFitResult:
    hardware: str
    coefficients: dict[str, float]  # TOML units
    points: dict[str, int]  # by phase
    errors: dict[str, tuple[float, float]]  # by phase: (median, p90) after the fit
    prior_errors: dict[str, tuple[float, float]]  # the same with the coefficients before it
    source: str


def attention_tables(hardware: str, engine: str = DEFAULT_ENGINE,
                     version: str | None = None) -> tuple[dict[str, Path], str]:
    """({phase: table path}, version) of an engine's attention tables of one of our GPUs: the
    decode table's version (the engine's, `tables.aiconfigurator_table`) for both phases."""
    decode, version = aiconfigurator_table(hardware, "attention", engine, PHASES["decode"],
                                           version)
    prefill = decode.parent / PHASES["prefill"]
    if not prefill.is_file():
        raise CalibrationError(f"`engine` {engine!r} has no prefill attention table for "
                               f"{hardware} at {version}")
    return {"prefill": prefill, "decode": decode}, version


def measured_attention(table: pa.Table, phase: str) -> MeasuredAttention:
    """The rows the model covers: BF16 math (prefill), a modeled KV format."""
    missing = [c for c in (*COLUMNS, "attn_dtype", "kv_cache_dtype") if c not in table.column_names]
    if missing:
        raise CalibrationError(f"attention table needs columns {', '.join(missing)}")
    kv_names = string_column(table, "kv_cache_dtype")
    keep = np.isin(kv_names, list(KV_FORMATS)) & (numeric_column(table, "latency") > 0)
    if phase == "decode":
        groups = numeric_column(table, "num_heads") / numeric_column(table, "num_key_value_heads")
        keep &= groups <= MAX_GROUPED_HEADS
    if phase == "prefill":
        keep &= string_column(table, "attn_dtype") == MATH_FORMAT
    col = lambda name: numeric_column(table, name)[keep]  # noqa: E731
    kv_bytes = np.array([get_precision(KV_FORMATS[n]).activation_bytes_per_value
                         for n in kv_names[keep]], dtype=np.float64)
    tokens = col("isl") if phase == "prefill" else col("isl") + col("step")
    data = MeasuredAttention(phase, col("batch_size"), tokens, col("num_heads"),
                             col("num_key_value_heads"), col("head_dim"), col("window_size"),
                             kv_bytes, col("latency") / MS_PER_S)
    return data.subset(fastest_per_key(data.keys(), data.time_s))


# ---- the model at trial coefficients --------------------------------------------------------

def _arch(data: MeasuredAttention) -> ArchArrays:
    """One GQA layer per row (sliding when the row has a window)."""
    zeros = np.zeros(len(data))
    windowed = data.window > 0
    return ArchArrays.from_columns(zeros, layers=zeros + 1.0, heads_q=data.heads,
                                   heads_kv=data.kv_heads, head_dim=data.head_dim,
                                   v_dim=data.head_dim, sliding_layers=windowed * 1.0,
                                   window=np.where(windowed, data.window, np.inf))


def _single_gpu(rows: int) -> DeployArrays:
    ones = np.ones(rows)
    return DeployArrays(tp=ones, ep=ones, pp=ones, dp=ones, imbalance=0.0 * ones)


def with_coefficients(eff: Efficiency, coefficients: dict[str, float]) -> Efficiency:
    """`eff` with the attention coefficients (TOML units) replaced."""
    return replace_coefficients(eff, coefficients, EFFICIENCY_FIELDS)


def predicted_s(data: MeasuredAttention, hw: HardwareSpec, eff: Efficiency) -> np.ndarray:
    """Predicted kernel time of every row; each KV format runs under its own Env."""
    arch, deploy, out = _arch(data), _single_gpu(len(data)), np.empty(len(data))
    for kv_bytes in np.unique(data.kv_bytes):
        rows = np.flatnonzero(data.kv_bytes == kv_bytes)
        kv = next(get_precision(f) for f in KV_FORMATS.values()
                  if get_precision(f).activation_bytes_per_value == kv_bytes)
        env = Env(hw=hw, eff=eff, linear=get_precision("bf16"), kv=kv, high=get_precision("bf16"))
        a, d, sub = arch.take(rows), _take(deploy, rows), data.subset(rows)
        if data.phase == "prefill":
            out[rows] = prefill_attention_s(a, d, env, sub.batch * sub.tokens,
                                            (sub.tokens + 1) / 2, seqs=sub.batch)
        else:
            out[rows] = decode_attention_s(a, d, env, sub.batch, sub.tokens)
    return out


def _take(d: DeployArrays, rows: np.ndarray) -> DeployArrays:
    return DeployArrays(**{f.name: _rows(getattr(d, f.name), rows) for f in fields(d)})


def _rows(value, rows: np.ndarray):
    """`value[rows]` for a per-row array; a scalar field (a default) as it is."""
    return value[rows] if np.ndim(value) else value


# ---- fitting --------------------------------------------------------------------------------

def prior_coefficients(eff: Efficiency, hw: HardwareSpec) -> dict[str, float]:
    """`eff`'s attention coefficients in TOML units, defaults resolved (launch, decode's)."""
    decode_fixed_s = hw.kernel_launch_s if eff.attention_fixed_overhead_s is None \
        else eff.attention_fixed_overhead_s
    prefill_fixed_s = eff.prefill_attention_fixed_overhead_s
    resolved = eff.model_copy(update={
        "attention_fixed_overhead_s": decode_fixed_s,
        "prefill_attention_fixed_overhead_s": decode_fixed_s if prefill_fixed_s is None
        else prefill_fixed_s})
    return coefficients_in(resolved, EFFICIENCY_FIELDS)


def fit_attention(tables: dict[str, MeasuredAttention], hw: HardwareSpec, eff: Efficiency,
                  hardware: str, source: str, sample_points: int = FIT_SAMPLE_POINTS,
                  seed: int = 0) -> AttentionFitResult:
    """Fit the coefficients on every phase at once (each phase weighted equally)."""
    for phase, data in tables.items():
        check_fit_rows(f"{source}: {phase} attention", data.time_s, data.keys(),
                       len(COEFFICIENTS))
    coefficients = fit_log_time(
        tables, lambda d, c: predicted_s(d, hw, with_coefficients(eff, c)), COEFFICIENTS,
        sample_points, seed)
    prior = with_coefficients(eff, prior_coefficients(eff, hw))
    fitted = with_coefficients(eff, coefficients)
    errors = lambda e: {p: abs_error_quantiles(predicted_s(d, hw, e), d.time_s)  # noqa: E731
                        for p, d in tables.items()}
    return AttentionFitResult(hardware, coefficients, {p: len(d) for p, d in tables.items()},
                              errors(fitted), errors(prior), source)


def fit_source(r: AttentionFitResult) -> str:
    """The `source` of every fitted attention coefficient: table, points and errors."""
    return fitted_source(r.source, r.points, r.errors)
