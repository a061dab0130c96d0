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
    ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, MAMBA2_MIXER, SLIDING_ATTENTION,
    Architecture,
)  # fmt: skip
from cost_model.errors import ConfigError

EXPORT_ORDER = (
    "llama", "mistral", "qwen2", "qwen3", "gemma2", "mixtral", "qwen3_moe", "gpt_oss",
    "deepseek_v3", "gemma3_text", "minimax_m2", "deepseek_v32", "glm_moe_dsa", "qwen3_5_text",
    "qwen3_5_moe_text", "qwen3_next", "nemotron_h", "falcon_h1",
)  # fmt: skip
_CLASS_NAMES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "mixtral": "MixtralForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM", "gpt_oss": "GptOssForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "minimax_m2": "MiniMaxM2ForCausalLM",
    "deepseek_v32": "DeepseekV32ForCausalLM", "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "nemotron_h": "NemotronHForCausalLM", "falcon_h1": "FalconH1ForCausalLM",
    "qwen3_5_text": "Qwen3_5ForCausalLM",
    "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
}  # fmt: skip
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
        "intermediate_size": arch.intermediate_size, "num_hidden_layers": arch.num_layers,
        "num_attention_heads": arch.num_attention_heads, "num_key_value_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim, "hidden_act": arch.hidden_act,
        "max_position_embeddings": arch.max_position_embeddings,
        "tie_word_embeddings": arch.tie_word_embeddings,
    }  # fmt: skip
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
    closest = min(EXPORT_ORDER, key=lambda family: len(broken[family]))
    raise ConfigError(
        f"cannot export `{arch.name}` as a Hugging Face config: no supported model_type represents "
        f"it; the closest, `{closest}`, needs " + ", ".join(broken[closest])
    )


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
    }  # fmt: skip
    merged = {**plain, **allowed}
    return {key: (getattr(arch, key), values) for key, values in merged.items()
            if values is not None}


def _same_bias(arch: Architecture) -> dict[str, tuple[Any, ...]]:
    """One `attention_bias` key sets the q, k, v and o biases together."""
    return {"qkv_bias": _BOTH, "o_bias": (arch.qkv_bias,)}


def _heads_divide_hidden(arch: Architecture) -> Rules:
    """LlamaConfig and Gemma2Config refuse hidden_size % num_attention_heads != 0."""
    remainder = arch.hidden_size % arch.num_attention_heads
    return {"hidden_size % num_attention_heads": (remainder, (0,))}


def _deepseek_rules(arch: Architecture) -> Rules:
    """MLA, dense or MoE; transformers makes the shared experts n_shared * moe_intermediate wide."""
    mla = _rules(
        arch, **_same_bias(arch), attention_kind=("mla",), is_moe=_BOTH, num_shared_experts=None,
        first_dense_layers=None,
    )  # fmt: skip
    width = (arch.num_shared_experts * arch.moe_intermediate_size,)
    return {**mla, "shared_expert_intermediate_size": (arch.shared_expert_intermediate_size, width)}


def _dsa_rules(arch: Architecture) -> Rules:
    """DeepSeek-V3.2 / GLM-5: DeepSeek-V3's rules with the sparse-attention indexer."""
    return {**_deepseek_rules(arch), "is_sparse_attention": (arch.is_sparse_attention, (True,))}


def _qwen_hybrid_rules(arch: Architecture, moe: bool, any_placement: bool) -> Rules:
    """Qwen3-Next / Qwen3.5: gated attention with head QK norms and Gated DeltaNet layers (no
    layer without a mixer, no per-layer FFN widths); MoE with one gated shared expert."""
    shared = {"num_shared_experts": (1,), "shared_expert_gate": (True,)} if moe else {}
    placement = {"first_dense_layers": None, "moe_layer_period": None} if any_placement else {}
    rules = _rules(arch, qk_norm=(True,), attention_output_gate=(True,), is_heterogeneous=_BOTH,
                   is_moe=(moe,), **placement, **shared)
    pattern = {"layers without a mixer": (arch.num_layers - arch.num_mixer_layers, (0,)),
               "layer_ffn_widths": (arch.layer_ffn_widths, (None,))}
    return {**rules, **pattern}


def _nemotron_h_blocks(arch: Architecture) -> list[str] | None:
    """Each layer as one Nemotron-H block, or None when some layer has both a mixer and an FFN
    (or neither), a linear mixer other than Mamba-2, or a second FFN width."""
    mixers = arch.layer_mixers or (ATTENTION_MIXER,) * arch.num_layers
    widths, blocks = arch.dense_ffn_widths, []
    for mixer, width, moe in zip(mixers, widths, arch.layer_is_moe, strict=True):
        has_ffn = bool(width) or moe
        if (mixer != "none") == has_ffn or mixer == GATED_DELTANET_MIXER:
            return None
        if width and width != arch.intermediate_size:
            return None
        blocks.append({MAMBA2_MIXER: "linear_attention", ATTENTION_MIXER: FULL_ATTENTION}.get(
            mixer, "moe" if moe else "mlp"))
    return blocks


def _nemotron_h_rules(arch: Architecture) -> Rules:
    """Nemotron-H: one block per layer (Mamba-2, attention, ungated MLP or MoE with at most one
    shared expert), no QK norms."""
    rules = _rules(arch, **_same_bias(arch), gated_mlp=(False,), is_moe=_BOTH,
                   is_heterogeneous=_BOTH, mlp_bias=_BOTH,
                   num_shared_experts=(1,) if arch.is_moe else (0,))
    placement = ((arch.first_dense_layers, arch.moe_layer_period) if arch.layer_moe is None
                 else (0, 1))
    blocks = _nemotron_h_blocks(arch)
    return {**rules, "one block (mixer or FFN) per layer": (blocks is not None, (True,)),
            "MoE placement (layer_moe, or MoE-free)": (placement if arch.is_moe else (0, 1),
                                                       ((0, 1),))}


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
    "mixtral": lambda a: _rules(a, is_moe=(True,), sliding_pattern=_UNIFORM_SLIDING),
    "qwen3_moe": lambda a: _rules(
        a, **_same_bias(a), is_moe=(True,), qk_norm=(True,), first_dense_layers=None,
        moe_layer_period=None, sliding_pattern=_UNIFORM_SLIDING,
    ),
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
    # Falcon-H1: every layer attention + Mamba-2 in parallel, then a SwiGLU
    "falcon_h1": lambda a: {
        **_rules(a, **_same_bias(a), mlp_bias=_BOTH, is_heterogeneous=_BOTH),
        "every layer attention+mamba2": (a.num_parallel_hybrid_layers, (a.num_layers,)),
        "layer_ffn_widths": (a.layer_ffn_widths, (None,)),
    },
}  # fmt: skip


# ---- the keys of each model_type -----------------------------------------------------------------


def _window(arch: Architecture) -> int | None:
    return arch.sliding_window if arch.num_sliding_layers else None


def _bias(arch: Architecture) -> dict[str, Any]:
    return {"attention_bias": arch.qkv_bias}  # q, k, v and o (the rules ensure o_bias == qkv_bias)


def _export_layer_types(arch: Architecture) -> dict[str, Any]:
    types = [SLIDING_ATTENTION if sliding else FULL_ATTENTION for sliding in arch.layer_is_sliding]
    return {"sliding_window": _window(arch), "layer_types": types}


def _export_qwen2(arch: Architecture) -> dict[str, Any]:
    """Qwen2 always has q/k/v biases (no key); `layer_types` overrides `max_window_layers`."""
    window = {"use_sliding_window": arch.num_sliding_layers > 0,
              "max_window_layers": arch.num_layers}
    return {**window, **_export_layer_types(arch)}


def _export_gemma2(arch: Architecture) -> dict[str, Any]:
    activation = {"hidden_act": _OMIT, "hidden_activation": arch.hidden_act}
    scaling = {"query_pre_attn_scalar": arch.head_dim}  # 1/sqrt(head_dim), as Gemma-2 2B and 9B
    return {**activation, **_bias(arch), **scaling, **_export_layer_types(arch)}


def _export_mixtral(arch: Architecture) -> dict[str, Any]:
    """Mixtral's `intermediate_size` is the expert width."""
    experts = {"num_local_experts": arch.num_experts, "num_experts_per_tok": arch.experts_per_token}
    return {**experts, "intermediate_size": arch.moe_intermediate_size,
            "sliding_window": _window(arch)}


def _export_qwen3_moe(arch: Architecture) -> dict[str, Any]:
    return {
        **_bias(arch), "num_experts": arch.num_experts,
        "num_experts_per_tok": arch.experts_per_token,
        "moe_intermediate_size": arch.moe_intermediate_size, "norm_topk_prob": True,
        "decoder_sparse_step": arch.moe_layer_period,
        "mlp_only_layers": list(range(arch.first_dense_layers)),
        "use_sliding_window": arch.num_sliding_layers > 0, "sliding_window": _window(arch),
    }  # fmt: skip


def _export_gpt_oss(arch: Architecture) -> dict[str, Any]:
    return {**_bias(arch), **_export_mixtral(arch), **_export_layer_types(arch)}


def _export_deepseek_v3(arch: Architecture) -> dict[str, Any]:
    """MLA; one routing group (n_group = topk_group = 1) so that any expert count routes."""
    mla = {
        "q_lora_rank": arch.q_lora_rank or None, "kv_lora_rank": arch.kv_lora_rank,
        "qk_nope_head_dim": arch.qk_nope_head_dim, "qk_rope_head_dim": arch.qk_rope_head_dim,
        "v_head_dim": arch.v_head_dim, "head_dim": _OMIT, **_bias(arch),
    }  # fmt: skip
    if not arch.is_moe:
        return {**mla, "first_k_dense_replace": arch.num_layers}
    return {
        **mla, "n_routed_experts": arch.num_experts, "num_experts_per_tok": arch.experts_per_token,
        "n_shared_experts": arch.num_shared_experts,
        "moe_intermediate_size": arch.moe_intermediate_size,
        "first_k_dense_replace": arch.first_dense_layers, "n_group": 1, "topk_group": 1,
    }  # fmt: skip


def _export_dsa(arch: Architecture) -> dict[str, Any]:
    """DeepSeek-V3's keys plus the indexer; every layer runs its own indexer (GLM-5's
    `indexer_types` all "full")."""
    indexer = {"index_n_heads": arch.index_heads, "index_head_dim": arch.index_head_dim,
               "index_topk": arch.index_topk}
    return {**_export_deepseek_v3(arch), **indexer}


def _export_minimax_m2(arch: Architecture) -> dict[str, Any]:
    experts = {"num_local_experts": arch.num_experts, "num_experts_per_tok": arch.experts_per_token}
    return {**experts, "intermediate_size": arch.moe_intermediate_size}


def _export_qwen_hybrid(arch: Architecture) -> dict[str, Any]:
    """`layer_types` ("linear_attention" for Gated DeltaNet) and the linear-attention shapes."""
    mixers = arch.layer_mixers or ()
    types = ["linear_attention" if m == GATED_DELTANET_MIXER else FULL_ATTENTION for m in mixers]
    linear = {"linear_num_key_heads": arch.linear_num_key_heads,
              "linear_key_head_dim": arch.linear_key_head_dim,
              "linear_num_value_heads": arch.linear_num_value_heads,
              "linear_value_head_dim": arch.linear_value_head_dim,
              "linear_conv_kernel_dim": arch.linear_conv_kernel} if mixers else {}
    return {**_bias(arch), "layer_types": types or [FULL_ATTENTION] * arch.num_layers, **linear}


def _export_qwen_moe(arch: Architecture) -> dict[str, Any]:
    return {"num_experts": arch.num_experts, "num_experts_per_tok": arch.experts_per_token,
            "moe_intermediate_size": arch.moe_intermediate_size, "norm_topk_prob": True,
            "shared_expert_intermediate_size": arch.shared_expert_intermediate_size}


def _export_nemotron_h(arch: Architecture) -> dict[str, Any]:
    fields: dict[str, Any] = {
        **_bias(arch), "layers_block_type": _nemotron_h_blocks(arch), "hidden_act": _OMIT,
        "mlp_hidden_act": arch.hidden_act, "mlp_bias": arch.mlp_bias,
    }
    if arch.num_linear_attention_layers:
        fields.update(mamba_num_heads=arch.linear_num_value_heads,
                      mamba_head_dim=arch.linear_value_head_dim,
                      n_groups=arch.linear_num_key_heads, ssm_state_size=arch.linear_key_head_dim,
                      conv_kernel=arch.linear_conv_kernel, use_conv_bias=arch.linear_conv_bias)
    if arch.is_moe:
        fields.update(n_routed_experts=arch.num_experts, num_experts_per_tok=arch.experts_per_token,
                      moe_intermediate_size=arch.moe_intermediate_size,
                      n_shared_experts=arch.num_shared_experts,
                      moe_shared_expert_intermediate_size=arch.shared_expert_intermediate_size)
    return fields


_EXPORTERS: dict[str, Callable[[Architecture], dict[str, Any]]] = {
    "llama": lambda arch: {**_bias(arch), "mlp_bias": arch.mlp_bias},
    "mistral": lambda arch: {"sliding_window": _window(arch)},
    "qwen2": _export_qwen2,
    "qwen3": lambda arch: {**_bias(arch), **_export_qwen2(arch)},
    "gemma2": _export_gemma2,
    "gemma3_text": _export_gemma2,
    "mixtral": _export_mixtral,
    "qwen3_moe": _export_qwen3_moe,
    "gpt_oss": _export_gpt_oss,
    "deepseek_v3": _export_deepseek_v3,
    "minimax_m2": _export_minimax_m2,
    "deepseek_v32": _export_dsa,
    "glm_moe_dsa": lambda arch: {**_export_dsa(arch), "indexer_types": ["full"] * arch.num_layers},
    "qwen3_5_text": _export_qwen_hybrid,
    "nemotron_h": _export_nemotron_h,
    "falcon_h1": lambda arch: {
        **_bias(arch), "mlp_bias": arch.mlp_bias,
        "mamba_d_ssm": arch.linear_num_value_heads * arch.linear_value_head_dim,
        "mamba_n_heads": arch.linear_num_value_heads, "mamba_d_head": arch.linear_value_head_dim,
        "mamba_n_groups": arch.linear_num_key_heads, "mamba_d_state": arch.linear_key_head_dim,
        "mamba_d_conv": arch.linear_conv_kernel, "mamba_conv_bias": arch.linear_conv_bias,
        "mamba_rms_norm": arch.linear_norm,
    },
    "qwen3_5_moe_text": lambda arch: {**_export_qwen_hybrid(arch), **_export_qwen_moe(arch),
                                      "intermediate_size": _OMIT},
    "qwen3_next": lambda arch: {
        **_export_qwen_hybrid(arch), **_export_qwen_moe(arch),
        "decoder_sparse_step": arch.moe_layer_period,
        "mlp_only_layers": list(range(arch.first_dense_layers)),
    },
}
