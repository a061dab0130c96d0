"""Comparison (and calibration) of the MoE layer on measured fused-MoE kernels.

A measured table has one row per fused MoE call on one GPU: `num_tokens` (tokens entering the
layer), `hidden_size`, `inter_size` (one expert's H′), `topk`, `num_experts`, `moe_tp_size`,
`moe_ep_size`, `moe_dtype`, `distribution`, `kernel_source` and `latency` (ms) — the columns of
aiconfigurator-core's `moe_perf.parquet`. The op routes, permutes, runs the two grouped expert
GEMMs (gated up, down) and un-permutes; the router GEMM is outside it.
Each row maps onto `cost_model.layers.ffn_gemms` (one MoE layer, no shared expert: the
`moe/experts_up` and `moe/experts_down` rows) timed by the calibrated GEMM model.
Rows left out: weight-only or mixed formats the model does not have (`w4a16_mxfp4`,
`w4a8_mxfp4_mxfp8`), non-gated experts (`ffn_gemms` models gated experts), the second
(min-latency) nvfp4 kernel timed on the same shapes, and power-law routing (the model takes an
imbalance δ, not a distribution; the balanced rows fit the δ = 0 case).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pyarrow as pa

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.efficiency import Efficiency
from cost_model.hardware import HardwareSpec
from cost_model.layers import GemmList, ffn_gemms, moe_overhead_s
from cost_model.precision import get_precision
from cost_model.step_load import StepLoad
from cost_model.units import MS_PER_S, US_PER_S
from search.calibration.errors import CalibrationError
from search.calibration.gemm import (
    AIC_SYSTEMS,
    DEFAULT_FRAMEWORK,
    FIT_SAMPLE_POINTS,
    _version_key,
    abs_error_quantiles,
    aiconfigurator_data_dir,
    coefficients_in,
    fit_log_time,
    fitted_source,
    numeric_column,
    replace_coefficients,
)

TABLE = "moe_perf.parquet"
MOE_FORMATS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}
BALANCED = "balanced"
NON_GATED_SOURCE = "moe_torch_flow_nongated"
ALTERNATE_SOURCES = ("moe_torch_flow_min_latency",)  # second kernel timed on the same shapes
COLUMNS = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
           "moe_ep_size", "latency")
# name: (lower bound, upper bound, start) in TOML units
COEFFICIENTS = {
    "fixed_overhead_us": (0.0, 200.0, 10.0),
    "per_token_us": (0.0, 1.0, 0.01),
    "per_routed_copy_us": (0.0, 0.1, 0.001),
}
EFFICIENCY_FIELDS = {  # coefficient -> (Efficiency field, TOML units per SI unit)
    "fixed_overhead_us": ("moe_fixed_overhead_s", US_PER_S),
    "per_token_us": ("moe_per_token_s", US_PER_S),
    "per_routed_copy_us": ("moe_per_routed_copy_s", US_PER_S),
}


@dataclass(frozen=True)
class MeasuredMoe:
    """Measured fused-MoE calls of one GPU in one format (1-D arrays of equal length)."""

    dtype: str  # our format name
    tokens: np.ndarray
    hidden: np.ndarray
    inter: np.ndarray
    top_k: np.ndarray
    experts: np.ndarray
    moe_tp: np.ndarray
    moe_ep: np.ndarray
    time_s: np.ndarray

    def __len__(self) -> int:
        return len(self.time_s)

    def subset(self, index: np.ndarray) -> MeasuredMoe:
        return MeasuredMoe(self.dtype, **{f.name: getattr(self, f.name)[index]
                                          for f in fields(self) if f.name != "dtype"})


@dataclass(frozen=True)
class MoeFitResult:
    hardware: str
    coefficients: dict[str, float]  # TOML units
    points: dict[str, int]  # by format
    errors: dict[str, tuple[float, float]]  # by format: (median, p90) after the fit
    prior_errors: dict[str, tuple[float, float]]  # the same with the GEMMs alone
    source: str


def aiconfigurator_moe_table(hardware: str, framework: str = DEFAULT_FRAMEWORK,
                             version: str | None = None) -> tuple[Path, str]:
    """(table path, framework version) of one of our GPUs. Default: the largest table (later
    versions of aiconfigurator-core add small tables of new kernels beside the full sweep)."""
    if hardware not in AIC_SYSTEMS:
        raise CalibrationError(f"`hardware` {hardware!r} has no aiconfigurator table")
    folder = aiconfigurator_data_dir() / AIC_SYSTEMS[hardware] / "moe" / framework
    found = folder.glob(f"*/{TABLE}") if folder.is_dir() else []
    sizes = {p.parent.name: p.stat().st_size for p in found}
    if not sizes:
        raise CalibrationError(f"`framework` {framework!r} has no MoE table for {hardware}")
    if version not in sizes:
        version = max(sorted(sizes, key=_version_key), key=sizes.get)
    return folder / version / TABLE, version


def _names(table: pa.Table, name: str) -> np.ndarray:
    return np.array(table.column(name).to_pylist(), dtype=object)


def measured_moe(table: pa.Table) -> tuple[dict[str, MeasuredMoe], dict[str, int]]:
    """({our format: rows the model covers}, {reason: rows left out})."""
    needed = (*COLUMNS, "moe_dtype", "distribution", "kernel_source")
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise CalibrationError(f"MoE table needs columns {', '.join(missing)}")
    dtype, source = _names(table, "moe_dtype"), _names(table, "kernel_source")
    reasons = {"format not modeled": ~np.isin(dtype, list(MOE_FORMATS)),
               "non-gated experts": source == NON_GATED_SOURCE,
               "alternate (min-latency) kernel": np.isin(source, ALTERNATE_SOURCES),
               "power-law routing": _names(table, "distribution") != BALANCED,
               "no latency": ~(numeric_column(table, "latency") > 0)}
    left = np.zeros(table.num_rows, bool)
    skipped = {}
    for reason, rows in reasons.items():
        skipped[reason] = int(np.sum(rows & ~left))
        left |= rows
    out = {}
    for name, fmt in MOE_FORMATS.items():
        keep = ~left & (dtype == name)
        if keep.any():
            col = {c: numeric_column(table, c)[keep] for c in COLUMNS}
            out[fmt] = MeasuredMoe(fmt, col["num_tokens"], col["hidden_size"], col["inter_size"],
                                   col["topk"], col["num_experts"], col["moe_tp_size"],
                                   col["moe_ep_size"], col["latency"] / MS_PER_S)
    return out, skipped


# ---- the model ------------------------------------------------------------------------------

def _arch(data: MeasuredMoe) -> ArchArrays:
    zeros = np.zeros(len(data))
    values = {f.name: zeros for f in fields(ArchArrays)}
    values.update(hidden=data.hidden, layers=zeros + 1.0, experts=data.experts,
                  top_k=data.top_k, expert_ffn=data.inter, moe_layers=zeros + 1.0)
    return ArchArrays(**values)


def _deploy(data: MeasuredMoe) -> DeployArrays:
    """EP × moe-TP GPUs, attention data-parallel over the EP ranks: moe_tp = TP·DP/EP; the
    tables' balanced routing (no busier GPU, no skew)."""
    ones = np.ones(len(data))
    return DeployArrays(tp=data.moe_tp, ep=data.moe_ep, pp=ones, dp=data.moe_ep,
                        imbalance=0.0 * ones, random_routing=0.0)


def with_coefficients(eff: Efficiency, coefficients: dict[str, float]) -> Efficiency:
    """`eff` with the MoE coefficients (TOML units) replaced."""
    return replace_coefficients(eff, coefficients, EFFICIENCY_FIELDS)


def prior_coefficients(eff: Efficiency) -> dict[str, float]:
    return coefficients_in(eff, EFFICIENCY_FIELDS)


def predicted_s(data: MeasuredMoe, hw: HardwareSpec, eff: Efficiency) -> np.ndarray:
    """Predicted time of every row: the two grouped expert GEMMs plus the MoE overhead."""
    a, d = _arch(data), _deploy(data)
    env = Env(hw=hw, eff=eff, linear=get_precision(data.dtype), kv=get_precision("bf16"),
              high=get_precision("bf16"))
    gemms = GemmList(shape=(len(data),))
    ffn_gemms(gemms, a, d, StepLoad.single_group(data.tokens), 0.0, 1.0)
    times = gemms.times_s(env)
    return times["moe/experts_up"] + times["moe/experts_down"] + moe_overhead_s(
        a, d, env, data.tokens)


# ---- fitting --------------------------------------------------------------------------------

def fit_moe(tables: dict[str, MeasuredMoe], hw: HardwareSpec, eff: Efficiency, hardware: str,
            source: str, sample_points: int = FIT_SAMPLE_POINTS, seed: int = 0) -> MoeFitResult:
    """Fit the MoE coefficients on every format at once (each format weighted equally)."""
    coefficients = fit_log_time(
        tables, lambda d, c: predicted_s(d, hw, with_coefficients(eff, c)), COEFFICIENTS,
        sample_points, seed)
    gemms_only = with_coefficients(eff, dict.fromkeys(COEFFICIENTS, 0.0))
    fitted = with_coefficients(eff, coefficients)
    errors = lambda e: {f: abs_error_quantiles(predicted_s(d, hw, e), d.time_s)  # noqa: E731
                        for f, d in tables.items()}
    return MoeFitResult(hardware, coefficients, {f: len(d) for f, d in tables.items()},
                        errors(fitted), errors(gemms_only), source)


def fit_source(r: MoeFitResult) -> str:
    """The `source` of every fitted MoE coefficient: table, points and errors."""
    return fitted_source(r.source, r.points, r.errors)
