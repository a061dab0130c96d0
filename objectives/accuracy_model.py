"""The accuracy proxy's loss model in two stages: `parts` computes what a shape and a token budget
fix (the laws' multipliers and the shape's ratios; cached), `combine` raises them to the fitted
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
from typing import NamedTuple

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
})


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
    mix_factor: float  # Bian's g(r)/g(4.2) (1 where the term does not apply)
    attention_width_frac: float  # n_q·d_h / H
    kv_width_frac: float  # n_kv·d_h / H (MLA: through its latent rank)
    head_dim: int
    ffn_width_frac: float  # narrowest active FFN, SwiGLU width in units of H
    gated: bool
    attention_share: float  # attention layers / mixer layers
    sliding_frac: float  # sliding layers / attention layers
    sliding_window: float  # tokens (infinite: no sliding layer)
    has_global_layer: bool  # some full-attention layer beside the sliding ones


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
        mix_factor=_mix_factor(shape), attention_width_frac=shape.attention_width_frac,
        kv_width_frac=shape.kv_width_frac, head_dim=shape.head_dim,
        ffn_width_frac=shape.ffn_width_frac, gated=shape.gated_ffn,
        attention_share=shape.full_attention_frac, sliding_frac=shape.sliding_attention_frac,
        sliding_window=shape.sliding_window or math.inf,
        has_global_layer=shape.sliding_layers < shape.num_layers - shape.linear_layers,
    )


def _mix_factor(shape: ShapeSummary) -> float:
    """g(r)/g(r_ref) of Bian's Task-3 law, r clamped to its fit range (P_mix = this^mix_scale)."""
    if not shape.uses_mix:
        return 1.0
    ratio = cap.clamp(shape.mlp_attention_ratio, terms.MIX_RATIO_RANGE)
    return terms.BIAN_TASK3.factor(ratio) / terms.BIAN_TASK3.factor(cap.REFERENCE_MIX_RATIO)


def _core_params(p: Parts, fit: AccuracyCoefficients) -> float:
    """N_core: the non-embedding size of a dense model of equal loss (MoE: capped at the total;
    DeepSeekMoE Table 2: Dense×16 ≈ DeepSeekMoE 2B, the MoE upper bound)."""
    if not p.moe_share:
        return p.total
    gain = p.joint**fit.moe_scale * p.grain**fit.granularity_scale
    return min(p.active * gain**p.moe_share, p.total)


class Combined(NamedTuple):
    """One prediction: L_hat = L_base · Π factors exactly."""

    effective_params: float  # N_eff
    base_loss_nats: float  # L_base(N_act,ne + w_emb·N_emb,counted, D)
    factors: dict[str, float]  # the multiplicative terms, in FAMILY_OF_TERM's order
    loss_nats: float  # L_hat


def combine(p: Parts, tokens: float, fmt: str, law: BaseLaw, fit: AccuracyCoefficients
            ) -> Combined:
    """The prediction of `p` trained on `tokens` in `fmt` under the coefficients `fit`."""
    embeddings = fit.embedding_weight * p.embeddings
    n_eff = _core_params(p, fit) + embeddings
    base = terms.base_loss_nats(law, p.active + embeddings, tokens)
    at_eff = terms.base_loss_nats(law, n_eff, tokens)
    factors = {
        "moe": at_eff / base,
        "vocabulary": terms.base_loss_nats(law, n_eff, tokens * p.tokens_frac) / at_eff,
        "depth": p.depth_ratio**fit.depth_scale, "mlp_mix": p.mix_factor**fit.mix_scale,
        "attention_width": cap.attention_width_penalty(p.attention_width_frac,
                                                       fit.attention_width_kappa),
        "kv_width": cap.kv_width_penalty(p.kv_width_frac, fit.kv_width_coef),
        "head_dim": cap.head_dim_penalty(p.head_dim, fit.head_dim_kappa),
        "ffn_width": cap.ffn_width_penalty(p.ffn_width_frac, fit.ffn_width_kappa),
        "ffn_gating": cap.ffn_gating_penalty(p.gated, fit.ffn_gate_coef),
        "linear_attention": mix.linear_attention_factor(p.attention_share, fit.hybrid_coef,
                                                        fit.linear_only_coef),
        "sliding_window": mix.sliding_window_penalty(p.sliding_window, p.sliding_frac,
                                                     p.has_global_layer, fit.sliding_window_coef),
        "precision": _precision_multiplier(fit, fmt),
    }
    return Combined(n_eff, base, factors, base * math.prod(factors.values()))


def _precision_multiplier(fit: AccuracyCoefficients, fmt: str) -> float:
    """The fitted multiplier of training in `fmt` against BF16 (calibration rows `fp8-*`,
    `nvfp4-*`, `mxfp4-*`; fp8_block shares fp8's recipe); FP32/FP16 carry BF16's 1."""
    fitted = {"fp8": fit.precision_fp8, "fp8_block": fit.precision_fp8,
              "nvfp4": fit.precision_nvfp4, "mxfp4": fit.precision_mxfp4}
    return fitted.get(fmt, 1.0)
