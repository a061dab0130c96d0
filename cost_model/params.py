"""Exact parameter counts (a named breakdown) of an `Architecture`.

Weight matrices (and their biases) are the rows of the table of sharded weight GEMMs
(`cost_model.sharded_gemms`); this module adds what is not a GEMM: embedding, norms, attention
sinks, the linear mixers' convolutions and per-head state parameters.

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

from cost_model.architecture import Architecture, field_value
from cost_model.sharded_gemms import WeightGemm, layer_sources, rows_of

BREAKDOWN_KEYS = (
    "embedding", "attention/q", "attention/kv", "attention/o", "attention/norm", "attention/sinks",
    "attention/indexer", "linear_attention/in_proj", "linear_attention/conv",
    "linear_attention/out_proj", "linear_attention/other",
    "mlp/gate", "mlp/up", "mlp/down", "moe/router", "moe/experts", "moe/shared", "norm", "lm_head",
)
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
    parts["norm"] = (_residual_norms(arch) + 1) * arch.hidden_size  # + final norm
    for key, count in _gemm_params(arch).items():
        parts[key] += count
    _add(parts, _attention_params(arch), arch.num_attention_layers)
    _add(parts, _global_attention_params(arch), arch.num_global_attention_layers)
    parts["moe/router"] += arch.num_moe_layers * _router_scale_params(arch)
    _add(parts, _linear_mixer_params(arch), arch.mixer.num_linear_attention_layers)
    unused_experts = arch.ffn.num_experts - arch.ffn.experts_per_token
    inactive = arch.num_moe_layers * unused_experts * _expert_params(arch)
    return ParamBreakdown(MappingProxyType(parts), sum(parts.values()) - inactive)


def _gemm_params(arch: Architecture) -> dict[str, int]:
    """Weights (and their biases) of every row of the table of weight GEMMs
    (`cost_model.sharded_gemms`), summed over the layers of its kind, by breakdown key; a tied
    LM head is the embedding's matrix (counted there)."""
    parts: dict[str, int] = {}
    for row in rows_of(arch):
        if row.tied is None or not field_value(arch, row.tied):
            parts[row.param_key] = parts.get(row.param_key, 0) + _row_params(arch, row)
    return parts


def _row_params(arch: Architecture, row: WeightGemm) -> int:
    """`row`'s weights and bias over the layers of its kind."""
    copies = arch.ffn.num_experts if row.experts else 1
    return sum(_matrix_params(src, row) * copies * layers
               for src, layers in layer_sources(arch, row.layers))


def _matrix_params(src, row: WeightGemm) -> int:
    n = row.n.value(src)
    bias = bool(field_value(src, row.bias)) if row.bias else False
    return n * row.k.value(src) + (n if bias else 0)


def _residual_norms(arch: Architecture) -> int:
    """Norms on the residual path: `norms_per_layer` per layer, or with a per-layer pattern one
    pre-norm per attention and per FFN that the layer has (Nemotron-NAS no-op blocks have none)."""
    if not arch.is_heterogeneous:
        return arch.num_layers * arch.norms_per_layer
    ffn_layers = arch.num_dense_layers + arch.num_moe_layers
    return arch.num_mixer_layers + ffn_layers


def _linear_mixer_params(arch: Architecture) -> dict[str, int]:
    if arch.mixer.linear_mixer_kind == "mamba2":
        return _mamba2_params(arch)
    if arch.mixer.linear_mixer_kind == "kimi_delta":
        return _kimi_delta_params(arch)
    return _gated_deltanet_params(arch)


def _kimi_delta_params(arch: Architecture) -> dict[str, int]:
    """One KDA layer's non-GEMM parameters (transformers' KimiLinearDeltaAttention; its
    projections are table rows): a bias-free conv over q, k, v, dt_bias (n·d), A_log (n),
    o_norm (d)."""
    heads, dim = arch.mixer.linear_num_value_heads, arch.mixer.linear_value_head_dim
    qkv = heads * dim
    return {
        "linear_attention/conv": 3 * qkv * arch.mixer.linear_conv_kernel,
        "linear_attention/other": qkv + heads + dim,
    }


def _mamba2_params(arch: Architecture) -> dict[str, int]:
    """One Mamba-2 mixer's non-GEMM parameters (transformers' NemotronHMamba2Mixer; in_proj and
    out_proj are table rows): a conv over x, B, C (bias iff `linear_conv_bias`); dt_bias, A_log,
    D per head; a gated RMSNorm over n_h·d_h."""
    inner = arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim
    conv_width = inner + 2 * arch.mixer.linear_num_key_heads * arch.mixer.linear_key_head_dim
    return {
        "linear_attention/conv":
            conv_width * (arch.mixer.linear_conv_kernel + arch.mixer.linear_conv_bias),
        "linear_attention/other": (3 * arch.mixer.linear_num_value_heads
                                   + (inner if arch.mixer.linear_norm else 0)),
    }


def _gated_deltanet_params(arch: Architecture) -> dict[str, int]:
    """One Gated DeltaNet layer's non-GEMM parameters (transformers' Qwen3NextGatedDeltaNet;
    in_proj_qkvz, in_proj_ba and out_proj are table rows): a bias-free depthwise conv over q, k,
    v, dt_bias and A_log per v head, a gated RMSNorm of one v head."""
    value_width = arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim
    conv_width = 2 * arch.mixer.linear_num_key_heads * arch.mixer.linear_key_head_dim + value_width
    return {
        "linear_attention/conv": conv_width * arch.mixer.linear_conv_kernel,
        "linear_attention/other":
            2 * arch.mixer.linear_num_value_heads + arch.mixer.linear_value_head_dim,
    }


def _add(parts: dict[str, int], per_layer: Mapping[str, int], num_layers: int) -> None:
    for key, count in per_layer.items():
        parts[key] += count * num_layers


def _attention_params(arch: Architecture) -> dict[str, int]:
    """One attention layer's parameters that are not weight GEMMs: norms, sinks."""
    att = arch.attention
    norm = (att.q_lora_rank + att.kv_lora_rank) if att.attention_kind == "mla" else \
        _qk_norm_params(arch)  # MLA: q_a_layernorm, kv_a_layernorm
    return {
        # + the DSA key's LayerNorm (w + b)
        "attention/norm": norm + 2 * att.index_head_dim,
        "attention/sinks": att.num_attention_heads if att.attention_sinks else 0,
    }


def _global_attention_params(arch: Architecture) -> dict[str, int]:
    """What one full-attention layer of its own shape (Gemma 4) adds to `_attention_params`:
    its q and k head norms are `global_head_dim` wide (the v norm has no weight)."""
    if not arch.attention.qk_norm or arch.attention.qk_norm_scope != "head":
        return {}
    return {"attention/norm": 2 * (arch.attention.global_head_dim - arch.attention.head_dim)}


def _router_scale_params(arch: Architecture) -> int:
    """Gemma 4's router (Gemma4TextRouter): `scale` over H and `per_expert_scale` over E."""
    return arch.hidden_size + arch.ffn.num_experts if arch.ffn.router_scales else 0


def _qk_norm_params(arch: Architecture) -> int:
    if not arch.attention.qk_norm:
        return 0
    if arch.attention.qk_norm_scope == "layer":  # one norm over all q heads, one over all k heads
        return arch.attention.q_dim + arch.attention.num_kv_heads * arch.attention.head_dim
    return 2 * arch.attention.head_dim


def _expert_params(arch: Architecture) -> int:
    """One routed expert of one layer: its rows' weights and biases (gpt-oss has biases)."""
    return sum(_matrix_params(arch, row) for row in rows_of(arch) if row.experts)
