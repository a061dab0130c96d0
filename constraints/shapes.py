"""The GEMM dimensions of one candidate *after sharding* (NVIDIA, AI Model Co-Design (2026), "How
GPUs execute GEMMs": alignment holds for the dimensions each GPU actually runs, after parallel
sharding), each named by the fields it comes from.

Sharding follows `cost_model.layers`: attention and dense/shared-expert MLPs split over TP, routed
experts over EP with each expert's intermediate split over moe_tp = TP·DP/EP. GQA keeps
⌈n_kv/TP⌉ KV heads per GPU (replicated beyond n_kv). The gated up projection's fused N is
2·H′/TP, aligned whenever H′/TP is, so H′/TP stands for gate, up (N) and down (K).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cost_model.architecture import Architecture
from cost_model.deployment import Deployment

TP_LABEL = "TP"
MOE_TP_LABEL = "(TP·DP/EP)"


@dataclass(frozen=True)
class GemmDim:
    """One GEMM dimension on one GPU: `size` may be fractional when the shard does not divide."""

    label: str  # the fields it comes from, e.g. "`intermediate_size`/TP"
    numbers: str  # the same expression in numbers, e.g. "14336/3"
    size: float
    reduction: bool  # the K of some GEMM (what block-scaled formats scale along)

    @property
    def is_integer(self) -> bool:
        return float(self.size).is_integer()

    def describe(self) -> str:
        """"`intermediate_size`/TP = 14336/3 = 4778.7"; the numbers are left out when plain."""
        shown = format_size(self.size)
        return f"{self.label} = {shown}" if self.numbers == shown else \
            f"{self.label} = {self.numbers} = {shown}"


def format_size(size: float) -> str:
    """An integer as is, a fractional size to one decimal (8192/6 -> "1365.3")."""
    return str(int(size)) if float(size).is_integer() else f"{size:.1f}"


def sharded(label: str, total: int, shards: int, shards_label: str, reduction: bool,
            factors: str | None = None) -> GemmDim:
    """`total` split over `shards` GPUs; `factors` spells `total` as a product, e.g. "32·128"."""
    if shards == 1:
        return GemmDim(label, factors or str(total), float(total), reduction)
    numbers = f"{total}/{shards}" if factors is None else f"{factors}/{shards} = {total}/{shards}"
    return GemmDim(f"{label}/{shards_label}", numbers, total / shards, reduction)


def gemm_dims(arch: Architecture, dep: Deployment) -> tuple[GemmDim, ...]:
    """Every distinct GEMM dimension one GPU runs for `arch` deployed as `dep`."""
    hidden = GemmDim("`hidden_size`", str(arch.hidden_size), float(arch.hidden_size), True)
    attention = _mla_dims(arch, dep) if arch.attention_kind == "mla" else _gqa_dims(arch, dep)
    return (hidden, *attention, *_mlp_dims(arch, dep))


def _gqa_dims(arch: Architecture, dep: Deployment) -> list[GemmDim]:
    n_q, n_kv, d_h, tp = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim, dep.tp
    query = sharded("`num_attention_heads`·`head_dim`", n_q * d_h, tp, TP_LABEL, True,
                    f"{n_q}·{d_h}")  # q_proj N, o_proj K
    kv_heads = math.ceil(n_kv / tp)
    kv_label, kv_numbers = ("`num_kv_heads`·`head_dim`", f"{n_kv}·{d_h}") if tp == 1 else \
        ("⌈`num_kv_heads`/TP⌉·`head_dim`", f"⌈{n_kv}/{tp}⌉·{d_h}")
    return [query, GemmDim(kv_label, kv_numbers, float(kv_heads * d_h), False)]  # k/v_proj N


def _mla_dims(arch: Architecture, dep: Deployment) -> list[GemmDim]:
    n_q, tp = arch.num_attention_heads, dep.tp
    dims = [GemmDim("`kv_lora_rank`", str(arch.kv_lora_rank), float(arch.kv_lora_rank), True)]
    if arch.q_lora_rank > 0:
        dims.append(GemmDim("`q_lora_rank`", str(arch.q_lora_rank), float(arch.q_lora_rank), True))
    nope, rope, v_dim = arch.qk_nope_head_dim, arch.qk_rope_head_dim, arch.v_head_dim
    dims.append(sharded("`num_attention_heads`·(`qk_nope_head_dim`+`qk_rope_head_dim`)",
                        n_q * (nope + rope), tp, TP_LABEL, False, f"{n_q}·({nope}+{rope})"))
    dims.append(sharded("`num_attention_heads`·`v_head_dim`", n_q * v_dim, tp, TP_LABEL, True,
                        f"{n_q}·{v_dim}"))  # o_proj K
    return dims


def _mlp_dims(arch: Architecture, dep: Deployment) -> list[GemmDim]:
    dims = []
    if arch.num_dense_layers > 0:
        dims.append(sharded("`intermediate_size`", arch.intermediate_size, dep.tp, TP_LABEL, True))
    if arch.is_moe:
        dims.append(sharded("`moe_intermediate_size`", arch.moe_intermediate_size, dep.moe_tp,
                            MOE_TP_LABEL, True))
    if arch.shared_expert_intermediate_size > 0:
        dims.append(sharded("`shared_expert_intermediate_size`",
                            arch.shared_expert_intermediate_size, dep.tp, TP_LABEL, True))
    return dims
