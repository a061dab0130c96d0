"""Hugging Face families with linear-attention layers (a recurrent state): Qwen3-Next and
Qwen3.5 (Gated DeltaNet), Nemotron-H / Nemotron-3 (Mamba-2 blocks), Bamba (Mamba-2 or attention,
then a SwiGLU), Kimi Linear (Kimi Delta Attention + MLA), Falcon-H1 (attention and Mamba-2 in
parallel)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cost_model.architecture import (
    ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, MAMBA2_MIXER, NO_MIXER,
    PARALLEL_MAMBA2_MIXER,
)
from cost_model.errors import ConfigError
from cost_model.hf.common import (
    Family, biases, defaults, mamba2_heads, moe_fields, qwen_shared_moe, read_int,
)
from cost_model.hf.mla import read_deepseek_v3


QWEN_LINEAR_ATTENTION = "linear_attention"


def _qwen_linear_layers(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 layer pattern: `layer_types` ("linear_attention": Gated DeltaNet,
    "full_attention": gated attention), else every `full_attention_interval`-th (default 4) layer
    full. Full layers' q_proj also yields the output gate."""
    layers = c["num_hidden_layers"]
    types = c["layer_types"]
    if types is None:
        interval = read_int({"full_attention_interval": c.get("full_attention_interval", 4)},
                        "full_attention_interval")
        types = [QWEN_LINEAR_ATTENTION if (i + 1) % interval else FULL_ATTENTION
                 for i in range(layers)]
    allowed = (FULL_ATTENTION, QWEN_LINEAR_ATTENTION)
    if (not isinstance(types, list | tuple) or len(types) != layers
            or not set(types) <= set(allowed)):
        raise ConfigError(
            f"`layer_types` ({types!r}) must list {allowed} once per layer ({layers} layers)"
        )
    fields: dict[str, Any] = {"attention_output_gate": True, "qk_norm": True, **biases(c)}
    if QWEN_LINEAR_ATTENTION not in types:
        return fields
    mixers = tuple(GATED_DELTANET_MIXER if t == QWEN_LINEAR_ATTENTION else ATTENTION_MIXER
                   for t in types)
    linear = {"linear_num_key_heads": read_int(c, "linear_num_key_heads"),
              "linear_key_head_dim": read_int(c, "linear_key_head_dim"),
              "linear_num_value_heads": read_int(c, "linear_num_value_heads"),
              "linear_value_head_dim": read_int(c, "linear_value_head_dim"),
              "linear_conv_kernel": read_int(c, "linear_conv_kernel_dim")}
    return {**fields, "layer_mixers": mixers, **linear}


def _read_qwen3_next(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-Next: Gated DeltaNet and gated-attention layers; MoE layers every
    `decoder_sparse_step`, the leading `mlp_only_layers` dense."""
    moe = qwen_shared_moe(c, read_int(c, "decoder_sparse_step"))
    return {**_qwen_linear_layers(c), **moe}


def _read_qwen3_5_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3.5-MoE's language model: Qwen3-Next's layers, every layer MoE (no dense key)."""
    return {**_qwen_linear_layers(c), **qwen_shared_moe(c, 1), "intermediate_size": 0}


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


_NEMOTRON_H_MIXERS = {"linear_attention": MAMBA2_MIXER, "full_attention": ATTENTION_MIXER}
_NEMOTRON_H_FFNS = ("mlp", "moe")


def _nemotron_h_layers(blocks: list[str]) -> list[tuple[str | None, str | None]]:
    """(mixer block, FFN block) of each layer. One block per layer, except the split form that
    `export` writes for a Mamba-2 hybrid whose every layer has a mixer and an FFN: Mamba-2
    blocks present and the pattern wholly (mixer, FFN) pairs. Each pair is then one layer: the
    same two pre-norm residual sub-blocks, so the same weights, norms and computation, read as
    the design that was exported (same layer count, pattern and `design_key`)."""
    pairs: list[tuple[str | None, str | None]] = list(zip(blocks[::2], blocks[1::2],
                                                          strict=False))
    if (len(blocks) % 2 == 0 and "linear_attention" in blocks
            and all(m in _NEMOTRON_H_MIXERS and f in _NEMOTRON_H_FFNS for m, f in pairs)):
        return pairs
    return [(b, None) if b in _NEMOTRON_H_MIXERS else (None, b) for b in blocks]


def _nemotron_h_ffns(c: Mapping[str, Any], ffns: list[str | None]) -> dict[str, Any]:
    """Per-layer FFN fields; canonical (no per-layer lists) when every layer has the same FFN."""
    if set(ffns) == {"mlp"}:
        return {"layer_ffn_widths": None, "intermediate_size": c["intermediate_size"]}
    widths = tuple(c["intermediate_size"] if f == "mlp" else 0 for f in ffns)
    fields = {"layer_ffn_widths": None if set(ffns) == {"moe"} else widths,
              "intermediate_size": c["intermediate_size"] if "mlp" in ffns else 0}
    if "moe" not in ffns:
        return fields
    # transformers builds the shared expert whatever `n_shared_experts` says (fixed to 1)
    shared = read_int(c, "moe_shared_expert_intermediate_size")
    return {**fields, **moe_fields(c, "n_routed_experts", "moe_intermediate_size"),
            "layer_moe": None if set(ffns) == {"moe"} else tuple(f == "moe" for f in ffns),
            "num_shared_experts": 1, "shared_expert_intermediate_size": shared}


def _read_nemotron_h(c: Mapping[str, Any]) -> dict[str, Any]:
    """Nemotron-H / Nemotron-3: blocks of one norm and a Mamba-2 mixer, GQA attention without
    QK norms, an ungated MLP of `intermediate_size`, or an MoE of ungated experts with a shared
    expert of `moe_shared_expert_intermediate_size`; a layer per block (transformers ignores
    `num_hidden_layers`), or per (mixer, FFN) pair in the split form (`_nemotron_h_layers`)."""
    layers = _nemotron_h_layers(_nemotron_h_blocks(c))
    mixers = tuple(NO_MIXER if mixer is None else _NEMOTRON_H_MIXERS.get(mixer, NO_MIXER)
                   for mixer, _ in layers)
    fields: dict[str, Any] = {
        "num_layers": len(layers), "gated_mlp": False, "hidden_act": c["mlp_hidden_act"],
        "mlp_bias": c["mlp_bias"], **biases(c), "layer_mixers": mixers,
        **_nemotron_h_ffns(c, [ffn for _, ffn in layers]),
    }
    if MAMBA2_MIXER in mixers:
        fields.update(linear_num_value_heads=read_int(c, "mamba_num_heads"),
                      linear_value_head_dim=read_int(c, "mamba_head_dim"),
                      linear_num_key_heads=read_int(c, "n_groups"),
                      linear_key_head_dim=read_int(c, "ssm_state_size"),
                      linear_conv_kernel=read_int(c, "conv_kernel"),
                      linear_conv_bias=c["use_conv_bias"])
    return fields


def _mamba2_fields(c: Mapping[str, Any], width: int) -> dict[str, Any]:
    """The Mamba-2 shape keys Bamba and Falcon-H1 share (`mamba_n_heads`, `mamba_d_head`,
    `mamba_n_groups`, `mamba_d_state`, `mamba_d_conv`, `mamba_conv_bias`), `width` wide."""
    return {**mamba2_heads(c, width, "mamba_n_heads", "mamba_d_head"),
            "linear_num_key_heads": read_int(c, "mamba_n_groups"),
            "linear_key_head_dim": read_int(c, "mamba_d_state"),
            "linear_conv_kernel": read_int(c, "mamba_d_conv"),
            "linear_conv_bias": c["mamba_conv_bias"]}


def _read_bamba(c: Mapping[str, Any]) -> dict[str, Any]:
    """Bamba (transformers' BambaDecoderLayer): each layer one mixer, GQA attention on
    `attn_layer_indices` (`attention_bias` on q/k/v/o) and Mamba-2 elsewhere, then a SwiGLU of
    `intermediate_size`. The Mamba-2 width is `mamba_expand` x hidden_size in `mamba_n_heads`
    heads, its output through a gated RMSNorm. RoPE on half of each head (BambaConfig hard-codes
    `partial_rotary_factor` 0.5) changes no weight."""
    layers = c["num_hidden_layers"]
    attention = c["attn_layer_indices"] or []
    if not set(attention) <= set(range(layers)):
        raise ConfigError(f"`attn_layer_indices` ({attention!r}) must name layers 0..{layers - 1}")
    mixers = tuple(ATTENTION_MIXER if i in attention else MAMBA2_MIXER for i in range(layers))
    fields = {**biases(c), "mlp_bias": c["mlp_bias"]}
    if MAMBA2_MIXER not in mixers:
        return fields
    width = read_int(c, "mamba_expand") * c["hidden_size"]
    return {**fields, "layer_mixers": mixers, **_mamba2_fields(c, width),
            "linear_norm": True}


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
    heads = read_int({"v": linear.get("num_heads", c["linear_num_heads"])}, "v")
    dim = read_int({"v": linear.get("head_dim", c["linear_head_dim"])}, "v")
    kernel = read_int({"v": linear.get("short_conv_kernel_size", c["linear_conv_kernel_dim"])}, "v")
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
    fields = read_deepseek_v3(
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
             else read_int(c, "mamba_expand") * c["hidden_size"])
    return {
        **biases(c), "mlp_bias": c["mlp_bias"],
        "layer_mixers": (PARALLEL_MAMBA2_MIXER,) * c["num_hidden_layers"],
        **_mamba2_fields(c, inner), "linear_norm": c["mamba_rms_norm"],
    }



_GDN_DEFAULTS = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                     linear_num_key_heads=16, linear_num_value_heads=32)
_QWEN_NEXT_IGNORED = frozenset({"full_attention_interval", "partial_rotary_factor",
                                "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings",
                                "mamba_ssm_dtype"})
# the output gate is always on in transformers' Qwen3-Next/Qwen3.5 attention; RoPE width
# (partial_rotary_factor, mrope) and the MTP layers (not built) change no shape
_QWEN_NEXT_FIXED = {"attn_output_gate": (True,), "mlp_bias": (False,)}
_QWEN_3_5_FIXED: dict[str, tuple[Any, ...]] = {**_QWEN_NEXT_FIXED, "mlp_only_layers": ([], None)}
FAMILIES: dict[str, Family] = {
    "qwen3_next": Family(
        _read_qwen3_next, defaults(
            (151936, 2048, 5632, 48, 16, 2, 256, "silu", 32768, False), attention_bias=False,
            **_GDN_DEFAULTS, decoder_sparse_step=1, moe_intermediate_size=512,
            shared_expert_intermediate_size=512, num_experts_per_tok=10, num_experts=512,
            mlp_only_layers=None, layer_types=None),
        ignored=_QWEN_NEXT_IGNORED, fixed=_QWEN_NEXT_FIXED),
    "qwen3_5_moe_text": Family(
        _read_qwen3_5_moe, defaults(
            (248320, 2048, None, 40, 16, 2, 256, "silu", 32768, False), attention_bias=False,
            **_GDN_DEFAULTS, moe_intermediate_size=512, shared_expert_intermediate_size=512,
            num_experts_per_tok=8, num_experts=256, layer_types=None),
        ignored=_QWEN_NEXT_IGNORED, fixed=_QWEN_3_5_FIXED),
    "qwen3_5_text": Family(
        _read_qwen3_5, defaults(
            (248320, 4096, 12288, 32, 16, 4, 256, "silu", 32768, False), attention_bias=False,
            **_GDN_DEFAULTS, layer_types=None),
        ignored=_QWEN_NEXT_IGNORED, fixed=_QWEN_3_5_FIXED),
    "nemotron_h": Family(
        _read_nemotron_h, defaults(
            (131072, 4096, 21504, None, 32, 8, 128, None, 4096, False), attention_bias=False,
            mlp_hidden_act="relu2", mlp_bias=False, ssm_state_size=128, mamba_num_heads=128,
            mamba_head_dim=64, n_groups=8, conv_kernel=4, use_conv_bias=True, n_routed_experts=8,
            n_shared_experts=1, moe_intermediate_size=7688,
            moe_shared_expert_intermediate_size=7688, num_experts_per_tok=2,
            layers_block_type=None),
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
    "kimi_linear": Family(
        _read_kimi_linear, defaults(
            (163840, 2304, 9216, 27, 32, 32, None, "silu", 1048576, False), attention_bias=False,
            moe_intermediate_size=1024, n_shared_experts=1, num_local_experts=256,
            num_experts_per_tok=8, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
            qk_nope_head_dim=128, v_head_dim=128, mlp_layer_types=None, layer_types=None,
            linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4),
        ignored=frozenset({"linear_attn_config", "first_k_dense_replace", "routed_scaling_factor",
                           "num_expert_group", "n_group", "topk_group", "qk_head_dim", "head_dim",
                           "moe_renormalize", "num_nextn_predict_layers"}),
        fixed={"mlp_bias": (False,)},
        aliases={"num_experts": "num_local_experts", "num_experts_per_token": "num_experts_per_tok",
                 "num_shared_experts": "n_shared_experts",
                 "model_max_length": "max_position_embeddings"},
    ),
    "bamba": Family(
        _read_bamba, defaults(
            (128000, 4096, 14336, 32, 32, 8, None, "silu", 262144, False), attention_bias=False,
            mlp_bias=False, attn_layer_indices=None, mamba_n_heads=128, mamba_d_head="auto",
            mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4, mamba_expand=2,
            mamba_conv_bias=True),
        # Mamba-2 kernel knobs and the loss's z-term change no shape; `attn_rotary_emb` (older
        # checkpoints: the RoPE width) is replaced by the hard-coded half-head RoPE
        ignored=frozenset({"mamba_chunk_size", "time_step_limit", "time_step_min",
                           "time_step_max", "time_step_floor", "z_loss_coefficient",
                           "num_logits_to_keep", "use_mamba_kernels", "attn_rotary_emb",
                           "partial_rotary_factor"}),
        fixed={"mamba_proj_bias": (False,)},
    ),
    "falcon_h1": Family(
        _read_falcon_h1, defaults(
            (128000, 4096, 14336, 32, 32, 8, None, "silu", 8192, False), attention_bias=False,
            mlp_bias=False, mamba_d_ssm=1024, mamba_n_heads=128, mamba_d_head="auto",
            mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4, mamba_expand=2,
            mamba_conv_bias=True, mamba_rms_norm=False),
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
}
