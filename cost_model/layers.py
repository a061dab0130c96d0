"""The GEMMs of one pipeline stage's forward pass, with their per-GPU shapes after sharding.

Their N, K, sharding and counts are the rows of `cost_model.sharded_gemms` (fused kernels as
there); this module gives each its M and runs them. Shapes follow NVIDIA, AI Model Co-Design
(2026), Table 1 (M = tokens; N, K = model dims), sharded by the deployment: attention and dense
FFN by TP on the tokens of the busiest attention-DP group (`StepLoad`: whole requests, never
split across groups), experts by EP with each expert's H′ split over moe_tp = TP·DP/EP on every
group's tokens, vocabulary by TP.
MoE under uniform routing (NVIDIA, AI Model Co-Design (2026), "Large expert parallelism"):
M_expert = C·k/E; the weights actually read are those of the experts touched by at least one token,
1 − (1 − k/E)^C of them; with EP > 1 the busiest GPU's experts hold (1+δ) times the mean, and it
touches more of its experts than the average GPU (random routing, `busiest_rank_touched_experts`;
with every expert on each GPU, EP = 1, there is no busier GPU to wait for: the grouped GEMM runs
the same total tiles whatever the split between experts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.gemm import HOT_DTYPE, GemmRates
from cost_model.gemm_unique import unique_gemm_time_s
from cost_model.order_statistics import expected_largest_z
from cost_model.sharded_gemms import (
    KERNELS, ArchColumns, active, column_layer_counts, per_gpu_k, per_gpu_n, read,
)
from cost_model.step_load import StepLoad

MOE_HIDDEN_UNIT = 4096  # `moe.<format>.per_local_copy_us` is quoted per copy of 4096 elements


def touched_expert_frac(tokens, top_k, experts):
    """Expected fraction of experts that receive at least one of `tokens` tokens (uniform)."""
    miss = np.clip(1.0 - top_k / np.maximum(experts, 1.0), 0.0, 1.0)
    return 1.0 - miss ** np.maximum(tokens, 0.0)


def tokens_per_expert(concurrency, top_k, experts):
    """The co-design post's MoE sizing equation: GEMM-M per expert = C·k/E."""
    return np.asarray(concurrency, dtype=np.float64) * top_k / np.maximum(experts, 1.0)


@dataclass
class GemmList:
    """Named GEMMs of a forward: shape, how many run per stage (`count`), and precision class:
    BF16 (`high`), the routed experts' format (`moe`) or the linear layers' format."""

    shape: tuple[int, ...]  # every dimension broadcasts to this shape
    names: list[str] = field(default_factory=list)
    dims: list[tuple] = field(default_factory=list)  # (m, n, k, groups, count)
    high: list[bool] = field(default_factory=list)  # True: BF16 (unquantized)
    moe: list[bool] = field(default_factory=list)  # True: routed experts (`Env.experts`)
    expert_ep: np.ndarray | float | None = None  # deployments' EP, set with the expert rows

    def add(self, name, m, n, k, count, groups=1.0, high=False, moe=False):
        self.names.append(name)
        self.dims.append((m, n, k, groups, count))
        self.high.append(high)
        self.moe.append(moe)

    def _rows_mask(self, flags: list[bool], rows: list[int]) -> np.ndarray:
        return np.array([flags[row] for row in rows]).reshape((-1,) + (1,) * len(self.shape))

    def rates(self, env: Env, rows: list[int]) -> GemmRates:
        """Each row's rates (axis 0): BF16, the experts' fused MoE kernels (their format's) or
        the linear layers'."""
        low = env.linear_rates
        if any(self.moe[row] for row in rows):
            experts = env.expert_rates(self.expert_ep)  # EP = 1's entry or the joint one
            low = GemmRates.select(self._rows_mask(self.moe, rows), experts, low)
        return GemmRates.select(self._rows_mask(self.high, rows), env.high_rates, low)

    def times_s(self, env: Env, dtype: type = HOT_DTYPE) -> dict[str, float | np.ndarray]:
        """Per-stage time of each named GEMM (count × one GEMM), in one vectorized call computed
        in `dtype` (calibration passes float64: its finite-difference Jacobians need the digits).
        GEMMs that no candidate runs (count 0 everywhere: MLA rows of GQA models, expert rows of
        dense ones) are not evaluated and take 0 s; most batches run a third of the rows."""
        rows = [row for row, dims in enumerate(self.dims) if np.any(dims[4])]
        times: dict[str, float | np.ndarray] = dict.fromkeys(self.names, 0.0)
        if not rows:
            return times
        shape = self.shape
        stacked = np.empty((5, len(rows)) + shape)
        for i, row in enumerate(rows):
            for j, value in enumerate(self.dims[row]):
                stacked[j, i] = value  # numpy broadcasts on assignment, in C
        m, n, k, groups, count = stacked
        live = (m > 0) & (n > 0) & (k > 0) & (groups > 0) & (count > 0)
        rates = self.rates(env, rows)
        # each distinct GEMM once: sweeps repeat most of them (`cost_model.gemm_unique`)
        live_s = unique_gemm_time_s([self.dims[row][:4] for row in rows], live, env.hw, rates,
                                    dtype) * count
        times.update(zip((self.names[row] for row in rows), live_s))
        return times


def layer_gemms(g: GemmList, a: ArchArrays, d: DeployArrays, load: StepLoad, attention_layers,
                linear_layers, dense_layers, moe_layers):
    """Every weight GEMM of the table (`cost_model.sharded_gemms`) for the given layer counts
    of each kind, plus the LM head."""
    add_table_gemms(g, a, d, load, column_layer_counts(a, attention_layers, linear_layers,
                                                       dense_layers, moe_layers))


def add_table_gemms(g: GemmList, a: ArchArrays, d: DeployArrays, load: StepLoad, layers: dict):
    """The table's kernels on `layers[row.layers]` layers each (sets not in `layers` left out):
    fused rows add their N; of exclusive rows (GQA or MLA) the candidate's own is taken."""
    src = ArchColumns(a)
    for name, rows in KERNELS.items():
        if rows[0].layers in layers:
            _add_kernel(g, src, d, load, name, rows, layers[rows[0].layers])


def _add_kernel(g: GemmList, src: ArchColumns, d: DeployArrays, load: StepLoad, name, rows,
                layers):
    masks = [active(row, src) for row in rows]
    n = sum(mask * per_gpu_n(row, src, d) for mask, row in zip(masks, rows))
    k = reduce(np.maximum, [mask * per_gpu_k(row, src, d) for mask, row in zip(masks, rows)])
    count = layers * reduce(np.logical_or, masks)
    first = rows[0]
    high, moe = first.precision == "high", first.precision == "experts"
    if first.experts:
        m, groups = _expert_m_groups(src.a, d, load)
        g.expert_ep = d.ep
        g.add(name, m, n, k, count, groups=groups, moe=moe)
    elif first.decode_kernel:
        _add_absorbed(g, src, d, load, rows, count)
        g.add(name, load.group_prefill_tokens, n, k, count)
    else:
        g.add(name, _logit_tokens(load) if first.layers == "model" else load.group_tokens,
              n, k, count, high=high)


def _add_absorbed(g: GemmList, src: ArchColumns, d: DeployArrays, load: StepLoad, rows, count):
    """decode: W_UK / W_UV absorbed into per-head GEMMs (DeepSeek-V2 §2.1.2), W_UK transposed
    (the query's nope part into the latent)."""
    for row in rows:
        heads = read(src, row.n.terms[0].factors[0]) / getattr(d, row.shard)
        n, k = per_gpu_n(row, src, d) / np.maximum(heads, 1e-12), per_gpu_k(row, src, d)
        n, k = (k, n) if row.decode_transposed else (n, k)
        g.add(row.decode_kernel, load.group_decode_tokens, n, k, count, groups=heads)


def attention_gemms(g: GemmList, a: ArchArrays, d: DeployArrays, load: StepLoad, layers):
    """Every attention kernel of the table (QKV or MLA projections, the output gate, the DSA
    indexer, the output projection) on `layers` layers, busiest group's tokens."""
    counts = column_layer_counts(a, layers, 0.0, 0.0, 0.0)
    add_table_gemms(g, a, d, load, {s: counts[s] for s in ("attention", "global")})


def moe_imbalance_frac(d: DeployArrays):
    """δ of the busiest GPU's routed tokens: the deployment's, only when experts are spread
    over EP > 1 GPUs."""
    return np.where(d.ep > 1, d.imbalance, 0.0)


def ffn_gemms(g: GemmList, a: ArchArrays, d: DeployArrays, load: StepLoad, dense_layers,
              moe_layers):
    """Dense FFN, shared experts and router (busiest group's tokens); routed experts (grouped
    GEMMs, in the experts' format) on every group's tokens."""
    add_table_gemms(g, a, d, load, dict(dense=dense_layers, moe=moe_layers))


def _expert_m_groups(a: ArchArrays, d: DeployArrays, load: StepLoad):
    """(tokens per touched expert on the busiest GPU, experts it touches) of one MoE layer."""
    tokens = load.instance_tokens
    touched = touched_expert_frac(tokens, a.ffn.top_k, a.ffn.experts)
    m_expert = tokens_per_expert(tokens, a.ffn.top_k, a.ffn.experts) / np.maximum(touched, 1e-12) \
        * (1.0 + moe_imbalance_frac(d))
    return m_expert, busiest_rank_touched_experts(touched, a.ffn.experts, d.ep, d.random_routing)


def busiest_rank_touched_experts(touched_frac, experts, ep, random_routing=1.0):
    """Experts the busiest of `ep` expert-parallel GPUs reads in one MoE layer when each expert
    is touched with probability `touched_frac` (`touched_expert_frac`). Each GPU holds n = E/EP
    experts, so its touched count is Binomial(n, p) (mean n·p, variance n·p·(1 − p)); the layer
    waits for the busiest of EP GPUs, z_EP standard deviations above the mean
    (`order_statistics.expected_largest_z`), never more than its n experts:
        min(n·p + z_EP·√(n·p·(1 − p)), n).
    At EP = 1 it is the mean (z = 0: every GPU holds every expert); at small batches it is what
    expert parallelism costs in weight reads (DeepSeek-V3, 16 tokens, EP 8: 16.7 experts on the
    busiest GPU vs 12.7 on average), at large ones p → 1 and it vanishes (the routed tokens'
    skew is δ, `moe_imbalance_frac`). min(·, n) is non-decreasing in p (where the sum decreases,
    near p = 1, it is already above n), so the layer never gets faster with more tokens.
    `random_routing` 0: balanced routing, every GPU at the mean (aiconfigurator's "balanced"
    kernel tables, `search.calibration.moe`)."""
    n = experts / ep
    mean = n * touched_frac
    spread = np.sqrt(np.maximum(mean * (1.0 - touched_frac), 0.0)) * random_routing
    return np.minimum(mean + expected_largest_z(ep) * spread, n)


def moe_routed_tokens(a: ArchArrays, d: DeployArrays, tokens):
    """Token copies one GPU's experts receive per MoE layer: C·k/EP (balanced routing)."""
    return tokens * a.ffn.top_k / d.ep


def moe_overhead_s(a: ArchArrays, d: DeployArrays, env: Env, tokens):
    """Non-GEMM time of one fused MoE layer on one GPU, in its experts' format and on the step's
    engine's kernels (`Env.moe_terms`, `cost_model.efficiency.MoeEfficiency`): a fixed floor
    (routing top-k, the permute/unpermute and activation kernels' launches), a cost per local
    routed token copy per 4096 hidden elements (permute, activation quantization, gated
    activation and weighted unpermute move each copy: C·k/EP copies of H elements) and a cost per
    routed copy of ALL the layer's tokens (the fused MoE receives every rank's tokens and sorts
    and scans all C·k expert indices to pick its local ones, whatever the EP degree); 0 s for a
    dense model. An EP = 1 deployment pays its format's EP = 1 entry's terms where the file has
    one (`cost_model.moe_ep`), as its grouped GEMMs run that entry's ceilings. Fitted per engine
    and format on measured fused-MoE kernels with the grouped GEMMs (`search/calibration/moe.py`;
    figures: tests/benchmarks/bench_moe_fit.py)."""
    terms = env.moe_terms.at(d.ep)  # EP = 1's entry or the joint one (`cost_model.moe_ep`)
    local_copies = moe_routed_tokens(a, d, tokens)
    per_local_s = terms.per_local_copy_s * a.hidden / MOE_HIDDEN_UNIT
    scanned_s = tokens * a.ffn.top_k * terms.per_scanned_copy_s
    return np.where(a.ffn.experts > 0,
                    terms.fixed_overhead_s + local_copies * per_local_s + scanned_s, 0.0)


def _logit_tokens(load: StepLoad):
    """Logits for the decode tokens and the last prompt token of each request whose prefill
    the step completes."""
    return load.group_decode_tokens + np.minimum(load.group_prefill_tokens,
                                                 load.group_prefill_seqs)


def lm_head_gemm(g: GemmList, a: ArchArrays, d: DeployArrays, load: StepLoad):
    """The LM head (BF16 weights, vocabulary over TP) on the busiest group's logit tokens."""
    add_table_gemms(g, a, d, load, dict(model=1.0))
