"""The parts of an `Architecture`, one frozen pydantic model per concern, each with the rules
that read only its own fields: `AttentionConfig` (the attention layers' shape), `FfnConfig` (the
dense MLP, the experts, the router and which layers are MoE) and `MixerConfig` (which token mixer
each layer has and the linear-attention mixers' shape). Rules that read two parts, or a part and
the layer count, are `Architecture`'s (`cost_model.architecture`).

A part's fields keep the names users write (study TOML, `--batch` columns, our JSON): an
`Architecture` is built from, and dumped to, one flat dict of them (`cost_model.architecture`
routes each key to the part that declares it), so a new field is one line in its part (and its
importer in `cost_model/hf/`).

The per-layer lists sit with the concern they describe: `layer_types` (sliding or full) with
attention, `layer_mixers` (the token mixer) with the mixer, `layer_ffn_widths` and `layer_moe`
(the channel mixer: dense width or MoE) with the FFN, whose rules they share (`layer_moe`
replaces `first_dense_layers` / `moe_layer_period`; `layer_ffn_widths` is 0 on MoE layers and
at most `intermediate_size`). Each part names them in `per_layer_fields`; their length (one entry
per layer) is `Architecture`'s rule.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

# Bounds of the shape fields: far above every released model (the value cited beside each), so
# only a typo or a corrupted file reaches them; they keep every count finite and every per-layer
# list small. `cost_model.hf.schema` applies the same bounds to the Hugging Face keys.
# Layers: 4x DeepNet's 1,000-layer Transformer (Wang et al. 2022, arXiv 2203.00555); released
# LLMs stay under 130 (Llama 3.1 405B: 126).
MAX_LAYERS = 4096
# Widths (hidden, FFN, expert, head, low-rank, state): 2^20, 12.8x the widest released FFN,
# MT-NLG 530B's 81,920 = 4 x 20,480 (Smith et al. 2022, arXiv 2201.11990).
MAX_WIDTH = 1 << 20
# Head counts: 2^14, 128x the most query heads released (128: MT-NLG, Llama 3.1 405B, DeepSeek-V3).
MAX_HEADS = 1 << 14
# Vocabulary: 2^22, 16x the largest released one (Gemma 3: 262,144; arXiv 2503.19786).
MAX_VOCAB = 1 << 22
# Routed experts: 2^22, 4x PEER's 1,048,576 single-neuron experts (He 2024, arXiv 2407.04202);
# released MoE LLMs use at most 512 (Qwen3-Next).
MAX_EXPERTS = 1 << 22
# Token counts (positions, windows, chunks, sparse top-k): 2^30, ~100x Llama 4 Scout's
# 10,485,760-token context (meta-llama/Llama-4-Scout-17B-16E config.json).
MAX_TOKENS = 1 << 30
Layers = Annotated[StrictInt, Field(ge=1, le=MAX_LAYERS)]
LayersOrZero = Annotated[StrictInt, Field(ge=0, le=MAX_LAYERS)]
Width = Annotated[StrictInt, Field(ge=1, le=MAX_WIDTH)]
WidthOrZero = Annotated[StrictInt, Field(ge=0, le=MAX_WIDTH)]
Heads = Annotated[StrictInt, Field(ge=1, le=MAX_HEADS)]
HeadsOrZero = Annotated[StrictInt, Field(ge=0, le=MAX_HEADS)]
ExpertsOrZero = Annotated[StrictInt, Field(ge=0, le=MAX_EXPERTS)]
Tokens = Annotated[StrictInt, Field(ge=1, le=MAX_TOKENS)]
TokensOrZero = Annotated[StrictInt, Field(ge=0, le=MAX_TOKENS)]
LayerType = Literal["full_attention", "sliding_attention"]
MixerKind = Literal[
    "attention", "gated_deltanet", "kimi_delta", "mamba2", "attention+mamba2", "none",
]
ATTENTION_MIXER: MixerKind = "attention"
GATED_DELTANET_MIXER: MixerKind = "gated_deltanet"
KIMI_DELTA_MIXER: MixerKind = "kimi_delta"  # Kimi Delta Attention (Kimi Linear)
MAMBA2_MIXER: MixerKind = "mamba2"
PARALLEL_MAMBA2_MIXER: MixerKind = "attention+mamba2"  # both on the same input, summed (Falcon-H1)
NO_MIXER: MixerKind = "none"
LINEAR_MIXERS = (GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, MAMBA2_MIXER, PARALLEL_MAMBA2_MIXER)
FULL_ATTENTION: LayerType = "full_attention"
SLIDING_ATTENTION: LayerType = "sliding_attention"

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class AttentionConfig(BaseModel):
    """The attention layers' shape (every layer whose mixer attends).

    - GQA (`attention_kind="gqa"`; MHA is n_kv = n_q, MQA is n_kv = 1) or DeepSeek MLA (`"mla"`):
      queries through an optional low-rank `q_lora_rank`, keys/values through the latent
      `kv_lora_rank` plus one shared RoPE key of `qk_rope_head_dim`; for MLA `head_dim` is the
      query/key head width `qk_nope_head_dim + qk_rope_head_dim` and `num_kv_heads ==
      num_attention_heads`.
    - Sliding windows: `layer_types` names each layer's attention ("full_attention" or
      "sliding_attention", as in transformers); `None` means every layer uses `sliding_window`
      when it is set and full attention when it is `None`.
    - QK norms: `qk_norm` with `qk_norm_scope` "head" (one RMSNorm over head_dim shared by the
      heads, Qwen3) or "layer" (one over the whole q projection and one over the whole k
      projection, MiniMax-M2: n_q·d_h + n_kv·d_h weights).
    - DeepSeek Sparse Attention (DSA, DeepSeek-V3.2 and GLM-5: `index_heads` > 0): MLA whose
      queries attend only to the `index_topk` keys a lightning indexer picks. The indexer has
      `index_heads` heads of `index_head_dim` (queries from the MLA q latent, one shared key
      from the hidden state, LayerNorm on that key, a per-head weight) and caches its key per
      token beside the MLA latent.
    - `attention_output_gate`: the query projection also yields a sigmoid gate per output
      element (q_proj 2·n_q·d_h wide: Qwen3-Next).
    - Full-attention layers with their own shape (Gemma 4): `global_head_dim` > 0 gives every
      full-attention layer heads of that width and `num_global_kv_heads` KV heads (both or
      neither; sliding layers keep `head_dim` / `num_kv_heads`); `attention_k_eq_v`: those
      layers have no v_proj (the values come from k_proj, normed apart by a weightless RMSNorm).
    - Biases: `qkv_bias` on the q/k/v projections (MLA: on `q_a_proj` and `kv_a_proj`),
      `o_bias` on the output projection; `attention_sinks` is one learned logit per query head
      (gpt-oss).
    """

    model_config = _FROZEN
    per_layer_fields: ClassVar[tuple[str, ...]] = ("layer_types",)

    num_attention_heads: Heads
    num_kv_heads: Heads
    head_dim: Width  # independent of hidden_size / num_attention_heads
    attention_kind: Literal["gqa", "mla"] = "gqa"
    q_lora_rank: WidthOrZero = 0  # MLA; 0 = uncompressed q_proj
    kv_lora_rank: WidthOrZero = 0  # MLA
    qk_nope_head_dim: WidthOrZero = 0  # MLA
    qk_rope_head_dim: WidthOrZero = 0  # MLA
    v_head_dim: WidthOrZero = 0  # MLA
    qk_norm: StrictBool = False  # RMSNorm over head_dim on q and k (Qwen3)
    qk_norm_scope: Literal["head", "layer"] = "head"  # "layer": over all heads (MiniMax-M2)
    attention_sinks: StrictBool = False  # one learned logit per query head (gpt-oss)
    attention_output_gate: StrictBool = False  # q_proj also yields an output gate (Qwen3-Next)
    sliding_window: Tokens | None = None
    layer_types: tuple[LayerType, ...] | None = None
    global_head_dim: WidthOrZero = 0  # full-attention layers' head width (0: `head_dim`)
    num_global_kv_heads: HeadsOrZero = 0  # full-attention layers' KV heads (0: `num_kv_heads`)
    attention_k_eq_v: StrictBool = False  # full-attention layers have no v_proj (Gemma 4)
    # DeepSeek Sparse Attention (MLA + lightning indexer); all 0 = dense attention
    index_heads: HeadsOrZero = 0
    index_head_dim: WidthOrZero = 0
    index_topk: TokensOrZero = 0  # keys each query attends to
    qkv_bias: StrictBool = False
    o_bias: StrictBool = False

    @model_validator(mode="after")
    def _rules(self) -> Self:
        for rule in (_check_heads, _check_mla, _check_global_shape, _check_qk_norm, _check_dsa,
                     _check_attention_flags):
            rule(self)
        return self

    @property
    def is_sparse_attention(self) -> bool:
        """DeepSeek Sparse Attention: a lightning indexer picks `index_topk` keys per query."""
        return self.index_heads > 0

    @property
    def q_dim(self) -> int:
        """Output width of the query projection (MLA: n_q * (nope + rope) = n_q * head_dim)."""
        return self.num_attention_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one value head (GQA: head_dim; MLA: v_head_dim)."""
        return self.v_head_dim if self.attention_kind == "mla" else self.head_dim


_MLA_DIM_FIELDS = (
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
)
_DSA_FIELDS = ("index_heads", "index_head_dim", "index_topk")


def _check_heads(att: AttentionConfig) -> None:
    n_q, n_kv = att.num_attention_heads, att.num_kv_heads
    if n_q % n_kv:
        raise ValueError(
            f"`num_attention_heads` ({n_q}) must be divisible by `num_kv_heads` ({n_kv})"
        )


def _check_mla(att: AttentionConfig) -> None:
    if att.attention_kind == "gqa":
        _require_zero(att, _MLA_DIM_FIELDS, "when `attention_kind` is 'gqa'")
        return
    for field in ("kv_lora_rank", "qk_rope_head_dim", "v_head_dim"):
        if getattr(att, field) < 1:
            raise ValueError(f"`{field}` ({getattr(att, field)}) must be >= 1 for MLA")
    qk_dim = att.qk_nope_head_dim + att.qk_rope_head_dim
    if att.head_dim != qk_dim:
        raise ValueError(
            f"`head_dim` ({att.head_dim}) must equal `qk_nope_head_dim` + `qk_rope_head_dim` "
            f"({qk_dim}) for MLA"
        )
    if att.num_kv_heads != att.num_attention_heads:
        raise ValueError(
            f"`num_kv_heads` ({att.num_kv_heads}) must equal `num_attention_heads` "
            f"({att.num_attention_heads}) for MLA"
        )
    for flag in ("qk_norm", "attention_sinks"):
        if getattr(att, flag):
            raise ValueError(f"`{flag}` (True) is not supported with `attention_kind` 'mla'")


def _check_global_shape(att: AttentionConfig) -> None:
    """Gemma 4's full-attention shape: both fields or neither, GQA, and k = v only there."""
    dim, heads = att.global_head_dim, att.num_global_kv_heads
    if (dim > 0) != (heads > 0):
        raise ValueError(f"`global_head_dim` ({dim}) and `num_global_kv_heads` ({heads}) must "
                         "both be >= 1 or both 0")
    if dim and att.attention_kind != "gqa":
        raise ValueError("`global_head_dim` is supported with `attention_kind` 'gqa' only")
    if heads and att.num_attention_heads % heads:
        raise ValueError(f"`num_attention_heads` ({att.num_attention_heads}) must be divisible "
                         f"by `num_global_kv_heads` ({heads})")
    if dim and att.qk_norm and att.qk_norm_scope != "head":
        raise ValueError("`global_head_dim` is supported with `qk_norm_scope` 'head' only")
    if att.attention_k_eq_v and not dim:
        raise ValueError("`attention_k_eq_v` (True) needs `global_head_dim` >= 1 (the "
                         "full-attention layers it applies to)")


def _check_qk_norm(att: AttentionConfig) -> None:
    if att.qk_norm_scope != "head" and not att.qk_norm:
        raise ValueError(
            f"`qk_norm_scope` ({att.qk_norm_scope!r}) must be 'head' when `qk_norm` is False"
        )


def _check_dsa(att: AttentionConfig) -> None:
    values = [getattr(att, field) for field in _DSA_FIELDS]
    if not any(values):
        return
    if not all(values):
        shown = ", ".join(f"`{f}` = {v}" for f, v in zip(_DSA_FIELDS, values, strict=True))
        raise ValueError(f"sparse attention needs every one of {shown} >= 1, or all 0")
    if att.attention_kind != "mla" or att.q_lora_rank < 1:
        raise ValueError(
            f"sparse attention (`index_heads` = {att.index_heads}) needs `attention_kind` 'mla' "
            f"with `q_lora_rank` >= 1 (got {att.attention_kind!r}, {att.q_lora_rank}): "
            "the indexer reads the query latent"
        )


def _check_attention_flags(att: AttentionConfig) -> None:
    if att.layer_types is not None and att.sliding_window is None:
        raise ValueError("`layer_types` must be None when `sliding_window` is None")
    if att.attention_output_gate and att.attention_kind != "gqa":
        raise ValueError(
            "`attention_output_gate` (True) is supported with `attention_kind` 'gqa' only"
        )


class FfnConfig(BaseModel):
    """The channel mixer of every layer: a dense MLP, or routed experts plus shared ones.

    - MoE placement (Qwen2/3-MoE `decoder_sparse_step`, DeepSeek `first_k_dense_replace`): layer
      i (0-based) is MoE iff `num_experts > 0`, `i >= first_dense_layers` and `(i + 1) %
      moe_layer_period == 0`; every other layer has a dense MLP of `intermediate_size`.
    - `layer_moe` names the MoE layers explicitly (Nemotron-H's hybrid pattern), instead of
      `first_dense_layers` / `moe_layer_period`; with it, `layer_ffn_widths` is 0 on MoE layers.
    - `layer_ffn_widths` gives each layer's dense FFN width (0: no FFN, Puzzle/Nemotron-NAS);
      None means `intermediate_size` on every dense layer.
    - `shared_expert_gate`: one H → 1 sigmoid gate on the shared expert per MoE layer
      (Qwen2-MoE/Qwen3-Next); `router_scales`: the router also scales its input per channel and
      each expert's weight (Gemma 4: `scale` of H, `per_expert_scale` of E per MoE layer).
    - Biases: `mlp_bias` on dense and shared-expert MLPs, `router_bias` on the router,
      `expert_bias` on routed experts.
    """

    model_config = _FROZEN
    per_layer_fields: ClassVar[tuple[str, ...]] = ("layer_ffn_widths", "layer_moe")

    intermediate_size: WidthOrZero  # width of dense-layer MLPs; unused when no layer is dense
    gated_mlp: StrictBool = True  # gate and up projections (SwiGLU / GeGLU)
    hidden_act: str = Field(default="silu", min_length=1)
    mlp_bias: StrictBool = False
    num_experts: ExpertsOrZero = 0  # routed experts per MoE layer; 0 = dense model
    experts_per_token: ExpertsOrZero = 0
    moe_intermediate_size: WidthOrZero = 0
    num_shared_experts: ExpertsOrZero = 0
    shared_expert_intermediate_size: WidthOrZero = 0  # total width of the shared expert(s)
    shared_expert_gate: StrictBool = False  # H -> 1 sigmoid gate on the shared expert
    router_scales: StrictBool = False  # router input scale[H] and per-expert scale[E] (Gemma 4)
    router_bias: StrictBool = False
    expert_bias: StrictBool = False
    first_dense_layers: LayersOrZero = 0
    moe_layer_period: Layers = 1
    layer_moe: tuple[StrictBool, ...] | None = None  # explicit MoE layers (None: placement rule)
    layer_ffn_widths: tuple[WidthOrZero, ...] | None = None  # dense FFN width per layer, 0: none

    @model_validator(mode="before")
    @classmethod
    def _default_shared_width(cls, data: Any) -> Any:
        """`shared_expert_intermediate_size` defaults to num_shared_experts *
        moe_intermediate_size."""
        if isinstance(data, dict) and data.get("shared_expert_intermediate_size") is None:
            shared, width = data.get("num_shared_experts", 0), data.get("moe_intermediate_size", 0)
            if isinstance(shared, int) and isinstance(width, int):
                data = {**data, "shared_expert_intermediate_size": shared * width}
        return data

    @model_validator(mode="after")
    def _rules(self) -> Self:
        for rule in (_check_experts, _check_expert_flags, _check_explicit_layers):
            rule(self)
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


_MOE_ONLY_FIELDS = (
    "experts_per_token", "moe_intermediate_size", "num_shared_experts",
    "shared_expert_intermediate_size", "first_dense_layers",
)


def _check_experts(ffn: FfnConfig) -> None:
    if not ffn.is_moe:
        _require_zero(ffn, _MOE_ONLY_FIELDS, "for a dense model (`num_experts` = 0)")
        for field, value in (("moe_layer_period", 1), ("router_bias", False),
                             ("expert_bias", False)):
            if getattr(ffn, field) != value:
                raise ValueError(f"`{field}` ({getattr(ffn, field)}) must be {value} for a "
                                 "dense model (`num_experts` = 0)")
        return
    k, n_experts = ffn.experts_per_token, ffn.num_experts
    if not 1 <= k <= n_experts:
        raise ValueError(
            f"`experts_per_token` ({k}) must be between 1 and `num_experts` ({n_experts})"
        )
    if ffn.moe_intermediate_size < 1:
        raise ValueError(
            f"`moe_intermediate_size` ({ffn.moe_intermediate_size}) must be >= 1 for MoE"
        )
    has_shared, width = ffn.num_shared_experts > 0, ffn.shared_expert_intermediate_size
    if has_shared != (width > 0):
        raise ValueError(
            f"`shared_expert_intermediate_size` ({width}) must be > 0 iff "
            f"`num_shared_experts` ({ffn.num_shared_experts}) > 0"
        )


def _check_expert_flags(ffn: FfnConfig) -> None:
    if ffn.router_scales and not ffn.is_moe:
        raise ValueError("`router_scales` (True) needs `num_experts` >= 1")
    if ffn.shared_expert_gate and ffn.num_shared_experts == 0:
        raise ValueError("`shared_expert_gate` (True) needs `num_shared_experts` >= 1")


def _check_explicit_layers(ffn: FfnConfig) -> None:
    """`layer_moe` replaces the placement rule; `layer_ffn_widths` leaves MoE layers at 0."""
    if ffn.layer_moe is not None:
        if not ffn.is_moe or ffn.first_dense_layers or ffn.moe_layer_period != 1:
            raise ValueError("`layer_moe` needs `num_experts` >= 1, `first_dense_layers` 0 and "
                             "`moe_layer_period` 1 (it replaces them)")
    widths = ffn.layer_ffn_widths
    if widths is None:
        return
    if ffn.intermediate_size and set(widths) == {ffn.intermediate_size}:
        raise ValueError("`layer_ffn_widths` must be None when every layer has `intermediate_size`")
    if ffn.is_moe and ffn.layer_moe is None:
        raise ValueError("`layer_ffn_widths` with MoE needs `layer_moe` (which layers are MoE)")
    moe_with_width = [i for i, (w, moe) in enumerate(zip(widths, ffn.layer_moe or ()))
                      if w and moe]
    if moe_with_width:
        raise ValueError(f"`layer_ffn_widths` must be 0 on MoE layers (layer {moe_with_width[0]})")
    if ffn.intermediate_size != max(widths, default=0):
        raise ValueError(f"`intermediate_size` ({ffn.intermediate_size}) must equal the widest of "
                         f"`layer_ffn_widths` ({max(widths, default=0)})")


class MixerConfig(BaseModel):
    """Which token mixer each layer has, and the linear-attention mixers' shape.

    - `layer_mixers` names each layer's token mixer ("attention"; "gated_deltanet": linear
      attention with a recurrent state, Qwen3-Next/Qwen3.5; "none": Puzzle/Nemotron-NAS layers
      whose attention was removed); None means every layer has attention. With a pattern, the
      norms are the sub-blocks' own (one pre-norm per attention and per FFN: `norms_per_layer`
      2).
    - Gated DeltaNet (arXiv 2412.06464, as transformers' Qwen3-Next): `linear_num_key_heads`
      q/k heads of `linear_key_head_dim`, `linear_num_value_heads` v heads of
      `linear_value_head_dim`; projections H → q, k, v, the output gate z (v width) and per-v-head
      β and decay a; a depthwise causal conv of `linear_conv_kernel` taps (no bias) over q, k,
      v; per-v-head dt bias and A_log; a gated RMSNorm of one v head's width; the output
      projection. Its state per sequence is one key_head_dim x value_head_dim matrix per v head
      (fp32 in the kernels) plus the conv's last kernel-1 inputs.
    - Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; transformers'
      KimiLinearDeltaAttention): q, k, v of `linear_num_value_heads` (= key heads) x
      `linear_value_head_dim` (= key dim), a bias-free conv over them, a channel-wise forget
      gate and an output gate each through a rank-head_dim bottleneck (f_a/f_b, g_a/g_b),
      dt_bias per channel, A_log and β per head, a gated RMSNorm of one head, o_proj; its state
      is one head_dim² matrix per head.
    - Mamba-2 (arXiv 2405.21060, as transformers' Nemotron-H mixer) uses the same fields, read
      as SSD's duality with linear attention: `linear_num_value_heads` SSM heads of
      `linear_value_head_dim` channels, `linear_num_key_heads` B/C groups of
      `linear_key_head_dim` (the SSM state size). in_proj H → z, x (heads·head_dim each), B, C
      (groups·state each) and dt (one per head); a conv over x, B, C with a bias iff
      `linear_conv_bias`; dt_bias, A_log and D per head; a gated RMSNorm over heads·head_dim
      (iff `linear_norm`; Falcon-H1 has none); out_proj. Its state per sequence has the same
      shape as Gated DeltaNet's. "attention+mamba2" runs attention and Mamba-2 side by side on
      the same normed input (Falcon-H1's parallel hybrid): the layer counts as both.
    """

    model_config = _FROZEN
    per_layer_fields: ClassVar[tuple[str, ...]] = ("layer_mixers",)

    layer_mixers: tuple[MixerKind, ...] | None = None
    # linear-attention mixers; all 0 when no layer has one
    linear_num_key_heads: HeadsOrZero = 0
    linear_key_head_dim: WidthOrZero = 0
    linear_num_value_heads: HeadsOrZero = 0
    linear_value_head_dim: WidthOrZero = 0
    linear_conv_kernel: WidthOrZero = 0
    linear_conv_bias: StrictBool = False  # Mamba-2's conv bias (Gated DeltaNet has none)
    linear_norm: StrictBool = True  # Mamba-2's gated RMSNorm (Falcon-H1: off)

    @model_validator(mode="after")
    def _rules(self) -> Self:
        _check_linear(self)
        return self

    @property
    def num_linear_attention_layers(self) -> int:
        """Layers whose mixer is linear attention with a recurrent state (Gated DeltaNet)."""
        if self.layer_mixers is None:
            return 0
        return sum(self.layer_mixers.count(kind) for kind in LINEAR_MIXERS)

    @property
    def linear_mixer_kind(self) -> MixerKind | None:
        """The linear-attention mixer the model uses (one kind per model), or None."""
        kind = next((k for k in LINEAR_MIXERS if k in (self.layer_mixers or ())), None)
        return MAMBA2_MIXER if kind == PARALLEL_MAMBA2_MIXER else kind

    @property
    def num_parallel_hybrid_layers(self) -> int:
        """Layers running attention and Mamba-2 side by side (counted in both kinds)."""
        return 0 if self.layer_mixers is None else self.layer_mixers.count(PARALLEL_MAMBA2_MIXER)


_LINEAR_FIELDS = ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads",
                  "linear_value_head_dim", "linear_conv_kernel")


def _check_linear(mix: MixerConfig) -> None:
    if mix.layer_mixers is not None and set(mix.layer_mixers) == {ATTENTION_MIXER}:
        raise ValueError("`layer_mixers` must be None when every layer is attention")
    if mix.linear_conv_bias and mix.linear_mixer_kind != MAMBA2_MIXER:
        raise ValueError("`linear_conv_bias` (True) is for Mamba-2 layers only")
    if not mix.linear_norm and mix.linear_mixer_kind != MAMBA2_MIXER:
        raise ValueError("`linear_norm` (False) is for Mamba-2 layers only")
    if mix.num_linear_attention_layers == 0:
        _require_zero(mix, _LINEAR_FIELDS, "when no layer is linear attention (`layer_mixers`)")
        return
    for field in _LINEAR_FIELDS:
        if getattr(mix, field) < 1:
            raise ValueError(f"`{field}` ({getattr(mix, field)}) must be >= 1: "
                             f"{mix.num_linear_attention_layers} layers are linear attention")
    kinds = sorted(k for k in LINEAR_MIXERS if k in (mix.layer_mixers or ()))
    if len({MAMBA2_MIXER if k == PARALLEL_MAMBA2_MIXER else k for k in kinds}) > 1:
        raise ValueError(f"`layer_mixers` mixes {kinds}: one linear-attention kind per model")
    keys, values = mix.linear_num_key_heads, mix.linear_num_value_heads
    if values % keys:
        raise ValueError(f"`linear_num_value_heads` ({values}) must be divisible by "
                         f"`linear_num_key_heads` ({keys})")


def _require_zero(part: BaseModel, fields: tuple[str, ...], when: str) -> None:
    for field in fields:
        if getattr(part, field) != 0:
            raise ValueError(f"`{field}` ({getattr(part, field)}) must be 0 {when}")
