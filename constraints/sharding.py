"""Constraints on how the architecture shards: alignment, block scaling, divisibility and KV
replication (NVIDIA, AI Model Co-Design (2026): Guideline 2 after sharding,
NVFP4 micro-blocks, Guideline 7)."""

from __future__ import annotations

import math
from collections import Counter

from cost_model import (
    ATTENTION_MIXER, MAMBA2_MIXER, Architecture, Deployment, deployment_violations, get_precision,
)
from constraints.shapes import GemmDim, gemm_dims
from constraints.violation import Violation

FULL_WASTE_FRAC = 1.0  # a fractional shard (8192/6) cannot be tiled at all
NO_REPLICATION = 1  # KV copies per KV head when TP does not exceed the KV heads


def padding_waste_frac(size: float, multiple: int) -> float:
    """Padding share of the padded dim: (⌈d/a⌉a − d)/(⌈d/a⌉a); 1 for a fractional shard."""
    if not float(size).is_integer():
        return FULL_WASTE_FRAC
    padded = math.ceil(size / multiple) * multiple
    return (padded - size) / padded


def _is_multiple(dim: GemmDim, multiple: int) -> bool:
    return dim.is_integer and int(dim.size) % multiple == 0


def _why_not_multiple(dim: GemmDim, multiple: int) -> str:
    if not dim.is_integer:
        return f"{dim.describe()} is not an integer, let alone a multiple of {multiple}"
    padded = math.ceil(dim.size / multiple) * multiple
    waste = padding_waste_frac(dim.size, multiple)
    return f"{dim.describe()} is not a multiple of {multiple} (pads to {padded}: {waste:.1%} waste)"


def check_alignment(arch: Architecture, dep: Deployment, multiple: int = 128,
                    aligned: int | None = None) -> Violation:
    """Every GEMM dim after sharding a multiple of `multiple`; value = summed padding waste.
    `aligned`: how many distinct dims there are, when the caller knows every one is a multiple
    (`constraints.columns.aligned_counts`: the dims are not listed again)."""
    if aligned is not None:
        return _aligned(aligned, dep, multiple)
    dims = gemm_dims(arch, dep)
    wastes = [padding_waste_frac(dim.size, multiple) for dim in dims]
    bad = [dim for dim in dims if not _is_multiple(dim, multiple)]
    if not bad:
        return _aligned(len(dims), dep, multiple)
    worst = dims[max(range(len(dims)), key=wastes.__getitem__)]
    others = "".join(f"; also {dim.describe()}" for dim in bad if dim is not worst)
    summary = f"{len(bad)} of {len(dims)} GEMM dims misaligned, summed waste {sum(wastes):.2f}"
    return Violation("alignment", sum(wastes),
                     f"{_why_not_multiple(worst, multiple)}{others} ({summary})")


def _aligned(count: int, dep: Deployment, multiple: int) -> Violation:
    return Violation("alignment", 0.0, f"ok: all {count} GEMM dims after sharding "
                     f"(TP={dep.tp}, EP={dep.ep}) are multiples of {multiple}")


def check_nvfp4_block(arch: Architecture, dep: Deployment, whole: int | None = None
                      ) -> Violation:
    """Block-scaled formats (nvfp4, mxfp4, fp8_block) need every GEMM K a multiple of the block
    (NVIDIA, AI Model Co-Design (2026), "Quantization as a performance lever": one scale per
    16-value micro-block);
    value = number of offending K dims. `whole`: how many distinct K dims there are, when the
    caller knows every one is a multiple of the block (`constraints.columns.aligned_counts`)."""
    precision = get_precision(dep.precision)
    block = precision.block_size
    if block == 1:
        return Violation("nvfp4_block", 0.0,
                         f"ok: `precision` {precision.name} is not block-scaled")
    reductions = None if whole is not None else \
        [dim for dim in gemm_dims(arch, dep) if dim.reduction]
    bad = [] if reductions is None else [dim for dim in reductions if not _is_multiple(dim, block)]
    if not bad:
        count = whole if reductions is None else len(reductions)
        return Violation("nvfp4_block", 0.0, f"ok: all {count} GEMM K dims are "
                         f"multiples of the {precision.name} block ({block})")
    listed = "; ".join(dim.describe() for dim in bad)
    return Violation("nvfp4_block", float(len(bad)),
                     f"`precision` {precision.name} scales blocks of {block} along K, but "
                     f"{len(bad)} K dim(s) are not multiples of {block}: {listed}")


def _layer_kinds(arch: Architecture) -> tuple[str, ...]:
    """Each layer's token mixer, sliding-window attention named apart ("attention/sliding")."""
    mixers = arch.mixer.layer_mixers or (ATTENTION_MIXER,) * arch.num_layers
    return tuple(f"{m}/sliding" if sliding else m
                 for m, sliding in zip(mixers, arch.layer_is_sliding, strict=True))


def _stage_kind_counts(arch: Architecture, stages: int) -> list[Counter]:
    """The layer kinds each of `stages` contiguous, equally long PP stages holds."""
    kinds, size = _layer_kinds(arch), arch.num_layers // stages
    return [Counter(kinds[s * size:(s + 1) * size]) for s in range(stages)]


def pattern_stage_violations(arch: Architecture, dep: Deployment) -> list[str]:
    """NVIDIA, AI Model Co-Design (2026), Guideline 6 ("regular, repeatable layer patterns that are
    easy to split into balanced pipeline stages"): PP stages of whole, equal layer counts must
    also hold the same mixers (full, sliding, linear, none), i.e. a repeating unit of the layer
    pattern divides the layers per stage (part of `_pipeline_violations`)."""
    pp, layers = dep.pp, arch.num_layers
    if pp == 1 or pp > layers or layers % pp or len(set(_layer_kinds(arch))) == 1:
        return []
    counts = _stage_kind_counts(arch, pp)
    if all(c == counts[0] for c in counts):
        return []
    shown = "; ".join(f"stage {s}: " + " + ".join(f"{n} {kind}" for kind, n in sorted(c.items()))
                      for s, c in enumerate(counts) if c != counts[0] or s == 0)
    return [f"`pp` ({pp}) splits the layer pattern into stages of different mixers ({shown}): "
            f"a repeating unit of the pattern must divide the {layers // pp} layers per stage"]


def _pipeline_violations(arch: Architecture, dep: Deployment) -> list[str]:
    """A balanced PP split: whole layers per stage, (MoE) as many MoE layers per stage, and
    (layer patterns) the same mixers in every stage."""
    pp, layers = dep.pp, arch.num_layers
    if pp == 1 or pp > layers:  # pp > layers is already one of `deployment_violations`
        return []
    broken = []
    if layers % pp:
        broken.append(f"`pp` ({pp}) must divide `num_layers` ({layers}) for a balanced split")
    if arch.ffn.is_moe and arch.num_moe_layers % pp:
        broken.append(f"`pp` ({pp}) must divide the {arch.num_moe_layers} MoE layers "
                      f"(`num_layers` {layers} less {arch.num_dense_layers} dense) so that every "
                      "stage holds as many")
    return broken + pattern_stage_violations(arch, dep)


def linear_attention_violations(arch: Architecture, dep: Deployment) -> list[str]:
    """TP shards linear-attention layers by head, as vLLM does: Gated DeltaNet and Kimi Delta
    Attention split both their key and value heads over TP (vllm/model_executor/models/
    qwen3_next.py: `num_k_heads // tp_size`, `num_v_heads // tp_size`); Mamba-2 splits its SSM
    heads, and its B/C groups unless there is one group, which every rank then holds whole
    (vllm/model_executor/layers/mamba/mamba_mixer2.py: "Tensor parallel world size must divide
    num heads"; "... does not divide num_groups, then num_groups must equal 1")."""
    kind, tp = arch.mixer.linear_mixer_kind, dep.tp
    if kind is None or tp == 1:  # no linear-attention layer, or nothing sharded
        return []
    heads, groups = arch.mixer.linear_num_value_heads, arch.mixer.linear_num_key_heads
    what = {MAMBA2_MIXER: ("Mamba-2 heads", "B/C groups")}.get(kind, ("value heads", "key heads"))
    broken = []
    if heads % tp:
        broken.append(f"`tp` ({tp}) must divide `linear_num_value_heads` ({heads}): the "
                      f"{what[0]} of the {arch.mixer.num_linear_attention_layers} {kind} layers "
                      "are sharded over TP")
    groups_replicated = kind == MAMBA2_MIXER and groups == 1
    if groups % tp and not groups_replicated:
        one = " (or be 1, replicated on every rank)" if kind == MAMBA2_MIXER else ""
        broken.append(f"`tp` ({tp}) must divide `linear_num_key_heads` ({groups}){one}: the "
                      f"{what[1]} of the {kind} layers are sharded over TP")
    return broken


def check_divisibility(arch: Architecture, dep: Deployment) -> Violation:
    """Heads by TP, KV heads vs TP, linear-attention heads by TP, experts by EP, expert H′ by
    moe_tp, a balanced PP split; value = number of broken rules."""
    broken = (deployment_violations(arch, dep) + linear_attention_violations(arch, dep)
              + _pipeline_violations(arch, dep))
    if not broken:
        return Violation("divisibility", 0.0, f"ok: heads, experts and layers divide evenly "
                         f"under TP={dep.tp}, EP={dep.ep}, PP={dep.pp}, DP={dep.dp}")
    return Violation("divisibility", float(len(broken)), "; ".join(broken))


def check_kv_replication(arch: Architecture, dep: Deployment) -> Violation:
    """TP beyond the KV heads replicates the KV cache (NVIDIA, AI Model Co-Design (2026),
    Guideline 7); value = extra
    copies per KV byte stored: ⌈n_kv/TP⌉·TP/n_kv − 1 (GQA), TP − 1 (MLA's shared latent)."""
    if arch.attention.attention_kind == "mla":
        return _mla_replication(dep)
    n_kv, tp = arch.attention.num_kv_heads, dep.tp
    copies = math.ceil(n_kv / tp) * tp / n_kv
    if copies == NO_REPLICATION:
        return Violation("kv_replication", 0.0, f"ok: TP={tp} shards the {n_kv} KV heads "
                         "without replication")
    relation = "exceeds" if tp > n_kv else "does not divide"
    per_gpu = math.ceil(n_kv / tp)
    return Violation("kv_replication", copies - NO_REPLICATION,
                     f"TP={tp} {relation} `num_kv_heads` ({n_kv}): each GPU holds ⌈{n_kv}/{tp}⌉ = "
                     f"{per_gpu} KV heads, so the KV cache is stored {copies:.3g}× over")


def _mla_replication(dep: Deployment) -> Violation:
    tp = dep.tp
    if tp == NO_REPLICATION:
        return Violation("kv_replication", 0.0, "ok: MLA latent cache with TP=1 is not replicated")
    return Violation("kv_replication", float(tp - NO_REPLICATION),
                     "MLA's latent KV cache (`kv_lora_rank` + `qk_rope_head_dim`, shared by all "
                     f"heads) is replicated on every one of the TP={tp} ranks; attention DP "
                     f"(TP=1, DP={tp * dep.dp}) avoids it")
