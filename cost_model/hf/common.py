"""What every Hugging Face family reader shares: the common keys, the refusal of unread
shape-looking keys, and small readers (integers, biases, sliding patterns, experts).

A family is a `Family`: its reader (the Architecture fields beyond the common ones), the
defaults of transformers' config class for every key it reads, and the keys it ignores, fixes or
aliases. The family groups live in `gqa`, `mla`, `hybrid` and `nas`; `importer` dispatches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cost_model.architecture import FULL_ATTENTION, SLIDING_ATTENTION
from cost_model.errors import ConfigError
from cost_model.hf.schema import nearest_key
from cost_model.sourced import shown

_COMMON_KEYS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings",
    "tie_word_embeddings",
)
# Keys whose names look shape-related but that change neither parameters nor attention span.
_HARMLESS_KEYS = frozenset({
    "rms_norm_eps", "layer_norm_eps", "norm_topk_prob", "attention_dropout", "hidden_dropout",
    "attn_logit_softcapping", "output_hidden_states", "output_attentions", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise", "original_max_position_embeddings", "num_labels",
    "query_pre_attn_scalar", "chunk_size_feed_forward", "num_beams", "num_beam_groups",
    "num_return_sequences", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
})
# Generic PretrainedConfig keys (full dumps of older transformers) that would change the shape.
_FIXED_FOR_ALL = {
    "pruned_heads": ({},), "add_cross_attention": (False,), "cross_attention_hidden_size": (None,),
    "tie_encoder_decoder": (False,),
}
_SHAPE_STEMS = (
    "intermediate", "hidden", "head", "layer", "expert", "lora", "vocab", "embed", "rank", "dim",
    "size", "bias", "norm", "window", "moe", "sparse", "shared", "group", "num", "kv", "tie",
    "sink",
    "proj", "mlp", "attn", "attention", "qk", "ffn", "width", "depth", "rout",
)


def defaults(common: tuple[Any, ...], **extra: Any) -> dict[str, Any]:
    return {**dict(zip(_COMMON_KEYS, common, strict=True)), **extra}


@dataclass(frozen=True)
class Family:
    """How one model_type is read."""

    # Architecture fields beyond the common ones
    read: Callable[[Mapping[str, Any]], dict[str, Any]]
    # transformers 5.24 config-class defaults of every key read (None: derived, e.g. head_dim =
    # hidden_size // num_attention_heads, num_key_value_heads = num_attention_heads)
    defaults: Mapping[str, Any]
    ignored: frozenset[str] = frozenset()  # shape-looking keys transformers does not use here
    # keys allowed with these values
    fixed: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)  # alias -> key read


def resolve_aliases(config: Mapping[str, Any], family: Family) -> dict[str, Any]:
    given = dict(config)
    for alias, key in family.aliases.items():
        if alias not in given:
            continue
        value = given.pop(alias)
        if key in given and given[key] != value:
            raise ConfigError(f"`{alias}` ({value!r}) must equal `{key}` ({given[key]!r})")
        given[key] = value
    return given


def check_keys(given: Mapping[str, Any], model_type: str, family: Family) -> None:
    read, fixed = family.defaults.keys(), {**_FIXED_FOR_ALL, **family.fixed}
    for key, value in given.items():
        if key in fixed and value not in fixed[key]:
            allowed = " or ".join(repr(v) for v in fixed[key])
            raise ConfigError(
                f"`{key}` ({shown(value)}) is not supported for model_type `{model_type}`: "
                f"must be {allowed}"
            )
        known = key in read or key in family.ignored or key in fixed or key in _HARMLESS_KEYS
        if not known and _looks_shape_related(key):
            near = nearest_key(key, (*read, *family.aliases))
            raise ConfigError(
                f"`{key}` ({shown(value)}) is not supported for model_type `{model_type}`: "
                f"archscout does not read it and it may change the model's shape{near}"
            )


def _looks_shape_related(key: str) -> bool:
    tokens = [token for token in re.split(r"[^a-z0-9]+", key.lower()) if token]
    return any(token == "n" or token.startswith(_SHAPE_STEMS) for token in tokens)


def read_int(config: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"`{key}` ({shown(value)}) must be an integer >= {minimum}")
    return value


def common_fields(c: Mapping[str, Any]) -> dict[str, Any]:
    hidden, heads = read_int(c, "hidden_size"), read_int(c, "num_attention_heads")
    return {
        "vocab_size": c["vocab_size"],
        "hidden_size": hidden,
        # None only where the family derives it (Nemotron-H: the block pattern's length)
        "num_layers": None if c["num_hidden_layers"] is None else read_int(c, "num_hidden_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": heads if c["num_key_value_heads"] is None else c["num_key_value_heads"],
        "head_dim": hidden // heads if c["head_dim"] is None else c["head_dim"],
        "intermediate_size": c["intermediate_size"],
        "hidden_act": c["hidden_act"],
        "max_position_embeddings": c["max_position_embeddings"],
        "tie_word_embeddings": c["tie_word_embeddings"],
    }


def biases(c: Mapping[str, Any]) -> dict[str, Any]:
    return {"qkv_bias": c["attention_bias"], "o_bias": c["attention_bias"]}


def uniform_sliding(window: int | None) -> dict[str, Any]:
    """Every layer uses the window (Mistral, Mixtral, Phi-3, Qwen3-MoE in transformers)."""
    return {"sliding_window": window, "layer_types": None}


def layer_types_fields(
    c: Mapping[str, Any], window: int | None, default: tuple[str, ...]
) -> dict[str, Any]:
    """Per-layer pattern, canonical: None when no layer or every layer slides."""
    types = c["layer_types"] if c["layer_types"] is not None else default
    allowed = (FULL_ATTENTION, SLIDING_ATTENTION)
    layers = c["num_hidden_layers"]
    if (not isinstance(types, list | tuple) or len(types) != layers
            or not set(types) <= set(allowed)):
        raise ConfigError(
            f"`layer_types` ({types!r}) must list {allowed} once per layer ({layers} layers)"
        )
    sliding = types.count(SLIDING_ATTENTION)
    if window is None or sliding == 0:
        return uniform_sliding(None)
    if sliding == layers:
        return uniform_sliding(window)
    return {"sliding_window": window, "layer_types": tuple(types)}


def moe_fields(c: Mapping[str, Any], experts_key: str, width_key: str) -> dict[str, Any]:
    return {
        "num_experts": c[experts_key],
        "experts_per_token": c["num_experts_per_tok"],
        "moe_intermediate_size": c[width_key],
    }


def qwen_shared_moe(c: Mapping[str, Any], step: int) -> dict[str, Any]:
    """Qwen's MoE (Qwen1.5/2-MoE, Qwen3-Next, Qwen3.5): routed experts plus one sigmoid-gated
    shared expert of `shared_expert_intermediate_size`; the `mlp_only_layers` (leading only)
    are dense, and of the others every `step`-th is MoE."""
    dense = sorted(set(c.get("mlp_only_layers") or ()))
    if dense != list(range(len(dense))):
        raise ConfigError(
            f"`mlp_only_layers` ({dense}) is not supported: only leading layers 0..k-1 can be dense"
        )
    # transformers builds the shared expert and its gate whatever the width: 0 would leave a gate
    shared = read_int(c, "shared_expert_intermediate_size")
    return {**moe_fields(c, "num_experts", "moe_intermediate_size"),
            "first_dense_layers": len(dense), "moe_layer_period": step, "num_shared_experts": 1,
            "shared_expert_intermediate_size": shared, "shared_expert_gate": True}


def mamba2_heads(c: Mapping[str, Any], width: int, heads_key: str, head_key: str) -> dict[str, Any]:
    """The value heads of a Mamba-2 mixer `width` channels wide: `heads_key` heads of
    `head_key` channels ("auto": width / heads), which must tile the width exactly."""
    heads = read_int(c, heads_key)
    head_dim = width // heads if c[head_key] == "auto" else read_int(c, head_key)
    if head_dim * heads != width:
        raise ConfigError(f"`{head_key}` ({c[head_key]!r}) x `{heads_key}` ({heads}) must equal "
                          f"the Mamba-2 width ({width})")
    return {"linear_num_value_heads": heads, "linear_value_head_dim": head_dim}
