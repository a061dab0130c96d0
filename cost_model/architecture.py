"""The architecture of a decoder-only LLM: one frozen pydantic model, derived values as properties.

Conventions (the same as transformers' modeling code, which `params.py` counts exactly):

- Attention is GQA (`attention_kind="gqa"`; MHA is n_kv = n_q, MQA is n_kv = 1) or DeepSeek MLA
  (`"mla"`): queries through an optional low-rank `q_lora_rank`, keys/values through the latent
  `kv_lora_rank` plus one shared RoPE key of `qk_rope_head_dim`; for MLA `head_dim` is the query/key
  head width `qk_nope_head_dim + qk_rope_head_dim` and `num_kv_heads == num_attention_heads`.
- MoE placement (Qwen2/3-MoE `decoder_sparse_step`, DeepSeek `first_k_dense_replace`): layer i
  (0-based) is MoE iff `num_experts > 0`, `i >= first_dense_layers` and
  `(i + 1) % moe_layer_period == 0`; every other layer has a dense MLP of `intermediate_size`.
- Sliding-window attention: `layer_types` names each layer's attention ("full_attention" or
  "sliding_attention", as in transformers); `None` means every layer uses `sliding_window` when it
  is set and full attention when it is `None`.
- QK norms: `qk_norm` with `qk_norm_scope` "head" (one RMSNorm over head_dim shared by the heads,
  Qwen3) or "layer" (one over the whole q projection and one over the whole k projection,
  MiniMax-M2: n_q·d_h + n_kv·d_h weights).
- DeepSeek Sparse Attention (DSA, DeepSeek-V3.2 and GLM-5: `index_heads` > 0): MLA whose queries
  attend only to the `index_topk` keys a lightning indexer picks. The indexer has `index_heads`
  heads of `index_head_dim` (queries from the MLA q latent, one shared key from the hidden state,
  LayerNorm on that key, a per-head weight) and caches its key per token beside the MLA latent.
- Per-layer heterogeneity (a layer pattern): `layer_mixers` names each layer's token mixer
  ("attention"; "gated_deltanet": linear attention with a recurrent state, Qwen3-Next/Qwen3.5;
  "none": Puzzle/Nemotron-NAS layers whose attention was removed); None means every layer has
  attention. `layer_ffn_widths` gives each layer's dense FFN width (0: no FFN), for dense
  models; None means `intermediate_size` on every dense layer. With either, the norms are the
  sub-blocks' own (one pre-norm per attention and per FFN: `norms_per_layer` 2).
- Gated DeltaNet (arXiv 2412.06464, as transformers' Qwen3-Next): `linear_num_key_heads` q/k heads
  of `linear_key_head_dim`, `linear_num_value_heads` v heads of `linear_value_head_dim`; projections
  H → q, k, v, the output gate z (v width) and per-v-head β and decay a; a depthwise causal conv of
  `linear_conv_kernel` taps (no bias) over q, k, v; per-v-head dt bias and A_log; a gated RMSNorm
  of one v head's width; the output projection. Its state per sequence is one
  key_head_dim x value_head_dim matrix per v head (fp32 in the kernels) plus the conv's last
  kernel-1 inputs.
- Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; transformers' KimiLinearDeltaAttention):
  q, k, v of `linear_num_value_heads` (= key heads) x `linear_value_head_dim` (= key dim), a
  bias-free conv over them, a channel-wise forget gate and an output gate each through a rank-
  head_dim bottleneck (f_a/f_b, g_a/g_b), dt_bias per channel, A_log and β per head, a gated
  RMSNorm of one head, o_proj; its state is one head_dim² matrix per head.
- Mamba-2 (arXiv 2405.21060, as transformers' Nemotron-H mixer) uses the same fields, read as SSD's
  duality with linear attention: `linear_num_value_heads` SSM heads of `linear_value_head_dim`
  channels, `linear_num_key_heads` B/C groups of `linear_key_head_dim` (the SSM state size).
  in_proj H → z, x (heads·head_dim each), B, C (groups·state each) and dt (one per head); a conv
  over x, B, C with a bias iff `linear_conv_bias`; dt_bias, A_log and D per head; a gated RMSNorm
  over heads·head_dim (iff `linear_norm`; Falcon-H1 has none); out_proj. Its state per sequence
  has the same shape as Gated DeltaNet's. "attention+mamba2" runs attention and Mamba-2 side by
  side on the same normed input (Falcon-H1's parallel hybrid): the layer counts as both.
- `layer_moe` names the MoE layers explicitly (Nemotron-H's hybrid pattern), instead of
  `first_dense_layers` / `moe_layer_period`; with it, `layer_ffn_widths` is 0 on MoE layers.
- `attention_output_gate`: the query projection also yields a sigmoid gate per output element
  (q_proj 2·n_q·d_h wide: Qwen3-Next); `shared_expert_gate`: one H → 1 sigmoid gate on the shared
  expert per MoE layer (Qwen2-MoE/Qwen3-Next).
- Full-attention layers with their own shape (Gemma 4): `global_head_dim` > 0 gives every
  full-attention layer heads of that width and `num_global_kv_heads` KV heads (both or neither;
  sliding layers keep `head_dim` / `num_kv_heads`); `attention_k_eq_v`: those layers have no
  v_proj (the values come from k_proj, normed apart by a weightless RMSNorm).
- `router_scales`: the router also scales its input per channel and each expert's weight
  (Gemma 4: `scale` of H, `per_expert_scale` of E per MoE layer).
- Biases: `qkv_bias` on the q/k/v projections (MLA: on `q_a_proj` and `kv_a_proj`), `o_bias` on
  the output projection, `mlp_bias` on dense and shared-expert MLPs, `router_bias` on the router,
  `expert_bias` on routed experts; `attention_sinks` is one learned logit per query head (gpt-oss).
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, model_validator,
)

from cost_model.errors import ConfigError

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
_WITH_ATTENTION = (ATTENTION_MIXER, PARALLEL_MAMBA2_MIXER)
_LINEAR_FIELDS = ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads",
                  "linear_value_head_dim", "linear_conv_kernel")
# fields that mean nothing when no layer attends / when no layer is linear (design_key)
_ATTENTION_FIELDS = (
    "num_attention_heads", "num_kv_heads", "head_dim", "attention_kind", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_norm",
    "qk_norm_scope", "attention_sinks", "attention_output_gate", "qkv_bias", "o_bias",
    "index_heads", "index_head_dim", "index_topk", "global_head_dim", "num_global_kv_heads",
    "attention_k_eq_v",
)
_LINEAR_MIXER_FIELDS = (*_LINEAR_FIELDS, "linear_conv_bias", "linear_norm")
FULL_ATTENTION: LayerType = "full_attention"
SLIDING_ATTENTION: LayerType = "sliding_attention"

_MLA_DIM_FIELDS = (
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
)
_DSA_FIELDS = ("index_heads", "index_head_dim", "index_topk")
_MOE_ONLY_FIELDS = (
    "experts_per_token", "moe_intermediate_size", "num_shared_experts",
    "shared_expert_intermediate_size", "first_dense_layers",
)


class Architecture(BaseModel):
    """Shape of a decoder-only transformer LM; every field a transformers config can express."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    family: str = Field(default="custom", min_length=1)  # HF model_type it came from
    vocab_size: Annotated[StrictInt, Field(ge=1, le=MAX_VOCAB)]
    hidden_size: Width
    num_layers: Layers
    num_attention_heads: Heads
    num_kv_heads: Heads
    head_dim: Width  # independent of hidden_size / num_attention_heads
    max_position_embeddings: Tokens
    # attention
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
    # per-layer heterogeneity; None = homogeneous
    layer_mixers: tuple[MixerKind, ...] | None = None
    layer_ffn_widths: tuple[WidthOrZero, ...] | None = None  # dense FFN width per layer, 0: none
    # linear-attention mixers (Gated DeltaNet); all 0 when no layer has one
    linear_num_key_heads: HeadsOrZero = 0
    linear_key_head_dim: WidthOrZero = 0
    linear_num_value_heads: HeadsOrZero = 0
    linear_value_head_dim: WidthOrZero = 0
    linear_conv_kernel: WidthOrZero = 0
    linear_conv_bias: StrictBool = False  # Mamba-2's conv bias (Gated DeltaNet has none)
    linear_norm: StrictBool = True  # Mamba-2's gated RMSNorm (Falcon-H1: off)
    layer_moe: tuple[StrictBool, ...] | None = None  # explicit MoE layers (None: placement rule)
    # dense MLP
    intermediate_size: WidthOrZero  # width of dense-layer MLPs; unused when no layer is dense
    gated_mlp: StrictBool = True  # gate and up projections (SwiGLU / GeGLU)
    hidden_act: str = Field(default="silu", min_length=1)
    # mixture of experts
    num_experts: ExpertsOrZero = 0  # routed experts per MoE layer; 0 = dense model
    experts_per_token: ExpertsOrZero = 0
    moe_intermediate_size: WidthOrZero = 0
    num_shared_experts: ExpertsOrZero = 0
    shared_expert_intermediate_size: WidthOrZero = 0  # total width of the shared expert(s)
    shared_expert_gate: StrictBool = False  # H -> 1 sigmoid gate on the shared expert
    router_scales: StrictBool = False  # router input scale[H] and per-expert scale[E] (Gemma 4)
    first_dense_layers: LayersOrZero = 0
    moe_layer_period: Layers = 1
    # biases, norms, embeddings
    qkv_bias: StrictBool = False
    o_bias: StrictBool = False
    mlp_bias: StrictBool = False
    router_bias: StrictBool = False
    expert_bias: StrictBool = False
    # per layer (Gemma-2: 4 around attention and MLP; Gemma 4's MoE block 3 more:
    # transformers' Gemma4TextDecoderLayer post_feedforward_layernorm_1/_2,
    # pre_feedforward_layernorm_2)
    norms_per_layer: Annotated[StrictInt, Field(ge=1, le=7)] = 2
    tie_word_embeddings: StrictBool = False

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
    def _cross_field_rules(self) -> Self:
        for rule in (_check_heads, _check_mla, _check_moe, _check_moe_layers, _check_sliding,
                     _check_global_shape, _check_qk_norm, _check_dsa, _check_layer_pattern,
                     _check_linear):
            rule(self)
        return self

    # ---- attention ---------------------------------------------------------------------------
    @property
    def is_sparse_attention(self) -> bool:
        """DeepSeek Sparse Attention: a lightning indexer picks `index_topk` keys per query."""
        return self.index_heads > 0

    @property
    def num_attention_layers(self) -> int:
        """Layers whose mixer is attention (full or sliding); the others have no mixer."""
        if self.layer_mixers is None:
            return self.num_layers
        return sum(self.layer_mixers.count(kind) for kind in _WITH_ATTENTION)

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

    @property
    def num_mixer_layers(self) -> int:
        """Layers with a token mixer of any kind (attention, linear or both)."""
        return (self.num_layers if self.layer_mixers is None
                else self.num_layers - self.layer_mixers.count(NO_MIXER))

    @property
    def is_heterogeneous(self) -> bool:
        """True when layers differ beyond the sliding/MoE patterns (`layer_mixers`, FFN widths)."""
        return any(
            v is not None for v in (self.layer_mixers, self.layer_ffn_widths, self.layer_moe)
        )

    @property
    def q_dim(self) -> int:
        """Output width of the query projection (MLA: n_q * (nope + rope) = n_q * head_dim)."""
        return self.num_attention_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one value head (GQA: head_dim; MLA: v_head_dim)."""
        return self.v_head_dim if self.attention_kind == "mla" else self.head_dim

    @property
    def layer_is_sliding(self) -> tuple[bool, ...]:
        if self.sliding_window is None:
            return (False,) * self.num_layers
        if self.layer_types is None:
            return (True,) * self.num_layers
        return tuple(kind == SLIDING_ATTENTION for kind in self.layer_types)

    @property
    def num_sliding_layers(self) -> int:
        if self.sliding_window is None:
            return 0
        return (self.num_layers if self.layer_types is None
                else self.layer_types.count(SLIDING_ATTENTION))

    @property
    def num_full_attention_layers(self) -> int:
        """Attention layers that are not sliding (layers without a mixer are neither)."""
        return self.num_attention_layers - self.num_sliding_layers

    @property
    def num_global_attention_layers(self) -> int:
        """Full-attention layers shaped by `global_head_dim` / `num_global_kv_heads` (Gemma 4);
        0 when every attention layer has `head_dim` / `num_kv_heads`."""
        return self.num_full_attention_layers if self.global_head_dim else 0

    @property
    def sliding_pattern(self) -> Literal["none", "all", "mixed"]:
        """Whether no layer, every layer or some layers use sliding-window attention."""
        sliding = self.num_sliding_layers
        return "none" if sliding == 0 else "all" if sliding == self.num_layers else "mixed"

    # ---- MLP / MoE ---------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def layer_is_moe(self) -> tuple[bool, ...]:
        return tuple(self._is_moe_layer(i) for i in range(self.num_layers))

    def _is_moe_layer(self, layer: int) -> bool:
        if self.layer_moe is not None:
            return self.is_moe and self.layer_moe[layer]
        after_dense = layer >= self.first_dense_layers
        return self.is_moe and after_dense and (layer + 1) % self.moe_layer_period == 0

    @property
    def num_moe_layers(self) -> int:
        """Layers i >= first_dense_layers with (i + 1) a multiple of moe_layer_period."""
        if not self.is_moe:
            return 0
        if self.layer_moe is not None:
            return sum(self.layer_moe)
        period, first = self.moe_layer_period, min(self.first_dense_layers, self.num_layers)
        return self.num_layers // period - first // period

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense FFN (with `layer_ffn_widths`: those of width > 0)."""
        if self.layer_ffn_widths is not None:
            return sum(1 for width in self.layer_ffn_widths if width > 0)
        return self.num_layers - self.num_moe_layers

    @property
    def dense_ffn_widths(self) -> tuple[int, ...]:
        """Each layer's dense FFN width (0: an MoE layer or a layer without FFN)."""
        if self.layer_ffn_widths is not None:
            return self.layer_ffn_widths
        return tuple(0 if moe else self.intermediate_size for moe in self.layer_is_moe)

    @property
    def mean_dense_ffn_width(self) -> float:
        """Mean width over the dense-FFN layers: Σ widths / dense layers, so that dense layers x
        this width gives the exact dense FFN weights (`intermediate_size` when homogeneous)."""
        dense = self.num_dense_layers
        if self.layer_ffn_widths is None or dense == 0:
            return float(self.intermediate_size)
        return sum(self.layer_ffn_widths) / dense

    # ---- identity ----------------------------------------------------------------------------
    @property
    def design_key(self) -> tuple[tuple[str, Any], ...]:
        """The design as (field, value) pairs: every field but the labels `name` and `family`,
        with the values no layer uses normalized, so two architectures share a key iff they are
        the same model. Normalized: the dense `intermediate_size` when no layer is dense (an MoE
        whose every layer is MoE), `layer_types` naming every layer sliding (= None), per-layer
        patterns equal on every layer (`layer_mixers` all attention, `layer_ffn_widths` all
        `intermediate_size`: None), the attention fields when no layer attends (a pure Mamba-2
        stack) and the linear-mixer fields when no layer is linear (None). Expert fields of a
        dense model, the shared-expert width without shared experts and the QK-norm scope
        without QK norms are fixed by the validators."""
        fields = self.model_dump(exclude={"name", "family"})
        if self.num_dense_layers == 0:
            fields["intermediate_size"] = 0
        if self.layer_types is not None and self.num_sliding_layers == self.num_layers:
            fields["layer_types"] = None
        # a per-layer pattern that is the same on every layer is the homogeneous model
        if set(fields.get("layer_mixers") or ()) == {"attention"}:
            fields["layer_mixers"] = None
        if set(fields.get("layer_ffn_widths") or ()) == {self.intermediate_size}:
            fields["layer_ffn_widths"] = None
        unused = ((_ATTENTION_FIELDS if self.num_attention_layers == 0 else ())
                  + (_LINEAR_MIXER_FIELDS if self.num_linear_attention_layers == 0 else ()))
        fields.update(dict.fromkeys(unused))
        return tuple(fields.items())


def design_name(arch: Architecture, show_vocab: bool = False) -> str:
    """A short name of the shape that names every field a searched design varies in and none it
    does not use: `H{hidden}-L{layers}`, then `-A{q heads}x{head dim}kv{kv heads}` when some
    layer attends, the layer pattern and linear-mixer shape when layers differ
    (`mixer_pattern_name`), `-E{experts}k{top-k}x{expert width}s{shared experts}` for an MoE, then
    the dense MLPs: `-F{width}` when every layer is dense, `-F{dense layers}x{width}` for an MoE's
    dense layers (none: nothing), and `-V{vocab}` when `show_vocab` (a study that searches the
    vocabulary)."""
    a = arch
    name = f"H{a.hidden_size}-L{a.num_layers}"
    if a.num_attention_layers:
        name += f"-A{a.num_attention_heads}x{a.head_dim}kv{a.num_kv_heads}"
    name += mixer_pattern_name(a)
    if a.is_moe:
        name += (f"-E{a.num_experts}k{a.experts_per_token}x{a.moe_intermediate_size}"
                 f"s{a.num_shared_experts}")
        if a.num_dense_layers:
            name += f"-F{a.num_dense_layers}x{a.intermediate_size}"
    elif a.num_dense_layers:
        name += f"-F{a.intermediate_size}"
    if show_vocab:
        name += f"-V{a.vocab_size}"
    return name


# One letter per mixer in design names: G Gated DeltaNet, K Kimi Delta Attention, M Mamba-2,
# P attention + Mamba-2 in parallel, A attention, N no mixer.
MIXER_LETTERS: dict[str, str] = {
    GATED_DELTANET_MIXER: "G", KIMI_DELTA_MIXER: "K", MAMBA2_MIXER: "M",
    PARALLEL_MAMBA2_MIXER: "P", ATTENTION_MIXER: "A", NO_MIXER: "N",
}
_MAX_UNIT_NAME_CHARS = 12  # a longer repeating unit is named by its counts and a digest
_DIGEST_HEX_CHARS = 6


def mixer_pattern_name(arch: Architecture) -> str:
    """The per-layer pattern in a design name ("" for a homogeneous model). A pattern that
    repeats a short unit is the unit run-length coded (Qwen3-Next's 3 Gated DeltaNet + 1
    attention: `-G3A1`); otherwise the mixer counts plus a digest of the exact per-layer lists
    (mixers, FFN widths, MoE layers: `-M54A10N54#1f0c2e`), so distinct placements get distinct
    names. Linear layers add their shape `-S{v heads}x{v dim}g{key heads}x{key dim}c{conv
    taps}` (`b`: conv bias, `u`: no gated norm)."""
    if not arch.is_heterogeneous:
        return ""
    letters = "".join(MIXER_LETTERS[m] for m in arch.layer_mixers or ())
    unit = _run_length(_repeating_unit(letters)) if letters else ""
    exact = bool(unit) and len(unit) <= _MAX_UNIT_NAME_CHARS and arch.layer_ffn_widths is None \
        and arch.layer_moe is None
    name = f"-{unit}" if exact else f"-{_letter_counts(letters)}#{_pattern_digest(arch)}"
    if arch.num_linear_attention_layers:
        a = arch
        name += (f"-S{a.linear_num_value_heads}x{a.linear_value_head_dim}"
                 f"g{a.linear_num_key_heads}x{a.linear_key_head_dim}c{a.linear_conv_kernel}"
                 f"{'b' if a.linear_conv_bias else ''}{'' if a.linear_norm else 'u'}")
    return name


def _repeating_unit(letters: str) -> str:
    """The shortest unit whose repetition is `letters`."""
    size = len(letters)
    return next(letters[:p] for p in range(1, size + 1)
                if size % p == 0 and letters[:p] * (size // p) == letters)


def _run_length(unit: str) -> str:
    """`GGGA` -> `G3A1`."""
    return "".join(f"{m.group(1)}{len(m.group(0))}" for m in re.finditer(r"(.)\1*", unit))


def _letter_counts(letters: str) -> str:
    """Mixer counts in `MIXER_LETTERS` order (`M54A10N54`); `F` when only FFN widths vary."""
    counts = [f"{c}{letters.count(c)}" for c in MIXER_LETTERS.values() if letters.count(c)]
    return "".join(counts) or "F"


def _pattern_digest(arch: Architecture) -> str:
    """A short digest of the exact per-layer lists (stable across processes and runs)."""
    lists = (arch.layer_mixers, arch.layer_ffn_widths, arch.layer_moe)
    return hashlib.sha1(repr(lists).encode()).hexdigest()[:_DIGEST_HEX_CHARS]


def periodic_layer_types(num_layers: int, full_attention_period: int) -> tuple[LayerType, ...]:
    """Sliding layers with every `full_attention_period`-th layer full (Gemma-2, gpt-oss: 2)."""
    if full_attention_period < 1:
        raise ConfigError(f"`full_attention_period` ({full_attention_period}) must be >= 1")
    is_full = [(i + 1) % full_attention_period == 0 for i in range(num_layers)]
    return tuple(FULL_ATTENTION if full else SLIDING_ATTENTION for full in is_full)


def make_architecture(**fields: Any) -> Architecture:
    """Build an `Architecture`, turning pydantic's ValidationError into a `ConfigError`."""
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        raise config_error_from(exc, str(fields.get("name", "architecture"))) from exc


def config_error_from(exc: ValidationError, source: str) -> ConfigError:
    """One `ConfigError` whose message names every bad field, its rule and its value."""
    return ConfigError(f"{source}: " + "; ".join(_describe(err) for err in exc.errors()))


def _describe(err: Any) -> str:
    if err["type"] == "value_error":  # our cross-field rules: the message already names fields
        return str(err["ctx"]["error"])
    field = ".".join(str(part) for part in err["loc"]) or "architecture"
    value = err.get("input")
    shown = "missing" if err["type"] == "missing" else repr(value)
    return f"`{field}` ({shown}): {err['msg']}"


# ---- cross-field rules (each raises ValueError naming the fields, the rule and the values) -----


def _check_heads(arch: Architecture) -> None:
    n_q, n_kv = arch.num_attention_heads, arch.num_kv_heads
    if n_q % n_kv:
        raise ValueError(
            f"`num_attention_heads` ({n_q}) must be divisible by `num_kv_heads` ({n_kv})"
        )


def _check_mla(arch: Architecture) -> None:
    if arch.attention_kind == "gqa":
        _require_zero(arch, _MLA_DIM_FIELDS, "when `attention_kind` is 'gqa'")
        return
    for field in ("kv_lora_rank", "qk_rope_head_dim", "v_head_dim"):
        if getattr(arch, field) < 1:
            raise ValueError(f"`{field}` ({getattr(arch, field)}) must be >= 1 for MLA")
    qk_dim = arch.qk_nope_head_dim + arch.qk_rope_head_dim
    if arch.head_dim != qk_dim:
        raise ValueError(
            f"`head_dim` ({arch.head_dim}) must equal `qk_nope_head_dim` + `qk_rope_head_dim` "
            f"({qk_dim}) for MLA"
        )
    if arch.num_kv_heads != arch.num_attention_heads:
        raise ValueError(
            f"`num_kv_heads` ({arch.num_kv_heads}) must equal `num_attention_heads` "
            f"({arch.num_attention_heads}) for MLA"
        )
    for flag in ("qk_norm", "attention_sinks"):
        if getattr(arch, flag):
            raise ValueError(f"`{flag}` (True) is not supported with `attention_kind` 'mla'")


def _check_moe(arch: Architecture) -> None:
    if not arch.is_moe:
        _require_zero(arch, _MOE_ONLY_FIELDS, "for a dense model (`num_experts` = 0)")
        _require_value(arch, ("moe_layer_period", "router_bias", "expert_bias"), (1, False, False))
        return
    k, n_experts = arch.experts_per_token, arch.num_experts
    if not 1 <= k <= n_experts:
        raise ValueError(
            f"`experts_per_token` ({k}) must be between 1 and `num_experts` ({n_experts})"
        )
    if arch.moe_intermediate_size < 1:
        raise ValueError(
            f"`moe_intermediate_size` ({arch.moe_intermediate_size}) must be >= 1 for MoE"
        )
    has_shared, width = arch.num_shared_experts > 0, arch.shared_expert_intermediate_size
    if has_shared != (width > 0):
        raise ValueError(
            f"`shared_expert_intermediate_size` ({width}) must be > 0 iff "
            f"`num_shared_experts` ({arch.num_shared_experts}) > 0"
        )


def _check_moe_layers(arch: Architecture) -> None:
    for field in ("first_dense_layers", "moe_layer_period"):
        if getattr(arch, field) > arch.num_layers:
            raise ValueError(
                f"`{field}` ({getattr(arch, field)}) must be <= `num_layers` ({arch.num_layers})"
            )
    if arch.is_moe and arch.num_moe_layers == 0:
        raise ValueError(
            f"`num_experts` ({arch.num_experts}) > 0 but no layer is MoE (`first_dense_layers` = "
            f"{arch.first_dense_layers}, `moe_layer_period` = {arch.moe_layer_period})"
        )
    if arch.num_dense_layers > 0 and arch.intermediate_size < 1:
        raise ValueError(
            f"`intermediate_size` ({arch.intermediate_size}) must be >= 1: "
            f"{arch.num_dense_layers} layers are dense"
        )


def _check_sliding(arch: Architecture) -> None:
    if arch.layer_types is None:
        return
    if arch.sliding_window is None:
        raise ValueError("`layer_types` must be None when `sliding_window` is None")
    if len(arch.layer_types) != arch.num_layers:
        raise ValueError(
            f"`layer_types` ({len(arch.layer_types)} entries) must have one entry per layer "
            f"(`num_layers` = {arch.num_layers})"
        )


def _check_global_shape(arch: Architecture) -> None:
    """Gemma 4's full-attention shape: both fields or neither, GQA, and k = v only there."""
    dim, heads = arch.global_head_dim, arch.num_global_kv_heads
    if (dim > 0) != (heads > 0):
        raise ValueError(f"`global_head_dim` ({dim}) and `num_global_kv_heads` ({heads}) must "
                         "both be >= 1 or both 0")
    if dim and arch.attention_kind != "gqa":
        raise ValueError("`global_head_dim` is supported with `attention_kind` 'gqa' only")
    if heads and arch.num_attention_heads % heads:
        raise ValueError(f"`num_attention_heads` ({arch.num_attention_heads}) must be divisible "
                         f"by `num_global_kv_heads` ({heads})")
    if dim and arch.qk_norm and arch.qk_norm_scope != "head":
        raise ValueError("`global_head_dim` is supported with `qk_norm_scope` 'head' only")
    if arch.attention_k_eq_v and not dim:
        raise ValueError("`attention_k_eq_v` (True) needs `global_head_dim` >= 1 (the "
                         "full-attention layers it applies to)")
    if arch.router_scales and not arch.is_moe:
        raise ValueError("`router_scales` (True) needs `num_experts` >= 1")


def _check_qk_norm(arch: Architecture) -> None:
    if arch.qk_norm_scope != "head" and not arch.qk_norm:
        raise ValueError(
            f"`qk_norm_scope` ({arch.qk_norm_scope!r}) must be 'head' when `qk_norm` is False"
        )


def _check_dsa(arch: Architecture) -> None:
    values = [getattr(arch, field) for field in _DSA_FIELDS]
    if not any(values):
        return
    if not all(values):
        shown = ", ".join(f"`{f}` = {v}" for f, v in zip(_DSA_FIELDS, values, strict=True))
        raise ValueError(f"sparse attention needs every one of {shown} >= 1, or all 0")
    if arch.attention_kind != "mla" or arch.q_lora_rank < 1:
        raise ValueError(
            f"sparse attention (`index_heads` = {arch.index_heads}) needs `attention_kind` 'mla' "
            f"with `q_lora_rank` >= 1 (got {arch.attention_kind!r}, {arch.q_lora_rank}): "
            "the indexer reads the query latent"
        )


def _check_layer_pattern(arch: Architecture) -> None:
    for field in ("layer_mixers", "layer_ffn_widths", "layer_moe"):
        values = getattr(arch, field)
        if values is not None and len(values) != arch.num_layers:
            raise ValueError(f"`{field}` ({len(values)} entries) must have one entry per layer "
                             f"(`num_layers` = {arch.num_layers})")
    if arch.layer_mixers is not None and set(arch.layer_mixers) == {ATTENTION_MIXER}:
        raise ValueError("`layer_mixers` must be None when every layer is attention")
    widths = arch.layer_ffn_widths
    if widths is not None and arch.intermediate_size and set(widths) == {arch.intermediate_size}:
        raise ValueError("`layer_ffn_widths` must be None when every layer has `intermediate_size`")
    if not arch.is_heterogeneous:
        return
    if arch.norms_per_layer != 2:
        raise ValueError(f"`norms_per_layer` ({arch.norms_per_layer}) must be 2 with a per-layer "
                         "pattern (one pre-norm per attention and per FFN)")
    if arch.layer_mixers is not None and arch.sliding_window is not None:
        raise ValueError(
            "`sliding_window` must be None with `layer_mixers` (not supported together)"
        )
    if arch.layer_moe is not None:
        if not arch.is_moe or arch.first_dense_layers or arch.moe_layer_period != 1:
            raise ValueError("`layer_moe` needs `num_experts` >= 1, `first_dense_layers` 0 and "
                             "`moe_layer_period` 1 (it replaces them)")
    widths = arch.layer_ffn_widths
    if widths is None:
        return
    if arch.is_moe and arch.layer_moe is None:
        raise ValueError("`layer_ffn_widths` with MoE needs `layer_moe` (which layers are MoE)")
    moe_with_width = [i for i, (w, moe) in enumerate(zip(widths, arch.layer_is_moe)) if w and moe]
    if moe_with_width:
        raise ValueError(f"`layer_ffn_widths` must be 0 on MoE layers (layer {moe_with_width[0]})")
    if arch.intermediate_size != max(widths):
        raise ValueError(f"`intermediate_size` ({arch.intermediate_size}) must equal the widest of "
                         f"`layer_ffn_widths` ({max(widths)})")


def _check_linear(arch: Architecture) -> None:
    if arch.linear_conv_bias and arch.linear_mixer_kind != MAMBA2_MIXER:
        raise ValueError("`linear_conv_bias` (True) is for Mamba-2 layers only")
    if not arch.linear_norm and arch.linear_mixer_kind != MAMBA2_MIXER:
        raise ValueError("`linear_norm` (False) is for Mamba-2 layers only")
    if arch.num_linear_attention_layers == 0:
        _require_zero(arch, _LINEAR_FIELDS, "when no layer is linear attention (`layer_mixers`)")
    else:
        for field in _LINEAR_FIELDS:
            if getattr(arch, field) < 1:
                raise ValueError(f"`{field}` ({getattr(arch, field)}) must be >= 1: "
                                 f"{arch.num_linear_attention_layers} layers are linear attention")
        kinds = sorted(k for k in LINEAR_MIXERS if k in (arch.layer_mixers or ()))
        if len({MAMBA2_MIXER if k == PARALLEL_MAMBA2_MIXER else k for k in kinds}) > 1:
            raise ValueError(f"`layer_mixers` mixes {kinds}: one linear-attention kind per model")
        keys, values = arch.linear_num_key_heads, arch.linear_num_value_heads
        if values % keys:
            raise ValueError(f"`linear_num_value_heads` ({values}) must be divisible by "
                             f"`linear_num_key_heads` ({keys})")
    if arch.attention_output_gate and arch.attention_kind != "gqa":
        raise ValueError(
            "`attention_output_gate` (True) is supported with `attention_kind` 'gqa' only"
        )
    if arch.shared_expert_gate and arch.num_shared_experts == 0:
        raise ValueError("`shared_expert_gate` (True) needs `num_shared_experts` >= 1")


def _require_zero(arch: Architecture, fields: tuple[str, ...], when: str) -> None:
    for field in fields:
        if getattr(arch, field) != 0:
            raise ValueError(f"`{field}` ({getattr(arch, field)}) must be 0 {when}")


def _require_value(arch: Architecture, fields: tuple[str, ...], values: tuple[object, ...]) -> None:
    for field, value in zip(fields, values, strict=True):
        if getattr(arch, field) != value:
            raise ValueError(
                f"`{field}` ({getattr(arch, field)}) must be {value} for a dense model "
                "(`num_experts` = 0)"
            )
