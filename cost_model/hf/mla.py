"""Hugging Face families with DeepSeek's MLA: DeepSeek-V3 (and Kimi-K2, its architecture), and
with the DSA lightning indexer: DeepSeek-V3.2, GLM-5."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cost_model.errors import ConfigError
from cost_model.hf.common import Family, biases, defaults, moe_fields, read_int


def read_deepseek_v3(c: Mapping[str, Any]) -> dict[str, Any]:
    nope, rope = read_int(c, "qk_nope_head_dim", 0), read_int(c, "qk_rope_head_dim")
    mla = {
        "attention_kind": "mla", "q_lora_rank": c["q_lora_rank"] or 0,
        "kv_lora_rank": c["kv_lora_rank"],
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": c["v_head_dim"],
        "head_dim": nope + rope, "num_kv_heads": c["num_attention_heads"], **biases(c),
    }
    first_dense = read_int(c, "first_k_dense_replace", 0)
    if first_dense >= c["num_hidden_layers"]:
        return mla  # every layer dense: the routed-expert keys are unused
    moe = {"num_shared_experts": c["n_shared_experts"] or 0, "first_dense_layers": first_dense}
    return {**mla, **moe_fields(c, "n_routed_experts", "moe_intermediate_size"), **moe}



def _read_dsa(c: Mapping[str, Any]) -> dict[str, Any]:
    """DeepSeek-V3.2 / GLM-5: DeepSeek-V3's MLA and MoE plus the DSA lightning indexer on every
    layer. `mlp_layer_types` and `layer_types`, when given, must be what the config class derives
    (leading dense layers; every layer "indexed_attention")."""
    fields = read_deepseek_v3(c)
    layers, dense = (c["num_hidden_layers"],
                     min(read_int(c, "first_k_dense_replace", 0), c["num_hidden_layers"]))
    derived = {"mlp_layer_types": ["dense"] * dense + ["sparse"] * (layers - dense),
               "layer_types": ["indexed_attention"] * layers}
    for key, expected in derived.items():
        if c[key] is not None and list(c[key]) != expected:
            raise ConfigError(f"`{key}` ({c[key]!r}) is not supported: only {expected[0]!r} … as "
                              "`first_k_dense_replace` derives it")
    indexer = {"index_heads": read_int(c, "index_n_heads"),
               "index_head_dim": read_int(c, "index_head_dim"),
               "index_topk": read_int(c, "index_topk")}
    return {**fields, **indexer}


def _read_glm_moe_dsa(c: Mapping[str, Any]) -> dict[str, Any]:
    """GLM-5: `_read_dsa`; every layer must run its own indexer (`indexer_types` all "full": a
    "shared" layer reuses the previous layer's top-k and has no indexer weights)."""
    types = c["indexer_types"]
    if types is not None and set(types) != {"full"}:
        raise ConfigError(
            f"`indexer_types` ({types!r}) is not supported: every layer must be 'full'"
        )
    for key in ("index_topk_pattern", "index_topk_freq"):
        if key in c and c[key] not in (None, 1, "F" * c["num_hidden_layers"]):
            raise ConfigError(
                f"`{key}` ({c[key]!r}) is not supported: every layer must run its indexer"
            )
    return _read_dsa(c)

_DEEPSEEK_IGNORED = frozenset({
    "num_nextn_predict_layers", "num_mtp_layers", "head_dim", "qk_head_dim", "n_group",
    "topk_group", "ep_size", "routed_scaling_factor",
})  # MTP layers are not built by transformers; its config class recomputes (q)k head dims
_DEEPSEEK_FIXED = {"moe_layer_freq": (1,), "mlp_bias": (False,)}
_DEEPSEEK_ALIASES = {"num_local_experts": "n_routed_experts"}
_MLA_MOE = dict(moe_intermediate_size=2048, n_shared_experts=1, n_routed_experts=256,
                num_experts_per_tok=8, first_k_dense_replace=3, kv_lora_rank=512)
_DEEPSEEK_V3 = defaults(
    (129280, 7168, 18432, 61, 128, 128, None, "silu", 4096, False), attention_bias=False,
    **_MLA_MOE, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
)
# the indexer's RoPE layout (interleaved or not) changes no shape
_DSA_IGNORED = _DEEPSEEK_IGNORED | {"indexer_rope_interleave"}
FAMILIES: dict[str, Family] = {
    "deepseek_v3": Family(read_deepseek_v3, _DEEPSEEK_V3, ignored=_DEEPSEEK_IGNORED,
                          fixed=_DEEPSEEK_FIXED, aliases=_DEEPSEEK_ALIASES),
    # Kimi-K2's `kimi_k2` is DeepSeek-V3's architecture (transformers' KimiK25Config turns its
    # text_config into a `deepseek_v3` one)
    "kimi_k2": Family(read_deepseek_v3, _DEEPSEEK_V3, ignored=_DEEPSEEK_IGNORED,
                      fixed=_DEEPSEEK_FIXED, aliases=_DEEPSEEK_ALIASES),
    "deepseek_v32": Family(
        _read_dsa, defaults(
            (129280, 7168, 18432, 61, 128, 128, 64, "silu", 163840, False), attention_bias=False,
            **_MLA_MOE, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128,
            v_head_dim=128, index_topk=2048, index_head_dim=128, index_n_heads=64,
            mlp_layer_types=None, layer_types=None),
        ignored=_DSA_IGNORED, fixed=_DEEPSEEK_FIXED, aliases=_DEEPSEEK_ALIASES),
    "glm_moe_dsa": Family(
        _read_glm_moe_dsa, defaults(
            (154880, 6144, 12288, 78, 64, 64, 64, "silu", 202752, False), attention_bias=False,
            **_MLA_MOE, q_lora_rank=2048, qk_rope_head_dim=64, qk_nope_head_dim=192,
            v_head_dim=256, index_topk=2048, index_head_dim=128, index_n_heads=32,
            mlp_layer_types=None, layer_types=None, indexer_types=None),
        ignored=_DSA_IGNORED | {"index_topk_pattern", "index_topk_freq", "index_skip_topk_offset"},
        fixed=_DEEPSEEK_FIXED, aliases={**_DEEPSEEK_ALIASES, "num_experts": "n_routed_experts"},
    ),
}
