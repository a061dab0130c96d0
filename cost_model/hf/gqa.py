"""Hugging Face families of GQA transformers (full, sliding-window and chunked attention; dense
and MoE): Llama, Mistral, Mixtral, Phi-3, Qwen2/3(-MoE), Qwen1.5/2-MoE, GLM-4.5, gpt-oss,
Gemma 2/3/4, MiniMax-M2, Llama 4."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cost_model.architecture import FULL_ATTENTION, SLIDING_ATTENTION, periodic_layer_types
from cost_model.errors import ConfigError
from cost_model.hf.common import (
    Family, biases, defaults, layer_types_fields, moe_fields, qwen_shared_moe, read_int,
    uniform_sliding,
)


def _read_llama(c: Mapping[str, Any]) -> dict[str, Any]:
    return {**biases(c), "mlp_bias": c["mlp_bias"]}


def _read_mistral(c: Mapping[str, Any]) -> dict[str, Any]:
    return uniform_sliding(c["sliding_window"])


def _read_mixtral(c: Mapping[str, Any]) -> dict[str, Any]:
    """Mixtral's `intermediate_size` is the expert width; there are no dense layers."""
    experts = moe_fields(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, **_read_mistral(c)}


def _qwen_window(c: Mapping[str, Any]) -> int | None:
    return c["sliding_window"] if c["use_sliding_window"] else None


def _read_qwen2(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen2 always has q/k/v biases; layers from `max_window_layers` on slide."""
    first_sliding, layers = c["max_window_layers"], range(c["num_hidden_layers"])
    default = tuple(SLIDING_ATTENTION if i >= first_sliding else FULL_ATTENTION for i in layers)
    return {"qkv_bias": True, **layer_types_fields(c, _qwen_window(c), default)}


def _read_qwen3(c: Mapping[str, Any]) -> dict[str, Any]:
    return {**_read_qwen2(c), **biases(c), "qk_norm": True}


def _read_qwen3_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    fields = {**biases(c), "qk_norm": True, **uniform_sliding(_qwen_window(c))}
    if c["num_experts"] == 0:
        return fields
    dense = sorted(set(c["mlp_only_layers"] or ()))
    if dense != list(range(len(dense))):
        raise ConfigError(
            f"`mlp_only_layers` ({dense}) is not supported: only leading layers 0..k-1 can be dense"
        )
    placement = {"first_dense_layers": len(dense), "moe_layer_period": c["decoder_sparse_step"]}
    return {**fields, **moe_fields(c, "num_experts", "moe_intermediate_size"), **placement}


def _read_qwen2_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen1.5/2-MoE (transformers' Qwen2Moe): GQA with q/k/v biases (`qkv_bias`; o_proj has
    none); the leading `mlp_only_layers` dense, every `decoder_sparse_step`-th other layer MoE
    with one sigmoid-gated shared expert (`qwen_shared_moe`); under `use_sliding_window` the
    even-indexed layers below `max_window_layers` slide (transformers' default `layer_types`)."""
    window = _qwen_window(c)
    default = tuple(SLIDING_ATTENTION if i % 2 == 0 and i < c["max_window_layers"]
                    else FULL_ATTENTION for i in range(c["num_hidden_layers"]))
    fields = {"qkv_bias": c["qkv_bias"], **layer_types_fields(c, window, default)}
    if c["num_experts"] == 0:
        return fields
    return {**fields, **qwen_shared_moe(c, read_int(c, "decoder_sparse_step"))}


def _read_glm4_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    """GLM-4.5 (transformers' Glm4Moe): GQA with `attention_bias` on q/k/v (o_proj has none),
    head QK norms under `use_qk_norm`, `first_k_dense_replace` leading dense SwiGLUs of
    `intermediate_size`, then MoE layers of `n_routed_experts` and one ungated shared MLP of
    `n_shared_experts` x `moe_intermediate_size` (n shared experts as one MLP n times as wide: the
    same function and weights; 0: an MLP without weights that adds 0). The MTP layers
    (`num_nextn_predict_layers`) are not built; the RoPE width and routing groups change no
    weight."""
    fields = {"qkv_bias": c["attention_bias"], "qk_norm": c["use_qk_norm"]}
    dense = read_int(c, "first_k_dense_replace", minimum=0)
    if dense >= c["num_hidden_layers"]:
        return fields
    shared = read_int(c, "n_shared_experts", minimum=0)
    return {**fields, **moe_fields(c, "n_routed_experts", "moe_intermediate_size"),
            "first_dense_layers": dense, "num_shared_experts": shared,
            "shared_expert_intermediate_size": shared * read_int(c, "moe_intermediate_size")}



def _read_minimax_m2(c: Mapping[str, Any]) -> dict[str, Any]:
    """MiniMax-M2: GQA with one RMSNorm over all q heads and one over all k heads, experts of
    `intermediate_size` (no dense layers, no shared expert); the routing correction bias is a
    buffer, not a parameter."""
    experts = moe_fields(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, "qk_norm": True, "qk_norm_scope": "layer"}



def _read_gpt_oss(c: Mapping[str, Any]) -> dict[str, Any]:
    """gpt-oss: biased experts and router, attention sinks, alternating sliding/full layers."""
    default = periodic_layer_types(c["num_hidden_layers"], 2)
    flags = {"router_bias": True, "expert_bias": True, "attention_sinks": True, **biases(c)}
    layers = layer_types_fields(c, c["sliding_window"], default)
    experts = moe_fields(c, "num_local_experts", "intermediate_size")
    return {**experts, "intermediate_size": 0, **flags, **layers}


def _read_gemma2(c: Mapping[str, Any]) -> dict[str, Any]:
    """Gemma-2: pre/post norms around attention and MLP, `hidden_activation`, alternating layers."""
    default = periodic_layer_types(c["num_hidden_layers"], 2)
    layers = layer_types_fields(c, c["sliding_window"], default)
    return {"norms_per_layer": 4, "hidden_act": c["hidden_activation"], **biases(c), **layers}


def _read_gemma3(c: Mapping[str, Any]) -> dict[str, Any]:
    """Gemma 3: Gemma 2's four norms per layer plus head QK norms; without `layer_types` every
    `sliding_window_pattern`-th layer (default 6: five sliding per global) is full."""
    # a full dump: "_…"
    given = c.get("sliding_window_pattern", c.get("_sliding_window_pattern", 6))
    period = read_int({"sliding_window_pattern": given}, "sliding_window_pattern")
    default = periodic_layer_types(c["num_hidden_layers"], period)
    layers = layer_types_fields(c, c["sliding_window"], default)
    return {"norms_per_layer": 4, "hidden_act": c["hidden_activation"], "qk_norm": True,
            **biases(c), **layers}


# Gemma 4 features archscout does not model: per-layer input embeddings (PLE, the small models)
# and layers reusing an earlier layer's KV cache
_GEMMA4_UNSUPPORTED = {"hidden_size_per_layer_input": "per-layer input embeddings (PLE)",
                       "num_kv_shared_layers": "KV-cache sharing across layers"}


GEMMA4_GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.__post_init__'s default (transformers 5.24)


def _gemma4_full_layer_shape(c: Mapping[str, Any], types: list[str]) -> tuple[int, int | None]:
    """(head width, KV heads or None: `num_key_value_heads`) of the full-attention layers: from
    `per_layer_config` when given (what transformers' own `to_dict` writes), else from
    `global_head_dim` (absent: transformers' default, not a declared field) and, under
    `attention_k_eq_v`, `num_global_key_value_heads`."""
    per_layer = c.get("per_layer_config")
    if not per_layer:
        dim = c["global_head_dim"]
        dim = GEMMA4_GLOBAL_HEAD_DIM if dim is None else read_int(c, "global_head_dim")
        return dim, c["num_global_key_value_heads"] if c["attention_k_eq_v"] else None
    full = {i for i, kind in enumerate(types) if kind == FULL_ATTENTION}
    shapes = {tuple(sorted(v.items())) for v in per_layer.values() if isinstance(v, Mapping)}
    keys = {k for shape in shapes for k, _ in shape}
    if ({int(i) for i in per_layer} != full or len(shapes) != 1
            or not keys <= {"head_dim", "num_key_value_heads"} or "head_dim" not in keys):
        raise ConfigError(f"`per_layer_config` ({per_layer!r}) is not supported for model_type "
                          "`gemma4_text`: only one `head_dim` (and `num_key_value_heads`) "
                          "shared by exactly the full-attention layers")
    shape = dict(next(iter(shapes)))
    return shape["head_dim"], shape.get("num_key_value_heads")


def _read_gemma4(c: Mapping[str, Any]) -> dict[str, Any]:
    """Gemma 4 (transformers' Gemma4TextConfig / Gemma4TextDecoderLayer): Gemma 3's norms and
    head QK norms (the v norm has no weight), full-attention layers of `global_head_dim` with
    `num_global_key_value_heads` KV heads under `attention_k_eq_v` (no v_proj there; without it
    they keep `num_key_value_heads`), default pattern five sliding per full layer, the last one
    full. `enable_moe_block`: every layer runs its dense MLP and routed experts side by side on
    the same input, i.e. an MoE layer whose shared expert is the MLP (`intermediate_size`);
    its router scales the input (H) and each expert (E); three more norms per layer."""
    for key, what in _GEMMA4_UNSUPPORTED.items():
        if c[key]:
            raise ConfigError(f"`{key}` ({c[key]!r}) is not supported for model_type "
                              f"`gemma4_text`: {what} not modelled (must be 0)")
    types = list(c["layer_types"] or periodic_layer_types(c["num_hidden_layers"], 6))
    types[-1] = FULL_ATTENTION  # transformers forces the last layer to full attention
    head_dim, global_kv = _gemma4_full_layer_shape(c, types)
    fields = {"norms_per_layer": 4, "hidden_act": c["hidden_activation"], "qk_norm": True,
              **biases(c), **layer_types_fields({**c, "layer_types": types}, c["sliding_window"],
                                                tuple(types)),
              "global_head_dim": head_dim,
              "num_global_kv_heads": global_kv or c["num_key_value_heads"],
              "attention_k_eq_v": c["attention_k_eq_v"]}
    if not c["enable_moe_block"]:
        return fields
    experts = {"num_experts": read_int(c, "num_experts"),
               "experts_per_token": read_int(c, "top_k_experts"),
               "moe_intermediate_size": read_int(c, "moe_intermediate_size")}
    return {**fields, **experts, "num_shared_experts": 1, "intermediate_size": 0,
            "shared_expert_intermediate_size": read_int(c, "intermediate_size"),
            "router_scales": True, "norms_per_layer": 7}


LLAMA4_CHUNKED_ATTENTION = "chunked_attention"


def _llama4_layer_types(c: Mapping[str, Any]) -> list[str]:
    """Each layer's attention: `layer_types` when given, else chunked on RoPE layers
    (`no_rope_layers[i]` = 1) and full on the NoPE ones (every `no_rope_layer_interval`-th)."""
    layers = c["num_hidden_layers"]
    if c["layer_types"] is not None:
        types = list(c["layer_types"])
    else:
        interval = read_int(c, "no_rope_layer_interval")
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
    layers, step = c["num_hidden_layers"], read_int(c, "interleave_moe_layer_step")
    derived = list(range(step - 1, layers, step))
    if c["moe_layers"] is not None and list(c["moe_layers"]) != derived:
        raise ConfigError(f"`moe_layers` ({c['moe_layers']!r}) is not supported: only every "
                          f"`interleave_moe_layer_step`-th layer ({derived[:4]}…) can be MoE")
    types = _llama4_layer_types(c)
    window = read_int(c, "attention_chunk_size")
    experts = moe_fields(c, "num_local_experts", "intermediate_size")
    return {**biases(c), **experts, "intermediate_size": c["intermediate_size_mlp"],
            "num_shared_experts": 1, "moe_layer_period": step,
            **layer_types_fields({**c, "layer_types": types}, window, tuple(types))}


_NO_BIAS = {"attention_bias": (False,), "mlp_bias": (False,)}
_EXPERT_ALIAS = {"num_experts": "num_local_experts"}
_GEMMA = defaults((256000, 2304, 9216, 26, 8, 4, 256, None, 8192, True), attention_bias=False,
                  hidden_activation="gelu_pytorch_tanh", sliding_window=4096, layer_types=None)
_MISTRAL = defaults((32000, 4096, 14336, 32, 32, 8, None, "silu", 131072, False),
                    sliding_window=4096)
# transformers 5.24 config-class defaults; the tuple is (vocab, hidden, intermediate, layers,
# heads, kv heads, head_dim, act, max positions, tied), as `defaults` names them.
FAMILIES: dict[str, Family] = {
    "llama": Family(_read_llama, defaults(
        (32000, 4096, 11008, 32, 32, None, None, "silu", 2048, False), attention_bias=False,
        mlp_bias=False)),
    "mistral": Family(_read_mistral, _MISTRAL, fixed=_NO_BIAS),
    "mixtral": Family(_read_mixtral, defaults(
        (32000, 4096, 14336, 32, 32, 8, None, "silu", 131072, False), sliding_window=None,
        num_experts_per_tok=2, num_local_experts=8), fixed=_NO_BIAS, aliases=_EXPERT_ALIAS),
    "qwen2": Family(_read_qwen2, defaults(
        (151936, 4096, 22016, 32, 32, 32, None, "silu", 32768, False), use_sliding_window=False,
        sliding_window=4096, max_window_layers=28, layer_types=None),
        fixed={"attention_bias": (True,), "mlp_bias": (False,)}),
    "qwen3": Family(_read_qwen3, defaults(
        (151936, 4096, 22016, 32, 32, 32, 128, "silu", 32768, False), attention_bias=False,
        use_sliding_window=False, sliding_window=4096, max_window_layers=28, layer_types=None),
        fixed={"mlp_bias": (False,)}),
    "qwen3_moe": Family(
        _read_qwen3_moe, defaults(
            (151936, 2048, 6144, 24, 32, 4, None, "silu", 32768, False), attention_bias=False,
            use_sliding_window=False, sliding_window=4096, decoder_sparse_step=1,
            moe_intermediate_size=768, num_experts_per_tok=8, num_experts=128,
            mlp_only_layers=None),
        ignored=frozenset({"max_window_layers"}), fixed={"mlp_bias": (False,)},
        aliases={"num_local_experts": "num_experts"},
    ),
    "qwen2_moe": Family(
        _read_qwen2_moe, defaults(
            (151936, 2048, 5632, 24, 16, 16, None, "silu", 32768, False), qkv_bias=True,
            use_sliding_window=False, sliding_window=4096, max_window_layers=28,
            layer_types=None, decoder_sparse_step=1, moe_intermediate_size=1408,
            shared_expert_intermediate_size=5632, num_experts_per_tok=4, num_experts=60,
            mlp_only_layers=None),
        fixed={"mlp_bias": (False,)}, aliases={"num_local_experts": "num_experts"},
    ),
    "glm4_moe": Family(
        _read_glm4_moe, defaults(
            (151552, 4096, 10944, 46, 96, 8, None, "silu", 131072, False), attention_bias=False,
            use_qk_norm=False, first_k_dense_replace=1, n_routed_experts=128,
            num_experts_per_tok=8, moe_intermediate_size=1408, n_shared_experts=1),
        # RoPE width, routing groups/scale and the MTP layers (not built) change no weight
        ignored=frozenset({"partial_rotary_factor", "n_group", "topk_group",
                           "routed_scaling_factor", "num_nextn_predict_layers"}),
        fixed={"mlp_bias": (False,)},
        aliases={"num_local_experts": "n_routed_experts",
                 "num_mtp_layers": "num_nextn_predict_layers"},
    ),
    "gpt_oss": Family(
        _read_gpt_oss, defaults(
            (201088, 2880, 2880, 36, 64, 8, 64, "silu", 131072, False), attention_bias=True,
            num_local_experts=128, num_experts_per_tok=4, sliding_window=128, layer_types=None),
        fixed={"mlp_bias": (False,)},
        aliases={**_EXPERT_ALIAS, "experts_per_token": "num_experts_per_tok"},
    ),
    "gemma2": Family(
        _read_gemma2, _GEMMA,
        ignored=frozenset({"hidden_act", "sliding_window_size"}),  # legacy duplicates
        fixed={"use_bidirectional_attention": (None, False)},
    ),
    "gemma3_text": Family(
        _read_gemma3, {**_GEMMA, "vocab_size": 262208, "max_position_embeddings": 131072},
        ignored=frozenset({"hidden_act", "sliding_window_pattern", "_sliding_window_pattern",
                           "final_logit_softcapping"}),
        fixed={"use_bidirectional_attention": (None, False)},
    ),
    "gemma4_text": Family(
        _read_gemma4, defaults(
            (262144, 2304, 9216, 30, 8, 4, 256, None, 131072, True), attention_bias=False,
            hidden_activation="gelu_pytorch_tanh", sliding_window=512, layer_types=None,
            global_head_dim=None, num_global_key_value_heads=None, attention_k_eq_v=False,
            hidden_size_per_layer_input=256, num_kv_shared_layers=0, enable_moe_block=False,
            num_experts=None, top_k_experts=None, moe_intermediate_size=None,
            per_layer_config=None),
        # `vocab_size_per_layer_input` sizes the PLE table and `use_double_wide_mlp` widens only
        # KV-shared layers' MLPs: both refused above; softcapping changes no shape
        ignored=frozenset({"vocab_size_per_layer_input", "use_double_wide_mlp",
                           "final_logit_softcapping", "hidden_act"}),
        fixed={"use_bidirectional_attention": (None, "vision"),
               "expert_intermediate_size": (None,)},
    ),
    # fused qkv / gate_up: same count as unfused
    "phi3": Family(_read_mistral, defaults(
        (32064, 3072, 8192, 32, 32, None, None, "silu", 4096, False), sliding_window=None),
        fixed=_NO_BIAS),
    "minimax_m2": Family(
        _read_minimax_m2, defaults(
            (200064, 3072, 1536, 62, 48, 8, 128, "silu", 196608, False), num_local_experts=256,
            num_experts_per_tok=8),
        # transformers' MiniMax-M2 always has per-layer QK norms and no shared expert; the partial
        # RoPE width, the routing bias (a buffer) and the MTP modules (not built) change no count
        ignored=frozenset({"rotary_dim", "use_routing_bias", "use_mtp", "mtp_transformer_layers",
                           "num_mtp_modules"}),
        fixed={"use_qk_norm": (True,), "qk_norm_type": ("per_layer",),
               "shared_intermediate_size": (0,), "attention_bias": (False,), "mlp_bias": (False,)},
        aliases={"num_experts": "num_local_experts"},
    ),
    "llama4_text": Family(
        _read_llama4, defaults(
            (202048, 5120, 8192, 48, 40, 8, 128, "silu", 131072, False), attention_bias=False,
            intermediate_size_mlp=16384, interleave_moe_layer_step=1, moe_layers=None,
            num_local_experts=16, num_experts_per_tok=1, attention_chunk_size=8192,
            no_rope_layer_interval=4, no_rope_layers=None, layer_types=None),
        # attention temperature tuning and the weightless QK L2 norm change no shape
        ignored=frozenset({"attn_scale", "attn_temperature_tuning", "floor_scale", "use_qk_norm",
                           "for_llm_compressor"}),
        fixed={"mlp_bias": (False,)},
    ),
}
