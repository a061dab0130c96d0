"""The efficiency layer: per GPU and number format, the coefficients that turn a roofline into a
prediction. They are data (TOML package data under `data/efficiency/`), not code, so that
`archscout calibrate` can refit them; each carries its source (a measurement or a stated prior).

GEMM coefficients, under `[gemm.<format>]` (bf16, fp8, fp8_block, nvfp4, …; a format without its
own entry uses its tensor-core rate's: fp4 → nvfp4, else bf16), all interpretable:
- `compute_ceiling_frac`: best sustained fraction of dense peak FLOP/s for large aligned GEMMs;
- `bandwidth_ceiling_frac`: best sustained fraction of HBM bandwidth for streaming kernels;
- `fixed_overhead_us`: time every GEMM pays regardless of size (launch, pipeline fill and drain);
- `n_half_dim`, `k_half_dim`: small-dimension saturation of a kernel tile: its math rate is
  scaled by B_N/(B_N + n_half) (a thin tile feeds its tensor cores less well) and its K loop runs
  as if k_half longer (pipeline fill and drain: K_s/(K_s + k_half) of the rate on a split of K_s);
- `overlap_frac`: share of the shorter of math and memory time hidden under the longer
  (1: the roofline max; 0: their sum);
- `split_k_overhead_us`: extra time of a split-K launch (partial-sum reduction, serialization);
  large where the library does not split K;
- `sm_bandwidth_gb_per_s`: what one SM of this format's kernels streams (its loads in flight over
  memory latency): a tile's K loop takes at least K_s·max(m_t·b_A, n_t·b_B) / (its SMs · this), so
  it caps grids too small to busy every SM (whatever the number of tiles: each streams its own);
- `quantize_fixed_us`, `quantize_bandwidth_frac` (quantized formats): the kernel that turns BF16
  activations into the GEMM's format: fixed time and fraction of HBM bandwidth it sustains.
`[gemm.<format>.fit]` (optional) records how a calibration fitted them: source, points, errors.
Other coefficients: attention `decode_bandwidth_frac` (KV streaming), `prefill_compute_frac`
(flash attention); communication `scale_up_bandwidth_frac`, `scale_out_bandwidth_frac`.
Optional, set by a calibration on measured kernels: attention `fixed_overhead_us` (time every
decode attention call pays: launch, scheduling, the softmax/reduction epilogue; default: the
catalog's `kernel_launch_us`), `prefill_fixed_overhead_us` (the same for a prefill call, which
also runs the QKV preprocessing kernel (RoPE, KV-cache append); default: `fixed_overhead_us`),
`decode_per_sequence_us` (SM time per decoding sequence and KV head: Q load, block scheduling,
page-table walk, split-KV reduction, output write; the call takes items × it / SMs; default 0),
`prefill_per_tile_us` (SM time per sequence, query head and 128-query tile beyond its math: pipeline
fill, the causal diagonal block, softmax epilogue; default 0), `prefill_per_token_us` (SM time per
query token and head: the QKV preprocessing and per-row softmax/output work; default 0),
`kv_dequant_g_per_s` (G KV elements/s a decode kernel converts from a quantized KV cache: caps
FP8-KV streaming below its bandwidth bound; default: no cap) and communication
`all_reduce_latency_us` (α of an all-reduce inside the scale-up domain; default: the catalog's
`scale_up_latency_us`). `[moe]` (optional, default 0; `cost_model.layers.moe_overhead_s`): the
non-GEMM time of a fused MoE layer: `fixed_overhead_us` (routing top-k, permute, activation and
unpermute kernels' floors), `per_token_us` (per routed token copy of 4096 hidden elements on one
GPU) and `per_routed_copy_us` (per routed copy of all the layer's tokens, C·k whatever the EP
degree: the fused MoE sorts and scans every expert index to pick its local ones), with `engine`
(a plain string, default "trtllm"), the serving engine whose fused-MoE kernels the tables timed:
its steps pay all three terms, any other engine's only the floor (`Efficiency.for_engine`).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cost_model.deployment import ENGINES
from cost_model.errors import ConfigError
from cost_model.precision import Precision
from cost_model.sourced import MISSING, is_number, sourced_value
from cost_model.units import GIGA, US_PER_S

_PACKAGE = "cost_model.data.efficiency"
DEFAULT_FILE = "default"  # used for hardware without a file of its own (e.g. a user's TOML)
POINTS_FILE = "gemm_points"  # measured GEMM times shipped for lookups, not a GPU's coefficients
# `[moe] engine`: the serving engine whose fused-MoE kernels the terms were fitted on
# (aiconfigurator-core's tables of that framework, `archscout calibrate --framework`)
MOE_ENGINES = ENGINES
DEFAULT_MOE_ENGINE = "trtllm"
RATE_FORMATS = {"fp8": "fp8", "fp4": "nvfp4", "bf16": "bf16"}  # entry a rate class falls back to


class GemmEfficiency(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    compute_ceiling_frac: float = Field(gt=0, le=1)
    bandwidth_ceiling_frac: float = Field(gt=0, le=1)
    fixed_overhead_s: float = Field(ge=0)
    n_half_dim: float = Field(ge=0)
    k_half_dim: float = Field(ge=0)
    overlap_frac: float = Field(ge=0, le=1)
    split_k_overhead_s: float = Field(ge=0)
    sm_bandwidth_bytes_per_s: float = Field(gt=0)
    quantize_fixed_s: float = Field(default=0.0, ge=0)
    quantize_bandwidth_frac: float = Field(default=1.0, gt=0, le=1)


class GemmFit(BaseModel):
    """How one `[gemm.<format>]` entry was fitted: absolute relative errors of predicted time
    (kernel + activation quantization) over the measured shapes, after and before (roofline)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    points: int = Field(ge=1)
    median_abs_error_frac: float = Field(ge=0)
    p90_abs_error_frac: float = Field(ge=0)
    roofline_median_abs_error_frac: float = Field(ge=0)
    roofline_p90_abs_error_frac: float = Field(ge=0)


class Efficiency(BaseModel):
    """All efficiency coefficients of one GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hardware: str
    version: str
    gemm: dict[str, GemmEfficiency]  # by number format: bf16, fp8, fp8_block, nvfp4, …
    gemm_fits: dict[str, GemmFit] = {}  # by format, for the entries a calibration fitted
    decode_attention_bandwidth_frac: float = Field(gt=0, le=1)
    prefill_attention_compute_frac: float = Field(gt=0, le=1)
    scale_up_bandwidth_frac: float = Field(gt=0, le=1)
    scale_out_bandwidth_frac: float = Field(gt=0, le=1)
    attention_fixed_overhead_s: float | None = Field(default=None, ge=0)  # None: kernel launch
    prefill_attention_fixed_overhead_s: float | None = Field(default=None, ge=0)  # None: decode's
    decode_attention_per_sequence_s: float = Field(default=0.0, ge=0)  # SM time per (seq, KV head)
    prefill_attention_per_tile_s: float = Field(default=0.0, ge=0)  # SM time per query tile·head
    prefill_attention_per_token_s: float = Field(default=0.0, ge=0)  # SM time per query token·head
    decode_kv_dequant_elements_per_s: float = Field(default=float("inf"), gt=0)  # quantized KV
    moe_fixed_overhead_s: float = Field(default=0.0, ge=0)  # per fused MoE layer call
    moe_per_token_s: float = Field(default=0.0, ge=0)  # per routed token copy of 4096 elements
    moe_per_routed_copy_s: float = Field(default=0.0, ge=0)  # per copy of every rank's tokens
    moe_engine: str = DEFAULT_MOE_ENGINE  # the engine whose fused-MoE kernels the terms describe
    all_reduce_latency_s: float | None = Field(default=None, ge=0)  # None: catalog scale-up α
    sources: dict[str, str]

    def for_engine(self, engine: str | None) -> Efficiency:
        """The coefficients a step of `engine` pays: all of them for the engine whose fused-MoE
        kernels `[moe]` was fitted on (`moe_engine`), else the MoE floor alone. Other engines
        run other fused-MoE kernels: SGLang's Triton kernel on Hopper streams DeepSeek-V3's
        TP-8-sliced experts at HBM speed (249 µs at 64 tokens on H200, aiconfigurator-core 0.12.0
        sglang 0.5.14 moe_perf) where TensorRT-LLM's CUTLASS kernel takes 721 µs (trtllm
        1.3.0rc20), so the size terms of one would misprice the other; without an engine
        (a generic one) the floor alone, the fastest fused MoE's."""
        if engine == self.moe_engine:
            return self
        return self.model_copy(update={"moe_per_token_s": 0.0, "moe_per_routed_copy_s": 0.0})

    @property
    def grouped_bandwidth_ceiling_frac(self) -> float:
        """The HBM ceiling of grouped (MoE expert) GEMMs at least: BF16's. A grouped launch of
        many experts keeps every SM streaming weights, as the full-grid BF16 kernels of the
        dense tables do; a quantized format's own ceiling is fitted on its dense tables, where
        small-M NVFP4 kernels stream far below it (aiconfigurator-core 0.12.0: TensorRT-LLM's
        NVFP4 fused MoE on DeepSeek-V3 shapes with every expert active streams ~5.9 TB/s of
        weights on B300, above its dense NVFP4 ceiling of 0.52 × 7.7 TB/s = 4.0 TB/s and at its
        BF16 ceiling, 0.75 × 7.7 = 5.8 TB/s; tests/benchmarks/bench_moe_fit.py)."""
        return self.gemm["bf16"].bandwidth_ceiling_frac

    def for_rate(self, rate: str) -> GemmEfficiency:
        """The entry of a tensor-core rate class (bf16, fp8, fp4); bf16's when it has none."""
        return self.gemm.get(RATE_FORMATS.get(rate, rate), self.gemm["bf16"])

    def for_precision(self, precision: Precision) -> GemmEfficiency:
        """The format's own entry (fp8_block, nvfp4, …), else its rate class's."""
        if precision.name in self.gemm:
            return self.gemm[precision.name]
        return self.for_rate(precision.tensor_core_rate)


def _value(table: dict, path: str, sources: dict[str, str], default: float | None = None) -> float:
    value = sourced_value(table, path, sources, "efficiency",
                          MISSING if default is None else default)
    if not is_number(value):
        raise ConfigError(f"`{path}` must be a number; got {value!r}")
    return float(value)


def _optional_us(doc: dict, path: str, sources: dict[str, str]) -> float | None:
    """An optional `{ value, source }` entry in µs, in seconds; None when absent."""
    section, _, key = path.partition(".")
    if key not in doc.get(section, {}):
        return None
    return _non_negative(doc, path, sources) / US_PER_S


def _non_negative(doc: dict, path: str, sources: dict[str, str], default=None) -> float:
    value = _value(doc, path, sources, default)
    if value < 0:
        raise ConfigError(f"`{path}` must be >= 0; got {value!r}")
    return value


def _gemm(doc: dict, fmt: str, sources: dict[str, str]) -> GemmEfficiency:
    prefix = f"gemm.{fmt}"
    value = lambda key, default=None: _value(doc, f"{prefix}.{key}", sources, default)  # noqa: E731
    try:
        return GemmEfficiency(
            compute_ceiling_frac=value("compute_ceiling_frac"),
            bandwidth_ceiling_frac=value("bandwidth_ceiling_frac"),
            fixed_overhead_s=value("fixed_overhead_us") / US_PER_S,
            n_half_dim=value("n_half_dim"), k_half_dim=value("k_half_dim"),
            overlap_frac=value("overlap_frac"),
            split_k_overhead_s=value("split_k_overhead_us") / US_PER_S,
            sm_bandwidth_bytes_per_s=value("sm_bandwidth_gb_per_s") * GIGA,
            quantize_fixed_s=value("quantize_fixed_us", 0.0) / US_PER_S,
            quantize_bandwidth_frac=value("quantize_bandwidth_frac", 1.0),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"`{prefix}.{err['loc'][0]}`: {err['msg']}; got {err.get('input')!r}") \
            from None


def _fit(doc: dict, fmt: str) -> GemmFit | None:
    table = doc["gemm"][fmt].get("fit")
    if table is None:
        return None
    try:
        return GemmFit(**table)
    except (TypeError, ValidationError) as exc:
        raise ConfigError(f"`gemm.{fmt}.fit` is malformed: {exc}") from None


def _moe_engine(doc: dict) -> str:
    engine = doc.get("moe", {}).get("engine", DEFAULT_MOE_ENGINE)
    if engine not in MOE_ENGINES:
        raise ConfigError(f"`moe.engine` must be one of {', '.join(MOE_ENGINES)}; got {engine!r}")
    return engine


def efficiency_from_toml(doc: dict) -> Efficiency:
    sources: dict[str, str] = {}
    gemm = {fmt: _gemm(doc, fmt, sources) for fmt in doc.get("gemm", {})}
    if "bf16" not in gemm:
        raise ConfigError("`gemm.bf16` efficiency is required (the fallback for other formats)")
    fits = {fmt: fit for fmt in gemm if (fit := _fit(doc, fmt)) is not None}
    return Efficiency(
        hardware=str(doc.get("hardware", "")), version=str(doc.get("version", "")), gemm=gemm,
        gemm_fits=fits,
        decode_attention_bandwidth_frac=_value(doc, "attention.decode_bandwidth_frac", sources),
        prefill_attention_compute_frac=_value(doc, "attention.prefill_compute_frac", sources),
        scale_up_bandwidth_frac=_value(doc, "communication.scale_up_bandwidth_frac", sources),
        scale_out_bandwidth_frac=_value(doc, "communication.scale_out_bandwidth_frac", sources),
        attention_fixed_overhead_s=_optional_us(doc, "attention.fixed_overhead_us", sources),
        prefill_attention_fixed_overhead_s=_optional_us(
            doc, "attention.prefill_fixed_overhead_us", sources),
        decode_attention_per_sequence_s=_optional_us(
            doc, "attention.decode_per_sequence_us", sources) or 0.0,
        prefill_attention_per_tile_s=_optional_us(
            doc, "attention.prefill_per_tile_us", sources) or 0.0,
        prefill_attention_per_token_s=_optional_us(
            doc, "attention.prefill_per_token_us", sources) or 0.0,
        decode_kv_dequant_elements_per_s=_non_negative(
            doc, "attention.kv_dequant_g_per_s", sources, float("inf")) * GIGA or float("inf"),
        all_reduce_latency_s=_optional_us(doc, "communication.all_reduce_latency_us", sources),
        moe_fixed_overhead_s=_optional_us(doc, "moe.fixed_overhead_us", sources) or 0.0,
        moe_per_token_s=_optional_us(doc, "moe.per_token_us", sources) or 0.0,
        moe_per_routed_copy_s=_optional_us(doc, "moe.per_routed_copy_us", sources) or 0.0,
        moe_engine=_moe_engine(doc),
        sources=sources,
    )


def efficiency_names() -> list[str]:
    """GPUs with coefficients of their own, plus `default`."""
    files = resources.files(_PACKAGE).iterdir()
    names = (f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))
    return sorted(name for name in names if name != POINTS_FILE)


@cache
def get_efficiency(hardware_name: str) -> Efficiency:
    """The shipped coefficients of a GPU, or the generic priors when it has none."""
    name = hardware_name if hardware_name in efficiency_names() else DEFAULT_FILE
    text = resources.files(_PACKAGE).joinpath(f"{name}.toml").read_text()
    return efficiency_from_toml(tomllib.loads(text))
