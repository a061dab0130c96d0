"""Lint findings for long-context serving and hybrid models (issue 15): attention's KV reads
dominating the time per output token where more linear-attention layers would pay (guideline 7:
"strategically targeting the dominant bottlenecks"; NVIDIA, AI Model Co-Design (2026): "long-
context, throughput-oriented serving spends most of its time in attention"). The pipeline
balance of a layer pattern is guideline 6 in `parallel.check_pipeline_balance`.
"""

from __future__ import annotations

import numpy as np

from cost_model import ATTENTION_MIXER, GATED_DELTANET_MIXER, Architecture, evaluate_points
from search.lint.support import (
    Draft, Fix, LintContext, param_change_frac, valid, with_fields,
)  # fmt: skip

# policy: full/sliding attention (KV reads and prefill attention, the cost model's attention_s
# less linear_attention_s) at or above this share of TPOT at the throughput end (the most
# concurrent requests that fit memory) at the workload's context is "KV-dominated"
KV_DOMINATED_SHARE_FRAC = 0.5
# long context: the 32K-token prompt of NVIDIA, AI Model Co-Design (2026), Figure 2's
# long-context column (also `search.plots.kinds.LONG_CONTEXT_ISL_TOKENS`); shorter prompts at a
# large batch are attention-heavy too, but there fewer KV bytes are what more concurrency needs
LONG_CONTEXT_ISL_TOKENS = 32_768
PERIODS = (2, 4, 8)  # full-attention periods tried: 1 in 2, Qwen3-Next's 1 in 4, 1 in 8
# a linear mixer for a model without one: Qwen3-Next-80B-A3B's Gated DeltaNet (its config.json:
# linear_num_value_heads 32 x 128, linear_num_key_heads 16 x 128, linear_conv_kernel_dim 4)
QWEN3_NEXT_LINEAR = dict(linear_num_value_heads=32, linear_value_head_dim=128,
                         linear_num_key_heads=16, linear_key_head_dim=128, linear_conv_kernel=4)
# its key-head counts tried (value heads twice as many, as there), the one whose parameters come
# nearest the model's is proposed: the lint budget holds parameters about fixed
LINEAR_KEY_HEADS = (4, 8, 16, 32)


def attention_shares(ctx: LintContext, pairs) -> list[tuple[float, int]]:
    """(attention share of TPOT less linear layers', concurrency) at each pair's throughput end."""
    archs, deps = [a for a, _ in pairs], [d for _, d in pairs]
    p = evaluate_points(archs, deps, ctx.hw, ctx.workload)
    tput = np.where(p.fits_memory, p.tokens_per_s_per_gpu, -np.inf)
    out = []
    for i in range(len(pairs)):
        j = int(np.argmax(tput[i]))
        if not np.isfinite(tput[i, j]):
            out.append((float("nan"), 0))
            continue
        attention = p.attention_s[i, j] - p.linear_attention_s[i, j]
        out.append((float(attention / p.tpot_s[i, j]), int(p.concurrency[i, j])))
    return out


def more_linear(arch: Architecture, period: int, stages: int) -> Architecture | None:
    """`arch` with every `period`-th layer full attention and the rest linear (its own linear
    mixer and shape, else Qwen3-Next's Gated DeltaNet with the head count whose parameters
    come nearest the model's); None unless the unit divides the layers per PP stage."""
    layers = arch.num_layers
    if layers % stages or (layers // stages) % period:
        return None
    mixer = arch.mixer.linear_mixer_kind or GATED_DELTANET_MIXER
    mixers = tuple(ATTENTION_MIXER if (i + 1) % period == 0 else mixer for i in range(layers))
    shapes = [{}] if arch.mixer.num_linear_attention_layers else \
        [{**QWEN3_NEXT_LINEAR, "linear_num_key_heads": k, "linear_num_value_heads": 2 * k}
         for k in LINEAR_KEY_HEADS]
    alts = [a for shape in shapes if (a := with_fields(
        arch, layer_mixers=mixers, sliding_window=None, layer_types=None, **shape)) is not None]
    return min(alts, key=lambda a: param_change_frac(arch, a), default=None)


def _full_period(arch: Architecture) -> float:
    """Layers per full-attention layer (1 for a model whose every layer attends)."""
    return arch.num_layers / max(arch.num_full_attention_layers, 1)


def check_kv_dominated(ctx: LintContext) -> list[Draft]:
    """Guideline 7 on long contexts (ISL ≥ `LONG_CONTEXT_ISL_TOKENS`): attention (KV reads) ≥
    `KV_DOMINATED_SHARE_FRAC` of TPOT at the throughput end; the alternative is the nearest
    pattern with fewer full-attention layers whose share falls below it (else the one that
    lowers it most), measured."""
    arch, dep = ctx.arch, ctx.dep
    if arch.num_full_attention_layers < 2 or ctx.workload.isl_tokens < LONG_CONTEXT_ISL_TOKENS:
        return []
    (share, concurrency), = attention_shares(ctx, [(arch, dep)])
    if not share >= KV_DOMINATED_SHARE_FRAC:
        return []
    alts = [a for p in PERIODS if p > _full_period(arch)
            if (a := more_linear(arch, p, dep.pp)) is not None and valid(a, dep)]
    shares = attention_shares(ctx, [(a, dep) for a in alts]) if alts else []
    below = [a for a, (s, _) in zip(alts, shares) if s < KV_DOMINATED_SHARE_FRAC]
    pick = below[0] if below else (min(zip(alts, shares), key=lambda x: x[1][0])[0]
                                   if alts else None)
    w = ctx.workload
    message = (f"at ISL {w.isl_tokens:,} / OSL {w.osl_tokens:,}, full-attention KV reads are "
               f"{share:.0%} of TPOT at the throughput end (concurrency {concurrency:,}), at or "
               f"above {KV_DOMINATED_SHARE_FRAC:.0%}: {arch.num_full_attention_layers} of "
               f"{arch.num_layers} layers keep a KV cache that grows with the context; linear-"
               "attention layers keep a fixed state instead")
    cost = {"attention_share_frac": share, "concurrency": concurrency,
            "threshold_frac": KV_DOMINATED_SHARE_FRAC,
            "full_attention_layers": arch.num_full_attention_layers}
    if pick is not None:
        cost["fix_attention_share_frac"] = shares[alts.index(pick)][0]
    else:
        message += "; no full-attention period in 2, 4, 8 divides the layers per stage"
    return [Draft(7, "kv-dominated", "info", message, cost,
                  (Fix(pick, dep),) if pick is not None else ())]
