"""The accuracy proxy's loss model in two stages: `parts` computes what a shape and a token budget
fix (the laws' multipliers, ratios and halvings; cached), `combine` raises them to the fitted
coefficients. The split makes a fit or a wide search cheap: only `combine` runs per coefficient
set. `objectives.accuracy` documents the model; every constant is in the modules it imports.

    N_core = N_act,ne (MoE: × joint^moe_scale × grain^granularity_scale to the MoE layer share,
             at most the total non-embedding count)
    N_eff  = N_core + w_emb · N_emb,counted   (embeddings up to a 96K vocabulary, Tao's grid)
    L_hat  = L_base(N_act,ne + w_emb·N_emb,counted, D) · moe · vocabulary · Π shape terms

with moe = L_base(N_eff, D)/L_base(N_act,ne + w·N_emb, D) and vocabulary = L_base(N_eff,
D·f(96K)/f(V))/L_base(N_eff, D) (the text a token covers), so that L_hat is their product exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from objectives import accuracy_terms as terms
from objectives import capacity_terms as cap
from objectives import mixer_terms as mix
from objectives.accuracy_coefficients import AccuracyCoefficients
from objectives.accuracy_shape import ShapeSummary
from objectives.accuracy_terms import BaseLaw

FAMILY_OF_TERM: Mapping[str, str] = MappingProxyType({
    "moe": "moe", "vocabulary": "vocabulary", "depth": "depth_width", "mlp_mix": "mix",
    "attention_width": "attention", "kv_width": "attention", "head_dim": "attention",
    "ffn_width": "ffn", "ffn_gating": "ffn", "linear_attention": "hybrid",
    "sliding_window": "hybrid", "precision": "precision",
})  # fmt: skip
PENALTY_NAMES = tuple(FAMILY_OF_TERM)


@dataclass(frozen=True)
class Parts:
    """What a shape and a token budget fix, before any fitted coefficient."""

    active: float  # N_act,ne
    total: float  # N_tot,ne
    embeddings: float  # embedding parameters counted (up to a 96K vocabulary)
    moe_share: float  # MoE layers / layers (0: dense)
    joint: float  # Joint MoE law multiplier at (expansion, N_act, D), 1 for dense
    grain: float  # Krajewski granularity multiplier, 1 for dense
    tokens_frac: float  # f(96K)/f(V): text per token against the 96K tokenizer
    depth_ratio: float  # Gemstones loss ratio against the reference aspect ratio
    mix_ratio: float  # Bian's g(r)/g(4.2) (1 where the term does not apply)
    width_halvings_sq: float  # log2(H/(n_q·d_h))², 0 at or above H
    kv_halvings: float  # log2(H/(n_kv·d_h)) clipped at 0 (MHA)
    head_halvings_sq: float
    ffn_halvings_sq: float
    gated: bool
    attention_share: float  # attention layers / mixer layers
    sliding_units: float  # s·h² of the sliding-window term


@lru_cache(maxsize=65536)
def parts(shape: ShapeSummary, tokens: float) -> Parts:
    counted = cap.clamp(cap.TAO_VOCAB_RANGE[1] / shape.vocab_size, (0.0, 1.0))
    moe = bool(shape.num_experts)
    return Parts(
        active=shape.active_non_embedding_params, total=shape.total_non_embedding_params,
        embeddings=shape.vocab_params * counted, moe_share=shape.moe_layer_frac,
        joint=cap.joint_moe_multiplier(shape.expansion, shape.active_params, tokens) if moe
        else 1.0, grain=cap.granularity_multiplier(shape.granularity) if moe else 1.0,
        tokens_frac=cap.vocab_tokens_frac(shape.vocab_size),
        depth_ratio=cap.depth_penalty(shape.active_non_embedding_params, shape.num_layers,
                                      tokens),
        mix_ratio=_mix_ratio(shape),
        width_halvings_sq=_halvings(shape.attention_width_frac, 1.0) ** 2,
        kv_halvings=_halvings(shape.kv_width_frac, 1.0),
        head_halvings_sq=_halvings(shape.head_dim, cap.HEAD_DIM_FLOOR) ** 2,
        ffn_halvings_sq=_halvings(shape.ffn_width_frac, 1.0) ** 2, gated=shape.gated_ffn,
        attention_share=shape.full_attention_frac, sliding_units=_sliding_units(shape),
    )  # fmt: skip


def _halvings(value: float, floor: float) -> float:
    return max(0.0, math.log2(floor / value))


def _mix_ratio(shape: ShapeSummary) -> float:
    if not shape.uses_mix:
        return 1.0
    ratio = cap.clamp(shape.mlp_attention_ratio, terms.MIX_RATIO_RANGE)
    return terms.BIAN_TASK3.factor(ratio) / terms.BIAN_TASK3.factor(cap.REFERENCE_MIX_RATIO)


def _sliding_units(shape: ShapeSummary) -> float:
    """s·h² of `mixer_terms.sliding_window_penalty` (its coefficient 1)."""
    has_global = shape.sliding_layers < shape.num_layers - shape.linear_layers
    return mix.sliding_window_penalty(shape.sliding_window or math.inf,
                                      shape.sliding_attention_frac, has_global, 1.0) - 1.0


def core_params(p: Parts, fit: AccuracyCoefficients) -> float:
    """N_core: the non-embedding size of a dense model of equal loss (MoE: capped at the total;
    DeepSeekMoE Table 2: Dense×16 ≈ DeepSeekMoE 2B, the MoE upper bound)."""
    if not p.moe_share:
        return p.total
    gain = p.joint**fit.moe_scale * p.grain**fit.granularity_scale
    return min(p.active * gain**p.moe_share, p.total)


def combine(p: Parts, tokens: float, fmt: str, law: BaseLaw, fit: AccuracyCoefficients
            ) -> tuple[float, float, dict[str, float], float]:  # fmt: skip
    """(N_eff, L_base, terms by PENALTY_NAMES, L_hat) with L_hat = L_base · Π terms exactly."""
    embeddings = fit.embedding_weight * p.embeddings
    n_eff = core_params(p, fit) + embeddings
    base = terms.base_loss_nats(law, p.active + embeddings, tokens)
    at_eff = terms.base_loss_nats(law, n_eff, tokens)
    factors = {
        "moe": at_eff / base,
        "vocabulary": terms.base_loss_nats(law, n_eff, tokens * p.tokens_frac) / at_eff,
        "depth": p.depth_ratio**fit.depth_scale, "mlp_mix": p.mix_ratio**fit.mix_scale,
        "attention_width": 1.0 + fit.attention_width_kappa * p.width_halvings_sq,
        "kv_width": cap.kv_width_penalty(2.0**-p.kv_halvings, fit.kv_width_coef),
        "head_dim": 1.0 + fit.head_dim_kappa * p.head_halvings_sq,
        "ffn_width": 1.0 + fit.ffn_width_kappa * p.ffn_halvings_sq,
        "ffn_gating": cap.ffn_gating_penalty(p.gated, fit.ffn_gate_coef),
        "linear_attention": mix.linear_attention_factor(p.attention_share, fit.hybrid_coef,
                                                        fit.linear_only_coef),
        "sliding_window": 1.0 + fit.sliding_window_coef * p.sliding_units,
        "precision": precision_multiplier(fit, fmt),
    }  # fmt: skip
    return n_eff, base, factors, base * math.prod(factors.values())


def precision_multiplier(fit: AccuracyCoefficients, fmt: str) -> float:
    """The fitted multiplier (fp8_block shares fp8's); FP32/FP16 carry BF16's 1."""
    fitted = {"fp8": fit.precision_fp8, "fp8_block": fit.precision_fp8,
              "nvfp4": fit.precision_nvfp4, "mxfp4": fit.precision_mxfp4}  # fmt: skip
    return fitted.get(fmt, 1.0)
