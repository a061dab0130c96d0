"""`Architecture` -> Hugging Face config dict: the most natural `model_type` that is exact.

Each exportable model_type has rules: what transformers' modeling code for it can express (one
`attention_bias` for q/k/v/o, which sliding patterns, which MoE placements, …). The
architecture's own family is used when it fits, else the first fitting model_type of
`EXPORT_ORDER`; transformers builds from the exported config a model of exactly
`count_params(arch)` parameters (checked in tests/cost_model/test_hf_config.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cost_model.architecture import (
    ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, MAMBA2_MIXER, NO_MIXER,
    SLIDING_ATTENTION, Architecture, field_value,
)
from cost_model.errors import ConfigError

EXPORT_ORDER = (
    "llama", "mistral", "qwen2", "qwen3", "gemma2", "mixtral", "qwen3_moe", "glm4_moe", "qwen2_moe",
    "gpt_oss",
    "deepseek_v3", "gemma3_text", "minimax_m2", "deepseek_v32", "glm_moe_dsa", "qwen3_5_text",
    "qwen3_5_moe_text", "qwen3_next", "nemotron_h", "bamba", "falcon_h1", "gemma4_text",
)
_CLASS_NAMES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "mixtral": "MixtralForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM", "glm4_moe": "Glm4MoeForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM", "gpt_oss": "GptOssForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "minimax_m2": "MiniMaxM2ForCausalLM",
    "deepseek_v32": "DeepseekV32ForCausalLM", "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "gemma4_text": "Gemma4ForCausalLM",
    "nemotron_h": "NemotronHForCausalLM", "falcon_h1": "FalconH1ForCausalLM",
    "bamba": "BambaForCausalLM",
    "qwen3_5_text": "Qwen3_5ForCausalLM",
    "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
}
_BOTH = (False, True)
_ANY_SLIDING = ("none", "all", "mixed")
_UNIFORM_SLIDING = ("none", "all")
_OMIT = object()  # marks an exported key to leave out
Rules = dict[str, tuple[Any, tuple[Any, ...]]]  # rule name -> (actual value, allowed values)


def architecture_to_hf_config(arch: Architecture) -> dict[str, Any]:
    """A config dict that `transformers.AutoConfig.for_model(**d)` (or `from_pretrained` on a
    folder holding it as config.json) loads into a model of exactly `count_params(arch)`."""
    family = _export_family(arch)
    common = {
        "model_type": family, "architectures": [_CLASS_NAMES[family]], "_name_or_path": arch.name,
        "vocab_size": arch.vocab_size, "hidden_size": arch.hidden_size,
        "intermediate_size": arch.ffn.intermediate_size, "num_hidden_layers": arch.num_layers,
        "num_attention_heads": arch.attention.num_attention_heads,
        "num_key_value_heads": arch.attention.num_kv_heads,
        "head_dim": arch.attention.head_dim, "hidden_act": arch.ffn.hidden_act,
        "max_position_embeddings": arch.max_position_embeddings,
        "tie_word_embeddings": arch.tie_word_embeddings,
    }
    merged = {**common, **_EXPORTERS[family](arch)}
    return {key: value for key, value in merged.items() if value is not _OMIT}


# ---- which model_type ----------------------------------------------------------------------------


def _export_family(arch: Architecture) -> str:
    """`arch.family` when it fits, else the first model_type in `EXPORT_ORDER` that does."""
    candidates = ((arch.family,) if arch.family in EXPORT_ORDER else ()) + EXPORT_ORDER
    broken = {family: _broken_rules(arch, family) for family in candidates}
    fitting = [family for family in candidates if not broken[family]]
    if fitting:
        return fitting[0]
    gap = export_gap(arch)
    if gap is not None:
        raise ConfigError(f"cannot export `{arch.name}` as a Hugging Face config: no supported "
                          f"model_type represents it: {gap}")
    closest = min(EXPORT_ORDER, key=lambda family: len(broken[family]))
    raise ConfigError(
        f"cannot export `{arch.name}` as a Hugging Face config: no supported model_type represents "
        f"it; the closest, `{closest}`, needs " + ", ".join(broken[closest])
    )


def export_gap(arch: Architecture) -> str | None:
    """Why no transformers 5.24 model_type expresses `arch` exactly, for the designs a search
    space can produce that none does (None: not one of them). Checked in transformers' modeling
    code: MLA sits beside linear layers only in kimi_linear, bailing_hybrid and glm5_next, all
    Kimi Delta Attention; no MLA family has a sliding window; every Mamba-2 family with a gated
    FFN ties the Mamba-2 width to `mamba_expand` (an integer) x hidden_size."""
    mla = arch.attention.attention_kind == "mla" and arch.num_attention_layers > 0
    kind = arch.mixer.linear_mixer_kind
    if mla and kind in (GATED_DELTANET_MIXER, MAMBA2_MIXER):
        return (f"`attention_kind` 'mla' with {kind} layers (`layer_mixers`): transformers pairs "
                "MLA only with Kimi Delta Attention (kimi_linear, bailing_hybrid, glm5_next)")
    if mla and arch.num_sliding_layers:
        return ("`attention_kind` 'mla' with sliding-window layers (`sliding_window`): no MLA "
                "model_type (deepseek_v3, deepseek_v32, glm_moe_dsa) has a sliding window")
    width = arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim
    serial = kind == MAMBA2_MIXER and not arch.mixer.num_parallel_hybrid_layers
    if serial and arch.ffn.gated_mlp and width % arch.hidden_size:
        return (f"`gated_mlp` (True) with Mamba-2 layers: nemotron_h's FFNs are ungated, and "
                f"bamba needs the Mamba-2 width `linear_num_value_heads` x `linear_value_head_dim` "
                f"({width}) to be a whole multiple of `hidden_size` ({arch.hidden_size})")
    return None


def _broken_rules(arch: Architecture, family: str) -> list[str]:
    rules = _FAMILY_RULES[family](arch)
    return [
        f"`{key}` in {allowed} (got {actual!r})"
        for key, (actual, allowed) in rules.items()
        if actual not in allowed
    ]


def _rules(arch: Architecture, **allowed: tuple[Any, ...] | None) -> Rules:
    """What a model_type needs: a plain dense GQA model, with `allowed` overriding (None: any)."""
    plain = {
        "attention_kind": ("gqa",), "gated_mlp": (True,), "norms_per_layer": (2,),
        "qk_norm": (False,), "qkv_bias": (False,), "o_bias": (False,), "mlp_bias": (False,),
        "router_bias": (False,), "expert_bias": (False,), "attention_sinks": (False,),
        "is_moe": (False,), "num_shared_experts": (0,), "first_dense_layers": (0,),
        "moe_layer_period": (1,), "sliding_pattern": ("none",), "qk_norm_scope": ("head",),
        "is_sparse_attention": (False,), "is_heterogeneous": (False,),
        "attention_output_gate": (False,), "shared_expert_gate": (False,),
        "global_head_dim": (0,), "attention_k_eq_v": (False,), "router_scales": (False,),
    }
    merged = {**plain, **allowed}
    return {key: (field_value(arch, key), values) for key, values in merged.items()
            if values is not None}


def _same_bias(arch: Architecture) -> dict[str, tuple[Any, ...]]:
    """One `attention_bias` key sets the q, k, v and o biases together."""
    return {"qkv_bias": _BOTH, "o_bias": (arch.attention.qkv_bias,)}


def _heads_divide_hidden(arch: Architecture) -> Rules:
    """LlamaConfig and Gemma2Config refuse hidden_size % num_attention_heads != 0."""
    remainder = arch.hidden_size % arch.attention.num_attention_heads
    return {"hidden_size % num_attention_heads": (remainder, (0,))}


def _deepseek_rules(arch: Architecture) -> Rules:
    """MLA, dense or MoE; transformers makes the shared experts n_shared * moe_intermediate wide."""
    mla = _rules(
        arch, **_same_bias(arch), attention_kind=("mla",), is_moe=_BOTH, num_shared_experts=None,
        first_dense_layers=None,
    )
    ffn = arch.ffn
    width = (ffn.num_shared_experts * ffn.moe_intermediate_size,)
    return {**mla, "shared_expert_intermediate_size": (ffn.shared_expert_intermediate_size, width)}


def _dsa_rules(arch: Architecture) -> Rules:
    """DeepSeek-V3.2 / GLM-5: DeepSeek-V3's rules with the sparse-attention indexer."""
    sparse = arch.attention.is_sparse_attention
    return {**_deepseek_rules(arch), "is_sparse_attention": (sparse, (True,))}


def _glm4_moe_rules(arch: Architecture) -> Rules:
    """GLM-4.5 (transformers' Glm4Moe): GQA with q/k/v biases only (o_proj has none), optional
    head QK norms, `first_k_dense_replace` leading dense layers, then every layer MoE with an
    ungated shared MLP of n_shared * moe_intermediate (0: a zero-width MLP, no weights, adds 0)."""
    rules = _rules(arch, qkv_bias=_BOTH, qk_norm=_BOTH, is_moe=(True,), num_shared_experts=None,
                   first_dense_layers=None)
    ffn = arch.ffn
    width = (ffn.num_shared_experts * ffn.moe_intermediate_size,)
    return {**rules, "shared_expert_intermediate_size": (ffn.shared_expert_intermediate_size,
                                                         width)}


def _qwen2_moe_rules(arch: Architecture) -> Rules:
    """Qwen1.5/2-MoE: GQA with q/k/v biases only, one sigmoid-gated shared MLP of any width (n
    shared SwiGLU experts under one gate are one MLP n times as wide), leading dense layers and
    `decoder_sparse_step` placement."""
    return _rules(arch, qkv_bias=_BOTH, is_moe=(True,), num_shared_experts=None,
                  shared_expert_gate=(True,), first_dense_layers=None, moe_layer_period=None)


def _qwen_hybrid_rules(arch: Architecture, moe: bool, any_placement: bool) -> Rules:
    """Qwen3-Next / Qwen3.5: gated attention with head QK norms and Gated DeltaNet layers (no
    layer without a mixer, no per-layer FFN widths); MoE with one gated shared expert."""
    shared = {"num_shared_experts": (1,), "shared_expert_gate": (True,)} if moe else {}
    placement = {"first_dense_layers": None, "moe_layer_period": None} if any_placement else {}
    rules = _rules(arch, qk_norm=(True,), attention_output_gate=(True,), is_heterogeneous=_BOTH,
                   is_moe=(moe,), **placement, **shared)
    pattern = {"layers without a mixer": (arch.num_layers - arch.num_mixer_layers, (0,)),
               "layer_ffn_widths": (arch.ffn.layer_ffn_widths, (None,))}
    return {**rules, **pattern}


_NEMOTRON_H_MIXER_BLOCKS = {MAMBA2_MIXER: "linear_attention", ATTENTION_MIXER: FULL_ATTENTION}


def _nemotron_h_blocks(arch: Architecture) -> list[str] | None:
    """Each layer as Nemotron-H blocks (one mixer or one FFN each, with its own pre-norm), or
    None when some layer has neither, a mixer other than Mamba-2 / attention, or a second FFN
    width. In a Mamba-2 hybrid a layer with a mixer and an FFN is two blocks, mixer then FFN:
    the same two pre-norm residual sub-blocks, so the same weights, norms and computation."""
    mixers = arch.mixer.layer_mixers or (ATTENTION_MIXER,) * arch.num_layers
    split, blocks = arch.mixer.linear_mixer_kind == MAMBA2_MIXER, []
    for mixer, width, moe in zip(mixers, arch.dense_ffn_widths, arch.layer_is_moe, strict=True):
        has_mixer, has_ffn = mixer != NO_MIXER, bool(width) or moe
        if (has_mixer and mixer not in _NEMOTRON_H_MIXER_BLOCKS) or not (has_mixer or has_ffn):
            return None
        if (has_mixer and has_ffn and not split) or (width and width != arch.ffn.intermediate_size):
            return None
        blocks += [_NEMOTRON_H_MIXER_BLOCKS[mixer]] if has_mixer else []
        blocks += ["moe" if moe else "mlp"] if has_ffn else []
    return blocks


def _nemotron_h_rules(arch: Architecture) -> Rules:
    """Nemotron-H: one block per layer (Mamba-2, attention, ungated MLP or MoE with at most one
    shared expert), no QK norms."""
    rules = _rules(arch, **_same_bias(arch), gated_mlp=(False,), is_moe=_BOTH,
                   is_heterogeneous=_BOTH, mlp_bias=_BOTH,
                   num_shared_experts=(1,) if arch.ffn.is_moe else (0,))
    placement = ((arch.ffn.first_dense_layers,
                  arch.ffn.moe_layer_period) if arch.ffn.layer_moe is None
                 else (0, 1))
    as_blocks = _nemotron_h_blocks(arch) is not None
    return {**rules, "layers as Nemotron-H blocks (a mixer or an FFN each)": (as_blocks, (True,)),
            "MoE placement (layer_moe, or MoE-free)": (placement if arch.ffn.is_moe else (0, 1),
                                                       ((0, 1),))}


def _gemma4_rules(arch: Architecture) -> Rules:
    """Gemma 4 (transformers' Gemma4TextConfig): Gemma 3's layers whose full-attention layers
    always have their own head width (`global_head_dim`, default 512) and, only under
    `attention_k_eq_v`, their own KV heads; the last layer full; dense, or MoE on every layer
    with the MLP beside the experts (one ungated shared expert, the router's scales, 7 norms)."""
    moe = arch.ffn.is_moe
    rules = _rules(arch, **_same_bias(arch), norms_per_layer=(7,) if moe else (4,),
                   qk_norm=(True,), sliding_pattern=_ANY_SLIDING, is_moe=_BOTH,
                   num_shared_experts=(1,) if moe else (0,), router_scales=(moe,),
                   global_head_dim=None,
                   attention_k_eq_v=_BOTH)
    att = arch.attention
    kv = att.num_global_kv_heads if att.attention_k_eq_v else att.num_kv_heads
    return {**rules, "global_head_dim >= 1": (arch.attention.global_head_dim > 0, (True,)),
            "num_global_kv_heads without attention_k_eq_v": (arch.attention.num_global_kv_heads,
                                                             (kv,)),
            "last layer full attention": (arch.layer_is_sliding[-1], (False,)),
            "dense layers beside MoE": (arch.num_dense_layers if moe else 0, (0,))}


def _bamba_rules(arch: Architecture) -> Rules:
    """Bamba: every layer one mixer (Mamba-2 or GQA attention, one bias for q/k/v/o) then a
    gated MLP; the Mamba-2 width is `mamba_expand` (an integer) x hidden_size. Its attention
    applies RoPE to half of each head (BambaConfig hard-codes `partial_rotary_factor` 0.5):
    the same weights and FLOPs, another position encoding."""
    rules = _rules(arch, **_same_bias(arch), mlp_bias=_BOTH, is_heterogeneous=_BOTH)
    mixers = set(arch.mixer.layer_mixers or ()) - {MAMBA2_MIXER, ATTENTION_MIXER}
    width = arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim
    return {**rules, "layer mixers other than mamba2/attention": (sorted(mixers), ([],)),
            "layer_ffn_widths": (arch.ffn.layer_ffn_widths, (None,)),
            "linear_norm": (arch.mixer.linear_norm, (True,)),
            "Mamba-2 width % hidden_size": (width % arch.hidden_size, (0,)),
            "some layer Mamba-2": (arch.mixer.linear_mixer_kind, (MAMBA2_MIXER,))}


_FAMILY_RULES: dict[str, Callable[[Architecture], Rules]] = {
    "llama": lambda a: {**_rules(a, **_same_bias(a), mlp_bias=_BOTH), **_heads_divide_hidden(a)},
    "mistral": lambda a: _rules(a, sliding_pattern=_UNIFORM_SLIDING),
    "qwen2": lambda a: _rules(a, qkv_bias=(True,), sliding_pattern=_ANY_SLIDING),
    "qwen3": lambda a: _rules(a, **_same_bias(a), qk_norm=(True,), sliding_pattern=_ANY_SLIDING),
    "gemma2": lambda a: {
        **_rules(a, **_same_bias(a), norms_per_layer=(4,), sliding_pattern=_ANY_SLIDING),
        **_heads_divide_hidden(a),
    },
    "gemma3_text": lambda a: {
        **_rules(a, **_same_bias(a), norms_per_layer=(4,), qk_norm=(True,),
                 sliding_pattern=_ANY_SLIDING),
        **_heads_divide_hidden(a),
    },
    "gemma4_text": _gemma4_rules,
    "mixtral": lambda a: _rules(a, is_moe=(True,), sliding_pattern=_UNIFORM_SLIDING),
    "qwen3_moe": lambda a: _rules(
        a, **_same_bias(a), is_moe=(True,), qk_norm=(True,), first_dense_layers=None,
        moe_layer_period=None, sliding_pattern=_UNIFORM_SLIDING,
    ),
    "glm4_moe": _glm4_moe_rules,
    "qwen2_moe": _qwen2_moe_rules,
    "gpt_oss": lambda a: _rules(
        a, **_same_bias(a), is_moe=(True,), router_bias=(True,), expert_bias=(True,),
        attention_sinks=(True,), sliding_pattern=_ANY_SLIDING,
    ),
    "deepseek_v3": _deepseek_rules,
    # MiniMax-M2: MoE only (its intermediate_size is the expert width), per-layer QK norms
    "minimax_m2": lambda a: {
        **_rules(a, is_moe=(True,), qk_norm=(True,), qk_norm_scope=("layer",)),
        "num_dense_layers": (a.num_dense_layers, (0,)),
    },
    "deepseek_v32": _dsa_rules,
    "glm_moe_dsa": _dsa_rules,
    "qwen3_5_text": lambda a: _qwen_hybrid_rules(a, moe=False, any_placement=False),
    "qwen3_5_moe_text": lambda a: _qwen_hybrid_rules(a, moe=True, any_placement=False),
    "qwen3_next": lambda a: _qwen_hybrid_rules(a, moe=True, any_placement=True),
    "nemotron_h": _nemotron_h_rules,
    "bamba": _bamba_rules,
    # Falcon-H1: every layer attention + Mamba-2 in parallel, then a SwiGLU
    "falcon_h1": lambda a: {
        **_rules(a, **_same_bias(a), mlp_bias=_BOTH, is_heterogeneous=_BOTH),
        "every layer attention+mamba2": (a.mixer.num_parallel_hybrid_layers, (a.num_layers,)),
        "layer_ffn_widths": (a.ffn.layer_ffn_widths, (None,)),
    },
}


# ---- the keys of each model_type -----------------------------------------------------------------


def _window(arch: Architecture) -> int | None:
    return arch.attention.sliding_window if arch.num_sliding_layers else None


def _bias(arch: Architecture) -> dict[str, Any]:
    # q, k, v and o (the rules ensure o_bias == qkv_bias)
    return {"attention_bias": arch.attention.qkv_bias}


def _export_layer_types(arch: Architecture) -> dict[str, Any]:
    types = [SLIDING_ATTENTION if sliding else FULL_ATTENTION for sliding in arch.layer_is_sliding]
    return {"sliding_window": _window(arch), "layer_types": types}


def _export_qwen2(arch: Architecture) -> dict[str, Any]:
    """Qwen2 always has q/k/v biases (no key); `layer_types` overrides `max_window_layers`."""
    window = {"use_sliding_window": arch.num_sliding_layers > 0,
              "max_window_layers": arch.num_layers}
    return {**window, **_export_layer_types(arch)}


def _export_gemma2(arch: Architecture) -> dict[str, Any]:
    activation = {"hidden_act": _OMIT, "hidden_activation": arch.ffn.hidden_act}
    # 1/sqrt(head_dim), as Gemma-2 2B and 9B
    scaling = {"query_pre_attn_scalar": arch.attention.head_dim}
    return {**activation, **_bias(arch), **scaling, **_export_layer_types(arch)}


GEMMA4_DEFAULT_WINDOW = 512  # Gemma4TextConfig.sliding_window (transformers 5.24): unused here


def _export_gemma4(arch: Architecture) -> dict[str, Any]:
    """Gemma 4 without per-layer input embeddings or KV sharing; an MoE's shared expert is the
    MLP of `enable_moe_block`."""
    layers = _export_layer_types(arch)
    shape = {"global_head_dim": arch.attention.global_head_dim,
             "attention_k_eq_v": arch.attention.attention_k_eq_v,
             "num_global_key_value_heads": arch.attention.num_global_kv_heads,
             "sliding_window": layers["sliding_window"] or GEMMA4_DEFAULT_WINDOW,
             "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
             "enable_moe_block": arch.ffn.is_moe}
    moe = {"num_experts": arch.ffn.num_experts, "top_k_experts": arch.ffn.experts_per_token,
           "moe_intermediate_size": arch.ffn.moe_intermediate_size,
           "intermediate_size": arch.ffn.shared_expert_intermediate_size} if arch.ffn.is_moe else {}
    return {"hidden_act": _OMIT, "hidden_activation": arch.ffn.hidden_act, **_bias(arch),
            **layers, **shape, **moe}


def _export_mixtral(arch: Architecture) -> dict[str, Any]:
    """Mixtral's `intermediate_size` is the expert width."""
    experts = {"num_local_experts": arch.ffn.num_experts,
               "num_experts_per_tok": arch.ffn.experts_per_token}
    return {**experts, "intermediate_size": arch.ffn.moe_intermediate_size,
            "sliding_window": _window(arch)}


def _export_qwen3_moe(arch: Architecture) -> dict[str, Any]:
    return {
        **_bias(arch), "num_experts": arch.ffn.num_experts,
        "num_experts_per_tok": arch.ffn.experts_per_token,
        "moe_intermediate_size": arch.ffn.moe_intermediate_size, "norm_topk_prob": True,
        "decoder_sparse_step": arch.ffn.moe_layer_period,
        "mlp_only_layers": list(range(arch.ffn.first_dense_layers)),
        "use_sliding_window": arch.num_sliding_layers > 0, "sliding_window": _window(arch),
    }


def _export_glm4_moe(arch: Architecture) -> dict[str, Any]:
    """RoPE on the whole head (Glm4MoeConfig defaults `partial_rotary_factor` to 0.5); one routing
    group; no multi-token-prediction layer."""
    experts = {"n_routed_experts": arch.ffn.num_experts,
               "num_experts_per_tok": arch.ffn.experts_per_token,
               "moe_intermediate_size": arch.ffn.moe_intermediate_size,
               "n_shared_experts": arch.ffn.num_shared_experts}
    placement = {"first_k_dense_replace": arch.ffn.first_dense_layers, "n_group": 1,
                 "topk_group": 1,
                 "num_nextn_predict_layers": 0}
    return {**experts, **placement, "attention_bias": arch.attention.qkv_bias,
            "use_qk_norm": arch.attention.qk_norm,
            "partial_rotary_factor": 1.0}


def _export_qwen2_moe(arch: Architecture) -> dict[str, Any]:
    """`qkv_bias` (o_proj has none); the shared MLP's total width; no sliding window."""
    return {
        "qkv_bias": arch.attention.qkv_bias, "num_experts": arch.ffn.num_experts,
        "num_experts_per_tok": arch.ffn.experts_per_token,
        "moe_intermediate_size": arch.ffn.moe_intermediate_size,
        "shared_expert_intermediate_size": arch.ffn.shared_expert_intermediate_size,
        "decoder_sparse_step": arch.ffn.moe_layer_period,
        "mlp_only_layers": list(range(arch.ffn.first_dense_layers)), "use_sliding_window": False,
    }


def _export_gpt_oss(arch: Architecture) -> dict[str, Any]:
    return {**_bias(arch), **_export_mixtral(arch), **_export_layer_types(arch)}


def _export_deepseek_v3(arch: Architecture) -> dict[str, Any]:
    """MLA; one routing group (n_group = topk_group = 1) so that any expert count routes."""
    mla = {
        "q_lora_rank": arch.attention.q_lora_rank or None,
        "kv_lora_rank": arch.attention.kv_lora_rank,
        "qk_nope_head_dim": arch.attention.qk_nope_head_dim,
        "qk_rope_head_dim": arch.attention.qk_rope_head_dim,
        "v_head_dim": arch.attention.v_head_dim, "head_dim": _OMIT, **_bias(arch),
    }
    if not arch.ffn.is_moe:
        return {**mla, "first_k_dense_replace": arch.num_layers}
    return {
        **mla, "n_routed_experts": arch.ffn.num_experts,
        "num_experts_per_tok": arch.ffn.experts_per_token,
        "n_shared_experts": arch.ffn.num_shared_experts,
        "moe_intermediate_size": arch.ffn.moe_intermediate_size,
        "first_k_dense_replace": arch.ffn.first_dense_layers, "n_group": 1, "topk_group": 1,
    }


def _export_dsa(arch: Architecture) -> dict[str, Any]:
    """DeepSeek-V3's keys plus the indexer; every layer runs its own indexer (GLM-5's
    `indexer_types` all "full")."""
    indexer = {"index_n_heads": arch.attention.index_heads,
               "index_head_dim": arch.attention.index_head_dim,
               "index_topk": arch.attention.index_topk}
    return {**_export_deepseek_v3(arch), **indexer}


def _export_minimax_m2(arch: Architecture) -> dict[str, Any]:
    experts = {"num_local_experts": arch.ffn.num_experts,
               "num_experts_per_tok": arch.ffn.experts_per_token}
    return {**experts, "intermediate_size": arch.ffn.moe_intermediate_size}


def _export_qwen_hybrid(arch: Architecture) -> dict[str, Any]:
    """`layer_types` ("linear_attention" for Gated DeltaNet) and the linear-attention shapes."""
    mixers = arch.mixer.layer_mixers or ()
    types = ["linear_attention" if m == GATED_DELTANET_MIXER else FULL_ATTENTION for m in mixers]
    linear = {"linear_num_key_heads": arch.mixer.linear_num_key_heads,
              "linear_key_head_dim": arch.mixer.linear_key_head_dim,
              "linear_num_value_heads": arch.mixer.linear_num_value_heads,
              "linear_value_head_dim": arch.mixer.linear_value_head_dim,
              "linear_conv_kernel_dim": arch.mixer.linear_conv_kernel} if mixers else {}
    return {**_bias(arch), "layer_types": types or [FULL_ATTENTION] * arch.num_layers, **linear}


def _export_qwen_moe(arch: Architecture) -> dict[str, Any]:
    return {"num_experts": arch.ffn.num_experts, "num_experts_per_tok": arch.ffn.experts_per_token,
            "moe_intermediate_size": arch.ffn.moe_intermediate_size, "norm_topk_prob": True,
            "shared_expert_intermediate_size": arch.ffn.shared_expert_intermediate_size}


def _export_nemotron_h(arch: Architecture) -> dict[str, Any]:
    blocks = _nemotron_h_blocks(arch) or []
    fields: dict[str, Any] = {
        **_bias(arch), "layers_block_type": blocks, "num_hidden_layers": len(blocks),
        "hidden_act": _OMIT,
        "mlp_hidden_act": arch.ffn.hidden_act, "mlp_bias": arch.ffn.mlp_bias,
    }
    if arch.mixer.num_linear_attention_layers:
        fields.update(mamba_num_heads=arch.mixer.linear_num_value_heads,
                      mamba_head_dim=arch.mixer.linear_value_head_dim,
                      n_groups=arch.mixer.linear_num_key_heads,
                      ssm_state_size=arch.mixer.linear_key_head_dim,
                      conv_kernel=arch.mixer.linear_conv_kernel,
                      use_conv_bias=arch.mixer.linear_conv_bias)
    if arch.ffn.is_moe:
        fields.update(n_routed_experts=arch.ffn.num_experts,
                      num_experts_per_tok=arch.ffn.experts_per_token,
                      moe_intermediate_size=arch.ffn.moe_intermediate_size,
                      n_shared_experts=arch.ffn.num_shared_experts,
                      moe_shared_expert_intermediate_size=arch.ffn.shared_expert_intermediate_size)
    return fields


def _export_bamba(arch: Architecture) -> dict[str, Any]:
    """The attention layers' indices and the Mamba-2 shapes (no projection biases)."""
    width = arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim
    mixers = arch.mixer.layer_mixers or ()
    return {
        **_bias(arch),
        "mlp_bias": arch.ffn.mlp_bias,
        "attn_layer_indices": [i for i, m in enumerate(mixers) if m == ATTENTION_MIXER],
        "mamba_n_heads": arch.mixer.linear_num_value_heads,
        "mamba_d_head": arch.mixer.linear_value_head_dim,
        "mamba_expand": width // arch.hidden_size,
        "mamba_n_groups": arch.mixer.linear_num_key_heads,
        "mamba_d_state": arch.mixer.linear_key_head_dim,
        "mamba_d_conv": arch.mixer.linear_conv_kernel,
        "mamba_conv_bias": arch.mixer.linear_conv_bias, "mamba_proj_bias": False,
    }


_EXPORTERS: dict[str, Callable[[Architecture], dict[str, Any]]] = {
    "llama": lambda arch: {**_bias(arch), "mlp_bias": arch.ffn.mlp_bias},
    "mistral": lambda arch: {"sliding_window": _window(arch)},
    "qwen2": _export_qwen2,
    "qwen3": lambda arch: {**_bias(arch), **_export_qwen2(arch)},
    "gemma2": _export_gemma2,
    "gemma3_text": _export_gemma2,
    "gemma4_text": _export_gemma4,
    "mixtral": _export_mixtral,
    "qwen3_moe": _export_qwen3_moe,
    "glm4_moe": _export_glm4_moe,
    "qwen2_moe": _export_qwen2_moe,
    "gpt_oss": _export_gpt_oss,
    "deepseek_v3": _export_deepseek_v3,
    "minimax_m2": _export_minimax_m2,
    "deepseek_v32": _export_dsa,
    "glm_moe_dsa": lambda arch: {**_export_dsa(arch), "indexer_types": ["full"] * arch.num_layers},
    "qwen3_5_text": _export_qwen_hybrid,
    "nemotron_h": _export_nemotron_h,
    "bamba": _export_bamba,
    "falcon_h1": lambda arch: {
        **_bias(arch),
        "mlp_bias": arch.ffn.mlp_bias,
        "mamba_d_ssm": arch.mixer.linear_num_value_heads * arch.mixer.linear_value_head_dim,
        "mamba_n_heads": arch.mixer.linear_num_value_heads,
        "mamba_d_head": arch.mixer.linear_value_head_dim,
        "mamba_n_groups": arch.mixer.linear_num_key_heads,
        "mamba_d_state": arch.mixer.linear_key_head_dim,
        "mamba_d_conv": arch.mixer.linear_conv_kernel,
        "mamba_conv_bias": arch.mixer.linear_conv_bias,
        "mamba_rms_norm": arch.mixer.linear_norm,
    },
    "qwen3_5_moe_text": lambda arch: {**_export_qwen_hybrid(arch), **_export_qwen_moe(arch),
                                      "intermediate_size": _OMIT},
    "qwen3_next": lambda arch: {
        **_export_qwen_hybrid(arch), **_export_qwen_moe(arch),
        "decoder_sparse_step": arch.ffn.moe_layer_period,
        "mlp_only_layers": list(range(arch.ffn.first_dense_layers)),
    },
}
