"""Exact parameter counts (a named breakdown) and forward FLOPs per token of an `Architecture`.

Counts equal the unique parameters transformers instantiates for the same config (a tied lm_head
is counted once, as the embedding); buffers (RoPE tables, DeepSeek's router correction bias) and
DeepSeek's multi-token-prediction layers, which transformers does not build, are not parameters.
`active_params` follows `validation/model_params.csv`: the total minus the routed experts a token
does not use, (E - k) of E in every MoE layer; embedding and lm_head are included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from cost_model.architecture import Architecture
from cost_model.units import gemm_flop

BREAKDOWN_KEYS = (
    "embedding", "attention/q", "attention/kv", "attention/o", "attention/norm", "attention/sinks",
    "attention/indexer", "linear_attention/in_proj", "linear_attention/conv",
    "linear_attention/out_proj", "linear_attention/other",
    "mlp/gate", "mlp/up", "mlp/down", "moe/router", "moe/experts", "moe/shared", "norm", "lm_head",
)  # fmt: skip
TOTAL_KEY = "total"


@dataclass(frozen=True, eq=False)
class ParamBreakdown(Mapping[str, int]):
    """Parameters by component, summed over layers; `breakdown["total"]` is their sum."""

    parts: Mapping[str, int]
    active_params: int

    def __getitem__(self, key: str) -> int:
        return self.total_params if key == TOTAL_KEY else self.parts[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.parts
        yield TOTAL_KEY

    def __len__(self) -> int:
        return len(self.parts) + 1

    @property
    def total_params(self) -> int:
        return sum(self.parts.values())

    @property
    def embedding_params(self) -> int:
        """Input embedding (a tied lm_head shares it)."""
        return self.parts["embedding"]

    @property
    def lm_head_params(self) -> int:
        """Untied output projection; 0 when tied to the embedding."""
        return self.parts["lm_head"]

    @property
    def non_embedding_params(self) -> int:
        return self.total_params - self.embedding_params - self.lm_head_params


# A search asks for the same architecture's counts from several places (budget constraint,
# accuracy proxy, report) and NSGA-II revisits architectures under other deployments; the result
# is immutable and `Architecture` is frozen (hashable), so it is computed once per architecture.
@lru_cache(maxsize=16384)
def count_params(arch: Architecture) -> ParamBreakdown:
    """Exact parameter count of `arch`, by component, with the per-token active count."""
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0)
    parts["embedding"] = arch.vocab_size * arch.hidden_size
    parts["lm_head"] = 0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size
    parts["norm"] = (_residual_norms(arch) + 1) * arch.hidden_size  # + final norm
    _add(parts, _attention_params(arch), arch.num_attention_layers)
    _add(parts, _linear_mixer_params(arch), arch.num_linear_attention_layers)
    if arch.layer_ffn_widths is None:
        _add(parts, _mlp_params(arch, arch.intermediate_size, "mlp"), arch.num_dense_layers)
    for width in arch.layer_ffn_widths or ():
        _add(parts, _mlp_params(arch, width, "mlp"), 1 if width else 0)
    _add(parts, _moe_params(arch), arch.num_moe_layers)
    unused_experts = arch.num_experts - arch.experts_per_token
    inactive = arch.num_moe_layers * unused_experts * _expert_params(arch)
    return ParamBreakdown(MappingProxyType(parts), sum(parts.values()) - inactive)


def _residual_norms(arch: Architecture) -> int:
    """Norms on the residual path: `norms_per_layer` per layer, or with a per-layer pattern one
    pre-norm per attention and per FFN that the layer has (Nemotron-NAS no-op blocks have none)."""
    if not arch.is_heterogeneous:
        return arch.num_layers * arch.norms_per_layer
    ffn_layers = arch.num_dense_layers + arch.num_moe_layers
    return arch.num_mixer_layers + ffn_layers


def _linear_mixer_params(arch: Architecture) -> dict[str, int]:
    if arch.linear_mixer_kind == "mamba2":
        return _mamba2_params(arch)
    if arch.linear_mixer_kind == "kimi_delta":
        return _kimi_delta_params(arch)
    return _gated_deltanet_params(arch)


def _kimi_delta_params(arch: Architecture) -> dict[str, int]:
    """One KDA layer (transformers' KimiLinearDeltaAttention): q, k, v (H → n·d each), b_proj
    (H → n), the forget and output gates' bottlenecks H → d → n·d (f_a/f_b, g_a/g_b; counted
    with in_proj), a bias-free conv over q, k, v, dt_bias (n·d), A_log (n), o_norm (d), o_proj."""
    hidden, heads, dim = arch.hidden_size, arch.linear_num_value_heads, arch.linear_value_head_dim
    qkv = heads * dim
    gates = 2 * (hidden * dim + dim * qkv)
    return {
        "linear_attention/in_proj": hidden * (3 * qkv + heads) + gates,
        "linear_attention/conv": 3 * qkv * arch.linear_conv_kernel,
        "linear_attention/out_proj": qkv * hidden,
        "linear_attention/other": qkv + heads + dim,
    }


def _mamba2_params(arch: Architecture) -> dict[str, int]:
    """One Mamba-2 mixer (transformers' NemotronHMamba2Mixer, no projection biases): in_proj
    H → z, x (n_h·d_h each), B, C (groups·state each), dt (n_h); a conv over x, B, C (bias iff
    `linear_conv_bias`); dt_bias, A_log, D per head; a gated RMSNorm over n_h·d_h; out_proj."""
    hidden, inner = arch.hidden_size, arch.linear_num_value_heads * arch.linear_value_head_dim
    conv_width = inner + 2 * arch.linear_num_key_heads * arch.linear_key_head_dim
    return {
        "linear_attention/in_proj": hidden * (conv_width + inner + arch.linear_num_value_heads),
        "linear_attention/conv": conv_width * (arch.linear_conv_kernel + arch.linear_conv_bias),
        "linear_attention/out_proj": inner * hidden,
        "linear_attention/other": (3 * arch.linear_num_value_heads
                                   + (inner if arch.linear_norm else 0)),
    }


def _gated_deltanet_params(arch: Architecture) -> dict[str, int]:
    """One Gated DeltaNet layer (transformers' Qwen3NextGatedDeltaNet): in_proj_qkvz + in_proj_ba
    (H → 2·n_k·d_k + 2·n_v·d_v + 2·n_v), a bias-free depthwise conv over q, k, v, dt_bias and
    A_log per v head, a gated RMSNorm of one v head, out_proj n_v·d_v → H."""
    hidden, value_width = arch.hidden_size, arch.linear_num_value_heads * arch.linear_value_head_dim
    conv_width = 2 * arch.linear_num_key_heads * arch.linear_key_head_dim + value_width
    in_width = conv_width + value_width + 2 * arch.linear_num_value_heads
    return {
        "linear_attention/in_proj": hidden * in_width,
        "linear_attention/conv": conv_width * arch.linear_conv_kernel,
        "linear_attention/out_proj": value_width * hidden,
        "linear_attention/other": 2 * arch.linear_num_value_heads + arch.linear_value_head_dim,
    }


def _add(parts: dict[str, int], per_layer: Mapping[str, int], num_layers: int) -> None:
    for key, count in per_layer.items():
        parts[key] += count * num_layers


def _attention_params(arch: Architecture) -> dict[str, int]:
    counts = _mla_params(arch) if arch.attention_kind == "mla" else _gqa_params(arch)
    counts["attention/sinks"] = arch.num_attention_heads if arch.attention_sinks else 0
    counts["attention/indexer"] = _indexer_params(arch)
    counts["attention/norm"] += 2 * arch.index_head_dim  # the indexer key's LayerNorm (w + b)
    return counts


def _indexer_params(arch: Architecture) -> int:
    """DSA lightning indexer (transformers' DeepseekV32Indexer / GlmMoeDsaIndexer): wq_b from the
    query latent to index_heads x index_head_dim, wk from the hidden state to one key,
    weights_proj to one weight per head; no biases (the LayerNorm on the key is counted with
    the attention norms)."""
    heads, dim = arch.index_heads, arch.index_head_dim
    return arch.q_lora_rank * heads * dim + arch.hidden_size * dim + arch.hidden_size * heads


def _gqa_params(arch: Architecture) -> dict[str, int]:
    hidden, q_dim, kv_dim = arch.hidden_size, arch.q_dim, 2 * arch.num_kv_heads * arch.head_dim
    q_out = q_dim * (2 if arch.attention_output_gate else 1)  # query and its output gate
    return {
        "attention/q": (hidden + arch.qkv_bias) * q_out,
        "attention/kv": (hidden + arch.qkv_bias) * kv_dim,
        "attention/o": (arch.attention_out_in_dim + arch.o_bias) * hidden,
        "attention/norm": _qk_norm_params(arch),
    }


def _qk_norm_params(arch: Architecture) -> int:
    if not arch.qk_norm:
        return 0
    if arch.qk_norm_scope == "layer":  # one norm over all q heads, one over all k heads
        return arch.q_dim + arch.num_kv_heads * arch.head_dim
    return 2 * arch.head_dim


def _mla_params(arch: Architecture) -> dict[str, int]:
    """DeepSeek MLA: q_a/q_b (or q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj, latent norms."""
    hidden, rank_q, rank_kv = arch.hidden_size, arch.q_lora_rank, arch.kv_lora_rank
    if rank_q:
        q_params = (hidden + arch.qkv_bias) * rank_q + rank_q * arch.q_dim
    else:
        q_params = hidden * arch.q_dim  # transformers: an uncompressed q_proj has no bias
    kv_up_dim = arch.num_attention_heads * (arch.qk_nope_head_dim + arch.v_head_dim)
    kv_params = (hidden + arch.qkv_bias) * (rank_kv + arch.qk_rope_head_dim) + rank_kv * kv_up_dim
    return {
        "attention/q": q_params,
        "attention/kv": kv_params,
        "attention/o": (arch.attention_out_in_dim + arch.o_bias) * hidden,
        "attention/norm": rank_q + rank_kv,  # q_a_layernorm, kv_a_layernorm
    }


def _mlp_params(arch: Architecture, width: int, prefix: str) -> dict[str, int]:
    """One dense MLP of `width` with `mlp_bias`: keys prefix/gate, prefix/up, prefix/down."""
    hidden, bias = arch.hidden_size, arch.mlp_bias
    up = (hidden + bias) * width
    gate = up if arch.gated_mlp else 0
    return {f"{prefix}/gate": gate, f"{prefix}/up": up, f"{prefix}/down": (width + bias) * hidden}


def _expert_params(arch: Architecture) -> int:
    """One routed expert: gate (if gated), up and down projections, plus biases (gpt-oss)."""
    width, hidden = arch.moe_intermediate_size, arch.hidden_size
    in_projections = 2 if arch.gated_mlp else 1
    weights = (in_projections + 1) * hidden * width
    biases = in_projections * width + hidden if arch.expert_bias else 0
    return weights + biases


def _moe_params(arch: Architecture) -> dict[str, int]:
    if not arch.is_moe:
        return {}
    shared = _mlp_params(arch, arch.shared_expert_intermediate_size, "shared")
    return {
        "moe/router": (arch.hidden_size + arch.router_bias) * arch.num_experts,
        "moe/experts": arch.num_experts * _expert_params(arch),
        "moe/shared": sum(shared.values()) + (arch.hidden_size if arch.shared_expert_gate else 0),
    }


# ---- FLOPs ---------------------------------------------------------------------------------------


def flops_per_token(
    arch: Architecture, context_tokens: float | np.ndarray = 0
) -> float | np.ndarray:
    """Forward FLOPs for one token attending to `context_tokens` earlier tokens (2 FLOP per MAC).

    = weight GEMMs with the active experts (`matmul_flop_per_token`) + attention scores and
    values at that context (`attention_flop_per_token`). Averaging over a causal prompt is the
    caller's job. Broadcasts over an array of contexts.
    """
    return matmul_flop_per_token(arch) + attention_flop_per_token(arch, context_tokens)


def matmul_flop_per_token(arch: Architecture) -> float:
    """FLOPs of every weight GEMM one token goes through: k experts, router and lm_head included."""
    layers = (
        arch.num_attention_layers * _gemms_flop(_attention_gemms(arch))
        + arch.num_linear_attention_layers * _gemms_flop(_linear_mixer_gemms(arch))
        + _dense_ffn_flop(arch)
        + arch.num_moe_layers * _moe_layer_flop(arch)
    )
    return float(layers + gemm_flop(1, arch.vocab_size, arch.hidden_size))


def _dense_ffn_flop(arch: Architecture) -> float:
    if arch.layer_ffn_widths is None:
        return arch.num_dense_layers * _gemms_flop(_mlp_gemms(arch, arch.intermediate_size))
    return sum(_gemms_flop(_mlp_gemms(arch, width)) for width in arch.layer_ffn_widths if width)


def attention_flop_per_token(
    arch: Architecture, context_tokens: float | np.ndarray = 0
) -> float | np.ndarray:
    """FLOPs of q·Kᵀ and softmax·V for one token over `context_tokens` (sliding layers: the window).

    MLA is counted in its expanded form (keys of nope + rope, values of v_head_dim per head).
    DSA: the main attention reads at most `index_topk` keys; the indexer scores every key
    (index_heads x index_head_dim MACs per key).
    """
    context = np.asarray(context_tokens, dtype=np.float64)
    if arch.is_sparse_attention:
        return _sparse_attention_flop(arch, context)
    full = arch.num_full_attention_layers * context
    window = context if arch.sliding_window is None else np.minimum(context, arch.sliding_window)
    attended = full + arch.num_sliding_layers * window
    per_head = gemm_flop(1, attended, arch.head_dim) + gemm_flop(1, attended, arch.value_head_dim)
    flop = arch.num_attention_heads * per_head
    return float(flop) if np.ndim(flop) == 0 else flop


def _sparse_attention_flop(arch: Architecture, context: np.ndarray) -> float | np.ndarray:
    attended = np.minimum(context, arch.index_topk)
    per_head = gemm_flop(1, attended, arch.head_dim) + gemm_flop(1, attended, arch.value_head_dim)
    indexer = gemm_flop(1, context, arch.index_heads * arch.index_head_dim)
    flop = arch.num_attention_layers * (arch.num_attention_heads * per_head + indexer)
    return float(flop) if np.ndim(flop) == 0 else flop


def _gemms_flop(gemms: list[tuple[int, int]]) -> float:
    """FLOPs for one token through weight matrices given as (out_features, in_features)."""
    return float(sum(gemm_flop(1, out_dim, in_dim) for out_dim, in_dim in gemms))


def _attention_gemms(arch: Architecture) -> list[tuple[int, int]]:
    hidden = arch.hidden_size
    out = [(hidden, arch.attention_out_in_dim)]
    if arch.is_sparse_attention:  # indexer: wq_b, wk, weights_proj
        heads, dim = arch.index_heads, arch.index_head_dim
        out += [(heads * dim, arch.q_lora_rank), (dim, hidden), (heads, hidden)]
    if arch.attention_kind == "gqa":
        q_out = arch.q_dim * (2 if arch.attention_output_gate else 1)
        return [(q_out, hidden), (2 * arch.num_kv_heads * arch.head_dim, hidden), *out]
    rank_q, rank_kv = arch.q_lora_rank, arch.kv_lora_rank
    q_gemms = [(rank_q, hidden), (arch.q_dim, rank_q)] if rank_q else [(arch.q_dim, hidden)]
    kv_up_dim = arch.num_attention_heads * (arch.qk_nope_head_dim + arch.v_head_dim)
    kv_gemms = [(rank_kv + arch.qk_rope_head_dim, hidden), (kv_up_dim, rank_kv)]
    return [*q_gemms, *kv_gemms, *out]


def _linear_mixer_gemms(arch: Architecture) -> list[tuple[int, int]]:
    counts = _linear_mixer_params(arch)
    hidden = arch.hidden_size
    if arch.linear_mixer_kind == "kimi_delta":  # the gates' bottlenecks are GEMMs of their own
        heads, dim = arch.linear_num_value_heads, arch.linear_value_head_dim
        inputs = [(3 * heads * dim + heads + 2 * dim, hidden), (heads * dim, dim),
                  (heads * dim, dim)]
    else:
        inputs = [(counts["linear_attention/in_proj"] // hidden, hidden)]
    return [*inputs, (hidden, counts["linear_attention/out_proj"] // hidden)]


def _mlp_gemms(arch: Architecture, width: int) -> list[tuple[int, int]]:
    up = [(width, arch.hidden_size)] * (2 if arch.gated_mlp else 1)
    return [*up, (arch.hidden_size, width)]


def _moe_layer_flop(arch: Architecture) -> float:
    router = gemm_flop(1, arch.num_experts, arch.hidden_size)
    experts = arch.experts_per_token * _gemms_flop(_mlp_gemms(arch, arch.moe_intermediate_size))
    shared = _gemms_flop(_mlp_gemms(arch, arch.shared_expert_intermediate_size))
    shared += gemm_flop(1, 1, arch.hidden_size) if arch.shared_expert_gate else 0.0
    return float(router) + experts + (shared if arch.num_shared_experts else 0.0)
