"""What the rules of `archscout lint` share (`search/lint/guidelines.py`, `parallel.py`): the
context of one run, the GEMMs one GPU runs, modified copies of an architecture or deployment, the
nearest value of a field that satisfies a rule, and the cost model's verdict on a change (TPOT at
concurrency 1, tokens/s/GPU at the throughput end, frontier area) from `evaluate_points`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Literal, Sequence

import numpy as np
from pydantic import ValidationError

from constraints import GemmDim, gemm_dims
from cost_model import (
    ArchArrays, Architecture, ConfigError, DeployArrays, Deployment, Env, GemmList, HardwareSpec,
    Precision, StepLoad, Workload, count_params, deployment_violations, gemm_cost, get_precision,
    field_value, layer_gemms, make_deployment, rows_of,
)
from search.lint.verdict import Measured, measure
from search.records.documents import DEFAULT_WINDOW

Severity = Literal["error", "warning", "info"]
NVFP4, FP8 = "nvfp4", "fp8"
# GEMM-M of NVIDIA, AI Model Co-Design (2026), Figure 4 (throughput sweeps on GB300)
GEMM_PROBE_TOKENS = 8192
PARAMS_PER_BILLION = 1e9
# fields a fix may change, most preferred first (widths before head counts)
FIX_FIELDS = (
    "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
    "kv_lora_rank", "q_lora_rank", "hidden_size", "head_dim", "v_head_dim", "qk_nope_head_dim",
)  # fmt: skip
HEAD_DIM_GRANULE = 8  # head widths move in steps of 8 (every real head_dim is a multiple of 8)
WIDTH_GRANULE = 16  # widths move in steps of 16 (the NVFP4 block, a divisor of every tile)
COUNT_FIELDS = ("num_layers", "num_attention_heads", "num_kv_heads", "num_experts")
SEARCH_STEPS = 256  # candidate values tried on each side of the current one
# policy: the parameter cost a fix may have, the larger of its total and active parameter
# change as a share of the model's (`archscout lint --max-param-change`); a model's parameter
# count is a quality choice lint does not remake
MAX_PARAM_CHANGE_FRAC = 0.05
REPORT_REACH = 4  # a fix up to this many budgets away is still measured, to say what it costs


@dataclass(frozen=True)
class Fix:
    """A compliant (architecture, deployment) the cost model evaluates next to the model."""

    arch: Architecture
    dep: Deployment
    # throughput the cost model does not see, the fix's over the model's (guideline 6: the
    # stage balance of a layer pattern; the cost model runs ceil(L/PP) average layers a stage)
    frontier_factor: float = 1.0


@dataclass(frozen=True)
class Draft:
    """A finding before its fixes are measured."""

    guideline: int
    code: str
    severity: Severity
    message: str
    cost: dict = field(default_factory=dict)
    fixes: tuple[Fix, ...] = ()  # primary first
    note: dict | None = None  # an alternative the cost model does not evaluate
    why_none: str = ""  # what the search for a fix within the parameter budget found instead


def default_precision(hw: HardwareSpec) -> str:
    """NVFP4 where the GPU has FP4 tensor cores (Blackwell), else FP8 (Hopper)."""
    return NVFP4 if hw.supports(get_precision(NVFP4)) else FP8


@dataclass(frozen=True)
class LintContext:
    """One lint run: the model, its deployment, the GPU and the workload."""

    arch: Architecture
    dep: Deployment
    hw: HardwareSpec
    workload: Workload
    window: tuple[float, float] = DEFAULT_WINDOW
    max_param_change_frac: float = MAX_PARAM_CHANGE_FRAC

    @cached_property
    def precision(self) -> Precision:
        return get_precision(self.dep.precision)

    @cached_property
    def bytes_per_value(self) -> float:
        return self.precision.weight_bytes_per_value

    @cached_property
    def ridge(self) -> float:
        return self.hw.ridge_flop_per_byte(self.precision)

    @cached_property
    def widest_tile(self) -> int:
        """N multiple of the widest kernel tile (cluster included): 256 Hopper, 512 Blackwell."""
        return max(k.tile_n * k.cluster_tiles_n for k in self.hw.gemm_kernels)

    @cached_property
    def env(self) -> Env:
        return Env.create(self.hw, self.dep.precision, self.dep.kv_cache_precision,
                          engine=self.workload.engine)

    @cached_property
    def baseline(self) -> Measured:
        return self.measure([(self.arch, self.dep)])[0]

    def measure(self, pairs: Sequence[tuple[Architecture, Deployment]]) -> list[Measured]:
        return measure(pairs, self.hw, self.workload, self.window)

    def where(self) -> str:
        return f"{self.precision.name} on {self.hw.name}"

    def within_budget(self, arch: Architecture) -> bool:
        """`arch`'s parameters within the budget of the model's (`param_change_frac`)."""
        return param_change_frac(self.arch, arch) <= self.max_param_change_frac

    def budget_text(self, reach: float = 1.0) -> str:
        """"±5%": the budget (× `reach`: how far a search for a fix goes, `REPORT_REACH`)."""
        return f"±{self.max_param_change_frac * reach:.0%}"

    def any_within_budget(self, fixes) -> bool:
        return any(self.within_budget(f.arch) for f in fixes)


# ---- shapes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gemm:
    """One weight GEMM of a layer on one GPU (dims after sharding), with the `Architecture`
    fields that set its N and K (empty for GEMMs not in the table: MLA's absorbed decode
    GEMMs)."""

    name: str
    n: float
    k: float
    high: bool  # runs in BF16 whatever the deployment's format
    n_fields: tuple[str, ...] = ()
    k_fields: tuple[str, ...] = ()


def model_gemms(arch: Architecture, dep: Deployment) -> list[Gemm]:
    """The GEMMs `cost_model.layers.layer_gemms` runs for `arch` deployed as `dep` (every
    kernel of the table on the layers that have it, the BF16 LM head too), in a step of one
    decode and one prompt token (so MLA's kv_b appears both absorbed and not)."""
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    g = GemmList((1, 1))
    layer_gemms(g, a, d, StepLoad.single_group(2.0, decode_seqs=1.0), a.attention_layers,
                a.mixer.linear_layers, a.ffn.dense_layers, a.ffn.moe_layers)
    scalar = lambda x: float(np.asarray(x).reshape(-1)[0])  # noqa: E731
    return [Gemm(name, scalar(n), scalar(k), high, *gemm_fields(arch, name))
            for name, (_, n, k, _, count), high in zip(g.names, g.dims, g.high)
            if min(scalar(n), scalar(k), scalar(count)) > 0]


def gemm_fields(arch: Architecture, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fields that set N, fields that set K) of the step GEMM `name`: those of its rows in the
    table of sharded weight GEMMs that `arch` has (MLA's q_b reads H without a query LoRA)."""
    rows = [row for row in rows_of(arch) if row.kernel == name]
    unique = lambda dims: tuple(dict.fromkeys(f for d in dims for f in d.fields))  # noqa: E731
    return (unique(row.n.chosen(arch) for row in rows),
            unique(row.k.chosen(arch) for row in rows))


def weight_gemms(arch: Architecture, dep: Deployment, *fields: str) -> list[Gemm]:
    """The quantized weight GEMMs of the table, those naming any of `fields` if given."""
    gemms = [g for g in model_gemms(arch, dep) if g.n_fields and not g.high]
    return [g for g in gemms if not fields or set(fields) & {*g.n_fields, *g.k_fields}]


def small_dim_field(arch: Architecture, gemm: Gemm) -> str:
    """The field a fix of the smaller of N and K changes."""
    names = gemm.n_fields if gemm.n <= gemm.k else gemm.k_fields
    return next((f for f in FIX_FIELDS if f in names), names[0])


def gemm_rate_flop_per_s(gemms: list[Gemm], ctx: LintContext) -> float:
    """Achieved FLOP/s of `gemms` together at M = 8192 tokens (a compute-bound batch)."""
    if not gemms:
        return math.nan
    cost = gemm_cost(GEMM_PROBE_TOKENS, np.array([g.n for g in gemms]),
                     np.array([g.k for g in gemms]), ctx.hw, ctx.precision,
                     engine=ctx.workload.engine)
    return float(np.sum(cost.flop) / np.sum(cost.time_s))


def label_fields(dim: GemmDim) -> list[str]:
    """The fields a `gemm_dims` dim comes from, e.g. ["num_attention_heads", "head_dim"]."""
    return list(dim.fields)


def fix_field(dim: GemmDim) -> str | None:
    """The field a fix of `dim` changes: its most preferred width field."""
    names = label_fields(dim)
    return next((f for f in FIX_FIELDS if f in names), None)


def dims_of(arch: Architecture, dep: Deployment, *fields: str) -> list[GemmDim]:
    """The GEMM dims whose label names any of `fields`."""
    return [dim for dim in gemm_dims(arch, dep) if set(fields) & set(label_fields(dim))]


def is_multiple(size: float, multiple: int) -> bool:
    return float(size).is_integer() and int(size) % multiple == 0


def misaligned_fields(arch: Architecture, dep: Deployment, multiple: int = 128) -> set:
    """The field tuples of the dims after sharding that are not multiples of `multiple` (the
    alignment floor of guideline 2)."""
    return {d.fields for d in gemm_dims(arch, dep) if not is_multiple(d.size, multiple)}


# ---- modified copies and the nearest compliant one ---------------------------------------------


def _repeat_pattern(types: tuple, length: int) -> tuple:
    period = next(p for p in range(1, len(types) + 1)
                  if all(t == types[i % p] for i, t in enumerate(types)))
    return tuple(types[i % period] for i in range(length))


def with_fields(arch: Architecture, **changes) -> Architecture | None:
    """A copy of `arch` with `changes` (MLA head_dim and KV heads and the sliding pattern follow);
    None when the result is not a valid architecture."""
    fields = {**arch.model_dump(), **changes}
    if arch.attention.attention_kind == "mla":
        fields["head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
        fields["num_kv_heads"] = fields["num_attention_heads"]
    types = fields["layer_types"]
    if types is not None and len(types) != fields["num_layers"]:
        fields["layer_types"] = _repeat_pattern(tuple(types), fields["num_layers"])
    try:
        return Architecture.model_validate(fields)
    except (ValidationError, ConfigError):
        return None


def with_deployment(dep: Deployment, **changes) -> Deployment | None:
    try:
        return make_deployment(**{**dep.model_dump(), **changes})
    except ConfigError:
        return None


def valid(arch: Architecture, dep: Deployment) -> bool:
    return not deployment_violations(arch, dep)


def _granule(field: str) -> int:
    if field in COUNT_FIELDS:
        return 1
    return HEAD_DIM_GRANULE if field.endswith("head_dim") else WIDTH_GRANULE


def _steps(value: int, granule: int, up: bool, max_distance: float) -> list[int]:
    """Multiples of `granule` above (or below) `value`, nearest first."""
    first = (value // granule + 1) * granule if up else (-(-value // granule) - 1) * granule
    sign = 1 if up else -1
    steps = (first + sign * j * granule for j in range(SEARCH_STEPS))
    return [v for v in steps if v >= 1 and abs(v - value) <= max_distance]


def nearest_values(ctx: LintContext, field: str, ok: Callable[[Architecture], bool],
                   up_only: bool = False, max_distance: float = math.inf) -> list[Architecture]:
    """The copies of the model with `field` nearest its value, one above and one below (nearest
    first), for which `ok` holds. A direction with none within the parameter budget
    (`ctx.within_budget`) goes on to `REPORT_REACH` × the budget, so that the nearest one over
    it is measured and reported, not offered; it stops there (parameters grow with every field,
    and the search is what makes lint slow)."""
    value, found = field_value(ctx.arch, field), []
    reach = REPORT_REACH * ctx.max_param_change_frac
    for up in (True,) if up_only else (True, False):
        for step in _steps(value, _granule(field), up, max_distance):
            alt = with_fields(ctx.arch, **{field: step})
            if alt is None:
                continue
            if param_change_frac(ctx.arch, alt) > reach:
                break
            if ok(alt):
                found.append(alt)
                break
    return sorted(found, key=lambda a: (not ctx.within_budget(a),
                                        abs(field_value(a, field) - value),
                                        field_value(a, field) < value))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def deployment_variants(arch: Architecture, dep: Deployment) -> list[Deployment]:
    """Same GPUs, nearest first: experts over more EP ranks, then attention TP traded for DP."""
    stage = dep.tp * dep.dp
    changes = [{"ep": ep} for ep in _divisors(stage) if ep > dep.ep and arch.ffn.is_moe]
    changes += [{"tp": tp, "dp": stage // tp} for tp in reversed(_divisors(dep.tp)) if tp < dep.tp]
    variants = [with_deployment(dep, **change) for change in changes]
    return [v for v in variants if v is not None and valid(arch, v)]


def param_change_frac(before: Architecture, after: Architecture) -> float:
    """The larger of the total and the active parameter change, as a share of `before`'s."""
    b, a = count_params(before), count_params(after)
    return max(abs(a.total_params / b.total_params - 1.0),
               abs(a.active_params / b.active_params - 1.0))


def params_delta(before: Architecture, after: Architecture) -> tuple[int, int]:
    """(total, active) parameters of `after` minus those of `before`."""
    b, a = count_params(before), count_params(after)
    return a.total_params - b.total_params, a.active_params - b.active_params


def _changes(before, after) -> dict:
    old, new = before.model_dump(), after.model_dump()
    return {k: [v, new[k]] for k, v in old.items() if k not in ("name", "layer_types")
            and new[k] != v}


def pattern_text(value):
    """A per-layer list as its repeating unit, `(7 gated_deltanet + 1 attention) × 4 layers`
    (other values as they are)."""
    if not isinstance(value, tuple) or len(value) < 2:
        return value
    size = next(p for p in range(1, len(value) + 1)
                if len(value) % p == 0 and value[:p] * (len(value) // p) == value)
    runs = [(k, len(list(g))) for k, g in itertools.groupby(value[:size])]
    return f"({' + '.join(f'{n} {k}' for k, n in runs)}) × {len(value) // size}"


def describe_fix(ctx: LintContext, fix: Fix) -> dict:
    """What a fix changes: summary, changed fields [old, new], parameter deltas."""
    arch, dep = _changes(ctx.arch, fix.arch), _changes(ctx.dep, fix.dep)
    total, active = params_delta(ctx.arch, fix.arch)
    words = [f"`{k}` {pattern_text(a)} → {pattern_text(b)}" for k, (a, b) in arch.items()]
    words += [f"{k} {a} → {b}" for k, (a, b) in dep.items()]
    size = f" ({total / PARAMS_PER_BILLION:+.3g}B params)" if total else " (same params)"
    return {"summary": ", ".join(words) + size, "architecture": arch, "deployment": dep,
            "params_delta": total, "active_params_delta": active}
