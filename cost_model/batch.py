"""Struct-of-arrays views of architectures and deployments, for vectorized evaluation.

Candidates run along axis 0 (shape (n, 1)) so they broadcast against concurrencies on axis 1.
Booleans become 0/1 floats; cost formulas select with `np.where`, never with `if`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Sequence

import numpy as np

from cost_model.architecture import Architecture
from cost_model.deployment import Deployment
from cost_model.efficiency import Efficiency, get_efficiency
from cost_model.errors import ConfigError
from cost_model.gemm import GemmRates
from cost_model.hardware import HardwareSpec
from cost_model.precision import Precision, get_precision


def _column(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1, 1)


@dataclass(frozen=True)
class ArchArrays:
    hidden: np.ndarray
    layers: np.ndarray
    heads_q: np.ndarray
    heads_kv: np.ndarray
    head_dim: np.ndarray
    vocab: np.ndarray
    ffn: np.ndarray  # dense intermediate H′
    gate_factor: np.ndarray  # 2 for gated (SwiGLU/GeGLU) up projections, else 1
    experts: np.ndarray
    top_k: np.ndarray
    expert_ffn: np.ndarray
    shared_ffn: np.ndarray  # total width of the shared expert(s)
    dense_layers: np.ndarray  # layers with a dense FFN
    moe_layers: np.ndarray
    mla: np.ndarray
    q_lora: np.ndarray
    kv_lora: np.ndarray
    rope_dim: np.ndarray
    nope_dim: np.ndarray
    v_dim: np.ndarray
    tied: np.ndarray
    sliding_layers: np.ndarray
    window: np.ndarray  # sliding window in tokens (inf when none)

    @classmethod
    def from_architectures(cls, archs: Sequence[Architecture]) -> ArchArrays:
        rows = [_arch_row(a) for a in archs]
        return cls(**{f.name: _column([r[f.name] for r in rows]) for f in fields(cls)})

    def take(self, index) -> ArchArrays:
        return ArchArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def _arch_row(a: Architecture) -> dict[str, float]:
    mla = a.attention_kind == "mla"
    return dict(
        hidden=a.hidden_size, layers=a.num_layers, heads_q=a.num_attention_heads,
        heads_kv=a.num_kv_heads, head_dim=a.head_dim, vocab=a.vocab_size, ffn=a.intermediate_size,
        gate_factor=2.0 if a.gated_mlp else 1.0, experts=a.num_experts,
        top_k=a.experts_per_token if a.is_moe else 0,
        expert_ffn=a.moe_intermediate_size if a.is_moe else 0,
        shared_ffn=a.shared_expert_intermediate_size if a.is_moe else 0,
        dense_layers=a.num_dense_layers, moe_layers=a.num_moe_layers, mla=float(mla),
        q_lora=a.q_lora_rank if mla else 0, kv_lora=a.kv_lora_rank if mla else 0,
        rope_dim=a.qk_rope_head_dim if mla else 0, nope_dim=a.qk_nope_head_dim if mla else 0,
        v_dim=a.v_head_dim if mla else a.head_dim, tied=float(a.tie_word_embeddings),
        sliding_layers=a.num_sliding_layers,
        window=float(a.sliding_window) if a.sliding_window else np.inf,
    )


@dataclass(frozen=True)
class DeployArrays:
    tp: np.ndarray
    ep: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    imbalance: np.ndarray

    @classmethod
    def from_deployments(cls, deps: Sequence[Deployment]) -> DeployArrays:
        return cls(tp=_column([d.tp for d in deps]), ep=_column([d.ep for d in deps]),
                   pp=_column([d.pp for d in deps]), dp=_column([d.dp for d in deps]),
                   imbalance=_column([d.moe_imbalance_frac for d in deps]))

    @property
    def moe_tp(self) -> np.ndarray:
        return self.tp * self.dp / self.ep

    @property
    def gpus(self) -> np.ndarray:
        return self.tp * self.dp * self.pp


@dataclass(frozen=True)
class Env:
    """What a group of candidates shares: the GPU, its efficiency data and the number formats."""

    hw: HardwareSpec
    eff: Efficiency
    linear: Precision  # weights and activations of linear layers
    kv: Precision
    high: Precision  # unquantized parts: embeddings, LM head, router, attention math

    @cached_property
    def linear_rates(self) -> GemmRates:
        return GemmRates.of(self.hw, self.linear)

    @cached_property
    def high_rates(self) -> GemmRates:
        return GemmRates.of(self.hw, self.high)

    @classmethod
    def create(cls, hw: HardwareSpec, precision: str, kv_precision: str) -> Env:
        linear = get_precision(precision, "precision")
        if not hw.supports(linear):
            have = ", ".join(sorted(hw.peak_flop_per_s))
            raise ConfigError(f"`precision` {linear.name} is not supported on {hw.name} "
                              f"(tensor-core rates: {have})")
        return cls(hw=hw, eff=get_efficiency(hw.name), linear=linear,
                   kv=get_precision(kv_precision, "kv_precision"), high=get_precision("bf16"))
