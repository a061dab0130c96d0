"""The quantities of an architecture the accuracy proxy's terms read (`ShapeSummary`), from
exact parameter counts (`cost_model.params`)."""

from __future__ import annotations

import math

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from cost_model import Architecture, count_params
from objectives import capacity_terms as cap


@dataclass(frozen=True)
class ShapeSummary:
    """The quantities of an architecture the proxy's terms read (exact counts from
    `count_params`)."""

    total_params: float
    active_params: float
    vocab_params: float  # N_emb: input embedding + untied lm_head (V·H, doubled if untied)
    attention_params: float  # q, k, v and o projections, all layers
    active_mlp_params: float  # dense MLPs + shared experts + router + k of E routed experts
    hidden_size: int
    num_layers: int
    vocab_size: int
    head_dim: int
    num_kv_heads: int
    attention_width_frac: float  # n_q·d_h / H (MLA: n_q·v_head_dim / H)
    kv_width_frac: float  # n_kv·d_h / H (MLA: latent rank over DeepSeek-V2's H/10, at most 1)
    ffn_width_frac: float  # narrowest active FFN of any layer kind, SwiGLU width in units of H
    gated_ffn: bool = True
    num_experts: int = 0
    experts_per_token: int = 0
    expansion: float = 0.0  # (E + shared)/(k + shared): routed experts per active one (0: dense)
    granularity: float = 0.0  # G = min(k, (8/3)·H / d_expert) (MoE; 0 for dense)
    activation_frac: float = 1.0  # (k + shared) / (E + shared)
    moe_layer_frac: float = 0.0
    is_mla: bool = False
    mla_rank_frac: float = 0.0  # kv_lora_rank / H
    sliding_layers: int = 0
    sliding_window: int = 0  # tokens (0: no sliding layer)
    sliding_attention_frac: float = 0.0  # sliding layers / attention layers
    full_attention_frac: float = 1.0  # attention layers / layers with a mixer (linear hybrids)
    linear_layers: int = 0

    @property
    def total_non_embedding_params(self) -> float:
        return self.total_params - self.vocab_params

    @property
    def active_non_embedding_params(self) -> float:
        return self.active_params - self.vocab_params

    @property
    def aspect_ratio(self) -> float:
        return self.hidden_size / self.num_layers

    @property
    def mlp_attention_ratio(self) -> float:
        """r of Bian et al. 2025b: MLP over attention parameters (MoE: the active MLP); infinite
        without an attention layer."""
        if not self.attention_params:
            return math.inf
        return self.active_mlp_params / self.attention_params

    @property
    def uses_mix(self) -> bool:
        """Bian's mix term was fitted on dense all-attention GQA models only."""
        return not self.num_experts and not self.is_mla and not self.linear_layers


@lru_cache(maxsize=16384)  # every band pass reads it; archs are frozen
def summarize_shape(arch: Architecture) -> ShapeSummary:
    counts = count_params(arch)
    attention = sum(counts[key] for key in ("attention/q", "attention/kv", "attention/o"))
    hidden, mla = arch.hidden_size, arch.attention.attention_kind == "mla"
    q_width = arch.attention.num_attention_heads * arch.attention.value_head_dim
    kv_width = (cap.mla_kv_width_frac(arch.attention.kv_lora_rank, hidden) if mla
                else arch.attention.num_kv_heads * arch.attention.head_dim / hidden)
    return ShapeSummary(
        total_params=float(counts.total_params), active_params=float(counts.active_params),
        vocab_params=float(counts.embedding_params + counts.lm_head_params),
        attention_params=float(attention), active_mlp_params=_active_mlp_params(arch, counts),
        hidden_size=hidden, num_layers=arch.num_layers, vocab_size=arch.vocab_size,
        head_dim=arch.attention.head_dim, num_kv_heads=arch.attention.num_kv_heads,
        attention_width_frac=q_width / hidden, kv_width_frac=kv_width,
        ffn_width_frac=_ffn_width_frac(arch), gated_ffn=arch.ffn.gated_mlp, is_mla=mla,
        mla_rank_frac=arch.attention.kv_lora_rank / hidden if mla else 0.0, **_mixer_summary(arch),
        **_moe_summary(arch),
    )


def _mixer_summary(arch: Architecture) -> dict:
    sliding, attention = arch.num_sliding_layers, arch.num_attention_layers
    return dict(sliding_layers=sliding, sliding_window=arch.attention.sliding_window or 0,
                sliding_attention_frac=sliding / attention if attention else 0.0,
                full_attention_frac=attention / max(arch.num_mixer_layers, 1),
                linear_layers=arch.mixer.num_linear_attention_layers)


def _active_mlp_params(arch: Architecture, counts: Mapping[str, int]) -> float:
    dense = counts["mlp/gate"] + counts["mlp/up"] + counts["mlp/down"]
    routed = (
        counts["moe/experts"] * arch.ffn.experts_per_token / arch.ffn.num_experts
        if arch.ffn.is_moe else 0.0
    )
    return float(dense + counts["moe/shared"] + counts["moe/router"] + routed)


def _ffn_width_frac(arch: Architecture) -> float:
    """min over layer kinds of the active FFN width in SwiGLU units of H (non-gated: 2/3 of it)."""
    gated = 1.0 if arch.ffn.gated_mlp else 2.0 / 3.0
    widths = []
    if arch.num_dense_layers:
        widths.append(arch.ffn.intermediate_size)
    if arch.num_moe_layers:
        widths.append(
            arch.ffn.experts_per_token * arch.ffn.moe_intermediate_size
            + arch.ffn.shared_expert_intermediate_size
        )
    return gated * min(widths) / arch.hidden_size


def _moe_summary(arch: Architecture) -> dict:
    if not arch.ffn.is_moe:
        return {}
    k, shared = arch.ffn.experts_per_token, arch.ffn.num_shared_experts
    dense_width = cap.REFERENCE_FFN_EXPANSION * 2.0 / 3.0 * arch.hidden_size  # SwiGLU of 4·H params
    return dict(num_experts=arch.ffn.num_experts, experts_per_token=k,
                expansion=(arch.ffn.num_experts + shared) / (k + shared),
                granularity=max(1.0, min(k, dense_width / arch.ffn.moe_intermediate_size)),
                activation_frac=(k + shared) / (arch.ffn.num_experts + shared),
                moe_layer_frac=arch.num_moe_layers / arch.num_layers)
