"""Guideline 4 of `archscout lint` (`search/lint/guidelines.py` has the policy): quantization
readiness: a K not a multiple of the block of a block-scaled format, a format above the lowest
the GPU runs, the BF16 LM head beside lower-precision linear layers."""

from __future__ import annotations

from constraints import check_nvfp4_block, gemm_dims
from cost_model.gemm import gemm_cost
from cost_model.precision import get_precision
from cost_model.units import US_PER_S
from search.lint.support import (
    NVFP4,
    REPORT_REACH,
    Draft,
    Fix,
    LintContext,
    default_precision,
    fix_field,
    is_multiple,
    nearest_values,
    valid,
    with_deployment,
)  # fmt: skip

BF16_SHARE_LIMIT_FRAC = 0.05  # policy: a BF16 layer worth quantizing


def check_quantization(ctx: LintContext) -> list[Draft]:
    """Guideline 4: block-scaled K, the lowest format of the GPU, the BF16 LM head."""
    return _block_scaling(ctx) + _lower_precision(ctx) + _bf16_lm_head(ctx)


def _block_scaling(ctx: LintContext) -> list[Draft]:
    deployed = ctx.precision.block_size > 1
    dep = ctx.dep if deployed else with_deployment(ctx.dep, precision=NVFP4)
    verdict = check_nvfp4_block(ctx.arch, dep)
    if verdict.feasible:
        return []
    block = get_precision(dep.precision).block_size
    bad = [d for d in gemm_dims(ctx.arch, dep) if d.reduction and not is_multiple(d.size, block)]
    name = fix_field(bad[0])
    ok = lambda a: valid(a, ctx.dep) and check_nvfp4_block(a, dep).feasible  # noqa: E731
    fixes = nearest_values(ctx, name, ok) if name else []
    why = "" if fixes else f"no `{name}` within {ctx.budget_text(REPORT_REACH)} of the " \
        f"parameters makes every K a multiple of {block}"
    severity, code = ("error", "block-k") if deployed else ("warning", "not-nvfp4-ready")
    message = verdict.message if deployed else f"the model cannot run in NVFP4: {verdict.message}"
    cost = {"block": block, "k_dims": [d.label for d in bad], "sizes": [d.size for d in bad]}
    return [Draft(4, code, severity, message, cost, tuple(Fix(a, ctx.dep) for a in fixes),
                  why_none=why)]


def _lower_precision(ctx: LintContext) -> list[Draft]:
    lowest = get_precision(default_precision(ctx.hw))
    if lowest.value_bits >= ctx.precision.value_bits:
        return []
    speedup = ctx.hw.peak_for(lowest) / ctx.hw.peak_for(ctx.precision)
    message = (f"linear layers run in {ctx.precision.name} although {ctx.hw.name} has "
               f"{lowest.name} tensor cores ({speedup:.3g}× the math, "
               f"{lowest.weight_bytes_per_value / ctx.bytes_per_value:.2g}× the weight bytes)")
    fix = Fix(ctx.arch, with_deployment(ctx.dep, precision=lowest.name))
    return [Draft(4, "higher-precision", "info", message, {"lowest_precision": lowest.name},
                  (fix,))]


def _bf16_lm_head(ctx: LintContext) -> list[Draft]:
    """The LM head stays BF16: a finding only where the linear layers run in a lower format."""
    if ctx.precision.value_bits >= get_precision("bf16").value_bits:
        return []
    n, k = ctx.arch.vocab_size / ctx.dep.tp, ctx.arch.hidden_size
    high_s = float(gemm_cost(1, n, k, ctx.hw, "bf16").time_s)
    low_s = float(gemm_cost(1, n, k, ctx.hw, ctx.precision).time_s)
    share = high_s / ctx.baseline.tpot_s
    if share < BF16_SHARE_LIMIT_FRAC:
        return []
    saving = (high_s - low_s) / ctx.baseline.tpot_s
    message = (f"lm_head (vocab {ctx.arch.vocab_size:,} × H {k}, N = {n:g} per GPU) stays in "
               f"BF16 and is {share:.0%} of TPOT at concurrency 1: in {ctx.precision.name} it "
               f"would take {low_s * US_PER_S:.0f} µs instead of {high_s * US_PER_S:.0f} µs "
               f"(TPOT {-saving:+.1%})")
    cost = {"lm_head_share_frac": share, "lm_head_us": [high_s * US_PER_S, low_s * US_PER_S],
            "tpot_change_frac": -saving}
    note = {"summary": f"lm_head in {ctx.precision.name} (same params)", "lm_head_precision":
            ["bf16", ctx.precision.name], "params_delta": 0, "active_params_delta": 0}
    return [Draft(4, "bf16-lm-head", "info", message, cost, note=note)]
