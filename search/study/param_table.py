"""Many parameter sets of a study at once, as numpy columns: which are models, their exact
parameter counts, and whether they meet the study's shape rules (budget and aspect ratio).

A sampler that proposes only designs inside the budget (`search.study.proposals`) and an
exhaustive enumeration (`search.study.exhaustive`) both test far more parameter sets than they
keep (a uniform draw of `moe-400b-gb300-nvl72` is inside its budget 5% of the time). Building each
set's `Architecture` (pydantic) and counting it row by row (`cost_model.params.count_params`)
costs ~1 ms; these columns cost ~1 µs a row. They follow `search.study.space.build_architecture`
for every shape a study space can produce (GQA or MLA attention, sliding-window and linear
hybrids with their repeating unit, dense or MoE FFNs with shared experts and leading dense
layers), and the counts are those of `count_params` exactly: tests compare both on every
shipped study's space. Kept designs are still built by `build_candidate`, which has the last
word on what is a model.

Counts, for the models `build_architecture` makes (no biases, untied embeddings, two residual
norms per layer, as `make_architecture`'s defaults), per design:
    embedding + LM head      2·V·H                          norms  (2·L + 1)·H
    GQA attention layer      (2·n_q + 2·n_kv)·d_h·H  (+ n_q·d_h·H output gate)  (+ 2·d_h QK norms)
    MLA attention layer      (r_kv + d_rope)·H + n_q·(d_nope + d_v)·r_kv + r_q·H
                             + n_q·(d_nope + d_rope)·(r_q or H) + H·n_q·d_v + r_q + r_kv
    Gated DeltaNet layer     (2·n_k·d_k + 2·n_v·d_v + 2·n_v)·H + H·n_v·d_v
                             + (2·n_k·d_k + n_v·d_v)·conv + 2·n_v + d_v
    Mamba-2 layer            (2·n_v·d_v + 2·n_k·d_k + n_v)·H + H·n_v·d_v
                             + (n_v·d_v + 2·n_k·d_k)·conv + 3·n_v + n_v·d_v
    dense FFN layer          (g + 1)·H·H′        (g = 2 gated, 1 ungated: Mamba-2 hybrids)
    MoE layer                E·H (router) + E·(g + 1)·H·H′_e + (g + 1)·H·s·H′_e (shared)
and the active count is the total less (E − k)·(g + 1)·H·H′_e per MoE layer
(`cost_model/params.py`, from transformers' modules).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from search.study.evaluation import hard_constraints
from search.study.spec import Space, StudySpec

GQA, MLA = "gqa", "mla"
NO_MIXER, GATED_DELTANET, MAMBA2 = "none", "gated_deltanet", "mamba2"
# A study's space's dimensions whose option is a name (not an integer)
NAMED = ("attention_kind", "linear_mixer", "precision", "kv_precision", "moe_precision",
         "serving")


def column(values: Sequence, name: str) -> np.ndarray:
    """A dimension's values as a column: int64, or object for names."""
    return np.asarray(values, dtype=object if name in NAMED else np.int64)


@dataclass(frozen=True)
class Shapes:
    """Per design (rows): what `build_architecture` derives from its params."""

    moe: np.ndarray  # bool
    top_k: np.ndarray  # capped at the experts
    moe_layers: np.ndarray
    dense_layers: np.ndarray
    dense_width: np.ndarray
    attention_layers: np.ndarray
    linear_layers: np.ndarray
    sliding_layers: np.ndarray
    ffn_matrices: np.ndarray  # 3 gated (gate, up, down), 2 ungated
    qk_norm: np.ndarray  # bool
    output_gate: np.ndarray  # bool
    model: np.ndarray  # bool: the params make a model (what the columns can tell)


def shapes(p: Mapping[str, np.ndarray]) -> Shapes:
    """The derived layer counts and flags of each row of complete params `p` (every `Space`
    dimension, fixed ones included, as columns)."""
    layers, experts = p["num_layers"], p["num_experts"]
    moe = experts > 0
    first_dense = np.where(moe, np.minimum(p["first_dense_layers"], layers - 1), 0)
    moe_layers = np.where(moe, layers - first_dense, 0)
    period, mixer = p["full_attention_period"], p["linear_mixer"]
    pattern = (period > 1) & ((mixer != NO_MIXER) | (p["sliding_window"] > 0))
    linear = pattern & (mixer != NO_MIXER)
    full = layers // period
    gqa = p["attention_kind"] == GQA
    mamba = linear & (mixer == MAMBA2)
    attention_layers = np.where(linear, full, layers)
    sliding = pattern & ~linear
    dense_width = np.where(~moe | (p["first_dense_layers"] > 0), p["intermediate_size"], 0)
    model = (moe | (p["intermediate_size"] >= 1)) & ~(pattern & (period > layers))
    # no transformers model_type has MLA beside linear or sliding layers (`export_gap`)
    model &= ~(~gqa & (linear | sliding) & (attention_layers > 0))
    return Shapes(
        moe=moe, top_k=np.minimum(p["experts_per_token"], experts), moe_layers=moe_layers,
        dense_layers=layers - moe_layers, dense_width=dense_width,
        attention_layers=attention_layers, linear_layers=np.where(linear, layers - full, 0),
        sliding_layers=np.where(sliding, layers - full, 0),
        ffn_matrices=np.where(mamba, 2, 3), qk_norm=pattern & gqa & ~mamba,
        output_gate=linear & gqa & (mixer == GATED_DELTANET), model=model,
    )


def _attention_params(p: Mapping[str, np.ndarray], s: Shapes) -> np.ndarray:
    """One attention layer's parameters (GQA or MLA)."""
    hidden, head, kv = p["hidden_size"], p["head_dim"], p["num_kv_heads"]
    heads = kv * p["q_per_kv"]
    gqa = (2 * heads + 2 * kv) * head * hidden + np.where(s.output_gate, heads * head * hidden, 0) \
        + np.where(s.qk_norm, 2 * head, 0)
    q_rank, kv_rank, rope = p["q_lora_rank"], p["kv_lora_rank"], p["qk_rope_head_dim"]
    mla = (kv_rank + rope) * hidden + heads * 2 * head * kv_rank + q_rank * hidden \
        + heads * (head + rope) * np.where(q_rank > 0, q_rank, hidden) \
        + hidden * heads * head + q_rank + kv_rank
    return np.where(p["attention_kind"] == GQA, gqa, mla)


def _linear_params(p: Mapping[str, np.ndarray]) -> np.ndarray:
    """One linear-mixer layer's parameters (Gated DeltaNet or Mamba-2)."""
    hidden, conv = p["hidden_size"], p["linear_conv_kernel"]
    heads, value = p["linear_num_value_heads"], p["linear_num_value_heads"] * \
        p["linear_value_head_dim"]
    key = p["linear_num_key_heads"] * p["linear_key_head_dim"]
    gated_deltanet = (2 * key + 2 * value + 2 * heads) * hidden + hidden * value \
        + (2 * key + value) * conv + 2 * heads + p["linear_value_head_dim"]
    mamba = (2 * value + 2 * key + heads) * hidden + hidden * value + (value + 2 * key) * conv \
        + 3 * heads + value
    return np.where(p["linear_mixer"] == MAMBA2, mamba, gated_deltanet)


def param_counts(p: Mapping[str, np.ndarray], s: Shapes | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(total, active) parameters of each row of complete params `p` (meaningless where
    `shapes(p).model` is False); `s`: `shapes(p)` when the caller has it."""
    s = shapes(p) if s is None else s
    hidden, layers = p["hidden_size"], p["num_layers"]
    experts, expert_width = np.where(s.moe, p["num_experts"], 0), p["moe_intermediate_size"]
    expert = s.ffn_matrices * hidden * expert_width
    moe_layer = experts * hidden + experts * expert \
        + np.where(s.moe, s.ffn_matrices * hidden * p["num_shared_experts"] * expert_width, 0)
    total = 2 * p["vocab_size"] * hidden + (2 * layers + 1) * hidden \
        + s.attention_layers * _attention_params(p, s) \
        + s.linear_layers * _linear_params(p) \
        + s.dense_layers * s.ffn_matrices * hidden * s.dense_width + s.moe_layers * moe_layer
    return total, total - s.moe_layers * (experts - s.top_k) * expert


def complete_columns(spec: StudySpec, sampled: Mapping[str, np.ndarray], rows: int
                     ) -> dict[str, np.ndarray]:
    """`sampled` columns plus every fixed dimension of the space, broadcast to `rows`."""
    out = {}
    for name in Space.model_fields:
        if name in sampled:
            out[name] = sampled[name]
        else:
            value = getattr(spec.space, name).options[0]
            out[name] = np.full(rows, value, dtype=object if name in NAMED else np.int64)
    return out


def within_rules(spec: StudySpec, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Rows that are models and meet the study's hard constraints that depend on the shape
    alone (`rule_masks`)."""
    return np.logical_and.reduce(list(rule_masks(spec, p).values()))


def rule_masks(spec: StudySpec, p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rows each shape rule keeps, in order: a model at all (`shape`), then the hard ones
    of the parameter budget, alignment (a hidden size that is a multiple of the alignment:
    every design has GEMMs whose N or K is `hidden_size`, the output projection's N, the MLPs'
    and experts' K, never sharded, so no deployment aligns a design whose hidden size is not)
    and the aspect-ratio band. A soft constraint filters nothing."""
    hard, s = hard_constraints(spec), shapes(p)
    masks = {"shape": s.model}
    if "params_budget" in hard:
        masks["params_budget"] = _in_budget(spec, p, s)
    if "alignment" in hard:
        masks["alignment"] = p["hidden_size"] % spec.constraints.alignment == 0
    if "aspect_ratio" in hard:
        masks["aspect_ratio"] = _in_band(spec, p["hidden_size"] / p["num_layers"])
    return masks


def first_broken(masks: Mapping[str, np.ndarray]) -> dict[str, int]:
    """How many rows break each rule of `rule_masks` first (a row breaking several counts
    once, under the first), rules that reject none left out."""
    out, left = {}, np.ones(len(next(iter(masks.values()))), dtype=bool)
    for name, ok in masks.items():
        if count := int((left & ~ok).sum()):
            out[name] = count
        left &= ok
    return out


def _in_budget(spec: StudySpec, p: Mapping[str, np.ndarray], s: Shapes) -> np.ndarray:
    """`check_params_budget`'s value ≤ 0: |actual / target − 1| − tolerance, total and active."""
    total, active = param_counts(p, s)
    ok = np.ones(len(total), dtype=bool)
    b = spec.budget
    for actual, target in ((total, b.total_params), (active, b.active_params)):
        if target is not None:
            ok &= np.abs(actual / target - 1.0) - b.tolerance_frac <= 0
    return ok


def _in_band(spec: StudySpec, ratio: np.ndarray) -> np.ndarray:
    """`check_aspect_ratio`'s value ≤ 0."""
    ok = np.ones(len(ratio), dtype=bool)
    low, high = spec.constraints.aspect_ratio_min, spec.constraints.aspect_ratio_max
    if low is not None:
        ok &= (low - ratio) / low <= 0
    if high is not None:
        ok &= (ratio - high) / high <= 0
    return ok
