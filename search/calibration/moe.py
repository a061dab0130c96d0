"""Calibration of the fused MoE layer, per engine and experts' format, on measured kernels.

A measured table has one row per fused MoE call on one GPU: `num_tokens` (tokens entering the
layer), `hidden_size`, `inter_size` (one expert's H′), `topk`, `num_experts`, `moe_tp_size`,
`moe_ep_size`, `moe_dtype`, `distribution`, `kernel_source` and `latency` (ms) — the columns of
aiconfigurator-core's `moe_perf.parquet`, one per engine. The op routes, permutes (quantizing the
activations where the format has quantized ones), runs the two grouped expert GEMMs (gated up,
down) and un-permutes; the router GEMM is outside it. Where an engine's table times several fused
kernels on one shape (TensorRT-LLM's CUTLASS and min-latency NVFP4 flows; vLLM's FlashInfer CUTLASS
and TensorRT-LLM-gen experts), the fastest is the engine's: it picks its MoE backend per
deployment.
Each row maps onto `cost_model.layers.ffn_gemms` (one MoE layer, no shared expert: the
`moe/experts_up` and `moe/experts_down` rows) plus `cost_model.layers.moe_overhead_s`, and per
format the six coefficients of `cost_model.efficiency.MoeEfficiency` are fitted by robust least
squares on log time: the grouped GEMMs' compute and HBM ceilings and per-SM stream rate (the rest
of the format's dense kernel model kept), the floor, the cost per local routed copy and per
scanned routing index.
Formats: bfloat16, fp8, fp8_block, nvfp4; `w4a16_mxfp4` (MXFP4 weights on BF16 math, gpt-oss on
Hopper) as `w4a16`; `w4a8_mxfp4_mxfp8` (MXFP4 weights, MXFP8 activations on Blackwell's
block-scaled tensor cores, how every engine runs gpt-oss there) as `mxfp4`.
Rows left out: formats the model does not have (`int4_wo`), non-gated experts (`ffn_gemms` models
gated experts) and power-law routing (the model takes an imbalance δ, not a distribution; the
balanced rows fit the δ = 0 case); and an EP = 1 configuration whose times repeat the EP = 2 ones
of the same shape and moe-TP (median |t(EP 1)/t(EP 2) − 1| < REPEATED_EP_FRAC over their common
token counts): an EP = 1 layer holds twice the experts, so at every measured size it reads about
twice the weights of an EP = 2 one (t(EP 1)/t(EP 2) has median 1.6–2.0 in every other
configuration of every table). In aiconfigurator-core 0.12.0 only DeepSeek-V3's layer (7168,
2048, 256 experts, top-8) repeats so — vLLM's and SGLang's on every GPU and format, TensorRT-LLM's
NVFP4 on B200 and GB200 — and there its EP = 1 times beat the HBM time of reading the touched
experts' weights (up to 3.4× on B200): those rows did not run what they are labelled. Why, in
aiconfigurator's collectors (github.com/ai-dynamo/aiconfigurator, collector/helper.py
`balanced_logits`; collector/sglang/collect_moe.py and collector/vllm/collect_moe.py route
DeepSeek-V3 through its grouped top-k, 8 groups, top-4, DeepseekV3ForCausalLM_cases.yaml): the
balanced logits pick one expert in each block of E/k = 32, so all 8 groups score alike and the
tie keeps the first 4 groups: every token lands on experts 0–127, half the layer, as at EP = 2.
The EP = 1 configurations without an EP = 2 twin (vLLM's moe-TP 8) cannot be told apart here
and stay in.
Each configuration (shape, moe-TP, EP: a `cell`) weighs the same in a fit (`cell_sample`), however
many token counts its table measured.
Two entries per format: `[moe.<format>]`, the joint fit over every row (EP > 1 configurations are
most of them: over 80% of TensorRT-LLM's and SGLang's rows, about half of vLLM's), what EP > 1
deployments run; and `[moe.<format>.ep1]`, the same six coefficients fitted on the EP = 1 rows
alone (at least MIN_EP1_CELLS configurations; else none, and EP = 1 runs the joint entry), what
EP = 1 deployments run. One form does not fit both: at EP = 1 the joint fit over-prices the
measured op 1.3-2x (tests/benchmarks/bench_moe_ep_split.py; held out 1 in 5 shapes, EP = 1
median |error| joint vs apart: vLLM w4a16 H200 30.7% -> 11.6%, TensorRT-LLM nvfp4 B200 45.4% ->
18.1%, mxfp4 43.1% -> 4.0%).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.efficiency import Efficiency, MoeEfficiency
from cost_model.hardware import HardwareSpec
from cost_model.layers import GemmList, ffn_gemms, moe_overhead_s
from cost_model.precision import get_precision
from cost_model.step_load import StepLoad
from cost_model.units import GIGA, MS_PER_S, US_PER_S
from search.calibration.errors import CalibrationError
from search.calibration.fitting import (
    FIT_SAMPLE_POINTS,
    abs_error_quantiles,
    check_fit_rows,
    fastest_per_key,
    fit_log_time,
    fitted_source,
)
from search.calibration.tables import (
    DEFAULT_ENGINE,
    aiconfigurator_table,
    numeric_column,
    string_column,
)

TABLE = ("moe", "moe_perf.parquet")
MOE_FORMATS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4",
               "w4a16_mxfp4": "w4a16", "w4a8_mxfp4_mxfp8": "mxfp4"}
BALANCED = "balanced"
NON_GATED = "nongated"  # in `kernel_source`: experts without a gate (ffn_gemms models gated ones)
COLUMNS = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
           "moe_ep_size")
# name: (TOML units per SI unit, lower bound, upper bound); starts: the dense entry's
COEFFICIENTS = {
    "compute_ceiling_frac": (1.0, 0.02, 1.0),
    "bandwidth_ceiling_frac": (1.0, 0.05, 1.0),
    "sm_bandwidth_gb_per_s": (1.0 / GIGA, None, None),
    "fixed_overhead_us": (US_PER_S, 0.0, 500.0),
    "per_local_copy_us": (US_PER_S, 0.0, 1.0),
    "per_scanned_copy_us": (US_PER_S, 0.0, 0.1),
}
FIELDS = {"compute_ceiling_frac": "compute_ceiling_frac",
          "bandwidth_ceiling_frac": "bandwidth_ceiling_frac",
          "sm_bandwidth_gb_per_s": "sm_bandwidth_bytes_per_s",
          "fixed_overhead_us": "fixed_overhead_s", "per_local_copy_us": "per_local_copy_s",
          "per_scanned_copy_us": "per_scanned_copy_s"}
START_FIXED_US, START_PER_LOCAL_US, START_PER_SCANNED_US = 20.0, 0.01, 0.0005
SM_BANDWIDTH_FLOOR_SHARES = 8.0  # B_SM may fall to 1/8 of an SM's fair share of HBM
REPEATED_EP_FRAC = 0.03  # EP = 1 times within 3% of EP = 2's: a repeated measurement (docstring)
REPEATED_EP = "EP = 1 times repeat EP = 2's"
MIN_EP1_CELLS = 2  # EP = 1 configurations an `ep1` entry needs: more than one shape's curve


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

    def keys(self) -> list[np.ndarray]:
        return [self.tokens, self.hidden, self.inter, self.top_k, self.experts, self.moe_tp,
                self.moe_ep]

    def cells(self) -> np.ndarray:
        """Each row's configuration (shape, moe-TP, EP: every token count of it) as an index."""
        keys = np.column_stack(self.keys()[1:])
        return np.unique(keys, axis=0, return_inverse=True)[1].ravel()


@dataclass(frozen=True)
class MoeFitResult:
    hardware: str
    dtype: str
    coefficients: dict[str, float]  # TOML units
    points: int
    error: tuple[float, float]  # (median, p90) after the fit
    prior_error: tuple[float, float]  # the same with the GEMMs alone (no overhead terms)
    source: str
    ep1: MoeFitResult | None = None  # the `[moe.<format>.ep1]` fit on the EP = 1 rows alone


def moe_table(hardware: str, engine: str = DEFAULT_ENGINE,
              version: str | None = None) -> tuple[Path, str]:
    """(table path, version) of an engine's fused-MoE table of one of our GPUs."""
    return aiconfigurator_table(hardware, TABLE[0], engine, TABLE[1], version)


def _reasons(table: pa.Table) -> dict[str, np.ndarray]:
    missing = [c for c in (*COLUMNS, "latency", "moe_dtype", "distribution", "kernel_source")
               if c not in table.column_names]
    if missing:
        raise CalibrationError(f"MoE table needs columns {', '.join(missing)}")
    dtype, source = string_column(table, "moe_dtype"), string_column(table, "kernel_source")
    return {"format not modeled": ~np.isin(dtype, list(MOE_FORMATS)),
            "non-gated experts": np.array([NON_GATED in s for s in source], dtype=bool),
            "power-law routing": string_column(table, "distribution") != BALANCED,
            "no latency": ~(numeric_column(table, "latency") > 0)}


def measured_moe(table: pa.Table, drop_repeated: bool = True
                 ) -> tuple[dict[str, MeasuredMoe], dict[str, int]]:
    """({our format: one row per measured shape, the engine's fastest kernel}, {reason: rows
    left out}); `drop_repeated` False keeps the repeated EP = 1 rows (and counts them)."""
    left = np.zeros(table.num_rows, bool)
    skipped = {}
    for reason, rows in _reasons(table).items():
        skipped[reason] = int(np.sum(rows & ~left))
        left |= rows
    dtype = string_column(table, "moe_dtype")
    columns = {c: numeric_column(table, c) for c in (*COLUMNS, "latency")}
    out = {}
    for name, fmt in MOE_FORMATS.items():
        rows = np.flatnonzero(~left & (dtype == name))
        if rows.size:
            col = {c: v[rows] for c, v in columns.items()}
            keep = fastest_per_key([col[c] for c in COLUMNS], col["latency"])
            data = MeasuredMoe(fmt, *(col[c][keep] for c in COLUMNS),
                               col["latency"][keep] / MS_PER_S)
            repeated = repeated_ep_rows(data)
            skipped[REPEATED_EP] = skipped.get(REPEATED_EP, 0) + int(repeated.sum())
            out[fmt] = data.subset(np.flatnonzero(~repeated)) if drop_repeated else data
    return out, skipped


def repeated_ep_rows(data: MeasuredMoe) -> np.ndarray:
    """True for the rows of every EP = 1 configuration whose times repeat its EP = 2 twin's
    (module docstring): median |t(EP 1)/t(EP 2) − 1| < REPEATED_EP_FRAC over common tokens."""
    twin = {}
    for i in np.flatnonzero(data.moe_ep == 2):
        twin[tuple(int(v[i]) for v in data.keys()[:-1])] = data.time_s[i]
    ratios: dict[tuple, list[float]] = {}
    ep1 = np.flatnonzero(data.moe_ep == 1)
    for i in ep1:
        key = tuple(int(v[i]) for v in data.keys()[:-1])
        if key in twin:
            ratios.setdefault(key[1:], []).append(data.time_s[i] / twin[key])
    repeated = {cfg for cfg, r in ratios.items()
                if np.median(np.abs(np.array(r) - 1.0)) < REPEATED_EP_FRAC}
    out = np.zeros(len(data), bool)
    out[ep1] = [tuple(int(v[i]) for v in data.keys()[1:-1]) in repeated for i in ep1]
    return out


def cell_sample(data: MeasuredMoe, sample_points: int | None, seed: int = 0) -> MeasuredMoe:
    """`data` subsampled to about `sample_points` rows, the same number from each configuration
    (every row of one with fewer), so that each weighs the same in a fit; all rows without a
    sample size or when they are fewer."""
    if sample_points is None or len(data) <= sample_points:
        return data
    rng = np.random.default_rng(seed)
    cells = data.cells()
    quota = max(1, sample_points // (int(cells.max()) + 1))
    order = rng.permutation(len(data))
    ranked = order[np.argsort(cells[order], kind="stable")]  # rows by cell, shuffled within
    starts = np.searchsorted(cells[ranked], cells[ranked])
    return data.subset(np.sort(ranked[np.arange(len(ranked)) - starts < quota]))


# ---- the model ------------------------------------------------------------------------------

def _arch(data: MeasuredMoe) -> ArchArrays:
    zeros = np.zeros(len(data))
    return ArchArrays.from_columns(zeros, hidden=data.hidden, layers=zeros + 1.0,
                                   experts=data.experts, top_k=data.top_k,
                                   expert_ffn=data.inter, moe_layers=zeros + 1.0)


def _deploy(data: MeasuredMoe) -> DeployArrays:
    """EP × moe-TP GPUs, attention data-parallel over the EP ranks: moe_tp = TP·DP/EP; the
    tables' balanced routing (no busier GPU, no skew)."""
    ones = np.ones(len(data))
    return DeployArrays(tp=data.moe_tp, ep=data.moe_ep, pp=ones, dp=data.moe_ep,
                        imbalance=0.0 * ones, random_routing=0.0)


def moe_efficiency_of(coefficients: dict[str, float]) -> MoeEfficiency:
    """TOML-unit coefficients -> `MoeEfficiency` (SI)."""
    return MoeEfficiency(**{FIELDS[name]: value / COEFFICIENTS[name][0]
                            for name, value in coefficients.items()})


def coefficients_of(moe: MoeEfficiency) -> dict[str, float]:
    """`MoeEfficiency` -> TOML-unit coefficients (the inverse of `moe_efficiency_of`)."""
    return {name: getattr(moe, field) * COEFFICIENTS[name][0] for name, field in FIELDS.items()}


def with_moe(eff: Efficiency, fmt: str, moe: MoeEfficiency,
             ep1: MoeEfficiency | None = None) -> Efficiency:
    """`eff` with the `[moe.<fmt>]` entry replaced and its EP = 1 entry set to `ep1` (None: no
    EP = 1 entry, `moe` at every EP)."""
    ep1_entries = {k: v for k, v in eff.moe_ep1.items() if k != fmt}
    return eff.model_copy(update={"moe": {**eff.moe, fmt: moe},
                                  "moe_ep1": ep1_entries | ({} if ep1 is None else {fmt: ep1})})


def ep1_subset(data: MeasuredMoe) -> MeasuredMoe | None:
    """The EP = 1 rows, None when they hold fewer than MIN_EP1_CELLS configurations."""
    rows = data.subset(np.flatnonzero(data.moe_ep == 1))
    return rows if len(rows) and int(rows.cells().max()) + 1 >= MIN_EP1_CELLS else None


def predicted_s(data: MeasuredMoe, hw: HardwareSpec, eff: Efficiency) -> np.ndarray:
    """Predicted time of every row: the two grouped expert GEMMs plus the MoE overhead."""
    a, d = _arch(data), _deploy(data)
    env = Env(hw=hw, eff=eff, linear=get_precision(data.dtype), kv=get_precision("bf16"),
              high=get_precision("bf16"))
    gemms = GemmList(shape=(len(data),))
    ffn_gemms(gemms, a, d, StepLoad.single_group(data.tokens), 0.0, 1.0)
    times = gemms.times_s(env, np.float64)
    return times["moe/experts_up"] + times["moe/experts_down"] + moe_overhead_s(
        a, d, env, data.tokens)


# ---- fitting --------------------------------------------------------------------------------

def _spec(fmt: str, hw: HardwareSpec, eff: Efficiency) -> dict[str, tuple[float, float, float]]:
    """(low, high, start) per coefficient: starts at the format's dense kernel model."""
    dense = eff.for_precision(get_precision(fmt))
    fair = hw.hbm_bytes_per_s / hw.sm_count * GIGA ** -1
    starts = {"compute_ceiling_frac": dense.compute_ceiling_frac,
              "bandwidth_ceiling_frac": max(dense.bandwidth_ceiling_frac,
                                            eff.grouped_bandwidth_ceiling_frac),
              "sm_bandwidth_gb_per_s": dense.sm_bandwidth_bytes_per_s / GIGA,
              "fixed_overhead_us": START_FIXED_US, "per_local_copy_us": START_PER_LOCAL_US,
              "per_scanned_copy_us": START_PER_SCANNED_US}
    spec = {}
    for name, (_, low, high) in COEFFICIENTS.items():
        if name == "sm_bandwidth_gb_per_s":
            low, high = fair / SM_BANDWIDTH_FLOOR_SHARES, hw.hbm_bytes_per_s / GIGA
        spec[name] = (low, high, float(np.clip(starts[name], low, high)))
    return spec


def fit_moe_format(data: MeasuredMoe, hw: HardwareSpec, eff: Efficiency, hardware: str,
                   source: str, sample_points: int = FIT_SAMPLE_POINTS,
                   seed: int = 0) -> MoeFitResult:
    """Fit one format's `[moe.<format>]` entry on its rows (the GEMMs' dense model from `eff`)."""
    spec = _spec(data.dtype, hw, eff)
    check_fit_rows(f"{source}: {data.dtype} fused MoE", data.time_s, data.keys(), len(spec))
    coefficients = fit_log_time(
        {data.dtype: cell_sample(data, sample_points, seed)},
        lambda d, c: predicted_s(d, hw, with_moe(eff, data.dtype, moe_efficiency_of(c))),
        spec, None, seed)
    fitted = with_moe(eff, data.dtype, moe_efficiency_of(coefficients))
    gemms_only = with_moe(eff, data.dtype, moe_efficiency_of({
        **coefficients, "fixed_overhead_us": 0.0, "per_local_copy_us": 0.0,
        "per_scanned_copy_us": 0.0}))
    error = lambda e: abs_error_quantiles(predicted_s(data, hw, e), data.time_s)  # noqa: E731
    return MoeFitResult(hardware, data.dtype, coefficients, len(data), error(fitted),
                        error(gemms_only), source)


def fit_moe_entries(data: MeasuredMoe, hw: HardwareSpec, eff: Efficiency, hardware: str,
                    source: str, sample_points: int = FIT_SAMPLE_POINTS,
                    seed: int = 0) -> MoeFitResult:
    """The joint `[moe.<format>]` fit on every row, with the `[moe.<format>.ep1]` fit on the
    EP = 1 rows alone as its `ep1` (None without MIN_EP1_CELLS EP = 1 configurations)."""
    joint = fit_moe_format(data, hw, eff, hardware, source, sample_points, seed)
    ep1 = ep1_subset(data)
    if ep1 is None:
        return joint
    return replace(joint, ep1=fit_moe_format(ep1, hw, eff, hardware, source, sample_points, seed))


def fit_moe(tables: dict[str, MeasuredMoe], hw: HardwareSpec, eff: Efficiency, hardware: str,
            source: str, sample_points: int = FIT_SAMPLE_POINTS,
            seed: int = 0) -> list[MoeFitResult]:
    """Fit every format the GPU supports (mxfp4 needs FP4 tensor cores): both entries."""
    return [fit_moe_entries(data, hw, eff, hardware, source, sample_points, seed)
            for fmt, data in tables.items() if hw.supports(get_precision(fmt))]


def fitted_efficiency(eff: Efficiency, r: MoeFitResult) -> Efficiency:
    """`eff` with a fit's `[moe.<format>]` entry and its EP = 1 entry (or none)."""
    ep1 = None if r.ep1 is None else moe_efficiency_of(r.ep1.coefficients)
    return with_moe(eff, r.dtype, moe_efficiency_of(r.coefficients), ep1)


def fit_source(r: MoeFitResult) -> str:
    """The `source` of a fitted `[moe.<format>]` entry: table, points and error."""
    return fitted_source(r.source, {r.dtype: r.points}, {r.dtype: r.error})
