"""The efficiency layer: per GPU, serving engine and number format, the coefficients that turn a
roofline into a prediction. They are data (TOML package data under `data/efficiency/<kernels>/`),
not code, so that `archscout calibrate` can refit them; each carries its source (a measurement or
a stated prior).

Kernels differ by engine: `<kernels>` is `trtllm`, `vllm` or `sglang` (each fitted on that engine's
measured tables) or `generic`, what a step without a named engine runs: per GPU and part (each
format's GEMMs, each format's fused MoE, attention, communication) the engine whose measured op is
the fastest (`search.calibration.generic`; each entry names its engine in `kernels`). A GPU with no
file of its own takes the folder's `default.toml` (the medians of the calibrated GPUs).
`ARCHSCOUT_CALIBRATION_DIR` names a folder laid out the same way (what `archscout calibrate`
writes): its files are read first; the shipped package data is never rewritten.

GEMM coefficients, under `[gemm.<format>]` (bf16, fp8, fp8_block, nvfp4; a format without its
own entry uses its tensor-core rate's: fp4 → nvfp4, fp8 → fp8, else bf16), all interpretable:
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
- `quantize_fixed_us`, `quantize_bandwidth_frac` (quantized formats): what the measured op spends
  beside the GEMM kernel turning BF16 activations into the GEMM's format: fixed time and fraction
  of HBM bandwidth it sustains (reported as `quantize_us`; serving steps fuse it into the kernel
  that produces the activations and pay the GEMM kernel alone);
- `quantize_per_row_ns`, `quantize_large_m_us`, `quantize_unaligned_m_us`,
  `quantize_unaligned_m_frac`, `quantize_unaligned_nk_us` (quantized formats, default 0): what each
  activation row adds beside its bytes, and the op's shape-dispatch steps above 16 rows, at M not
  a multiple of 4 (fixed, and a share of the kernel's time), at N not a multiple of 64 or K of
  128 (`cost_model.gemm`'s module docstring cites the tables).
`[gemm.<format>.fit]` (optional) records how a calibration fitted them: source, points, errors.

Fused MoE, under `[moe.<format>]` (bf16, fp8, fp8_block, nvfp4, w4a16 = MXFP4 weights on BF16
math, mxfp4 = MXFP4 weights on Blackwell's block-scaled tensor cores): the grouped expert GEMMs run
the format's dense kernel model with the fused kernel's own `compute_ceiling_frac`,
`bandwidth_ceiling_frac` and `sm_bandwidth_gb_per_s` (`Efficiency.expert_gemm`), and the layer pays
beside them (`cost_model.layers.moe_overhead_s`) `fixed_overhead_us` (routing top-k, permute,
activation and unpermute kernels' floors), `per_local_copy_us` (per routed token copy of 4096
hidden elements this GPU's experts receive: permute, activation quantization where the format has
it, gated activation and weighted unpermute move each copy) and `per_scanned_copy_us` (per routed
copy of ALL the layer's tokens, C·k whatever the EP degree: the fused MoE sorts and scans every
expert index to pick its local ones). `[moe.<format>.fit]` records the fit.
`[moe.<format>.ep1]` (optional; the same six coefficients and its own `fit`) is the entry fitted
on the format's EP = 1 rows alone: a deployment whose experts all sit on each GPU (EP = 1) runs it,
one with EP > 1 the joint `[moe.<format>]` fit over every row (mostly EP > 1 ones); without it an
EP = 1 deployment runs the joint entry too (`Efficiency.moe_efficiency`).

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
FP8-KV streaming below its bandwidth bound; default: no cap), `prefill_quantized_kv_frac` (a
prefill call's time beside its floor with an FP8 KV cache over a BF16 one; default 1) and
communication
`all_reduce_latency_us` (α of an all-reduce inside the scale-up domain; default: the catalog's
`scale_up_latency_us`).
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cost_model.deployment import ENGINES
from cost_model.errors import ConfigError
from cost_model.precision import Precision
from cost_model.sourced import MISSING, is_number, sourced_value
from cost_model.units import GIGA, NS_PER_S, US_PER_S

_PACKAGE = "cost_model.data.efficiency"
GENERIC = "generic"  # the kernels of a step without a named engine (module docstring)
KERNELS = (*ENGINES, GENERIC)  # the folders of data/efficiency/
DEFAULT_FILE = "default"  # used for hardware without a file of its own (e.g. a user's TOML)
POINTS_FILE = "gemm_points"  # measured GEMM times shipped for lookups, not a GPU's coefficients
CALIBRATION_DIR_ENV = "ARCHSCOUT_CALIBRATION_DIR"  # a user's calibration, read before the package
RATE_FORMATS = {"fp8": "fp8", "fp4": "nvfp4", "bf16": "bf16"}  # entry a rate class falls back to
FALLBACK_FORMAT = "bf16"


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
    quantize_per_row_s: float = Field(default=0.0, ge=0)
    quantize_large_m_s: float = Field(default=0.0, ge=0)
    quantize_unaligned_m_s: float = Field(default=0.0, ge=0)
    quantize_unaligned_m_frac: float = Field(default=0.0, ge=0)
    quantize_unaligned_nk_s: float = Field(default=0.0, ge=0)


class MoeEfficiency(BaseModel):
    """One format's fused MoE: its grouped GEMMs' ceilings and the layer's non-GEMM terms."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    compute_ceiling_frac: float = Field(gt=0, le=1)
    bandwidth_ceiling_frac: float = Field(gt=0, le=1)
    sm_bandwidth_bytes_per_s: float = Field(gt=0)
    fixed_overhead_s: float = Field(ge=0)
    per_local_copy_s: float = Field(ge=0)  # per routed copy of 4096 elements on this GPU
    per_scanned_copy_s: float = Field(ge=0)  # per routed copy of every rank's tokens


class KernelFit(BaseModel):
    """How one `[gemm.<format>]` or `[moe.<format>]` entry was fitted: absolute relative errors of
    the predicted op over the measured rows, after and (GEMMs) before (the roofline)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    points: int = Field(ge=1)
    median_abs_error_frac: float = Field(ge=0)
    p90_abs_error_frac: float = Field(ge=0)
    roofline_median_abs_error_frac: float | None = Field(default=None, ge=0)
    roofline_p90_abs_error_frac: float | None = Field(default=None, ge=0)


GemmFit = KernelFit  # the name calibration code and tests know


class Efficiency(BaseModel):
    """All efficiency coefficients of one GPU's kernels under one engine (or the generic ones)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hardware: str
    version: str
    kernels: str = GENERIC  # the engine whose tables were fitted, or "generic"
    origin: str = "package"  # "package", or the user's calibration folder the file came from
    gemm: dict[str, GemmEfficiency]  # by number format: bf16, fp8, fp8_block, nvfp4, …
    gemm_fits: dict[str, KernelFit] = {}  # by format, for the entries a calibration fitted
    moe: dict[str, MoeEfficiency] = {}  # by experts' format
    moe_fits: dict[str, KernelFit] = {}
    moe_ep1: dict[str, MoeEfficiency] = {}  # by experts' format: fitted on EP = 1 rows alone
    moe_ep1_fits: dict[str, KernelFit] = {}
    part_kernels: dict[str, str] = {}  # "gemm.nvfp4", "moe.fp8", "attention" -> engine (generic)
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
    prefill_quantized_kv_frac: float = Field(default=1.0, gt=0)  # prefill time, FP8 KV / BF16
    all_reduce_latency_s: float | None = Field(default=None, ge=0)  # None: catalog scale-up α
    sources: dict[str, str]

    @property
    def grouped_bandwidth_ceiling_frac(self) -> float:
        """The HBM ceiling of grouped launches other than the fused MoE's (MLA's absorbed per-head
        GEMMs) at least: BF16's. Many groups keep every SM streaming weights, as the full-grid
        BF16 kernels of the dense tables do; a quantized format's own ceiling is fitted on dense
        kernels, where small-M grids stream far below it."""
        return self.gemm[FALLBACK_FORMAT].bandwidth_ceiling_frac

    def dense_format(self, precision: Precision) -> str:
        """The `[gemm.*]` entry whose kernels run this format: its own, else its rate class's,
        else BF16's (a weight-only format computes in BF16: its rate class)."""
        for name in (precision.name, RATE_FORMATS.get(precision.tensor_core_rate)):
            if name in self.gemm:
                return name
        return FALLBACK_FORMAT

    def for_rate(self, rate: str) -> GemmEfficiency:
        """The entry of a tensor-core rate class (bf16, fp8, fp4); bf16's when it has none."""
        return self.gemm.get(RATE_FORMATS.get(rate, rate), self.gemm[FALLBACK_FORMAT])

    def for_precision(self, precision: Precision) -> GemmEfficiency:
        """The format's own entry (fp8_block, nvfp4, …), else its rate class's."""
        return self.gemm[self.dense_format(precision)]

    def moe_format(self, precision: Precision) -> str | None:
        """The `[moe.*]` entry whose fused kernels run these experts: the format's own, else its
        rate class's, else BF16's; None when the file has no MoE entry at all."""
        for name in (precision.name, RATE_FORMATS.get(precision.tensor_core_rate),
                     FALLBACK_FORMAT):
            if name in self.moe:
                return name
        return None

    def moe_efficiency(self, precision: Precision, ep1: bool = False) -> MoeEfficiency | None:
        """The fused MoE of these experts (`moe_format`); with `ep1`, of an EP = 1 deployment:
        the entry's `[moe.<format>.ep1]` fit where it has one, else the joint entry."""
        name = self.moe_format(precision)
        if name is None:
            return None
        return self.moe_ep1.get(name, self.moe[name]) if ep1 else self.moe[name]

    def expert_gemm(self, precision: Precision, ep1: bool = False) -> GemmEfficiency:
        """The grouped expert GEMMs' coefficients: the format's dense kernel model with the fused
        MoE's ceilings and per-SM stream rate (the dense entry alone without a MoE entry); with
        `ep1`, the EP = 1 entry's (`moe_efficiency`)."""
        dense, moe = self.for_precision(precision), self.moe_efficiency(precision, ep1)
        if moe is None:
            return dense
        return dense.model_copy(update={
            "compute_ceiling_frac": moe.compute_ceiling_frac,
            "bandwidth_ceiling_frac": moe.bandwidth_ceiling_frac,
            "sm_bandwidth_bytes_per_s": moe.sm_bandwidth_bytes_per_s})

    def kernels_of(self, part: str) -> str:
        """The engine whose measured kernels a part ("gemm.nvfp4", "moe.fp8", "attention",
        "communication") was fitted on: its own under a generic file, else the file's."""
        return self.part_kernels.get(part, self.kernels)

    def substitutes(self, linear: Precision, experts: Precision | None = None,
                    ep1: bool = False) -> list[str]:
        """What these formats run on other kernels than their own (`uncalibrated: …` lines):
        a format without its own measured GEMM or fused-MoE table takes its rate class's (or
        BF16's); a GPU without calibrated files takes the medians of the calibrated GPUs; with
        `ep1` (an EP = 1 deployment), experts without an EP = 1 fit take the joint one."""
        out = []
        if self.hardware == DEFAULT_FILE:
            out.append(f"no measured {self.kernels} kernels for this GPU: the medians of the "
                       "calibrated GPUs")
        dense = self.dense_format(linear)
        if dense != linear.name and not (linear.weight_only and dense == FALLBACK_FORMAT):
            out.append(f"{linear.name} GEMMs: no {self.kernels} table, {dense}'s kernels")
        if experts is not None:
            moe = self.moe_format(experts)
            if moe != experts.name:
                out.append(f"{experts.name} fused MoE: no {self.kernels} table, "
                           f"{moe or 'the dense'}'s kernels")
            if moe is not None and ep1 and moe not in self.moe_ep1:
                out.append(f"{experts.name} fused MoE at EP = 1: no {self.kernels} EP = 1 "
                           f"rows, the joint {moe} fit over every EP")
        return out


# ---- reading a file ---------------------------------------------------------------------------

GEMM_KEYS = {  # TOML key -> (GemmEfficiency field, TOML units per SI unit, default)
    "compute_ceiling_frac": ("compute_ceiling_frac", 1.0, None),
    "bandwidth_ceiling_frac": ("bandwidth_ceiling_frac", 1.0, None),
    "fixed_overhead_us": ("fixed_overhead_s", US_PER_S, None),
    "n_half_dim": ("n_half_dim", 1.0, None),
    "k_half_dim": ("k_half_dim", 1.0, None),
    "overlap_frac": ("overlap_frac", 1.0, None),
    "split_k_overhead_us": ("split_k_overhead_s", US_PER_S, None),
    "sm_bandwidth_gb_per_s": ("sm_bandwidth_bytes_per_s", 1.0 / GIGA, None),
    "quantize_fixed_us": ("quantize_fixed_s", US_PER_S, 0.0),
    "quantize_bandwidth_frac": ("quantize_bandwidth_frac", 1.0, 1.0),
    "quantize_per_row_ns": ("quantize_per_row_s", NS_PER_S, 0.0),
    "quantize_large_m_us": ("quantize_large_m_s", US_PER_S, 0.0),
    "quantize_unaligned_m_us": ("quantize_unaligned_m_s", US_PER_S, 0.0),
    "quantize_unaligned_m_frac": ("quantize_unaligned_m_frac", 1.0, 0.0),
    "quantize_unaligned_nk_us": ("quantize_unaligned_nk_s", US_PER_S, 0.0),
}
MOE_KEYS = {  # TOML key -> (MoeEfficiency field, TOML units per SI unit, default)
    "compute_ceiling_frac": ("compute_ceiling_frac", 1.0, None),
    "bandwidth_ceiling_frac": ("bandwidth_ceiling_frac", 1.0, None),
    "sm_bandwidth_gb_per_s": ("sm_bandwidth_bytes_per_s", 1.0 / GIGA, None),
    "fixed_overhead_us": ("fixed_overhead_s", US_PER_S, None),
    "per_local_copy_us": ("per_local_copy_s", US_PER_S, None),
    "per_scanned_copy_us": ("per_scanned_copy_s", US_PER_S, None),
}
MOE_EP1_KEY = "ep1"  # `[moe.<format>.ep1]`: the entry fitted on EP = 1 rows (module docstring)
PART_KERNELS_KEY = "kernels"  # in a generic file: the engine an entry was taken from


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


def _table(doc: dict, prefix: str):
    """The value at dotted `prefix` (the caller checked every part but the last exists)."""
    for part in prefix.split("."):
        doc = doc[part]
    return doc


def _entry(doc: dict, prefix: str, keys: dict, model: type[BaseModel], sources: dict[str, str]):
    """One `[gemm.<format>]`, `[moe.<format>]` or `[moe.<format>.ep1]` table as its model, in SI
    units."""
    table = _table(doc, prefix)
    if not isinstance(table, dict) or "value" in table:
        raise ConfigError(f"`{prefix}` must be a table of coefficients, one per format")
    values = {field: _value(doc, f"{prefix}.{key}", sources, default) / scale
              for key, (field, scale, default) in keys.items()}
    try:
        return model(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = next(k for k, (field, _, _) in keys.items() if field == err["loc"][0])
        raise ConfigError(f"`{prefix}.{key}`: {err['msg']}; got "
                          f"{values[err['loc'][0]] * keys[key][1]!r}") from None


def _fit(doc: dict, prefix: str) -> KernelFit | None:
    table = _table(doc, prefix).get("fit")
    if table is None:
        return None
    try:
        return KernelFit(**table)
    except (TypeError, ValidationError) as exc:
        raise ConfigError(f"`{prefix}.fit` is malformed: {exc}") from None


def _moe_ep1(doc: dict, moe: dict, sources: dict[str, str]) -> dict[str, MoeEfficiency]:
    """The `[moe.<format>.ep1]` entries of the formats that have one."""
    return {fmt: _entry(doc, f"moe.{fmt}.{MOE_EP1_KEY}", MOE_KEYS, MoeEfficiency, sources)
            for fmt in moe if MOE_EP1_KEY in doc["moe"][fmt]}


def _part_kernels(doc: dict) -> dict[str, str]:
    """`kernels = "<engine>"` of each entry of a generic file."""
    found = {}
    for section in ("gemm", "moe"):
        for fmt, table in doc.get(section, {}).items():
            if isinstance(table, dict) and PART_KERNELS_KEY in table:
                found[f"{section}.{fmt}"] = table[PART_KERNELS_KEY]
    for section in ("attention", "communication"):
        if PART_KERNELS_KEY in doc.get(section, {}):
            found[section] = doc[section][PART_KERNELS_KEY]
    for part, engine in found.items():
        if engine not in ENGINES:
            raise ConfigError(f"`{part}.kernels` must be one of {', '.join(ENGINES)}; got "
                              f"{engine!r}")
    return found


def _file_kernels(doc: dict, kernels: str) -> str:
    value = doc.get(PART_KERNELS_KEY, kernels)
    if value not in KERNELS:
        raise ConfigError(f"`kernels` must be one of {', '.join(KERNELS)}; got {value!r}")
    return value


def _attention_and_communication(doc: dict, sources: dict[str, str]) -> dict:
    us = lambda path: _optional_us(doc, path, sources)  # noqa: E731
    return dict(
        decode_attention_bandwidth_frac=_value(doc, "attention.decode_bandwidth_frac", sources),
        prefill_attention_compute_frac=_value(doc, "attention.prefill_compute_frac", sources),
        scale_up_bandwidth_frac=_value(doc, "communication.scale_up_bandwidth_frac", sources),
        scale_out_bandwidth_frac=_value(doc, "communication.scale_out_bandwidth_frac", sources),
        attention_fixed_overhead_s=us("attention.fixed_overhead_us"),
        prefill_attention_fixed_overhead_s=us("attention.prefill_fixed_overhead_us"),
        decode_attention_per_sequence_s=us("attention.decode_per_sequence_us") or 0.0,
        prefill_attention_per_tile_s=us("attention.prefill_per_tile_us") or 0.0,
        prefill_attention_per_token_s=us("attention.prefill_per_token_us") or 0.0,
        decode_kv_dequant_elements_per_s=_non_negative(
            doc, "attention.kv_dequant_g_per_s", sources, float("inf")) * GIGA or float("inf"),
        prefill_quantized_kv_frac=_non_negative(
            doc, "attention.prefill_quantized_kv_frac", sources, 1.0) or 1.0,
        all_reduce_latency_s=us("communication.all_reduce_latency_us"),
    )


def efficiency_from_toml(doc: dict, kernels: str = GENERIC) -> Efficiency:
    """An efficiency file's coefficients (`kernels`: its folder, unless the file names it)."""
    for section in ("gemm", "moe"):
        if not isinstance(doc.get(section, {}), dict):
            raise ConfigError(f"`{section}` must be a table of formats; got {doc[section]!r}")
    sources: dict[str, str] = {}
    gemm = {fmt: _entry(doc, f"gemm.{fmt}", GEMM_KEYS, GemmEfficiency, sources)
            for fmt in doc.get("gemm", {})}
    if FALLBACK_FORMAT not in gemm:
        raise ConfigError("`gemm.bf16` efficiency is required (the fallback for other formats)")
    moe = {fmt: _entry(doc, f"moe.{fmt}", MOE_KEYS, MoeEfficiency, sources)
           for fmt in doc.get("moe", {})}
    moe_ep1 = _moe_ep1(doc, moe, sources)
    return Efficiency(
        hardware=str(doc.get("hardware", "")), version=str(doc.get("version", "")),
        kernels=_file_kernels(doc, kernels), gemm=gemm, moe=moe, moe_ep1=moe_ep1,
        gemm_fits={f: fit for f in gemm if (fit := _fit(doc, f"gemm.{f}")) is not None},
        moe_fits={f: fit for f in moe if (fit := _fit(doc, f"moe.{f}")) is not None},
        moe_ep1_fits={f: fit for f in moe_ep1
                      if (fit := _fit(doc, f"moe.{f}.{MOE_EP1_KEY}")) is not None},
        part_kernels=_part_kernels(doc), **_attention_and_communication(doc, sources),
        sources=sources,
    )


# ---- finding a file ---------------------------------------------------------------------------

def _folder(kernels: str):
    return resources.files(_PACKAGE).joinpath(kernels)


def efficiency_names(kernels: str = GENERIC) -> list[str]:
    """GPUs with shipped coefficients of their own under `kernels`, plus `default`."""
    names = (f.name[: -len(".toml")] for f in _folder(kernels).iterdir()
             if f.name.endswith(".toml"))
    return sorted(name for name in names if name != POINTS_FILE)


def calibration_dir() -> Path | None:
    """The user's calibration folder (`ARCHSCOUT_CALIBRATION_DIR`), None when unset."""
    value = os.environ.get(CALIBRATION_DIR_ENV, "").strip()
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"`{CALIBRATION_DIR_ENV}` must name a folder of calibration files "
                          f"(archscout calibrate --output); got {value!r}")
    return folder.resolve()


def kernels_name(engine: str | None) -> str:
    """The `data/efficiency/` folder of an engine's kernels (None: the generic ones)."""
    if engine is None:
        return GENERIC
    if engine not in ENGINES:
        raise ConfigError(f"`engine` must be one of {', '.join(ENGINES)} (or unset); got "
                          f"{engine!r}")
    return engine


def get_efficiency(hardware_name: str, engine: str | None = None) -> Efficiency:
    """The coefficients of a GPU's kernels under `engine` (None: the generic kernels): the
    user's calibration folder's file when it has one, else the shipped one, else the priors."""
    return _load(hardware_name, kernels_name(engine), calibration_dir())


@cache
def _load(hardware_name: str, kernels: str, user_dir: Path | None) -> Efficiency:
    if user_dir is not None:
        path = user_dir / kernels / f"{hardware_name}.toml"
        if path.is_file():
            return _parse(path.read_text(), kernels, str(user_dir), str(path))
    name = hardware_name if hardware_name in efficiency_names(kernels) else DEFAULT_FILE
    text = _folder(kernels).joinpath(f"{name}.toml").read_text()
    return _parse(text, kernels, "package", f"{kernels}/{name}.toml")


def _parse(text: str, kernels: str, origin: str, where: str) -> Efficiency:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"efficiency file {where} is not valid TOML: {exc}") from None
    eff = efficiency_from_toml(doc, kernels)
    return eff.model_copy(update={"origin": origin})
