"""ONE table of a layer's weight GEMMs: every weight matrix a layer kind multiplies by, its N
(out features) and K (in features) as model dimensions named by the `Architecture` fields they
come from, how a deployment shards it, how many run per layer and on which layers.

Step times (`cost_model.layers`), weight memory (`cost_model.memory`), exact parameter counts
and matmul FLOPs (`cost_model.params`) and the alignment constraints (`constraints.shapes`) all
read this table; a new layer kind is a few rows here.

Shapes follow NVIDIA, AI Model Co-Design (2026), Table 1 (M = tokens; N, K = model dims) and
transformers' modeling code (the modules `params.py` counts exactly). Sharding, as in the
serving engines (Megatron-style TP): attention heads and linear-mixer heads over TP (q, k, v,
gates and in-projections split along N, output projections along K); GQA keeps ⌈n_kv/TP⌉ KV
heads per GPU (replicated beyond n_kv); the output projection, dense FFN, shared experts and the
vocabulary over `ffn_tp` = TP·KVP (Helix reuses its attention GPUs as one TP group there, and
TP alone without Helix); routed experts over EP (E/EP per GPU) with each expert's H′ split over
`moe_tp` = TP·DP·KVP/EP; MLA's down-projections, the DSA indexer and the router replicated.

Rows of one `kernel` run as one fused GEMM in the step model (q, k, v as `attention/qkv`; gate
and up as `mlp/up`): they share K and their N add up.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Literal, TypedDict

import numpy as np

from cost_model.architecture import Architecture, field_value, kept
from cost_model.batch import LINEAR_KIND_CODES, ArchArrays

Factor = str | tuple[str, ...]  # a field, or a sum of fields (shown in parentheses)
LayerSet = Literal["attention", "global", "linear", "dense", "moe", "model"]
Shard = Literal["tp", "ffn_tp", "moe_tp", "none"]
PrecisionClass = Literal["linear", "experts", "high"]  # the deployment's format, the experts', BF16


@dataclass(frozen=True)
class Term:
    """coef × the product of `factors` (a factor is a field or a parenthesized sum of fields)."""

    factors: tuple[Factor, ...]
    coef: int = 1

    def value(self, src):
        out = self.coef
        for factor in self.factors:
            out = out * _factor_value(src, factor)
        return out

    def label(self) -> str:
        parts = [_factor_label(f, lambda field: f"`{field}`") for f in self.factors]
        return "·".join(([str(self.coef)] if self.coef != 1 or not parts else []) + parts)

    def numbers(self, src) -> str:
        parts = [_factor_label(f, lambda field: str(read(src, field))) for f in self.factors]
        return "·".join(([str(self.coef)] if self.coef != 1 or not parts else []) + parts)


def _factor_value(src, factor: Factor):
    if isinstance(factor, str):
        return read(src, factor)
    return sum(read(src, field) for field in factor)


def _factor_label(factor: Factor, show) -> str:
    return show(factor) if isinstance(factor, str) else "(" + "+".join(map(show, factor)) + ")"


@dataclass(frozen=True)
class Dim:
    """A model dimension: a sum of `terms`; where it is 0, `fallback` (MLA's q_b reads the
    hidden state when there is no query LoRA)."""

    terms: tuple[Term, ...]
    fallback: Dim | None = None

    def value(self, src):
        total = sum(term.value(src) for term in self.terms)
        if self.fallback is None:
            return total
        return _pick(total > 0, total, self.fallback.value(src))

    def chosen(self, src) -> Dim:
        """The dim itself, or its fallback where it is 0 (an `Architecture` source)."""
        if self.fallback is None:
            return self
        return Dim(self.terms) if sum(t.value(src) for t in self.terms) > 0 else self.fallback

    @property
    def fields(self) -> tuple[str, ...]:
        return _dim_fields(self)

    def label(self) -> str:
        return _dim_label(self)

    def numbers(self, src) -> str:
        return "+".join(term.numbers(src) for term in self.terms)


@lru_cache(maxsize=1024)  # a dim's fields and label name fields, not values: the same for
def _dim_fields(d: Dim) -> tuple[str, ...]:  # every architecture (constraints ask per candidate)
    names = [f for t in d.terms for factor in t.factors
             for f in ((factor,) if isinstance(factor, str) else factor)]
    return tuple(dict.fromkeys(names + list(d.fallback.fields if d.fallback else ())))


@lru_cache(maxsize=1024)
def _dim_label(d: Dim) -> str:
    return "+".join(term.label() for term in d.terms)


def dim(*factors: Factor, coef: int = 1, fallback: Dim | None = None) -> Dim:
    """One product of fields, e.g. dim("num_attention_heads", "head_dim")."""
    return Dim((Term(factors, coef),), fallback)


def dim_sum(*dims: Dim) -> Dim:
    return Dim(tuple(term for d in dims for term in d.terms))


def _pick(condition, yes, no):
    if np.ndim(condition) == 0:
        return yes if condition else no
    return np.where(condition, yes, no)


@dataclass(frozen=True)
class WeightGemm:
    """One weight matrix of a layer kind (`name`, as a breakdown key plus transformers' module).

    `kind`: the attention or linear-mixer kind that has it (None: every layer of `layers`);
    `when`: a field that must be non-zero (a flag or an optional rank), `unless` one that must
    be zero; `layers` "attention" are the attention layers of `head_dim` / `num_kv_heads`,
    "global" the full-attention layers of their own shape (Gemma 4); `experts`: one per routed
    expert (E per layer, E/EP per GPU, k per token); `kv_heads`: N's first factor is KV heads,
    ⌈n_kv/TP⌉ of them per GPU; `bias`: the flag of a bias of N elements (counted by params);
    `decode_kernel`: MLA's kv_b runs absorbed into per-head GEMMs in decode (DeepSeek-V2 §2.1.2),
    transposed for W_UK; `tied`: the flag under which it is the embedding's matrix; `checked`:
    the dims the alignment constraints check (Guideline 2 is stated for Table 1's GEMMs and
    MLA's: not for MLA's latent-plus-RoPE width, nor yet for the linear mixers' and indexer's
    per-head projections (β, dt: n_v wide), nor the BF16 router and LM head)."""

    name: str
    kernel: str
    n: Dim
    k: Dim
    layers: LayerSet
    param_key: str
    shard: Shard = "none"
    sharded: Literal["n", "k"] | None = None
    kind: str | None = None
    when: str | None = None
    unless: str | None = None
    experts: bool = False
    kv_heads: bool = False
    precision: PrecisionClass = "linear"
    bias: str | None = None
    decode_kernel: str | None = None
    decode_transposed: bool = False
    tied: str | None = None
    checked: tuple[Literal["n", "k"], ...] = ("n", "k")

    @property
    def fields(self) -> tuple[str, ...]:
        """Every `Architecture` field the shape depends on (N's, then K's)."""
        return tuple(dict.fromkeys(self.n.fields + self.k.fields))


# `WeightGemm`'s keyword fields that the rows of one kind share (`WeightGemm(…, **shared)`),
# each with exactly its keys, so that a type checker sees every field set once
class _OfKind(TypedDict):
    layers: LayerSet
    kind: str


class _GlobalAttention(_OfKind):
    shard: Shard
    when: str


class _Indexer(TypedDict):
    layers: LayerSet
    when: str
    param_key: str
    checked: tuple[Literal["n", "k"], ...]


class _LinearMixer(TypedDict):
    layers: LayerSet
    shard: Shard
    sharded: Literal["n", "k"]
    param_key: str
    checked: tuple[Literal["n", "k"], ...]


class _LinearMixerOfKind(_LinearMixer):
    kind: str


class _Ffn(TypedDict):
    layers: LayerSet
    shard: Shard
    bias: str
    precision: PrecisionClass
    experts: bool


H = dim("hidden_size")
N_Q = "num_attention_heads"
_LIN_V = dim("linear_num_value_heads", "linear_value_head_dim")
_LIN_K = dim("linear_num_key_heads", "linear_key_head_dim")


def _attention_rows() -> tuple[WeightGemm, ...]:
    gqa = _OfKind(layers="attention", kind="gqa")
    mla = _OfKind(layers="attention", kind="mla")
    q, kv = dim(N_Q, "head_dim"), dim("num_kv_heads", "head_dim")
    return (
        WeightGemm("attention/q_proj", "attention/qkv", q, H, param_key="attention/q", shard="tp",
                   sharded="n", bias="qkv_bias", **gqa),
        WeightGemm("attention/k_proj", "attention/qkv", kv, H, param_key="attention/kv",
                   shard="tp", sharded="n", kv_heads=True, bias="qkv_bias", **gqa),
        WeightGemm("attention/v_proj", "attention/qkv", kv, H, param_key="attention/kv",
                   shard="tp", sharded="n", kv_heads=True, bias="qkv_bias", **gqa),
        # Qwen3-Next: q_proj's second half, a sigmoid gate per output element
        WeightGemm("attention/q_proj_gate", "attention/output_gate", q, H, param_key="attention/q",
                   shard="tp", sharded="n", when="attention_output_gate", bias="qkv_bias", **gqa),
        WeightGemm("attention/o_proj", "attention/o", H, q, param_key="attention/o",
                   shard="ffn_tp", sharded="k", bias="o_bias", **gqa),
        WeightGemm("attention/kv_a_proj_with_mqa", "attention/kv_a",
                   dim_sum(dim("kv_lora_rank"), dim("qk_rope_head_dim")), H,
                   param_key="attention/kv", bias="qkv_bias", checked=("k",), **mla),
        WeightGemm("attention/kv_b_proj.k", "attention/kv_b", dim(N_Q, "qk_nope_head_dim"),
                   dim("kv_lora_rank"), param_key="attention/kv", shard="tp", sharded="n",
                   decode_kernel="attention/absorb_k", decode_transposed=True, checked=("k",),
                   **mla),
        WeightGemm("attention/kv_b_proj.v", "attention/kv_b", dim(N_Q, "v_head_dim"),
                   dim("kv_lora_rank"), param_key="attention/kv", shard="tp", sharded="n",
                   decode_kernel="attention/absorb_v", checked=("k",), **mla),
        WeightGemm("attention/q_a_proj", "attention/q_a", dim("q_lora_rank"), H,
                   param_key="attention/q", when="q_lora_rank", bias="qkv_bias", **mla),
        WeightGemm("attention/q_b_proj", "attention/q_b",
                   dim(N_Q, ("qk_nope_head_dim", "qk_rope_head_dim")),
                   dim("q_lora_rank", fallback=H), param_key="attention/q", shard="tp",
                   sharded="n", **mla),
        WeightGemm("attention/o_proj", "attention/o", H, dim(N_Q, "v_head_dim"),
                   param_key="attention/o", shard="ffn_tp", sharded="k", bias="o_bias", **mla),
    )


def _global_attention_rows() -> tuple[WeightGemm, ...]:
    """Gemma 4's full-attention layers (transformers' Gemma4TextAttention with the layer's
    `per_layer_config`): q, k and (unless `attention_k_eq_v`) v of `global_head_dim`, with
    `num_global_kv_heads` KV heads, and o_proj; sharded as the other layers' (run apart: they
    are other layers)."""
    common = _GlobalAttention(layers="global", kind="gqa", shard="tp", when="global_head_dim")
    o_proj = _GlobalAttention(layers="global", kind="gqa", shard="ffn_tp", when="global_head_dim")
    q, kv = dim(N_Q, "global_head_dim"), dim("num_global_kv_heads", "global_head_dim")
    return (
        WeightGemm("attention/q_proj.global", "attention/qkv_global", q, H,
                   param_key="attention/q", sharded="n", bias="qkv_bias", **common),
        WeightGemm("attention/k_proj.global", "attention/qkv_global", kv, H,
                   param_key="attention/kv", sharded="n", kv_heads=True, bias="qkv_bias",
                   **common),
        WeightGemm("attention/v_proj.global", "attention/qkv_global", kv, H,
                   param_key="attention/kv", sharded="n", kv_heads=True, bias="qkv_bias",
                   unless="attention_k_eq_v", **common),
        WeightGemm("attention/o_proj.global", "attention/o_global", H, q,
                   param_key="attention/o", sharded="k", bias="o_bias",
                   **o_proj),
    )


def _indexer_rows() -> tuple[WeightGemm, ...]:
    """DSA's lightning indexer (DeepSeek-V3.2; transformers' DeepseekV32Indexer): wq_b from the
    query latent, wk and weights_proj (BF16) from the hidden state, replicated over TP."""
    dsa = _Indexer(layers="attention", when="index_heads", param_key="attention/indexer",
                   checked=())
    return (
        WeightGemm("attention/indexer.wq_b", "attention/indexer_q",
                   dim("index_heads", "index_head_dim"), dim("q_lora_rank"), **dsa),
        WeightGemm("attention/indexer.wk", "attention/indexer_k", dim("index_head_dim"), H, **dsa),
        WeightGemm("attention/indexer.weights_proj", "attention/indexer_w", dim("index_heads"), H,
                   precision="high", **dsa),
    )


def _linear_mixer_rows() -> tuple[WeightGemm, ...]:
    """Gated DeltaNet (Qwen3NextGatedDeltaNet: in_proj_qkvz, in_proj_ba), Mamba-2
    (NemotronHMamba2Mixer: in_proj to z, x, B, C, dt), Kimi Delta Attention
    (KimiLinearDeltaAttention: q, k, v, b, the forget/output gates' bottlenecks f_a/f_b,
    g_a/g_b) and their shared out_proj; TP splits the heads."""
    lin = _LinearMixer(layers="linear", shard="tp", sharded="n",
                       param_key="linear_attention/in_proj", checked=())
    gdn, mamba, kda = (_LinearMixerOfKind(**lin, kind=k)
                       for k in ("gated_deltanet", "mamba2", "kimi_delta"))
    heads, width = dim("linear_num_value_heads"), dim("linear_value_head_dim")
    two_v, two_k = dim(*_LIN_V.terms[0].factors, coef=2), dim(*_LIN_K.terms[0].factors, coef=2)
    rows = [
        WeightGemm("linear_attention/in_proj_qkvz", "linear_attention/in_proj",
                   dim_sum(two_k, two_v), H, **gdn),
        WeightGemm("linear_attention/in_proj_ba", "linear_attention/in_proj",
                   dim("linear_num_value_heads", coef=2), H, **gdn),
        WeightGemm("linear_attention/in_proj", "linear_attention/in_proj",
                   dim_sum(two_v, two_k, heads), H, **mamba),
    ]
    rows += [WeightGemm(f"linear_attention/{p}_proj", "linear_attention/in_proj", _LIN_V, H, **kda)
             for p in ("q", "k", "v")]
    rows += [WeightGemm("linear_attention/b_proj", "linear_attention/in_proj", heads, H, **kda)]
    rows += [WeightGemm(f"linear_attention/{g}_a_proj", "linear_attention/in_proj", width, H,
                        **kda) for g in ("f", "g")]
    rows += [WeightGemm(f"linear_attention/{g}_b_proj", "linear_attention/gate_up", _LIN_V, width,
                        **kda) for g in ("f", "g")]
    rows += [WeightGemm("linear_attention/out_proj", "linear_attention/out_proj", H, _LIN_V,
                        layers="linear", shard="tp", sharded="k",
                        param_key="linear_attention/out_proj", checked=())]
    return tuple(rows)


def _ffn_rows() -> tuple[WeightGemm, ...]:
    """Dense MLP, routed experts, shared expert(s) and router: gate (if gated) and up fused."""
    rows = []
    for prefix, width, key, common in (
        ("mlp", "intermediate_size", "mlp/",
         _Ffn(layers="dense", shard="ffn_tp", bias="mlp_bias", precision="linear", experts=False)),
        ("moe/experts", "moe_intermediate_size", "moe/experts",
         _Ffn(layers="moe", shard="moe_tp", bias="expert_bias", precision="experts",
              experts=True)),
        ("moe/shared", "shared_expert_intermediate_size", "moe/shared",
         _Ffn(layers="moe", shard="ffn_tp", bias="mlp_bias", precision="linear", experts=False)),
    ):
        up, down = f"{prefix}_up" if prefix != "mlp" else "mlp/up", \
            f"{prefix}_down" if prefix != "mlp" else "mlp/down"
        keys = (key + "gate", key + "up", key + "down") if prefix == "mlp" else (key,) * 3
        rows += [
            WeightGemm(f"{prefix}.gate_proj", up, dim(width), H, param_key=keys[0], sharded="n",
                       when="gated_mlp", **common),
            WeightGemm(f"{prefix}.up_proj", up, dim(width), H, param_key=keys[1], sharded="n",
                       **common),
            WeightGemm(f"{prefix}.down_proj", down, H, dim(width), param_key=keys[2], sharded="k",
                       **common),
        ]
    rows += [
        # Qwen2-MoE / Qwen3-Next: one H → 1 sigmoid gate on the shared expert
        WeightGemm("moe/shared_expert_gate", "moe/shared_gate", Dim((Term(()),)), H,
                   layers="moe", param_key="moe/shared", when="shared_expert_gate", checked=()),
        WeightGemm("moe/router", "moe/router", dim("num_experts"), H, layers="moe",
                   param_key="moe/router", precision="high", bias="router_bias", checked=()),
    ]
    return tuple(rows)


LM_HEAD = WeightGemm("lm_head", "lm_head", dim("vocab_size"), H, layers="model",
                     param_key="lm_head", shard="ffn_tp", sharded="n", precision="high",
                     tied="tie_word_embeddings", checked=())
ROWS: tuple[WeightGemm, ...] = (
    *_attention_rows(), *_global_attention_rows(), *_indexer_rows(), *_linear_mixer_rows(),
    *_ffn_rows(), LM_HEAD,
)


def kernels(rows: tuple[WeightGemm, ...] = ROWS) -> dict[str, tuple[WeightGemm, ...]]:
    """The step model's GEMMs: kernel name → the rows fused in it, in table order."""
    out: dict[str, list[WeightGemm]] = {}
    for row in rows:
        out.setdefault(row.kernel, []).append(row)
    return {name: tuple(group) for name, group in out.items()}


# ---- sources: an `Architecture`, or candidates' columns read under the same field names ------


def read(src, field: str):
    """The field users call `field` of `src`: an `Architecture` (`field_value`) or candidates'
    `ArchColumns`."""
    return field_value(src, field) if isinstance(src, Architecture) else src.read(field)


class ArchColumns:
    """`ArchArrays` under `Architecture`'s field names, so that the table's dims evaluate on
    (n, 1) columns. `gated_mlp` is gate_factor ≠ 1 (a view built from zeros, as the calibration
    fitters build one, reads as gated: what they fit). Every field a row reads has a column."""

    _COLUMNS = {field: attrgetter(path) for field, path in dict(
        hidden_size="hidden", num_attention_heads="attention.heads_q",
        num_kv_heads="attention.heads_kv", head_dim="attention.head_dim", vocab_size="vocab",
        intermediate_size="ffn.dense_width", num_experts="ffn.experts",
        experts_per_token="ffn.top_k", moe_intermediate_size="ffn.expert_ffn",
        shared_expert_intermediate_size="ffn.shared_ffn", q_lora_rank="attention.q_lora",
        kv_lora_rank="attention.kv_lora", qk_rope_head_dim="attention.rope_dim",
        qk_nope_head_dim="attention.nope_dim", v_head_dim="attention.v_dim",
        index_heads="attention.index_heads", index_head_dim="attention.index_head_dim",
        attention_output_gate="attention.output_gate",
        shared_expert_gate="ffn.shared_expert_gate",
        global_head_dim="attention.global_head_dim",
        num_global_kv_heads="attention.global_kv_heads", attention_k_eq_v="attention.k_eq_v",
        linear_num_value_heads="mixer.linear_heads", linear_key_head_dim="mixer.linear_key_dim",
        linear_value_head_dim="mixer.linear_value_dim",
    ).items()}

    def __init__(self, a: ArchArrays):
        self.a = a
        self._kinds: dict[str, np.ndarray] = {}

    def read(self, field: str):
        """The column of the `Architecture` field `field`."""
        if field == "gated_mlp":
            return self.a.ffn.gate_factor != 1.0
        if field == "linear_num_key_heads":  # from the conv width 2·n_k·d_k + n_v·d_v
            m = self.a.mixer
            return (m.linear_conv_width - m.linear_heads * m.linear_value_dim) / \
                np.maximum(2.0 * m.linear_key_dim, 1.0)
        if field not in self._COLUMNS:
            raise AttributeError(f"`{field}` has no column in ArchArrays")
        return self._COLUMNS[field](self.a)

    def is_kind(self, kind: str):
        """Whether each candidate has layers of `kind`: MLA vs GQA from `mla`, the linear
        mixer from `linear_kind` (computed once per kind)."""
        if kind not in self._kinds:
            a = self.a
            if kind in ("gqa", "mla"):
                self._kinds[kind] = (a.attention.mla > 0) == (kind == "mla")
            else:
                code = next(value for name, value in LINEAR_KIND_CODES.items() if name == kind)
                self._kinds[kind] = (a.mixer.linear_kind == code) & (a.mixer.linear_layers > 0)
        return self._kinds[kind]


KERNELS = kernels()  # what the vectorized consumers run


def column_layer_counts(a: ArchArrays, attention_layers, linear_layers, dense_layers,
                        moe_layers) -> dict[str, np.ndarray]:
    """Layers of each of `LAYER_SETS` among the given ones (a stage's or the model's): of the
    `attention_layers`, the full-attention layers of their own shape ("global") take their
    share of the model's attention layers; the LM head runs once."""
    glob = attention_layers * a.attention.global_layers / np.maximum(a.attention_layers, 1.0)
    return {"attention": attention_layers - glob, "global": glob, "linear": linear_layers,
            "dense": dense_layers, "moe": moe_layers, "model": 1.0}


def is_kind(src, kind: str | None):
    """Whether `src` (an `Architecture` or `ArchColumns`) has layers of `kind`."""
    if kind is None:
        return True
    if isinstance(src, ArchColumns):
        return src.is_kind(kind)
    return kind in (field_value(src, "attention_kind"), field_value(src, "linear_mixer_kind"))


def active(row: WeightGemm, src):
    """True (1) where `src` has `row`: its kind, its `when` field non-zero."""
    on = is_kind(src, row.kind)
    on = on if row.when is None else on & (read(src, row.when) > 0)
    return on if row.unless is None else on & (read(src, row.unless) == 0)


def per_gpu_n(row: WeightGemm, src, dep):
    """N on one GPU (`dep`: a `Deployment` or `DeployArrays`)."""
    if row.sharded != "n":
        return row.n.value(src)
    if row.kv_heads:  # ⌈n_kv/TP⌉ heads of the rest of the product
        term = row.n.terms[0]
        heads = _factor_value(src, term.factors[0])
        rest = Term(term.factors[1:], term.coef).value(src)
        return _ceil(heads / getattr(dep, row.shard)) * rest
    return row.n.value(src) / getattr(dep, row.shard)


def per_gpu_k(row: WeightGemm, src, dep):
    value = row.k.value(src)
    return value / getattr(dep, row.shard) if row.sharded == "k" else value


def per_gpu_count(row: WeightGemm, src, dep):
    """Matrices per layer on one GPU: E/EP routed experts, else 1."""
    return read(src, "num_experts") / dep.ep if row.experts else 1


def _ceil(x):
    return np.ceil(x) if isinstance(x, np.ndarray) else float(math.ceil(x))


# ---- one Architecture -------------------------------------------------------------------------


def layer_count(arch, layers: LayerSet) -> int:
    """How many of `arch`'s layers have the rows of `layers` (counted once per object: the
    table asks for each of its rows)."""
    return kept(arch, "layer_counts", _layer_counts)[layers]


def _layer_counts(arch) -> dict[str, int]:
    glob = arch.num_global_attention_layers
    return {"attention": arch.num_attention_layers - glob, "global": glob,
            "linear": arch.mixer.num_linear_attention_layers, "dense": arch.num_dense_layers,
            "moe": arch.num_moe_layers, "model": 1}


@lru_cache(maxsize=16384)  # parameter counts, constraints and lint all ask; `arch` is frozen
def rows_of(arch) -> tuple[WeightGemm, ...]:
    """The rows `arch` has: its kinds, its `when` fields, non-empty dims, on some layer."""
    return tuple(r for r in ROWS if active(r, arch) and layer_count(arch, r.layers) > 0
                 and r.n.value(arch) > 0 and r.k.value(arch) > 0)


def layer_sources(arch: Architecture, layers: LayerSet) -> Iterator[tuple[Architecture, int]]:
    """(source, layers) pairs whose sum covers `arch`'s `layers` layers: when the dense FFN
    widths vary, `arch` with each width as `intermediate_size` (an unvalidated copy, read by
    the table's dims only) and its layer count; else `arch` itself."""
    if layers == "dense" and arch.ffn.layer_ffn_widths is not None:
        widths: dict[int, int] = {}
        for width in arch.ffn.layer_ffn_widths:
            if width:
                widths[width] = widths.get(width, 0) + 1
        for width, count in widths.items():
            ffn = arch.ffn.model_copy(update={"intermediate_size": width})
            yield arch.model_copy(update={"ffn": ffn}), count
        return
    yield arch, layer_count(arch, layers)
