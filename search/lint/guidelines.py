"""`archscout lint`: a real model checked against the seven guidelines of NVIDIA, AI Model Co-Design
(2026) (https://developer.nvidia.com/blog/ai-model-co-design-hardware-friendly-llm-design/) and the
formulas behind them, one `Finding` per broken rule, each with its cost in the model's own numbers
and the nearest compliant alternative, measured by the cost model.

What fires each guideline (every GEMM dim taken *after* sharding):
1. near-square GEMMs: a weight GEMM whose intensity cap I∞ = (2/b)·NK/(N+K) lies below the
   ridge point I* of the format on the GPU: memory-bound at any batch (002 §2);
2. alignment: a dim not a multiple of 128; or a dim wider than, and not a multiple of, the widest
   tile of the GPU's kernels (256 Hopper, 512 with Blackwell's CGA) when aligning it raises the
   achieved GEMM rate by ≥ 1% (002 §3);
3. width vs depth: per-layer collectives and fixed kernels ≥ 25% of TPOT at concurrency 1; the
   alternative is ¾ of the layers at equal total parameters (wider FFN), inside the flat region
   of the loss in H/L (`objectives.accuracy_terms`, Morph runs) (002 §3);
4. quantization (`lint_quantization`): a K not a multiple of the block of a block-scaled format
   (16 for NVFP4); a format above the lowest the GPU runs; the BF16 LM head ≥ 5% of TPOT at
   concurrency 1 (002 §4);
5. MoE sizing (`lint_parallel`): M_expert = C·k/E at the memory limit below M*, the M at which
   the expert GEMM reaches the ridge; the cost of the imbalance (1+δ) with it (002 §5);
6. pipeline balance (`lint_parallel`): the slowest stage of a contiguous split ≥ 2% over the mean
   (prefill chunk or decode step, from per-layer-kind times of the cost model) at the deployed
   PP (none at PP = 1: only the deployment asked for is linted); the bubble (S−1)/(S−1+m) with
   it (002 §5);
7. attention vs FFN parallelism (`lint_parallel`): TP beyond the KV heads (any TP with MLA)
   replicates the KV cache (002 §5); and (`hybrid`) full-attention KV reads ≥ 50% of TPOT at the
   throughput end of a long-context workload, where more linear-attention layers pay.

Severity policy. `error` breaks a kernel's contract: a GEMM dim after sharding that is not a
multiple of 128 (a fractional shard included), a K that is not a multiple of the block of the
deployed block-scaled format; any error makes the command exit 1 (for a model repository's CI).
`warning` is a loss the deployment cannot avoid without a change: guidelines 1, 3, 5 (when a wider
EP helps) and 7, a model that cannot run in NVFP4, imbalance at the deployed PP. `info` is an
opportunity: 256/512 beyond the 128 floor, a lower-precision format, the BF16 LM head (where the
linear layers run below BF16), MoE sizing that no wider EP improves.

Measured cost: each candidate fix is evaluated with `evaluate_points` next to the model (TPOT at
concurrency 1, tokens/s/GPU at the throughput end, frontier area, before → after, with its
parameter delta). A fix is offered only if its parameters stay within the budget (the larger of
the total and the active change ≤ `--max-param-change`, 5% by default) and, unless the finding
breaks a hard rule (an error), it raises the frontier area (by ≥ 0.1%); the others are reported
with why ("No fix offered: … changes the parameters by 7.3%, over the ±5% budget", "no larger
frontier area"). Guideline 6's fixes count the stage balance the cost model does not see.
Deployment fixes (EP, attention DP) keep the parameters; a wider EP may take more GPUs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from constraints import check_alignment, gemm_dims, padding_waste_frac
from cost_model import (
    MS_PER_S, TERA, Architecture, Deployment, field_value, gemm_cost, intensity_cap_flop_per_byte,
    tile_efficiency,
)
from objectives import (
    ASPECT_KAPPA_CENTRAL, ASPECT_RATIO_MORPH_RANGE, ASPECT_RATIO_OPT_CENTRAL, aspect_ratio_penalty,
)
from search.lint.hybrid import check_kv_dominated
from search.lint.quantization import check_quantization
from search.lint.parallel import (
    check_attention_parallelism,
    check_disaggregation,
    check_moe_sizing,
    check_pipeline_balance,
)  # fmt: skip
from search.lint.verdict import Measured, change_document, change_text, raises_frontier
from search.lint.support import (
    FIX_FIELDS,
    GEMM_PROBE_TOKENS,
    REPORT_REACH,
    Draft,
    Fix,
    Gemm,
    LintContext,
    Severity,
    default_precision,
    deployment_variants,
    describe_fix,
    misaligned_fields,
    dims_of,
    fix_field,
    gemm_rate_flop_per_s,
    is_multiple,
    label_fields,
    nearest_values,
    param_change_frac,
    params_delta,
    small_dim_field,
    valid,
    weight_gemms,
    with_fields,
)  # fmt: skip

__all__ = ["Finding", "LintContext", "default_precision", "lint"]
SEVERITIES = ("error", "warning", "info")
ALIGN_FLOOR = 128  # the post's Guideline 2: "multiples of 128 at minimum"
INFO_MIN_GAIN_FRAC = 0.01  # policy: a 256/512 alignment worth reporting raises the GEMM rate 1%
SERIAL_SHARE_LIMIT_FRAC = 0.25  # policy: per-layer collectives + fixed kernels at concurrency 1
DEPTH_CUT_FRAC = 0.75  # guideline 3's alternative: ¾ of the layers at equal total parameters
LAYER_CUT_REACH_FRAC = 0.125  # layer counts tried around the ¾ cut (± this share of L)


@dataclass(frozen=True)
class Finding:
    """One broken guideline: its cost in the model's numbers and the nearest compliant fix."""

    guideline: int  # 1–7, NVIDIA, AI Model Co-Design (2026)
    code: str
    severity: Severity
    message: str
    cost: dict
    alternative: dict | None

    def __post_init__(self):
        if not 1 <= self.guideline <= 7 or self.severity not in SEVERITIES:
            raise ValueError(f"bad finding: guideline {self.guideline}, severity {self.severity}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _fixes(*fixes: Fix | None) -> tuple[Fix, ...]:
    return tuple(f for f in fixes if f is not None)


def _rate_tflop_per_s(ctx: LintContext, arch: Architecture, dep: Deployment, name: str) -> float:
    return gemm_rate_flop_per_s(weight_gemms(arch, dep, name), ctx) / TERA


# ---- guideline 1: near-square GEMMs ------------------------------------------------------------


def _cap(ctx: LintContext, gemm: Gemm) -> float:
    return float(intensity_cap_flop_per_byte(gemm.n, gemm.k, ctx.bytes_per_value))


def check_near_square(ctx: LintContext) -> list[Draft]:
    """Guideline 1: I∞ ≈ 2·min(N,K)/b below the ridge: memory-bound at any batch."""
    worst: dict[str, tuple[Gemm, float]] = {}
    for gemm in weight_gemms(ctx.arch, ctx.dep):
        cap, name = _cap(ctx, gemm), small_dim_field(ctx.arch, gemm)
        if cap < ctx.ridge and (name not in worst or cap < worst[name][1]):
            worst[name] = (gemm, cap)
    return [_cap_draft(ctx, name, gemm, cap) for name, (gemm, cap) in worst.items()]


def _cap_draft(ctx: LintContext, name: str, gemm: Gemm, cap: float) -> Draft:
    def ok(arch: Architecture, dep: Deployment = ctx.dep) -> bool:
        aligned = all(is_multiple(d.size, ALIGN_FLOOR) for d in dims_of(arch, dep, name))
        return valid(arch, dep) and aligned and \
            all(_cap(ctx, g) >= ctx.ridge for g in weight_gemms(arch, dep, name))
    arch_fixes = nearest_values(ctx, name, ok, up_only=True) if name in FIX_FIELDS else []
    dep_fix = next((v for v in deployment_variants(ctx.arch, ctx.dep) if ok(ctx.arch, v)), None)
    why = "" if arch_fixes or name not in FIX_FIELDS else f"no wider `{name}` within " \
        f"{ctx.budget_text(REPORT_REACH)} of the parameters lifts I∞ to the ridge"
    rate = float(gemm_cost(GEMM_PROBE_TOKENS, gemm.n, gemm.k, ctx.hw, ctx.precision,
                           engine=ctx.workload.engine)
                 .achieved_flop_per_s)
    peak_frac = rate / ctx.hw.peak_for(ctx.precision)
    message = (f"{gemm.name} (N={gemm.n:g}, K={gemm.k:g} per GPU): I∞ = (2/b)·NK/(N+K) = "
               f"{cap:,.0f} FLOP/B at b = {ctx.bytes_per_value:g} B is below the ridge "
               f"{ctx.ridge:,.0f}, so `{name}` → {min(gemm.n, gemm.k):g} cannot saturate "
               f"{ctx.where()} at any batch ({peak_frac:.0%} of peak at M = {GEMM_PROBE_TOKENS})")
    cost = {"gemm": gemm.name, "n": gemm.n, "k": gemm.k, "intensity_cap_flop_per_byte": cap,
            "ridge_flop_per_byte": ctx.ridge, "peak_frac_at_probe_tokens": peak_frac}
    fixes = (*(Fix(a, ctx.dep) for a in arch_fixes), *_fixes(Fix(ctx.arch, dep_fix) if dep_fix
                                                              else None))
    return Draft(1, "intensity-cap", "warning", message, cost, fixes, why_none=why)


# ---- guideline 2: alignment after sharding -----------------------------------------------------


def _aligned(size: float, multiple: int) -> bool:
    return is_multiple(size, ALIGN_FLOOR) and (size <= multiple or is_multiple(size, multiple))


def check_alignment_ladder(ctx: LintContext) -> list[Draft]:
    """Guideline 2: every dim after sharding a multiple of 128, and of 256/512 when wider."""
    floor_ok = check_alignment(ctx.arch, ctx.dep, ALIGN_FLOOR).feasible
    drafts = []
    for dim in gemm_dims(ctx.arch, ctx.dep):
        if not floor_ok and not is_multiple(dim.size, ALIGN_FLOOR):
            drafts.append(_align_draft(ctx, dim, ALIGN_FLOOR, "error"))
        elif not _aligned(dim.size, ctx.widest_tile):
            drafts.append(_align_draft(ctx, dim, ctx.widest_tile, "info"))
    return [d for d in drafts if d is not None]


def _alignment_fixes(ctx: LintContext, dim, multiple: int) -> tuple[list[Fix], str]:
    """Nearest (architecture, deployment)s with every dim of `dim`'s fields aligned to
    `multiple` and no dim misaligned that the model has aligned: the field above and below on
    the same GPUs, another deployment of them, else the field under the nearest such deployment
    (gpt-oss's 2880-wide experts, 720 per GPU at TP 4, align as 2816 over EP 2); with why none."""
    name, names = fix_field(dim), label_fields(dim)
    before = misaligned_fields(ctx.arch, ctx.dep)

    def ok(arch: Architecture, dep: Deployment = ctx.dep) -> bool:
        return valid(arch, dep) and misaligned_fields(arch, dep) <= before and \
            all(_aligned(d.size, multiple) for d in dims_of(arch, dep, *names))
    variants = deployment_variants(ctx.arch, ctx.dep)
    fixes = [Fix(a, ctx.dep) for a in nearest_values(ctx, name, ok)] if name else []
    fixes += next(([Fix(ctx.arch, v)] for v in variants if ok(ctx.arch, v)), [])
    for dep in variants if name and not ctx.any_within_budget(fixes) else ():
        found = [Fix(a, dep) for a in nearest_values(ctx, name, lambda a, d=dep: ok(a, d))]
        if ctx.any_within_budget(found):
            fixes += [f for f in found if ctx.within_budget(f.arch)]
            break
    why = "" if fixes else (f"no `{name}` within {ctx.budget_text(REPORT_REACH)} of the "
                            "parameters aligns it on these GPUs or another split of them"
                            if name else "no field of the table sets it")
    return fixes, why


def _align_draft(ctx: LintContext, dim, multiple: int, severity: Severity) -> Draft | None:
    fixes, why = _alignment_fixes(ctx, dim, multiple)
    arch_fix = next((f.arch for f in fixes if f.arch is not ctx.arch), None)
    over = fix_field(dim) or label_fields(dim)[-1]
    rates = [_rate_tflop_per_s(ctx, ctx.arch, ctx.dep, over)]
    if arch_fix is not None:
        rates.append(_rate_tflop_per_s(ctx, arch_fix, ctx.dep, over))
    if severity == "info" and (len(rates) < 2 or rates[1] < rates[0] * (1 + INFO_MIN_GAIN_FRAC)):
        return None  # the library's other kernels already cover this width
    eta = float(tile_efficiency(1, dim.size, 1, multiple))
    waste = padding_waste_frac(dim.size, multiple)
    floor = "" if multiple == ALIGN_FLOOR else f"is a multiple of {ALIGN_FLOOR} but "
    gemm_rate = "→".join(f"{r:,.0f}" for r in rates)
    message = (f"{dim.describe()} after sharding {floor}is not a multiple of {multiple}: a "
               f"{multiple}-wide tile pads it to {math.ceil(dim.size / multiple) * multiple} "
               f"(η_tile {eta:.3f}, {waste:.1%} waste); the GEMMs over `{over}` run at "
               f"{gemm_rate} TFLOP/s at M = {GEMM_PROBE_TOKENS}")
    cost = {"dim": dim.label, "size": dim.size, "multiple": multiple, "tile_efficiency": eta,
            "padding_waste_frac": waste, "gemm_tflop_per_s_at_probe_tokens": rates}
    code = "misaligned" if severity == "error" else f"not-{multiple}"
    return Draft(2, code, severity, message, cost, tuple(fixes), why_none=why)


# ---- guideline 3: width vs depth ---------------------------------------------------------------


def _aspect_loss_factor(arch: Architecture) -> float:
    """P_AR = 1 + κ·ln²(R/R*), the accuracy proxy's aspect-ratio term (R = H/L)."""
    ratio = arch.hidden_size / arch.num_layers
    return aspect_ratio_penalty(ratio, ASPECT_KAPPA_CENTRAL, ASPECT_RATIO_OPT_CENTRAL)


def check_width_vs_depth(ctx: LintContext) -> list[Draft]:
    """Guideline 3: serial per-layer overhead and collectives as a share of TPOT."""
    base, arch = ctx.baseline, ctx.arch
    comm, other = base.communication_s / base.tpot_s, base.other_s / base.tpot_s
    if comm + other < SERIAL_SHARE_LIMIT_FRAC:
        return []
    ratio = arch.hidden_size / arch.num_layers
    message = (f"{arch.num_layers} layers in series: per-layer collectives ({comm:.0%}) and fixed "
               f"per-layer kernels ({other:.0%}) are {comm + other:.0%} of TPOT at concurrency 1 "
               f"({base.tpot_s * MS_PER_S:.3g} ms); H/L = {arch.hidden_size}/{arch.num_layers} = "
               f"{ratio:.0f}")
    cost = {"serial_share_frac": comm + other, "communication_share_frac": comm,
            "other_share_frac": other, "aspect_ratio": ratio,
            "aspect_loss_factor": _aspect_loss_factor(arch)}
    fix = _shallower(ctx)
    if fix is not None:
        cost["fix_aspect_loss_factor"] = _aspect_loss_factor(fix.arch)
        message += (f"; the loss proxy's aspect term goes ×{cost['aspect_loss_factor']:.4f} → "
                    f"×{cost['fix_aspect_loss_factor']:.4f}")
    return [Draft(3, "depth-overhead", "warning", message, cost, _fixes(fix))]


def _shallower(ctx: LintContext) -> Fix | None:
    """About ¾ of the layers (a multiple of PP, within ±1/8 of the model's layers of the ¾ cut)
    with the FFN widened back to the same total parameters in steps that stay aligned after
    sharding: the count nearest the cut whose parameters stay within the budget, else the one
    whose parameters come nearest (reported, not offered)."""
    arch, dep = ctx.arch, ctx.dep
    name = "moe_intermediate_size" if arch.ffn.is_moe else "intermediate_size"
    granule = ALIGN_FLOOR * (dep.moe_tp if arch.ffn.is_moe else dep.tp)
    cut, reach = arch.num_layers * DEPTH_CUT_FRAC, arch.num_layers * LAYER_CUT_REACH_FRAC
    counts = sorted((n for n in range(dep.pp, arch.num_layers, dep.pp) if abs(n - cut) <= reach
                     and arch.hidden_size / n <= ASPECT_RATIO_MORPH_RANGE[1]),
                    key=lambda n: abs(n - cut))
    options = [wide for n in counts if (wide := _widened(arch, n, name, granule)) is not None
               and valid(wide, dep)]
    best = next((a for a in options if ctx.within_budget(a)), None) or \
        min(options, key=lambda a: param_change_frac(arch, a), default=None)
    return None if best is None else Fix(best, dep)


def _widened(arch: Architecture, layers: int, name: str, granule: int) -> Architecture | None:
    """`arch` with `layers` layers and `name` widened (by whole `granule`s) to the total
    parameters nearest the model's."""
    short = with_fields(arch, num_layers=layers)
    width = field_value(arch, name)
    stepped = None if short is None else with_fields(short, **{name: width + granule})
    if stepped is None:
        return None
    per_step, missing = params_delta(short, stepped)[0], params_delta(short, arch)[0]
    target = round((width + missing / per_step * granule) / granule) * granule
    return with_fields(short, **{name: target}) if target > 0 else None


# ---- all together ------------------------------------------------------------------------------

CHECKS = (check_near_square, check_alignment_ladder, check_width_vs_depth, check_quantization,
          check_moe_sizing, check_pipeline_balance, check_disaggregation,
          check_attention_parallelism, check_kv_dominated)


def _verdict(ctx: LintContext, draft: Draft, fix: Fix, measured: Measured) -> str:
    """Why `fix` is not offered ("" when it is): over the parameter budget, or, for a finding
    that breaks no hard rule, no higher frontier area."""
    change = param_change_frac(ctx.arch, fix.arch)
    if change > ctx.max_param_change_frac:
        return f"changes the parameters by {change:.1%}, over the {ctx.budget_text()} budget"
    if draft.severity != "error" and not raises_frontier(ctx.baseline, measured,
                                                          fix.frontier_factor):
        return "no larger frontier area"
    return ""


def _finding(ctx: LintContext, draft: Draft, measured: list[Measured]) -> Finding:
    """The draft with its fixes measured: those offered (see the module docstring), those not
    with why, or why the search found none within the parameter budget."""
    docs = [({**describe_fix(ctx, f),
              "measured": change_document(ctx.baseline, m, f.frontier_factor)},
             _verdict(ctx, draft, f, m)) for f, m in zip(draft.fixes, measured)]
    offered = [d for d, reason in docs if not reason]
    withheld = [{**d, "reason": reason} for d, reason in docs if reason]
    shown = lambda d: f"{d['summary']}: {change_text(d['measured'])}"  # noqa: E731
    text = " | or ".join(shown(d) for d in offered)
    text = f". Fix: {text}" if offered else \
        (f". Fix: {draft.note['summary']}" if draft.note else "")
    unfixed = [f"{shown(d)}: {d['reason']}" for d in withheld] + \
        ([draft.why_none] if draft.why_none and not offered else [])
    if unfixed:
        text += f"{'; not offered' if offered else '. No fix offered'}: " + " | ".join(unfixed)
    cost = {**draft.cost, **({"fix": offered[0]["measured"]} if offered else {}),
            **({"withheld_fixes": withheld} if withheld else {})}
    alternative = {**offered[0], "others": offered[1:]} if offered else draft.note
    return Finding(draft.guideline, draft.code, draft.severity, draft.message + text, cost,
                   alternative)


def lint(ctx: LintContext) -> list[Finding]:
    """Every finding of the seven guidelines, in guideline order; all fixes measured together."""
    drafts = [draft for check in CHECKS for draft in check(ctx)]
    fixes = [fix for draft in drafts for fix in draft.fixes]
    measured = iter(ctx.measure([(f.arch, f.dep) for f in fixes]) if fixes else [])
    return [_finding(ctx, d, [next(measured) for _ in d.fixes]) for d in drafts]
