"""Struct-of-arrays views of architectures and deployments, for vectorized evaluation.

Candidates run along axis 0 (shape (n, 1)) so they broadcast against concurrencies on axis 1.
Booleans become 0/1 floats; cost formulas select with `np.where`, never with `if`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cached_property, lru_cache
from typing import Sequence

import numpy as np

from cost_model.architecture import (
    GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, MAMBA2_MIXER, Architecture,
)
from cost_model.deployment import Deployment
from cost_model.efficiency import Efficiency, get_efficiency
from cost_model.errors import ConfigError
from cost_model.gemm import WEIGHT_ONLY_ACTIVATIONS, GemmRates
from cost_model.hardware import HardwareSpec
from cost_model.moe_ep import MoeTerms, has_ep1_entry, moe_terms, select_ep1_rates
from cost_model.precision import Precision, get_precision

# `ArchArrays.linear_kind`: each linear mixer's code (0 where a model has none, as in a view
# built from zeros)
LINEAR_KIND_CODES: dict[str | None, float] = {
    GATED_DELTANET_MIXER: 1.0, MAMBA2_MIXER: 2.0, KIMI_DELTA_MIXER: 3.0,
}


def _column(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1, 1)


@dataclass(frozen=True)
class AttentionArrays:
    """The attention layers' columns (`Architecture.attention`)."""

    heads_q: np.ndarray
    heads_kv: np.ndarray
    head_dim: np.ndarray
    mla: np.ndarray
    q_lora: np.ndarray
    kv_lora: np.ndarray
    rope_dim: np.ndarray
    nope_dim: np.ndarray
    v_dim: np.ndarray
    sliding_layers: np.ndarray
    window: np.ndarray  # sliding window in tokens (inf when none)
    index_heads: np.ndarray  # DSA lightning-indexer heads (0: dense attention)
    index_head_dim: np.ndarray  # indexer key width, cached per token and layer
    index_topk: np.ndarray  # keys a DSA query attends to (0: every key)
    output_gate: np.ndarray  # 1: q_proj also yields the attention output gate (Qwen3-Next)
    # Gemma 4's full-attention layers of their own shape (all 0: every layer has head_dim and
    # heads_kv)
    global_layers: np.ndarray
    global_head_dim: np.ndarray
    global_kv_heads: np.ndarray
    k_eq_v: np.ndarray  # 1: those layers have no v_proj


@dataclass(frozen=True)
class FfnArrays:
    """The dense MLP's and the experts' columns (`Architecture.ffn`)."""

    dense_width: np.ndarray  # dense intermediate H′ (per-layer widths: their mean over FFN layers)
    gate_factor: np.ndarray  # 2 for gated (SwiGLU/GeGLU) up projections, else 1
    experts: np.ndarray
    top_k: np.ndarray
    expert_ffn: np.ndarray
    shared_ffn: np.ndarray  # total width of the shared expert(s)
    dense_layers: np.ndarray  # layers with a dense FFN
    moe_layers: np.ndarray
    shared_expert_gate: np.ndarray  # 1: an H → 1 sigmoid gate on the shared expert (Qwen3-Next)


@dataclass(frozen=True)
class MixerArrays:
    """The layer pattern's and the linear mixers' columns (`Architecture.mixer`). Zero for a
    homogeneous, dense-attention model (so that a view built from zeros, as the calibration
    fitters do, keeps meaning "every layer attends")."""

    mixerless_layers: np.ndarray  # layers without a token mixer (Puzzle no-op attention)
    linear_layers: np.ndarray  # Gated DeltaNet / Mamba-2 layers (linear attention with a state)
    parallel_layers: np.ndarray  # of which also run attention beside it (Falcon-H1)
    linear_heads: np.ndarray  # v heads (each holds a key_dim x value_dim state)
    linear_key_dim: np.ndarray
    linear_value_dim: np.ndarray
    linear_kind: np.ndarray  # the linear mixer's code in LINEAR_KIND_CODES (0: none)
    linear_conv_width: np.ndarray  # channels of the short conv (q, k, v)
    linear_conv_kernel: np.ndarray


_ARRAY_PARTS: dict[str, type] = {
    "attention": AttentionArrays, "ffn": FfnArrays, "mixer": MixerArrays,
}


@dataclass(frozen=True)
class ArchArrays:
    """Candidates' architectures as columns, in `Architecture`'s parts (`a.ffn.experts`)."""

    hidden: np.ndarray
    layers: np.ndarray
    vocab: np.ndarray
    tied: np.ndarray
    attention: AttentionArrays
    ffn: FfnArrays
    mixer: MixerArrays

    @classmethod
    def from_architectures(cls, archs: Sequence[Architecture]) -> ArchArrays:
        rows = [_arch_row(a) for a in archs]
        return cls.from_columns(None, **{name: _column([r[name] for r in rows])
                                         for name in _COLUMN_NAMES})

    @classmethod
    def from_columns(cls, default, **columns) -> ArchArrays:
        """Columns by name, each routed to its part (by the parts' own fields); `default` for
        every column not given (the calibration fitters' one-kernel views: zeros)."""
        _check_names(columns)
        parts = {name: part(**{f.name: columns.get(f.name, default) for f in fields(part)})
                 for name, part in _ARRAY_PARTS.items()}
        core = {f.name: columns.get(f.name, default) for f in fields(cls) if f.name not in parts}
        return cls(**core, **parts)

    def with_columns(self, **columns) -> ArchArrays:
        """A copy with the named columns replaced, each in its part."""
        _check_names(columns)
        parts = {name: replace(getattr(self, name), **{f.name: columns[f.name]
                                                       for f in fields(part) if f.name in columns})
                 for name, part in _ARRAY_PARTS.items()}
        core = {name: value for name, value in columns.items() if name not in _PART_OF_COLUMN}
        return replace(self, **core, **parts)

    @property
    def attention_layers(self) -> np.ndarray:
        """Layers whose mixer is attention (full or sliding), parallel hybrids included."""
        m = self.mixer
        return self.layers - m.mixerless_layers - m.linear_layers + m.parallel_layers

    def take(self, index) -> ArchArrays:
        """The candidates at `index` (rows of every column, in every part)."""
        return _take(self, index)


def _take(columns, index):
    """A dataclass of columns at `index`; its parts (dataclasses) taken the same way."""
    return type(columns)(**{f.name: _take(value, index) if is_dataclass(value) else value[index]
                            for f in fields(columns) for value in (getattr(columns, f.name),)})


_PART_OF_COLUMN = {f.name: name for name, part in _ARRAY_PARTS.items() for f in fields(part)}
_COLUMN_NAMES = (*(f.name for f in fields(ArchArrays) if f.name not in _ARRAY_PARTS),
                 *_PART_OF_COLUMN)


def _check_names(columns) -> None:
    unknown = set(columns) - set(_COLUMN_NAMES)
    if unknown:
        raise TypeError(f"ArchArrays has no column {sorted(unknown)}")


@lru_cache(maxsize=16384)  # searches revisit architectures; `Architecture` is frozen
def _arch_row(a: Architecture) -> dict[str, float]:
    """One candidate's columns. Per-layer FFN widths (Puzzle) enter as `dense_layers` and their
    mean `dense_width`: the weights,
    FLOPs and bytes of the dense FFNs are exact (linear in the width);
    only each GEMM's tile/wave quantization is taken at the mean width (widths are multiples of
    256, so the error is that of one width against another, not of a misaligned one)."""
    return dict(hidden=a.hidden_size, layers=a.num_layers, vocab=a.vocab_size,
                tied=float(a.tie_word_embeddings), **_attention_columns(a), **_ffn_columns(a),
                **_mixer_columns(a))


def _attention_columns(a: Architecture) -> dict[str, float]:
    att = a.attention
    mla = att.attention_kind == "mla"
    return dict(
        heads_q=att.num_attention_heads, heads_kv=att.num_kv_heads, head_dim=att.head_dim,
        mla=float(mla), q_lora=att.q_lora_rank if mla else 0,
        kv_lora=att.kv_lora_rank if mla else 0, rope_dim=att.qk_rope_head_dim if mla else 0,
        nope_dim=att.qk_nope_head_dim if mla else 0, v_dim=att.value_head_dim,
        sliding_layers=a.num_sliding_layers,
        window=float(att.sliding_window) if att.sliding_window else np.inf,
        index_heads=att.index_heads, index_head_dim=att.index_head_dim,
        index_topk=att.index_topk, output_gate=float(att.attention_output_gate),
        global_layers=a.num_global_attention_layers, global_head_dim=att.global_head_dim,
        global_kv_heads=att.num_global_kv_heads, k_eq_v=float(att.attention_k_eq_v),
    )


def _ffn_columns(a: Architecture) -> dict[str, float]:
    ffn, moe = a.ffn, a.ffn.is_moe
    return dict(
        dense_width=a.mean_dense_ffn_width, gate_factor=2.0 if ffn.gated_mlp else 1.0,
        experts=ffn.num_experts, top_k=ffn.experts_per_token if moe else 0,
        expert_ffn=ffn.moe_intermediate_size if moe else 0,
        shared_ffn=ffn.shared_expert_intermediate_size if moe else 0,
        dense_layers=a.num_dense_layers, moe_layers=a.num_moe_layers,
        shared_expert_gate=float(ffn.shared_expert_gate and moe),
    )


def _mixer_columns(a: Architecture) -> dict[str, float]:
    """The layer pattern and the linear mixer's kind, heads and state shape: Gated DeltaNet,
    Mamba-2 and KDA all convolve q/k/v (x/B/C) and keep a key x value state per head. Their
    projections' widths are the table's rows (`cost_model.sharded_gemms`), read there by
    kind."""
    mix = a.mixer
    value_width = mix.linear_num_value_heads * mix.linear_value_head_dim
    return dict(
        mixerless_layers=a.num_layers - a.num_mixer_layers,
        linear_layers=mix.num_linear_attention_layers,
        parallel_layers=mix.num_parallel_hybrid_layers,
        linear_kind=LINEAR_KIND_CODES.get(mix.linear_mixer_kind, 0.0),
        linear_heads=mix.linear_num_value_heads, linear_key_dim=mix.linear_key_head_dim,
        linear_value_dim=mix.linear_value_head_dim,
        linear_conv_width=2 * mix.linear_num_key_heads * mix.linear_key_head_dim + value_width,
        linear_conv_kernel=mix.linear_conv_kernel,
    )


@dataclass(frozen=True)
class DeployArrays:
    tp: np.ndarray
    ep: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    imbalance: np.ndarray
    spec_tokens: np.ndarray | float = 0.0  # speculative tokens verified per step (0: none)
    spec_acceptance: np.ndarray | float = 0.0
    kvp: np.ndarray | float = 1.0  # Helix KV parallelism: attention sharded over the sequence
    # 1: tokens pick experts at random (serving: the busiest EP GPU touches more experts than
    # the mean, `layers.busiest_rank_touched_experts`); 0: balanced routing (the kernel tables)
    random_routing: np.ndarray | float = 1.0

    @classmethod
    def from_deployments(cls, deps: Sequence[Deployment]) -> DeployArrays:
        return cls(tp=_column([d.tp for d in deps]), ep=_column([d.ep for d in deps]),
                   pp=_column([d.pp for d in deps]), dp=_column([d.dp for d in deps]),
                   imbalance=_column([d.moe_imbalance_frac for d in deps]),
                   spec_tokens=_column([d.spec_tokens for d in deps]),
                   spec_acceptance=_column([d.spec_acceptance_frac for d in deps]),
                   kvp=_column([d.kvp for d in deps]))

    @property
    def speculative(self) -> bool:
        """True when any candidate verifies speculative tokens."""
        return bool(np.any(np.asarray(self.spec_tokens) > 0))

    @property
    def ffn_tp(self):
        """TP of the output projection, dense FFN, shared experts and LM head: Helix reuses its
        TP × KVP attention GPUs as one TP group there (TP alone without Helix)."""
        return self.tp * self.kvp

    @property
    def moe_tp(self) -> np.ndarray:
        return self.tp * self.dp * self.kvp / self.ep

    @property
    def gpus(self) -> np.ndarray:
        return self.tp * self.dp * self.pp * self.kvp


@dataclass(frozen=True)
class FormatColumn:
    """The byte widths of each candidate's number format as (n, 1) columns: stands in for one
    `Precision` where a batch mixes formats (the cost formulas only read these two)."""

    formats: tuple[Precision, ...]  # the distinct formats
    index: np.ndarray  # (n,): each candidate's entry of `formats`

    def _column(self, attr: str) -> np.ndarray:
        return _column(np.array([getattr(p, attr) for p in self.formats])[self.index])

    @cached_property
    def activation_bytes_per_value(self) -> np.ndarray:
        return self._column("activation_bytes_per_value")

    @cached_property
    def weight_bytes_per_value(self) -> np.ndarray:
        return self._column("weight_bytes_per_value")


@dataclass(frozen=True)
class Env:
    """What a batch of candidates shares: the GPU, its efficiency data (the serving engine's
    kernels, `cost_model.efficiency`) and the number formats (each one `Precision`, or a
    `FormatColumn` of per-candidate formats). A weight-only format (w4a16, w8a16) runs its GEMMs
    on BF16 activations at the BF16 rate and efficiency of the GPU with its own weight bytes
    (`cost_model.precision`); routed experts run the fused MoE kernels of their format
    (`GemmRates.for_experts`)."""

    hw: HardwareSpec
    eff: Efficiency
    linear: Precision | FormatColumn  # weights and activations of attention / dense linear layers
    kv: Precision | FormatColumn
    high: Precision  # unquantized parts: embeddings, LM head, router, attention math
    moe: Precision | FormatColumn | None = None  # routed experts; None: the `linear` format

    @property
    def experts(self) -> Precision | FormatColumn:
        """The routed experts' format."""
        return self.linear if self.moe is None else self.moe

    @property
    def mixed_experts(self) -> bool:
        """True when some candidate's experts use another format than its linear layers."""
        return self.moe is not None and not same_format(self.moe, self.linear)

    @cached_property
    def linear_rates(self) -> GemmRates:
        return _rates(self.hw, self.linear, self.eff)

    @cached_property
    def moe_rates(self) -> GemmRates:
        """The grouped expert GEMMs' rates: the fused MoE kernels of the experts' format (the
        joint `[moe.<format>]` entry: EP > 1)."""
        return _per_format(self.experts, lambda p: GemmRates.for_experts(self.hw, p, self.eff))

    @cached_property
    def moe_ep1_rates(self) -> GemmRates:
        """The same at EP = 1 (the format's `[moe.<format>.ep1]` entry; `moe_rates` itself when
        no format has one)."""
        if not has_ep1_entry(self.eff, self.experts):
            return self.moe_rates
        return _per_format(self.experts, lambda p: GemmRates.for_experts(
            self.hw, p, self.eff, self.eff.expert_gemm(p, ep1=True)))

    def expert_rates(self, ep) -> GemmRates:
        """Each deployment's grouped expert GEMM rates by its EP degree (`cost_model.moe_ep`);
        `ep` None: the joint entry's."""
        return self.moe_rates if ep is None else select_ep1_rates(ep, self.moe_ep1_rates,
                                                                  self.moe_rates)

    @cached_property
    def high_rates(self) -> GemmRates:
        return GemmRates.of(self.hw, self.high, efficiency=self.eff)

    @cached_property
    def moe_terms(self) -> MoeTerms:
        """Each candidate's fused-MoE terms (0 where the file has no MoE entry), its EP = 1
        entry's as `ep1` (`MoeTerms.at` picks each deployment's)."""
        return moe_terms(self.eff, self.experts)

    @classmethod
    def create(cls, hw: HardwareSpec, precision: str, kv_precision: str,
               moe_precision: str | None = None, engine: str | None = None) -> Env:
        """One environment of named formats on `engine`'s kernels (None: the generic ones)."""
        moe = None if moe_precision is None else _linear_format(hw, moe_precision,
                                                                "moe_precision")
        return cls(hw=hw, eff=get_efficiency(hw.name, engine),
                   linear=_linear_format(hw, precision),
                   kv=get_precision(kv_precision, "kv_precision"), high=get_precision("bf16"),
                   moe=moe)

    @classmethod
    def for_deployments(cls, hw: HardwareSpec, deps: Sequence[Deployment],
                        engine: str | None = None) -> Env:
        """One environment for candidates whose deployments may use different formats, on
        `engine`'s kernels (None: the generic ones)."""
        linear = _format_column(hw, [d.precision for d in deps], _linear_format)
        moe = _format_column(hw, [d.expert_precision for d in deps],
                             lambda hw, name: _linear_format(hw, name, "moe_precision"))
        kv = _format_column(hw, [d.kv_cache_precision for d in deps],
                            lambda _, name: get_precision(name, "kv_precision"))
        return cls(hw=hw, eff=get_efficiency(hw.name, engine), linear=linear, kv=kv,
                   high=get_precision("bf16"), moe=None if same_format(moe, linear) else moe)


def same_format(a: Precision | FormatColumn, b: Precision | FormatColumn) -> bool:
    """True when `a` and `b` give every candidate the same format."""
    if isinstance(a, Precision) or isinstance(b, Precision):
        return a == b
    return a.formats == b.formats and np.array_equal(a.index, b.index)


def _rates(hw: HardwareSpec, fmt: Precision | FormatColumn, eff: Efficiency) -> GemmRates:
    """GEMM rates of one format, or (n, 1) columns of each candidate's format."""
    return _per_format(fmt, lambda p: _format_rates(hw, p, eff))


def _per_format(fmt: Precision | FormatColumn, rates_of) -> GemmRates:
    """`rates_of(format)` for one format, or (n, 1) columns of each candidate's."""
    if isinstance(fmt, Precision):
        return rates_of(fmt)
    rates = [rates_of(p) for p in fmt.formats]
    return GemmRates(**{f.name: _column(np.array([getattr(r, f.name) for r in rates])[fmt.index])
                        for f in fields(GemmRates)})


def _format_rates(hw: HardwareSpec, fmt: Precision, eff: Efficiency) -> GemmRates:
    """A's format sets the peak and efficiency, B's the weight bytes: a weight-only format's
    activations are BF16 (`Precision.activation_bits`), so its GEMMs are BF16 GEMMs on
    narrower weights."""
    if fmt.weight_only:
        return GemmRates.of(hw, get_precision(WEIGHT_ONLY_ACTIVATIONS), fmt, efficiency=eff)
    return GemmRates.of(hw, fmt, efficiency=eff)


def _linear_format(hw: HardwareSpec, name: str, field: str = "precision") -> Precision:
    """The format `name` of linear layers (`field`: which deployment field names it), checked
    against the GPU's tensor-core rates."""
    linear = get_precision(name, field)
    if not hw.supports(linear):
        have = ", ".join(sorted(hw.peak_flop_per_s))
        raise ConfigError(f"`{field}` {linear.name} is not supported on {hw.name} "
                          f"(tensor-core rates: {have})")
    return linear


def _format_column(hw: HardwareSpec, names: Sequence[str], resolve) -> Precision | FormatColumn:
    """One `Precision` when every candidate uses the same format, else a `FormatColumn`."""
    distinct = list(dict.fromkeys(names))
    formats = tuple(resolve(hw, name) for name in distinct)
    if len(formats) == 1:
        return formats[0]
    position = {name: i for i, name in enumerate(distinct)}
    return FormatColumn(formats, np.array([position[name] for name in names]))
