"""Hugging Face `config.json` <-> `Architecture`, and loading either format from a file.

Import reads the keys transformers' modeling code reads for each supported `model_type`, with
the defaults of transformers' config class for absent keys (`TRANSFORMERS_DEFAULTS`, checked
against transformers in the tests). A key this module does not read and whose name suggests a
shape (hidden, head, layer, expert, lora, window, bias, …) is refused, as is a read key whose value
cannot be represented; other keys (token ids, rope, dropout, dtype, quantization) are ignored.
Export (`architecture_to_hf_config`, in `hf_export`) is re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cost_model.architecture import (
    ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, MAMBA2_MIXER, NO_MIXER,
    PARALLEL_MAMBA2_MIXER, SLIDING_ATTENTION, Architecture, config_error_from,
    periodic_layer_types,
)  # fmt: skip
from cost_model.errors import ConfigError
from cost_model.hf_export import EXPORT_ORDER, architecture_to_hf_config

__all__ = [
    "ARCHSCOUT_JSON_KEY", "ARCHSCOUT_JSON_VERSION", "EXPORT_ORDER", "SUPPORTED_MODEL_TYPES",
    "TRANSFORMERS_DEFAULTS",
    "architecture_from_hf_config", "architecture_from_json_dict", "architecture_to_hf_config",
    "architecture_to_json_dict", "load_architecture",
]  # fmt: skip

ARCHSCOUT_JSON_KEY = "archscout_architecture"  # marker (and format version) of our own JSON
ARCHSCOUT_JSON_VERSION = 1

_COMMON_KEYS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings",
    "tie_word_embeddings",
)  # fmt: skip
# Keys whose names look shape-related but that change neither parameters nor attention span.
_HARMLESS_KEYS = frozenset({
    "rms_norm_eps", "layer_norm_eps", "norm_topk_prob", "attention_dropout", "hidden_dropout",
    "attn_logit_softcapping", "output_hidden_states", "output_attentions", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise", "original_max_position_embeddings", "num_labels",
    "query_pre_attn_scalar", "chunk_size_feed_forward", "num_beams", "num_beam_groups",
    "num_return_sequences", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
})  # fmt: skip
# Generic PretrainedConfig keys (full dumps of older transformers) that would change the shape.
_FIXED_FOR_ALL = {
    "pruned_heads": ({},), "add_cross_attention": (False,), "cross_attention_hidden_size": (None,),
    "tie_encoder_decoder": (False,),
}  # fmt: skip
_SHAPE_STEMS = (
    "intermediate", "hidden", "head", "layer", "expert", "lora", "vocab", "embed", "rank", "dim",
    "size", "bias", "norm", "window", "moe", "sparse", "shared", "group", "num", "kv", "tie",
    "sink",
    "proj", "mlp", "attn", "attention", "qk", "ffn", "width", "depth", "rout",
)  # fmt: skip


def _defaults(common: tuple[Any, ...], **extra: Any) -> dict[str, Any]:
    return {**dict(zip(_COMMON_KEYS, common, strict=True)), **extra}


_GDN_DEFAULTS = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                     linear_num_key_heads=16, linear_num_value_heads=32)
# transformers 5.24 config-class defaults of every key read below (None: derived, e.g. head_dim
# = hidden_size // num_attention_heads, num_key_value_heads = num_attention_heads; MLA families
# derive head_dim from qk_nope_head_dim + qk_rope_head_dim whatever the key says). The tuple is
# (vocab, hidden, intermediate, layers, heads, kv heads, head_dim, act, max positions, tied).
TRANSFORMERS_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": _defaults(
        (32000, 4096, 11008, 32, 32, None, None, "silu", 2048, False), attention_bias=False,
        mlp_bias=False,
    ),
    "mistral": _defaults(
        (32000, 4096, 14336, 32, 32, 8, None, "silu", 131072, False), sliding_window=4096,
    ),
    "mixtral": _defaults(
        (32000, 4096, 14336, 32, 32, 8, None, "silu", 131072, False), sliding_window=None,
        num_experts_per_tok=2, num_local_experts=8,
    ),
    "qwen2": _defaults(
        (151936, 4096, 22016, 32, 32, 32, None, "silu", 32768, False), use_sliding_window=False,
        sliding_window=4096, max_window_layers=28, layer_types=None,
    ),
    "qwen3": _defaults(
        (151936, 4096, 22016, 32, 32, 32, 128, "silu", 32768, False), attention_bias=False,
        use_sliding_window=False, sliding_window=4096, max_window_layers=28, layer_types=None,
    ),
    "qwen3_moe": _defaults(
        (151936, 2048, 6144, 24, 32, 4, None, "silu", 32768, False), attention_bias=False,
        use_sliding_window=False, sliding_window=4096, decoder_sparse_step=1,
        moe_intermediate_size=768,
        num_experts_per_tok=8, num_experts=128, mlp_only_layers=None,
    ),
    "deepseek_v3": _defaults(
        (129280, 7168, 18432, 61, 128, 128, None, "silu", 4096, False), attention_bias=False,
        moe_intermediate_size=2048, n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8,
        first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128,
    ),
    "gpt_oss": _defaults(
        (201088, 2880, 2880, 36, 64, 8, 64, "silu", 131072, False), attention_bias=True,
        num_local_experts=128, num_experts_per_tok=4, sliding_window=128, layer_types=None,
    ),
    "gemma2": _defaults(
        (256000, 2304, 9216, 26, 8, 4, 256, None, 8192, True), attention_bias=False,
        hidden_activation="gelu_pytorch_tanh", sliding_window=4096, layer_types=None,
    ),
    "gemma3_text": _defaults(
        (262208, 2304, 9216, 26, 8, 4, 256, None, 131072, True), attention_bias=False,
        hidden_activation="gelu_pytorch_tanh", sliding_window=4096, layer_types=None,
    ),
    "phi3": _defaults(
        (32064, 3072, 8192, 32, 32, None, None, "silu", 4096, False), sliding_window=None,
    ),
    "minimax_m2": _defaults(
        (200064, 3072, 1536, 62, 48, 8, 128, "silu", 196608, False), num_local_experts=256,
        num_experts_per_tok=8,
    ),
    "deepseek_v32": _defaults(
        (129280, 7168, 18432, 61, 128, 128, 64, "silu", 163840, False), attention_bias=False,
        moe_intermediate_size=2048, n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8,
        first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128, index_topk=2048, index_head_dim=128, index_n_heads=64,
        mlp_layer_types=None, layer_types=None,
    ),
    "glm_moe_dsa": _defaults(
        (154880, 6144, 12288, 78, 64, 64, 64, "silu", 202752, False), attention_bias=False,
        moe_intermediate_size=2048, n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8,
        first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=2048, qk_rope_head_dim=64,
        qk_nope_head_dim=192, v_head_dim=256, index_topk=2048, index_head_dim=128, index_n_heads=32,
        mlp_layer_types=None, layer_types=None, indexer_types=None,
    ),
    "qwen3_next": _defaults(
        (151936, 2048, 5632, 48, 16, 2, 256, "silu", 32768, False), attention_bias=False,
        **_GDN_DEFAULTS, decoder_sparse_step=1, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, num_experts_per_tok=10, num_experts=512,
        mlp_only_layers=None, layer_types=None,
    ),
    "qwen3_5_moe_text": _defaults(
        (248320, 2048, None, 40, 16, 2, 256, "silu", 32768, False), attention_bias=False,
        **_GDN_DEFAULTS, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        num_experts_per_tok=8, num_experts=256, layer_types=None,
    ),
    "qwen3_5_text": _defaults(
        (248320, 4096, 12288, 32, 16, 4, 256, "silu", 32768, False), attention_bias=False,
        **_GDN_DEFAULTS, layer_types=None,
    ),
    "nemotron_h": _defaults(
        (131072, 4096, 21504, None, 32, 8, 128, None, 4096, False), attention_bias=False,
        mlp_hidden_act="relu2", mlp_bias=False, ssm_state_size=128, mamba_num_heads=128,
        mamba_head_dim=64, n_groups=8, conv_kernel=4, use_conv_bias=True, n_routed_experts=8,
        n_shared_experts=1, moe_intermediate_size=7688, moe_shared_expert_intermediate_size=7688,
        num_experts_per_tok=2, layers_block_type=None,
    ),
    "kimi_linear": _defaults(
        (163840, 2304, 9216, 27, 32, 32, None, "silu", 1048576, False), attention_bias=False,
        moe_intermediate_size=1024, n_shared_experts=1, num_local_experts=256,
        num_experts_per_tok=8, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128, mlp_layer_types=None, layer_types=None,
        linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4,
    ),
    "falcon_h1": _defaults(
        (128000, 4096, 14336, 32, 32, 8, None, "silu", 8192, False), attention_bias=False,
        mlp_bias=False, mamba_d_ssm=1024, mamba_n_heads=128, mamba_d_head="auto", mamba_n_groups=1,
        mamba_d_state=256, mamba_d_conv=4, mamba_expand=2, mamba_conv_bias=True,
        mamba_rms_norm=False,
    ),
    "llama4_text": _defaults(
        (202048, 5120, 8192, 48, 40, 8, 128, "silu", 131072, False), attention_bias=False,
        intermediate_size_mlp=16384, interleave_moe_layer_step=1, moe_layers=None,
        num_local_experts=16, num_experts_per_tok=1, attention_chunk_size=8192,
        no_rope_layer_interval=4, no_rope_layers=None, layer_types=None,
    ),
}
# Families whose config class transformers names differently: Kimi-K2's `kimi_k2` is DeepSeek-V3's
# architecture (transformers' KimiK25Config turns its text_config into a `deepseek_v3` one).
TRANSFORMERS_DEFAULTS["kimi_k2"] = TRANSFORMERS_DEFAULTS["deepseek_v3"]
TRANSFORMERS_MODEL_TYPES = {"kimi_k2": "deepseek_v3"}
# Families transformers 5.x has no class for (their repos ship remote code): the defaults are
# their remote config class's (DeciLMConfig subclasses LlamaConfig), `block_configs` is required.
REMOTE_CODE_DEFAULTS: dict[str, dict[str, Any]] = {
    "nemotron-nas": {
        **TRANSFORMERS_DEFAULTS["llama"], "intermediate_size": None, "block_configs": None,
    },
}
# Multimodal wrappers whose language model is read from `text_config` (the vision tower and its
# projector are not modelled): wrapper model_type -> the text model_type.
TEXT_CONFIG_WRAPPERS = {"llama4": "llama4_text", "kimi_k25": "kimi_k2",
                        "qwen3_5_moe": "qwen3_5_moe_text", "qwen3_5": "qwen3_5_text"}
SUPPORTED_MODEL_TYPES = (*TRANSFORMERS_DEFAULTS, *REMOTE_CODE_DEFAULTS)
_ALL_DEFAULTS = {**TRANSFORMERS_DEFAULTS, **REMOTE_CODE_DEFAULTS}


@dataclass(frozen=True)
class _Family:
    # Architecture fields beyond the common ones
    read: Callable[[Mapping[str, Any]], dict[str, Any]]
    ignored: frozenset[str] = frozenset()  # shape-looking keys transformers does not use here
    # keys allowed with these values
    fixed: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)  # alias -> key read


# ---- import ------------------------------------------------------------------------------------


def architecture_from_hf_config(config: Mapping[str, Any], name: str | None = None) -> Architecture:
    """The `Architecture` of a Hugging Face config dict (one of `SUPPORTED_MODEL_TYPES`)."""
    config = _language_model_config(config)
    model_type = config.get("model_type")
    if model_type not in _FAMILIES:
        supported = ", ".join((*SUPPORTED_MODEL_TYPES, *TEXT_CONFIG_WRAPPERS))
        raise ConfigError(f"`model_type` ({model_type!r}) is not supported; supported: {supported}")
    family = _FAMILIES[model_type]
    given = _resolve_aliases(config, family)
    _check_keys(given, model_type, family)
    merged = {**_ALL_DEFAULTS[model_type], **given}
    label = name or str(config.get("_name_or_path") or model_type)
    fields = {"name": label, "family": model_type, **_common_fields(merged), **family.read(merged)}
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        raise config_error_from(exc, f"{label} ({model_type})") from exc


def _language_model_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """`config` itself, or the `text_config` of a multimodal wrapper (e.g. Llama 4)."""
    text_type = TEXT_CONFIG_WRAPPERS.get(config.get("model_type"))
    if text_type is None:
        return config
    text = config.get("text_config") or {}  # absent: the text model's defaults, as transformers
    if not isinstance(text, Mapping):
        raise ConfigError(f"`text_config` ({text!r}) must be the language model's config (a dict) "
                          f"for model_type `{config['model_type']}`")
    name = text.get("_name_or_path") or config.get("_name_or_path") or config["model_type"]
    return {**text, "model_type": text_type, "_name_or_path": name}


def _resolve_aliases(config: Mapping[str, Any], family: _Family) -> dict[str, Any]:
    given = dict(config)
    for alias, key in family.aliases.items():
        if alias not in given:
            continue
        value = given.pop(alias)
        if key in given and given[key] != value:
            raise ConfigError(f"`{alias}` ({value!r}) must equal `{key}` ({given[key]!r})")
        given[key] = value
    return given


def _check_keys(given: Mapping[str, Any], model_type: str, family: _Family) -> None:
    read, fixed = _ALL_DEFAULTS[model_type].keys(), {**_FIXED_FOR_ALL, **family.fixed}
    for key, value in given.items():
        if key in fixed and value not in fixed[key]:
            allowed = " or ".join(repr(v) for v in fixed[key])
            raise ConfigError(
                f"`{key}` ({value!r}) is not supported for model_type `{model_type}`: "
                f"must be {allowed}"
            )
        known = key in read or key in family.ignored or key in fixed or key in _HARMLESS_KEYS
        if not known and _looks_shape_related(key):
            raise ConfigError(
                f"`{key}` ({value!r}) is not supported for model_type `{model_type}`: "
                "archscout does not read it and it may change the model's shape"
            )


def _looks_shape_related(key: str) -> bool:
    tokens = [token for token in re.split(r"[^a-z0-9]+", key.lower()) if token]
    return any(token == "n" or token.startswith(_SHAPE_STEMS) for token in tokens)


def _int(config: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"`{key}` ({value!r}) must be an integer >= {minimum}")
    return value


def _common_fields(c: Mapping[str, Any]) -> dict[str, Any]:
    hidden, heads = _int(c, "hidden_size"), _int(c, "num_attention_heads")
    return {
        "vocab_size": c["vocab_size"],
        "hidden_size": hidden,
        # None only where the family derives it (Nemotron-H: the block pattern's length)
        "num_layers": None if c["num_hidden_layers"] is None else _int(c, "num_hidden_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": heads if c["num_key_value_heads"] is None else c["num_key_value_heads"],
        "head_dim": hidden // heads if c["head_dim"] is None else c["head_dim"],
        "intermediate_size": c["intermediate_size"],
        "hidden_act": c["hidden_act"],
        "max_position_embeddings": c["max_position_embeddings"],
        "tie_word_embeddings": c["tie_word_embeddings"],
    }


def _biases(c: Mapping[str, Any]) -> dict[str, Any]:
    return {"qkv_bias": c["attention_bias"], "o_bias": c["attention_bias"]}


def _uniform_sliding(window: int | None) -> dict[str, Any]:
    """Every layer uses the window (Mistral, Mixtral, Phi-3, Qwen3-MoE in transformers)."""
    return {"sliding_window": window, "layer_types": None}


def _layer_types(
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
        return _uniform_sliding(None)
    if sliding == layers:
        return _uniform_sliding(window)
    return {"sliding_window": window, "layer_types": tuple(types)}


def _moe(c: Mapping[str, Any], experts_key: str, width_key: str) -> dict[str, Any]:
    return {
        "num_experts": c[experts_key],
        "experts_per_token": c["num_experts_per_tok"],
        "moe_intermediate_size": c[width_key],
    }


def _read_llama(c: Mapping[str, Any]) -> dict[str, Any]:
    return {**_biases(c), "mlp_bias": c["mlp_bias"]}


def _read_mistral(c: Mapping[str, Any]) -> dict[str, Any]:
    return _uniform_sliding(c["sliding_window"])


def _read_mixtral(c: Mapping[str, Any]) -> dict[str, Any]:
    """Mixtral's `intermediate_size` is the expert width; there are no dense layers."""
    experts = _moe(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, **_read_mistral(c)}


def _qwen_window(c: Mapping[str, Any]) -> int | None:
    return c["sliding_window"] if c["use_sliding_window"] else None


def _read_qwen2(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen2 always has q/k/v biases; layers from `max_window_layers` on slide."""
    first_sliding, layers = c["max_window_layers"], range(c["num_hidden_layers"])
    default = tuple(SLIDING_ATTENTION if i >= first_sliding else FULL_ATTENTION for i in layers)
    return {"qkv_bias": True, **_layer_types(c, _qwen_window(c), default)}


def _read_qwen3(c: Mapping[str, Any]) -> dict[str, Any]:
    return {**_read_qwen2(c), **_biases(c), "qk_norm": True}


def _read_qwen3_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    fields = {**_biases(c), "qk_norm": True, **_uniform_sliding(_qwen_window(c))}
    if c["num_experts"] == 0:
        return fields
    dense = sorted(set(c["mlp_only_layers"] or ()))
    if dense != list(range(len(dense))):
        raise ConfigError(
            f"`mlp_only_layers` ({dense}) is not supported: only leading layers 0..k-1 can be dense"
        )
    placement = {"first_dense_layers": len(dense), "moe_layer_period": c["decoder_sparse_step"]}
    return {**fields, **_moe(c, "num_experts", "moe_intermediate_size"), **placement}


def _read_deepseek_v3(c: Mapping[str, Any]) -> dict[str, Any]:
    nope, rope = _int(c, "qk_nope_head_dim", 0), _int(c, "qk_rope_head_dim")
    mla = {
        "attention_kind": "mla", "q_lora_rank": c["q_lora_rank"] or 0,
        "kv_lora_rank": c["kv_lora_rank"],
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": c["v_head_dim"],
        "head_dim": nope + rope, "num_kv_heads": c["num_attention_heads"], **_biases(c),
    }  # fmt: skip
    first_dense = _int(c, "first_k_dense_replace", 0)
    if first_dense >= c["num_hidden_layers"]:
        return mla  # every layer dense: the routed-expert keys are unused
    moe = {"num_shared_experts": c["n_shared_experts"] or 0, "first_dense_layers": first_dense}
    return {**mla, **_moe(c, "n_routed_experts", "moe_intermediate_size"), **moe}


def _read_minimax_m2(c: Mapping[str, Any]) -> dict[str, Any]:
    """MiniMax-M2: GQA with one RMSNorm over all q heads and one over all k heads, experts of
    `intermediate_size` (no dense layers, no shared expert); the routing correction bias is a
    buffer, not a parameter."""
    experts = _moe(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, "qk_norm": True, "qk_norm_scope": "layer"}


def _read_dsa(c: Mapping[str, Any]) -> dict[str, Any]:
    """DeepSeek-V3.2 / GLM-5: DeepSeek-V3's MLA and MoE plus the DSA lightning indexer on every
    layer. `mlp_layer_types` and `layer_types`, when given, must be what the config class derives
    (leading dense layers; every layer "indexed_attention")."""
    fields = _read_deepseek_v3(c)
    layers, dense = (c["num_hidden_layers"],
                     min(_int(c, "first_k_dense_replace", 0), c["num_hidden_layers"]))
    derived = {"mlp_layer_types": ["dense"] * dense + ["sparse"] * (layers - dense),
               "layer_types": ["indexed_attention"] * layers}
    for key, expected in derived.items():
        if c[key] is not None and list(c[key]) != expected:
            raise ConfigError(f"`{key}` ({c[key]!r}) is not supported: only {expected[0]!r} … as "
                              "`first_k_dense_replace` derives it")
    indexer = {"index_heads": _int(c, "index_n_heads"), "index_head_dim": _int(c, "index_head_dim"),
               "index_topk": _int(c, "index_topk")}
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


QWEN_LINEAR_ATTENTION = "linear_attention"


def _qwen_linear_layers(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 layer pattern: `layer_types` ("linear_attention": Gated DeltaNet,
    "full_attention": gated attention), else every `full_attention_interval`-th (default 4) layer
    full. Full layers' q_proj also yields the output gate."""
    layers = c["num_hidden_layers"]
    types = c["layer_types"]
    if types is None:
        interval = _int({"full_attention_interval": c.get("full_attention_interval", 4)},
                        "full_attention_interval")
        types = [QWEN_LINEAR_ATTENTION if (i + 1) % interval else FULL_ATTENTION
                 for i in range(layers)]
    allowed = (FULL_ATTENTION, QWEN_LINEAR_ATTENTION)
    if (not isinstance(types, list | tuple) or len(types) != layers
            or not set(types) <= set(allowed)):
        raise ConfigError(
            f"`layer_types` ({types!r}) must list {allowed} once per layer ({layers} layers)"
        )
    fields: dict[str, Any] = {"attention_output_gate": True, "qk_norm": True, **_biases(c)}
    if QWEN_LINEAR_ATTENTION not in types:
        return fields
    mixers = tuple(GATED_DELTANET_MIXER if t == QWEN_LINEAR_ATTENTION else ATTENTION_MIXER
                   for t in types)
    linear = {"linear_num_key_heads": _int(c, "linear_num_key_heads"),
              "linear_key_head_dim": _int(c, "linear_key_head_dim"),
              "linear_num_value_heads": _int(c, "linear_num_value_heads"),
              "linear_value_head_dim": _int(c, "linear_value_head_dim"),
              "linear_conv_kernel": _int(c, "linear_conv_kernel_dim")}
    return {**fields, "layer_mixers": mixers, **linear}


def _qwen_shared_moe(c: Mapping[str, Any], dense: list[int], step: int) -> dict[str, Any]:
    """Routed experts plus one gated shared expert of `shared_expert_intermediate_size`."""
    if dense != list(range(len(dense))):
        raise ConfigError(
            f"`mlp_only_layers` ({dense}) is not supported: only leading layers 0..k-1 can be dense"
        )
    # transformers builds the shared expert and its gate whatever the width: 0 would leave a gate
    shared = _int(c, "shared_expert_intermediate_size")
    return {**_moe(c, "num_experts", "moe_intermediate_size"), "first_dense_layers": len(dense),
            "moe_layer_period": step, "num_shared_experts": 1,
            "shared_expert_intermediate_size": shared, "shared_expert_gate": True}


def _read_qwen3_next(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-Next: Gated DeltaNet and gated-attention layers; MoE layers every
    `decoder_sparse_step`, the leading `mlp_only_layers` dense."""
    dense = sorted(set(c["mlp_only_layers"] or ()))
    moe = _qwen_shared_moe(c, dense, _int(c, "decoder_sparse_step"))
    return {**_qwen_linear_layers(c), **moe}


def _read_qwen3_5_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3.5-MoE's language model: Qwen3-Next's layers, every layer MoE (no dense key)."""
    return {**_qwen_linear_layers(c), **_qwen_shared_moe(c, [], 1), "intermediate_size": 0}


def _read_qwen3_5(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3.5 dense: Qwen3-Next's layers with a dense SwiGLU of `intermediate_size`."""
    return _qwen_linear_layers(c)


NEMOTRON_H_BLOCKS = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}


def _nemotron_h_blocks(c: Mapping[str, Any]) -> list[str]:
    """Each layer's block: `layers_block_type` (alias `layer_types`), else the legacy
    `hybrid_override_pattern` string (M Mamba-2, * attention, - MLP, E MoE), else transformers'
    default four blocks."""
    blocks = c["layers_block_type"]
    if blocks is None and c.get("hybrid_override_pattern") is not None:
        pattern = c["hybrid_override_pattern"]
        if not isinstance(pattern, str) or not set(pattern) <= set(NEMOTRON_H_BLOCKS):
            raise ConfigError(f"`hybrid_override_pattern` ({pattern!r}) must be a string of "
                              f"{''.join(NEMOTRON_H_BLOCKS)}")
        blocks = [NEMOTRON_H_BLOCKS[char] for char in pattern]
    blocks = (list(blocks) if blocks is not None
              else ["linear_attention", "moe", "full_attention", "mlp"])
    if not blocks or not set(blocks) <= set(NEMOTRON_H_BLOCKS.values()):
        raise ConfigError(f"`layers_block_type` ({blocks!r}) must list blocks of "
                          f"{sorted(NEMOTRON_H_BLOCKS.values())}")
    return blocks


def _read_nemotron_h(c: Mapping[str, Any]) -> dict[str, Any]:
    """Nemotron-H / Nemotron-3: one block per layer (its one norm and a Mamba-2 mixer, GQA
    attention without QK norms, an ungated MLP of `intermediate_size`, or an MoE of ungated
    experts with a shared expert of `moe_shared_expert_intermediate_size`); the layer count is
    the pattern's length (transformers ignores `num_hidden_layers`)."""
    blocks = _nemotron_h_blocks(c)
    mixer = {"linear_attention": MAMBA2_MIXER, "full_attention": ATTENTION_MIXER}
    fields: dict[str, Any] = {
        "num_layers": len(blocks), "gated_mlp": False, "hidden_act": c["mlp_hidden_act"],
        "mlp_bias": c["mlp_bias"], **_biases(c),
        "layer_mixers": tuple(mixer.get(block, NO_MIXER) for block in blocks),
        "layer_ffn_widths": tuple(c["intermediate_size"] if b == "mlp" else 0 for b in blocks),
        "intermediate_size": c["intermediate_size"] if "mlp" in blocks else 0,
    }
    if MAMBA2_MIXER in fields["layer_mixers"]:
        fields.update(linear_num_value_heads=_int(c, "mamba_num_heads"),
                      linear_value_head_dim=_int(c, "mamba_head_dim"),
                      linear_num_key_heads=_int(c, "n_groups"),
                      linear_key_head_dim=_int(c, "ssm_state_size"),
                      linear_conv_kernel=_int(c, "conv_kernel"),
                      linear_conv_bias=c["use_conv_bias"])
    if "moe" in blocks:
        # transformers builds the shared expert whatever `n_shared_experts` says (fixed to 1)
        shared = _int(c, "moe_shared_expert_intermediate_size")
        fields.update(_moe(c, "n_routed_experts", "moe_intermediate_size"),
                      layer_moe=tuple(b == "moe" for b in blocks),
                      num_shared_experts=1, shared_expert_intermediate_size=shared)
    return fields


def _kimi_linear_layer_types(c: Mapping[str, Any]) -> list[str]:
    """`layer_types`, else the checkpoint's `linear_attn_config` (1-based `full_attn_layers` /
    `kda_layers`), else every 4th layer from layer 4 (0-based) full, as transformers derives."""
    layers, linear = c["num_hidden_layers"], c.get("linear_attn_config") or {}
    if c["layer_types"] is not None:
        return list(c["layer_types"])
    if "full_attn_layers" in linear and "kda_layers" in linear:
        types = [""] * layers
        for index in linear["full_attn_layers"]:
            types[index - 1] = FULL_ATTENTION
        for index in linear["kda_layers"]:
            types[index - 1] = QWEN_LINEAR_ATTENTION
        return types
    return [FULL_ATTENTION if i and i % 4 == 0 else QWEN_LINEAR_ATTENTION for i in range(layers)]


def _read_kimi_linear(c: Mapping[str, Any]) -> dict[str, Any]:
    """Kimi Linear: Kimi Delta Attention layers and MLA layers (DeepSeek-V3's MLA), leading dense
    layers (`mlp_layer_types`, else `first_k_dense_replace`, default 1) then DeepSeek-style MoE.
    `linear_attn_config` (the checkpoint's form) overrides the linear shape keys."""
    linear = c.get("linear_attn_config") or {}
    heads = _int({"v": linear.get("num_heads", c["linear_num_heads"])}, "v")
    dim = _int({"v": linear.get("head_dim", c["linear_head_dim"])}, "v")
    kernel = _int({"v": linear.get("short_conv_kernel_size", c["linear_conv_kernel_dim"])}, "v")
    types = _kimi_linear_layer_types(c)
    if (len(types) != c["num_hidden_layers"]
            or not set(types) <= {FULL_ATTENTION, QWEN_LINEAR_ATTENTION}):
        raise ConfigError(
            f"`layer_types` ({types!r}) must name every layer full or linear attention"
        )
    layers = c["num_hidden_layers"]
    dense = c["mlp_layer_types"] or ["dense" if i < c.get("first_k_dense_replace", 1) else "sparse"
                                     for i in range(layers)]
    first = dense.count("dense")
    if list(dense) != ["dense"] * first + ["sparse"] * (layers - first):
        raise ConfigError(
            f"`mlp_layer_types` ({dense!r}) is not supported: only leading dense layers"
        )
    fields = _read_deepseek_v3(
        {**c, "first_k_dense_replace": first, "n_routed_experts": c["num_local_experts"]}
    )
    mixers = tuple(KIMI_DELTA_MIXER if t == QWEN_LINEAR_ATTENTION else ATTENTION_MIXER
                   for t in types)
    if KIMI_DELTA_MIXER not in mixers:
        return fields
    return {**fields, "layer_mixers": mixers, "linear_num_key_heads": heads,
            "linear_key_head_dim": dim, "linear_num_value_heads": heads,
            "linear_value_head_dim": dim, "linear_conv_kernel": kernel}


def _read_falcon_h1(c: Mapping[str, Any]) -> dict[str, Any]:
    """Falcon-H1: every layer runs GQA attention and Mamba-2 side by side on one normed input,
    then a SwiGLU; the Mamba inner width is `mamba_d_ssm` (else expand·H) in `mamba_n_heads`
    heads (`mamba_d_head` "auto": inner / heads); the µP multipliers carry no parameters."""
    inner = (c["mamba_d_ssm"] if c["mamba_d_ssm"] is not None
             else _int(c, "mamba_expand") * c["hidden_size"])
    heads = _int(c, "mamba_n_heads")
    head_dim = inner // heads if c["mamba_d_head"] == "auto" else _int(c, "mamba_d_head")
    if head_dim * heads != inner:
        raise ConfigError(f"`mamba_d_head` ({c['mamba_d_head']!r}) x `mamba_n_heads` ({heads}) "
                          f"must equal the Mamba inner width ({inner})")
    return {
        **_biases(c), "mlp_bias": c["mlp_bias"],
        "layer_mixers": (PARALLEL_MAMBA2_MIXER,) * c["num_hidden_layers"],
        "linear_num_value_heads": heads, "linear_value_head_dim": head_dim,
        "linear_num_key_heads": _int(c, "mamba_n_groups"),
        "linear_key_head_dim": _int(c, "mamba_d_state"),
        "linear_conv_kernel": _int(c, "mamba_d_conv"), "linear_conv_bias": c["mamba_conv_bias"],
        "linear_norm": c["mamba_rms_norm"],
    }


def _read_gpt_oss(c: Mapping[str, Any]) -> dict[str, Any]:
    """gpt-oss: biased experts and router, attention sinks, alternating sliding/full layers."""
    default = periodic_layer_types(c["num_hidden_layers"], 2)
    flags = {"router_bias": True, "expert_bias": True, "attention_sinks": True, **_biases(c)}
    layers = _layer_types(c, c["sliding_window"], default)
    experts = _moe(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, **flags, **layers}


def _read_gemma2(c: Mapping[str, Any]) -> dict[str, Any]:
    """Gemma-2: pre/post norms around attention and MLP, `hidden_activation`, alternating layers."""
    default = periodic_layer_types(c["num_hidden_layers"], 2)
    layers = _layer_types(c, c["sliding_window"], default)
    return {"norms_per_layer": 4, "hidden_act": c["hidden_activation"], **_biases(c), **layers}


def _read_gemma3(c: Mapping[str, Any]) -> dict[str, Any]:
    """Gemma 3: Gemma 2's four norms per layer plus head QK norms; without `layer_types` every
    `sliding_window_pattern`-th layer (default 6: five sliding per global) is full."""
    # a full dump: "_…"
    given = c.get("sliding_window_pattern", c.get("_sliding_window_pattern", 6))
    period = _int({"sliding_window_pattern": given}, "sliding_window_pattern")
    default = periodic_layer_types(c["num_hidden_layers"], period)
    layers = _layer_types(c, c["sliding_window"], default)
    return {"norms_per_layer": 4, "hidden_act": c["hidden_activation"], "qk_norm": True,
            **_biases(c), **layers}


LLAMA4_CHUNKED_ATTENTION = "chunked_attention"


def _llama4_layer_types(c: Mapping[str, Any]) -> list[str]:
    """Each layer's attention: `layer_types` when given, else chunked on RoPE layers
    (`no_rope_layers[i]` = 1) and full on the NoPE ones (every `no_rope_layer_interval`-th)."""
    layers = c["num_hidden_layers"]
    if c["layer_types"] is not None:
        types = list(c["layer_types"])
    else:
        interval = _int(c, "no_rope_layer_interval")
        rope = c["no_rope_layers"] or [int((i + 1) % interval != 0) for i in range(layers)]
        types = [LLAMA4_CHUNKED_ATTENTION if r else FULL_ATTENTION for r in rope]
    allowed = (FULL_ATTENTION, LLAMA4_CHUNKED_ATTENTION)
    if len(types) != layers or not set(types) <= set(allowed):
        raise ConfigError(f"`layer_types` ({types!r}) must list {allowed} once per layer "
                          f"({layers} layers)")
    return [SLIDING_ATTENTION if t == LLAMA4_CHUNKED_ATTENTION else t for t in types]


def _read_llama4(c: Mapping[str, Any]) -> dict[str, Any]:
    """Llama 4's language model: every `interleave_moe_layer_step`-th layer is MoE (routed experts
    and one shared expert, both `intermediate_size` wide), the others dense MLPs of
    `intermediate_size_mlp`. RoPE layers use chunked attention over `attention_chunk_size` tokens,
    modelled as a sliding window of that size: the same bound on KV cache and on the keys a query
    reads, but a window always spans `attention_chunk_size` keys where a chunk spans half of it
    on average past the first chunk. The QK L2 norms have no weights."""
    layers, step = c["num_hidden_layers"], _int(c, "interleave_moe_layer_step")
    derived = list(range(step - 1, layers, step))
    if c["moe_layers"] is not None and list(c["moe_layers"]) != derived:
        raise ConfigError(f"`moe_layers` ({c['moe_layers']!r}) is not supported: only every "
                          f"`interleave_moe_layer_step`-th layer ({derived[:4]}…) can be MoE")
    types = _llama4_layer_types(c)
    window = _int(c, "attention_chunk_size")
    experts = _moe(c, "num_local_experts", "intermediate_size")
    return {**_biases(c), **experts, "intermediate_size": c["intermediate_size_mlp"],
            "num_shared_experts": 1, "moe_layer_period": step,
            **_layer_types({**c, "layer_types": types}, window, tuple(types))}


# ---- Nemotron-NAS (Puzzle): Llama-3.x layers with per-layer attention/FFN blocks ----------------

_NAS_ATTENTION_OFF = {"replace_with_linear": (False, None), "sparsify": (None,),
                      "window_length": (None,), "num_sink_tokens": (None,),
                      "unshifted_sink": (False, None),
                      "use_prefill_window_in_sink_attention": (False, None)}  # fmt: skip
_NAS_FFN_OFF = {"replace_with_linear": (False, None), "sparsify": (None,)}


def nas_ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's `_ffn_mult_to_intermediate_size`: int(2·mult·H/3) rounded up to a multiple of
    256."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def _nas_block(block: Any, index: int) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    attention, ffn = (block.get(part) if isinstance(block, Mapping) else None
                      for part in ("attention", "ffn"))
    if not isinstance(attention, Mapping) or not isinstance(ffn, Mapping):
        raise ConfigError(
            f"`block_configs[{index}]` ({block!r}) must hold `attention` and `ffn` dicts"
        )
    for part, values, off in (("attention", attention, _NAS_ATTENTION_OFF),
                              ("ffn", ffn, _NAS_FFN_OFF)):
        for key, allowed in off.items():
            if values.get(key) not in allowed:
                raise ConfigError(f"`block_configs[{index}].{part}.{key}` ({values.get(key)!r}) "
                                  f"is not supported: must be {' or '.join(map(repr, allowed))}")
    return attention, ffn


def _nas_ffn(ffn: Mapping[str, Any], hidden: int, index: int) -> int:
    if ffn.get("no_op"):
        return 0
    if ffn.get("intermediate_size") is not None:
        return _int(ffn, "intermediate_size")
    mult = ffn.get("ffn_mult")
    if isinstance(mult, bool) or not isinstance(mult, int | float) or mult <= 0:
        raise ConfigError(f"`block_configs[{index}].ffn.ffn_mult` ({mult!r}) must be a number > 0")
    return nas_ffn_width(mult, hidden)


def _read_nemotron_nas(c: Mapping[str, Any]) -> dict[str, Any]:
    """Llama-3.x-Nemotron (DeciLM, NVIDIA Puzzle): each of `block_configs` gives a layer's
    attention (`no_op`: none, and no input norm; else GQA with n_q / `n_heads_in_group` KV
    heads) and FFN (`no_op`: none, and no post-attention norm; else a SwiGLU of
    `nas_ffn_width(ffn_mult)`). KV heads must be the same on every attention layer."""
    blocks, layers, heads = c["block_configs"], c["num_hidden_layers"], c["num_attention_heads"]
    if not isinstance(blocks, list | tuple) or len(blocks) != layers:
        raise ConfigError(f"`block_configs` must list one block per layer ({layers} layers)")
    mixers, widths, groups = [], [], set()
    for index, block in enumerate(blocks):
        attention, ffn = _nas_block(block, index)
        mixers.append(NO_MIXER if attention.get("no_op") else ATTENTION_MIXER)
        if not attention.get("no_op"):
            groups.add(_int(attention, "n_heads_in_group"))
        widths.append(_nas_ffn(ffn, c["hidden_size"], index))
    if len(groups) > 1:
        raise ConfigError(f"`block_configs` n_heads_in_group ({sorted(groups)}) is not supported: "
                          "every attention layer must have the same KV heads")
    kv_heads = heads // groups.pop() if groups else heads
    return {**_biases(c), "mlp_bias": c["mlp_bias"], "num_kv_heads": kv_heads,
            "layer_mixers": tuple(mixers) if NO_MIXER in mixers else None,
            "layer_ffn_widths": tuple(widths) if len(set(widths)) > 1 else None,
            "intermediate_size": max(widths)}


_NO_BIAS = {"attention_bias": (False,), "mlp_bias": (False,)}
_EXPERT_ALIAS = {"num_experts": "num_local_experts"}
_DEEPSEEK_IGNORED = frozenset({
    "num_nextn_predict_layers", "num_mtp_layers", "head_dim", "qk_head_dim", "n_group",
    "topk_group", "ep_size", "routed_scaling_factor",
})  # MTP layers are not built by transformers; its config class recomputes (q)k head dims
_DEEPSEEK_FIXED = {"moe_layer_freq": (1,), "mlp_bias": (False,)}
_DEEPSEEK_ALIASES = {"num_local_experts": "n_routed_experts"}
_QWEN_NEXT_IGNORED = frozenset({"full_attention_interval", "partial_rotary_factor",
                                "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings",
                                "mamba_ssm_dtype"})
_QWEN_NEXT_FIXED = {"attn_output_gate": (True,), "mlp_bias": (False,)}
_FAMILIES: dict[str, _Family] = {
    "llama": _Family(_read_llama),
    "mistral": _Family(_read_mistral, fixed=_NO_BIAS),
    "mixtral": _Family(_read_mixtral, fixed=_NO_BIAS, aliases=_EXPERT_ALIAS),
    "qwen2": _Family(_read_qwen2, fixed={"attention_bias": (True,), "mlp_bias": (False,)}),
    "qwen3": _Family(_read_qwen3, fixed={"mlp_bias": (False,)}),
    "qwen3_moe": _Family(
        _read_qwen3_moe, ignored=frozenset({"max_window_layers"}), fixed={"mlp_bias": (False,)},
        aliases={"num_local_experts": "num_experts"},
    ),
    "deepseek_v3": _Family(_read_deepseek_v3, ignored=_DEEPSEEK_IGNORED, fixed=_DEEPSEEK_FIXED,
                           aliases=_DEEPSEEK_ALIASES),
    "kimi_k2": _Family(_read_deepseek_v3, ignored=_DEEPSEEK_IGNORED, fixed=_DEEPSEEK_FIXED,
                       aliases=_DEEPSEEK_ALIASES),
    # the indexer's RoPE layout (interleaved or not) changes no shape
    "deepseek_v32": _Family(_read_dsa, ignored=_DEEPSEEK_IGNORED | {"indexer_rope_interleave"},
                            fixed=_DEEPSEEK_FIXED, aliases=_DEEPSEEK_ALIASES),
    "glm_moe_dsa": _Family(
        _read_glm_moe_dsa,
        ignored=_DEEPSEEK_IGNORED | {"indexer_rope_interleave", "index_topk_pattern",
                                     "index_topk_freq", "index_skip_topk_offset"},
        fixed=_DEEPSEEK_FIXED, aliases={**_DEEPSEEK_ALIASES, "num_experts": "n_routed_experts"},
    ),
    "minimax_m2": _Family(
        _read_minimax_m2,
        # transformers' MiniMax-M2 always has per-layer QK norms and no shared expert; the partial
        # RoPE width, the routing bias (a buffer) and the MTP modules (not built) change no count
        ignored=frozenset({"rotary_dim", "use_routing_bias", "use_mtp", "mtp_transformer_layers",
                           "num_mtp_modules"}),
        fixed={"use_qk_norm": (True,), "qk_norm_type": ("per_layer",),
               "shared_intermediate_size": (0,), "attention_bias": (False,), "mlp_bias": (False,)},
        aliases={"num_experts": "num_local_experts"},
    ),
    "nemotron-nas": _Family(_read_nemotron_nas),
    "kimi_linear": _Family(
        _read_kimi_linear,
        ignored=frozenset({"linear_attn_config", "first_k_dense_replace", "routed_scaling_factor",
                           "num_expert_group", "n_group", "topk_group", "qk_head_dim", "head_dim",
                           "moe_renormalize", "num_nextn_predict_layers"}),
        fixed={"mlp_bias": (False,)},
        aliases={"num_experts": "num_local_experts", "num_experts_per_token": "num_experts_per_tok",
                 "num_shared_experts": "n_shared_experts",
                 "model_max_length": "max_position_embeddings"},
    ),
    "falcon_h1": _Family(
        _read_falcon_h1,
        ignored=frozenset({
            "mamba_chunk_size", "mamba_norm_before_gate", "time_step_limit", "time_step_min",
            "time_step_max", "time_step_floor", "lm_head_multiplier", "embedding_multiplier",
            "mlp_multipliers", "key_multiplier", "attention_out_multiplier",
            "attention_in_multiplier",
            "ssm_multipliers", "ssm_in_multiplier", "ssm_out_multiplier", "num_logits_to_keep",
            "mamba_use_mlp", "layers_block_type",
        }),
        fixed={"mamba_proj_bias": (False,), "projectors_bias": (False,)},
    ),
    "nemotron_h": _Family(
        _read_nemotron_h,
        # Mamba-2 kernel knobs, dt init, routing scale/groups and the RoPE/residual options change
        # no shape; `expand` is implied by mamba_num_heads · mamba_head_dim in transformers
        ignored=frozenset({
            "expand", "time_step_min", "time_step_max", "time_step_limit", "time_step_floor",
            "time_step_rank", "chunk_size", "mamba_hidden_act", "use_mamba_kernels",
            "mamba_ssm_cache_dtype", "residual_in_fp32", "rescale_prenorm_residual",
            "num_logits_to_keep", "routed_scaling_factor", "n_group", "topk_group",
            "moe_shared_expert_overlap", "layer_norm_epsilon", "norm_eps", "partial_rotary_factor",
            "hybrid_override_pattern", "hidden_act",
            # the MTP blocks' pattern: unused while `num_nextn_predict_layers` is 0
            "mtp_layers_block_type", "mtp_hybrid_override_pattern",
        }),
        fixed={"mamba_proj_bias": (False,), "use_bias": (False,), "moe_latent_size": (None,),
               "n_shared_experts": (1,),
               "sliding_window": (None,), "num_nextn_predict_layers": (0, None)},
        aliases={"layer_types": "layers_block_type", "attention_head_dim": "head_dim",
                 "num_local_experts": "n_routed_experts"},
    ),
    # the output gate is always on in transformers' Qwen3-Next/Qwen3.5 attention; RoPE width
    # (partial_rotary_factor, mrope) and the MTP layers (not built) change no shape
    "qwen3_next": _Family(_read_qwen3_next, ignored=_QWEN_NEXT_IGNORED, fixed=_QWEN_NEXT_FIXED),
    "qwen3_5_moe_text": _Family(_read_qwen3_5_moe, ignored=_QWEN_NEXT_IGNORED,
                                fixed={**_QWEN_NEXT_FIXED, "mlp_only_layers": ([], None)}),
    "qwen3_5_text": _Family(_read_qwen3_5, ignored=_QWEN_NEXT_IGNORED,
                            fixed={**_QWEN_NEXT_FIXED, "mlp_only_layers": ([], None)}),
    "gpt_oss": _Family(
        _read_gpt_oss, fixed={"mlp_bias": (False,)},
        aliases={**_EXPERT_ALIAS, "experts_per_token": "num_experts_per_tok"},
    ),
    "gemma2": _Family(
        _read_gemma2, ignored=frozenset({"hidden_act", "sliding_window_size"}),  # legacy duplicates
        fixed={"use_bidirectional_attention": (None, False)},
    ),
    "gemma3_text": _Family(
        _read_gemma3, ignored=frozenset({"hidden_act", "sliding_window_pattern",
                                         "_sliding_window_pattern", "final_logit_softcapping"}),
        fixed={"use_bidirectional_attention": (None, False)},
    ),
    "phi3": _Family(_read_mistral, fixed=_NO_BIAS),  # fused qkv / gate_up: same count as unfused
    "llama4_text": _Family(
        _read_llama4,
        # attention temperature tuning and the weightless QK L2 norm change no shape
        ignored=frozenset({"attn_scale", "attn_temperature_tuning", "floor_scale", "use_qk_norm",
                           "for_llm_compressor"}),
        fixed={"mlp_bias": (False,)},
    ),
}


# ---- our own JSON and files ---------------------------------------------------------------------


def architecture_to_json_dict(arch: Architecture) -> dict[str, Any]:
    """Our own JSON: `arch.model_dump()` plus the `archscout_architecture` marker (format
    version)."""
    return {ARCHSCOUT_JSON_KEY: ARCHSCOUT_JSON_VERSION, **arch.model_dump(mode="json")}


def architecture_from_json_dict(
    doc: Mapping[str, Any], source: str = "architecture"
) -> Architecture:
    fields = dict(doc)
    version = fields.pop(ARCHSCOUT_JSON_KEY, ARCHSCOUT_JSON_VERSION)
    if version != ARCHSCOUT_JSON_VERSION:
        raise ConfigError(
            f"{source}: `{ARCHSCOUT_JSON_KEY}` ({version!r}) must be {ARCHSCOUT_JSON_VERSION}"
        )
    try:
        return Architecture.model_validate(fields)
    except ValidationError as exc:
        raise config_error_from(exc, source) from exc


ARCHSCOUT_RECORD_KEY = "archscout_record"  # marker (and format version) of a full trial record


def load_architecture(path: str | Path) -> Architecture:
    """Read a Hugging Face config.json (or a model folder holding one) or our own JSON."""
    file = Path(path)
    file = file / "config.json" if file.is_dir() else file
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"`{file}` cannot be read as JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"`{file}` must hold a JSON object; got {type(doc).__name__}")
    if ARCHSCOUT_RECORD_KEY in doc:  # a trial record written by `archscout export --format json`
        return architecture_from_json_dict(
            doc.get("architecture", {}), f"{file} (archscout record)"
        )
    if ARCHSCOUT_JSON_KEY in doc or "model_type" not in doc:
        return architecture_from_json_dict(doc, f"{file} (archscout JSON: no `model_type`)")
    default_name = file.parent.name if file.name == "config.json" else file.stem
    return architecture_from_hf_config(doc, name=str(doc.get("_name_or_path") or default_name))
