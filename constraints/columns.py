"""Every constraint of one architecture under many deployments at once: the values
`check_candidate` gives, as numpy columns over the deployments (no messages).

A study that sweeps deployments checks each architecture under every deployment of its space
(32 on `moe-400b-gb300-nvl72`); `check_candidate` rebuilds the architecture's GEMM dimensions
(`gemm_dims`: labels and numbers as text) for each, which was half of a search's time. Here the
dimensions are read from the table once per architecture (`DimTemplate`: each checked N or K, its
label unsharded and sharded, its size as a function of the deployment's shard) and evaluated on
the deployments' columns. The values equal `check_candidate`'s exactly (same operations, same
summation order; tests compare both over every shipped study); the messages of a chosen
deployment still come from `check_candidate` (given the dims counted here where they hold:
`aligned_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Sequence

import numpy as np

from constraints.budget import MIN_SEQUENCES, check_aspect_ratio, check_params_budget
from constraints.check import CONSTRAINT_NAMES
from constraints.shapes import HELIX_TP_LABEL, HIDDEN_LABEL, MOE_TP_LABEL, TP_LABEL
from constraints.sharding import FULL_WASTE_FRAC, pattern_stage_violations
from constraints.violation import ConstraintRules
from cost_model import (
    MAMBA2_MIXER, Architecture, Deployment, Dim, Term, WeightGemm, get_precision, rows_of,
)


@dataclass(frozen=True)
class DeploymentColumns:
    """Deployments as int64 columns (one entry each)."""

    deployments: tuple[Deployment, ...]
    tp: np.ndarray
    ep: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    kvp: np.ndarray
    ffn_tp: np.ndarray
    moe_tp: np.ndarray
    gpus: np.ndarray
    block: np.ndarray  # block size of the linear layers' format (1: not block-scaled)

    @classmethod
    def of(cls, deps: Sequence[Deployment]) -> DeploymentColumns:
        return _columns(tuple(deps))

    def __len__(self) -> int:
        return len(self.deployments)

    def take(self, index) -> DeploymentColumns:
        picked = np.asarray(index)
        return DeploymentColumns(Deployments(self.deployments[i] for i in picked),
                                 *(getattr(self, f)[picked] for f in _INT_FIELDS))


class Deployments(tuple):
    """A tuple of deployments that computes its hash once: the caches keyed by a sweep's
    deployments (`static_values`, `aligned_counts`) look it up several times an architecture,
    and each `Deployment` hashes every field. Equal to, and hashed as, the plain tuple."""

    def __hash__(self) -> int:
        found = self.__dict__.get("hash")
        if found is None:
            found = self.__dict__["hash"] = tuple.__hash__(self)
        return found


_INT_FIELDS = ("tp", "ep", "pp", "dp", "kvp", "ffn_tp", "moe_tp", "gpus", "block")


@lru_cache(maxsize=256)
def _columns(deps: tuple[Deployment, ...]) -> DeploymentColumns:
    ints = {f: np.array([_field(d, f) for d in deps], dtype=np.int64) for f in _INT_FIELDS}
    return DeploymentColumns(Deployments(deps), **ints)


def _field(dep: Deployment, name: str) -> int:
    return get_precision(dep.precision).block_size if name == "block" else getattr(dep, name)


_LABEL_IDS: dict[str, int] = {}
SHARDS = (None, "tp", "ffn_tp", "moe_tp")  # a dim's shard kind: its index here


def _label_id(label: str) -> int:
    return _LABEL_IDS.setdefault(label, len(_LABEL_IDS))


@dataclass(frozen=True)
class DimTemplate:
    """Every checked N or K of an architecture's table rows, in `gemm_dims`' order before its
    dedupe (`_row_dim`: the first `hidden_size` entry, then the others in table order), as
    arrays over those entries: the label unsharded, over TP (or over (TP·DP/EP) for experts)
    and in Helix's form (ffn_tp with kvp > 1), as ids; the shard kind (an index of `SHARDS`);
    the size's parts: `total`, or ⌈`kv_heads`/shard⌉·`rest` where `kv_heads` > 0 (GQA's whole
    KV heads per GPU); whether it is a K; and which earlier entries each could repeat."""

    label: np.ndarray
    sharded_label: np.ndarray
    helix_label: np.ndarray
    shard: np.ndarray
    total: np.ndarray
    kv_heads: np.ndarray
    rest: np.ndarray
    reduction: np.ndarray
    earlier: np.ndarray  # (entry, entry, 1) bool: the second entry comes before the first
    labels: tuple  # the label ids, shard kinds and K flags: what the dedupe depends on


_DERIVED = ("earlier", "labels")  # DimTemplate's fields not read from the entries


@lru_cache(maxsize=4096)
def dim_template(arch: Architecture) -> DimTemplate:
    entries = [_entry(arch, row, which) for row in rows_of(arch) for which in row.checked]
    hidden = [i for i, e in enumerate(entries) if e[0] == _label_id(HIDDEN_LABEL)][:1]
    order = hidden + [i for i in range(len(entries)) if i not in hidden]
    columns = [np.array(values)[order] for values in zip(*entries)]
    named = dict(zip((f.name for f in fields(DimTemplate) if f.name not in _DERIVED), columns))
    earlier = np.tri(len(order), k=-1, dtype=bool)[:, :, None]
    labels = tuple(tuple(named[f].tolist()) for f in ("label", "sharded_label", "helix_label",
                                                      "shard", "reduction"))
    return DimTemplate(**named, earlier=earlier, labels=labels)


def _entry(arch: Architecture, row: WeightGemm, which: str) -> tuple:
    model_dim = (row.n if which == "n" else row.k).chosen(arch)
    shard = row.shard if row.sharded == which else None
    heads = rest = 0
    if shard is not None and row.kv_heads:
        term = model_dim.terms[0]
        heads = Term(term.factors[:1]).value(arch)
        rest = Term(term.factors[1:], term.coef).value(arch)
    return (*_labels(row, which, model_dim), SHARDS.index(shard), float(model_dim.value(arch)),
            heads, rest, which == "k")


@lru_cache(maxsize=1024)
def _labels(row: WeightGemm, which: str, model_dim: Dim) -> tuple[int, int, int]:
    """Ids of the labels of `row`'s N or K (`model_dim`: the one chosen) unsharded, over its
    shard and in Helix's form, as `gemm_dims` writes them (they name fields, not values)."""
    label = model_dim.label()
    shard = row.shard if row.sharded == which else None
    sharded = f"{label}/{MOE_TP_LABEL if shard == 'moe_tp' else TP_LABEL}"
    helix = f"{label}/{HELIX_TP_LABEL}" if shard == "ffn_tp" else sharded
    if shard is not None and row.kv_heads:
        factors = model_dim.terms[0].factors
        inner = "·".join(f"`{f}`" for f in factors[1:])
        sharded = helix = f"⌈`{factors[0]}`/TP⌉·{inner}"
    return _label_id(label), _label_id(sharded), _label_id(helix)


@dataclass(frozen=True)
class Dims:
    """The distinct dims on one GPU under each deployment: (entries, deployments) arrays, the
    entries in `gemm_dims`' order."""

    size: np.ndarray  # float
    first: np.ndarray  # bool: the first entry of its label under that deployment (kept)
    reduction: np.ndarray  # bool: some entry of the label is a K


def gemm_dim_columns(arch: Architecture, d: DeploymentColumns) -> Dims:
    t = dim_template(arch)
    ones = np.ones(len(d), dtype=np.int64)
    shards = np.stack([ones, d.tp, d.ffn_tp, d.moe_tp])[t.shard]  # (entry, deployment)
    whole = shards == 1
    kv, rest, total = t.kv_heads[:, None], t.rest[:, None], t.total[:, None]
    size = np.where(whole, total, np.where(kv > 0, np.ceil(kv / shards) * rest, total / shards))
    return Dims(size, *_label_flags(t, whole, d.kvp > 1))


# (`DimTemplate.labels`, which entries are unsharded and which deployments use Helix) -> the
# dedupe's flags: architectures of one kind under one study's deployments share a few dozen
_FLAGS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
FLAGS_KEPT = 4096


def _label_flags(t: DimTemplate, whole: np.ndarray, helix_deps: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(entry, deployment) bools: the entry is the first of its label under the deployment
    (kept), some entry of its label is a K. An entry's label is its unsharded one where its
    shard is 1 (`whole`), else over TP, or in Helix's form for an ffn_tp shard with kvp > 1:
    so the flags depend on the template's labels and on `whole` and `helix_deps` alone, and are
    kept for them (shared arrays: read only)."""
    key = (t.labels, whole.shape, whole.tobytes(), helix_deps.tobytes())
    found = _FLAGS.get(key)
    if found is None:
        helix = (t.shard == SHARDS.index("ffn_tp"))[:, None] & helix_deps[None, :]
        label = np.where(whole, t.label[:, None],
                         np.where(helix, t.helix_label[:, None], t.sharded_label[:, None]))
        same = label[:, None, :] == label[None, :, :]  # (entry, entry, deployment)
        first = ~np.any(same & t.earlier, axis=1)
        reduction = np.any(same & t.reduction[None, :, None], axis=1)
        if len(_FLAGS) >= FLAGS_KEPT:
            _FLAGS.clear()
        found = _FLAGS[key] = (first, reduction)
    return found


def _padding_waste(size: np.ndarray, multiple: int) -> np.ndarray:
    """`padding_waste_frac` on columns."""
    padded = np.ceil(size / multiple) * multiple
    return np.where(size == np.floor(size), (padded - size) / padded, FULL_WASTE_FRAC)


def _misaligned(size: np.ndarray, multiple) -> np.ndarray:
    return (size != np.floor(size)) | (np.mod(size, multiple) != 0)


def alignment_values(dims: Dims, multiple: int) -> np.ndarray:
    """`check_alignment`'s value: the summed padding waste of the distinct dims, in order."""
    waste = np.where(dims.first, _padding_waste(dims.size, multiple), 0.0)
    return np.add.reduce(waste, axis=0)  # entry by entry, in order: as `sum` in the check


def nvfp4_block_values(dims: Dims, d: DeploymentColumns) -> np.ndarray:
    """`check_nvfp4_block`'s value: distinct K dims not a multiple of the format's block."""
    bad = dims.first & dims.reduction & _misaligned(dims.size, d.block[None, :])
    return np.where(d.block > 1, bad.sum(axis=0), 0).astype(float)


def sharding_broken(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """How many of `deployment_violations`' rules `arch` breaks under each deployment."""
    heads, kv = arch.attention.num_attention_heads, arch.attention.num_kv_heads
    broken = (heads % d.tp != 0).astype(int) + ((kv % d.tp != 0) & (d.tp % kv != 0))
    broken += (arch.num_dense_layers > 0) & (arch.ffn.intermediate_size % d.ffn_tp != 0)
    broken += (d.kvp > 1) & (heads % d.ffn_tp != 0)
    broken += d.pp > arch.num_layers
    if arch.ffn.is_moe:
        return broken + (arch.ffn.num_experts % d.ep != 0) + \
            (arch.ffn.moe_intermediate_size % d.moe_tp != 0)
    return broken + (d.ep > 1)


def linear_broken(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """How many of `linear_attention_violations`' rules `arch` breaks under each deployment."""
    if arch.mixer.num_linear_attention_layers == 0:
        return np.zeros(len(d), dtype=int)
    split = d.tp > 1
    groups = arch.mixer.linear_num_key_heads
    replicated = arch.mixer.linear_mixer_kind == MAMBA2_MIXER and groups == 1
    return (split & (arch.mixer.linear_num_value_heads % d.tp != 0)).astype(int) + \
        (split & (groups % d.tp != 0) & (not replicated))


def stage_split_broken(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """How many of `pipeline_violations`' rules other than the layer pattern's (whole layers,
    as many MoE layers per stage) `arch` breaks under each deployment."""
    layers = arch.num_layers
    staged = (d.pp > 1) & (d.pp <= layers)
    broken = (staged & (layers % d.pp != 0)).astype(int)
    return broken + (staged & (arch.num_moe_layers % d.pp != 0)) if arch.ffn.is_moe else broken


def pattern_broken(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """`pattern_stage_violations` under each deployment (0 or 1), once per PP degree."""
    degrees, first = np.unique(d.pp, return_index=True)
    pattern = {int(pp): len(pattern_stage_violations(arch, d.deployments[i]))
               for pp, i in zip(degrees, first)}
    return np.array([pattern[int(pp)] for pp in d.pp], dtype=int)


def divisibility_values(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """`check_divisibility`'s value: how many of its rules `arch` breaks under each."""
    return (sharding_broken(arch, d) + linear_broken(arch, d) + stage_split_broken(arch, d)
            + pattern_broken(arch, d)).astype(float)


def kv_replication_values(arch: Architecture, d: DeploymentColumns) -> np.ndarray:
    """`check_kv_replication`'s value: extra KV copies per KV byte."""
    if arch.attention.attention_kind == "mla":
        return (d.tp - 1).astype(float)
    kv = arch.attention.num_kv_heads
    return np.ceil(kv / d.tp) * d.tp / kv - 1


def gpu_values(d: DeploymentColumns, max_gpus: int | None) -> np.ndarray:
    return np.zeros(len(d)) if max_gpus is None else (d.gpus - max_gpus).astype(float)


def memory_fit_values(max_concurrency) -> np.ndarray:
    """`check_memory_fit`'s value: one sequence less what fits."""
    return MIN_SEQUENCES - np.asarray(max_concurrency, dtype=float)


def static_values(arch: Architecture, d: DeploymentColumns, rules: ConstraintRules
                  ) -> dict[str, np.ndarray]:
    """Every constraint but `memory_fit` (which needs the cost model's memory limit), by name:
    the shape's own (`params_budget`, `aspect_ratio`) repeated over the deployments. Kept for
    the architectures and deployments last asked (a search checks a proposal before it scores
    it); the arrays are shared: read only."""
    return _static_values(arch, d.deployments, rules)


def aligned_counts(arch: Architecture, d: DeploymentColumns, j: int, rules: ConstraintRules
                   ) -> tuple[int | None, int | None]:
    """Under deployment `j`: how many distinct GEMM dims there are if every one is aligned, and
    how many distinct K dims if every one is a whole number of the format's blocks (None where
    some is not): what `check_alignment` and `check_nvfp4_block` say then, counted on columns."""
    values, dims = static_values(arch, d, rules), _dims(arch, d.deployments)
    aligned = int(dims.first[:, j].sum()) if values["alignment"][j] == 0 else None
    whole = int((dims.first & dims.reduction)[:, j].sum()) if values["nvfp4_block"][j] == 0 \
        else None
    return aligned, whole


@lru_cache(maxsize=1024)
def _dims(arch: Architecture, deps: tuple[Deployment, ...]) -> Dims:
    return gemm_dim_columns(arch, DeploymentColumns.of(deps))


@lru_cache(maxsize=1024)
def _static_values(arch: Architecture, deps: tuple[Deployment, ...], rules: ConstraintRules
                   ) -> dict[str, np.ndarray]:
    d = DeploymentColumns.of(deps)
    dims = _dims(arch, deps)
    ones = np.ones(len(d))
    return {
        "params_budget": ones * check_params_budget(arch, rules).value,
        "alignment": alignment_values(dims, rules.alignment),
        "divisibility": divisibility_values(arch, d),
        "kv_replication": kv_replication_values(arch, d),
        "nvfp4_block": nvfp4_block_values(dims, d),
        "gpus": gpu_values(d, rules.max_gpus),
        "aspect_ratio": ones * check_aspect_ratio(arch, rules.aspect_ratio_min,
                                                  rules.aspect_ratio_max).value,
    }


def constraint_values(arch: Architecture, d: DeploymentColumns, rules: ConstraintRules,
                      max_concurrency) -> dict[str, np.ndarray]:
    """Every constraint's value per deployment, in `CONSTRAINT_NAMES` order."""
    values = {**static_values(arch, d, rules), "memory_fit": memory_fit_values(max_concurrency)}
    return {name: values[name] for name in CONSTRAINT_NAMES}
