"""The GEMM dimensions of one candidate *after sharding* (NVIDIA, AI Model Co-Design (2026), "How
GPUs execute GEMMs": alignment holds for the dimensions each GPU actually runs, after parallel
sharding), each named by the fields it comes from.

The dims are those of the table of weight GEMMs (`cost_model.sharded_gemms`, the shapes the
step model runs), sharded as there: attention and dense/shared-expert MLPs split over TP, routed
experts over EP with each expert's intermediate split over moe_tp = TP·DP/EP. GQA keeps
⌈n_kv/TP⌉ KV heads per GPU (replicated beyond n_kv). The gated up projection's fused N is
2·H′/TP, aligned whenever H′/TP is, so H′/TP stands for gate, up (N) and down (K).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from cost_model import Architecture, Deployment, Term, WeightGemm, per_gpu_n, rows_of

TP_LABEL = "TP"
HELIX_TP_LABEL = "(TP·KVP)"  # Helix: the output projection, FFN and vocabulary over tp·kvp GPUs
MOE_TP_LABEL = "(TP·DP/EP)"
HIDDEN_LABEL = "`hidden_size`"


@dataclass(frozen=True)
class GemmDim:
    """One GEMM dimension on one GPU: `size` may be fractional when the shard does not divide."""

    label: str  # the fields it comes from, e.g. "`intermediate_size`/TP"
    numbers: str  # the same expression in numbers, e.g. "14336/3"
    size: float
    reduction: bool  # the K of some GEMM (what block-scaled formats scale along)
    fields: tuple[str, ...] = ()  # the `Architecture` fields of `label`, in order

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
            factors: str | None = None, fields: tuple[str, ...] = ()) -> GemmDim:
    """`total` split over `shards` GPUs; `factors` spells `total` as a product, e.g. "32·128"."""
    if shards == 1:
        return GemmDim(label, factors or str(total), float(total), reduction, fields)
    numbers = f"{total}/{shards}" if factors is None else f"{factors}/{shards} = {total}/{shards}"
    return GemmDim(f"{label}/{shards_label}", numbers, total / shards, reduction, fields)


@lru_cache(maxsize=4096)  # alignment and block-scaling checks both read it; both are frozen
def gemm_dims(arch: Architecture, dep: Deployment) -> tuple[GemmDim, ...]:
    """Every distinct GEMM dimension one GPU runs for `arch` deployed as `dep`: the dims of the
    table's rows that the alignment guideline checks (`WeightGemm.checked`), `hidden_size`
    first; a dim is a reduction when it is some row's K."""
    dims: dict[str, GemmDim] = {}
    for row in rows_of(arch):
        for which in row.checked:
            dim = _row_dim(arch, dep, row, which)
            seen = dims.get(dim.label)
            dims[dim.label] = dim if seen is None else \
                replace(seen, reduction=seen.reduction or dim.reduction)
    hidden = [dim for dim in dims.values() if dim.label == HIDDEN_LABEL]
    return (*hidden, *(dim for dim in dims.values() if dim.label != HIDDEN_LABEL))


def _row_dim(arch: Architecture, dep: Deployment, row: WeightGemm, which: str) -> GemmDim:
    """N or K (`which`) of `row` on one GPU, labelled by its fields."""
    model_dim = (row.n if which == "n" else row.k).chosen(arch)
    label, numbers, total = model_dim.label(), model_dim.numbers(arch), model_dim.value(arch)
    reduction, shards = which == "k", getattr(dep, row.shard) if row.sharded == which else 1
    if shards == 1:
        return GemmDim(label, numbers, float(total), reduction, model_dim.fields)
    if row.kv_heads:  # ⌈n_kv/TP⌉ whole KV heads per GPU
        head_factors = model_dim.terms[0].factors
        heads, rest = Term(head_factors[:1]), Term(head_factors[1:])
        return GemmDim(f"⌈{heads.label()}/TP⌉·{rest.label()}",
                       f"⌈{heads.numbers(arch)}/{shards}⌉·{rest.numbers(arch)}",
                       float(per_gpu_n(row, arch, dep)), reduction, model_dim.fields)
    factors = numbers if numbers != str(total) else None
    return sharded(label, total, shards, _shard_label(row, dep), reduction, factors,
                   model_dim.fields)


def _shard_label(row: WeightGemm, dep: Deployment) -> str:
    if row.shard == "moe_tp":
        return MOE_TP_LABEL
    return HELIX_TP_LABEL if row.shard == "ffn_tp" and dep.kvp > 1 else TP_LABEL
