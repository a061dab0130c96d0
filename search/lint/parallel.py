"""The parallelism rules of `archscout lint` (`search/lint/guidelines.py` has the
policy): guideline 5, MoE sizing; 6, pipeline balance; 7, attention vs FFN parallelism (NVIDIA,
AI Model Co-Design (2026))."""

from __future__ import annotations

import math

import numpy as np

from constraints import check_kv_replication
from cost_model import (
    ATTENTION_MIXER, GIB_BYTES, LINEAR_MIXERS, MS_PER_S, NO_MIXER, PARALLEL_MAMBA2_MIXER,
    ArchArrays, Architecture, DeployArrays, Deployment, bubble_frac, kv_cache_bytes_per_sequence,
    stage_forward, tokens_per_expert,
)
from search.lint.verdict import change_frac
from search.lint.support import (
    Draft,
    Fix,
    Gemm,
    REPORT_REACH,
    LintContext,
    model_gemms,
    nearest_values,
    param_change_frac,
    valid,
    with_deployment,
    with_fields,
)  # fmt: skip

STAGE_IMBALANCE_LIMIT_FRAC = 0.02  # policy: slowest pipeline stage over the mean
LAYER_FIX_RANGE_FRAC = 0.125  # a layer-count fix moves L by at most this share
MIB_PER_GIB = 1024


# ---- guideline 5: MoE sizing -------------------------------------------------------------------


def _ridge_tokens(ctx: LintContext, g: Gemm) -> float:
    """M* with I(M) = 2MNK / (b(MK + NK + MN)) = I*: M* = I*·b·NK / (2NK − I*·b·(N+K))."""
    rb = ctx.ridge * ctx.bytes_per_value
    margin = 2.0 * g.n * g.k - rb * (g.n + g.k)
    return rb * g.n * g.k / margin if margin > 0 else math.inf


def m_star_tokens(ctx: LintContext, arch: Architecture, dep: Deployment) -> float:
    """Tokens per expert at which the routed-expert GEMMs (up and down) reach the ridge."""
    return max(_ridge_tokens(ctx, g) for g in model_gemms(arch, dep)
               if g.name.startswith("moe/experts"))


def check_moe_sizing(ctx: LintContext) -> list[Draft]:
    """Guideline 5: M_expert = C·k/E at the memory limit must reach M*."""
    arch = ctx.arch
    if not arch.ffn.is_moe:
        return []
    e, k = arch.ffn.num_experts, arch.ffn.experts_per_token
    m_star = m_star_tokens(ctx, arch, ctx.dep)
    c_max = ctx.baseline.max_concurrency
    m_expert = float(tokens_per_expert(c_max, k, e))
    if m_expert >= m_star:
        return []
    imbalance = _imbalance_area_change(ctx)
    message = _sizing_message(ctx, m_star, m_expert, imbalance)
    cost = {"m_star_tokens": m_star, "concurrency_needed": m_star * e / k, "max_concurrency": c_max,
            "m_expert_tokens": m_expert, "imbalance_frac": ctx.dep.moe_imbalance_frac,
            "imbalance_frontier_area_change_frac": imbalance}
    fix = _wide_ep(ctx)
    if fix is None:
        message += (f"; no wider EP within the {ctx.hw.scale_up_domain_gpus}-GPU scale-up domain "
                    "raises tokens/s/GPU: fewer, wider experts (G1) are the lever")
    return [Draft(5, "expert-concurrency", "warning" if fix else "info", message, cost,
                  (fix,) if fix else ())]


def _sizing_message(ctx: LintContext, m_star: float, m_expert: float, imbalance: float) -> str:
    ffn, c_max = ctx.arch.ffn, ctx.baseline.max_concurrency
    e, k = ffn.num_experts, ffn.experts_per_token
    ridge = f"the ridge ({ctx.ridge:,.0f} FLOP/B, {ctx.where()})"
    need = (f"reach {ridge} at M* = {m_star:,.0f} tokens each, i.e. C ≥ M*·E/k = "
            f"{m_star * e / k:,.0f} concurrent sequences" if math.isfinite(m_star) else
            f"never reach {ridge}: I∞ < I* under this sharding (G1)")
    holds = f"hold at most {c_max:,.0f}" if c_max >= 1 else "cannot hold the model"
    message = (f"routed experts {need}; {ctx.dep.gpus}× {ctx.hw.name} {holds} (M_expert = C·k/E "
               f"= {m_expert:.1f})")
    if math.isfinite(imbalance):
        message += (f"; the imbalance (1+δ) = {1 + ctx.dep.moe_imbalance_frac:.2f} changes the "
                    f"frontier area by {imbalance:+.1%}")
    return message


def _imbalance_area_change(ctx: LintContext) -> float:
    even = with_deployment(ctx.dep, moe_imbalance_frac=0.0)
    balanced = ctx.measure([(ctx.arch, even)])[0]
    return change_frac(balanced.frontier_area, ctx.baseline.frontier_area)


def _wide_ep(ctx: LintContext) -> Fix | None:
    """Attention DP + wide EP inside the scale-up domain (co-design post, Guideline 5): the
    narrowest EP with M_expert ≥ M* that raises tokens/s/GPU, else the one that raises it most."""
    arch, dep, stage = ctx.arch, ctx.dep, ctx.dep.tp * ctx.dep.dp
    top = min(arch.ffn.num_experts, ctx.hw.scale_up_domain_gpus)
    sizes = [2**j for j in range(1, top.bit_length()) if 2**j >= stage and 2**j > dep.ep
             and arch.ffn.num_experts % 2**j == 0]
    deps = [d for d in (with_deployment(dep, tp=1, dp=g, ep=g) for g in sizes)
            if d is not None and valid(arch, d)]
    measured = ctx.measure([(arch, d) for d in deps]) if deps else []
    base = ctx.baseline.tokens_per_s_per_gpu
    gains = [m.tokens_per_s_per_gpu / base if base > 0 else m.tokens_per_s_per_gpu
             for m in measured]  # NaN baseline (no fit): any fitting EP is a gain
    better = [i for i, g in enumerate(gains) if g > 1 or (not base > 0 and g > 0)]
    if not better:
        return None
    k, e = arch.ffn.experts_per_token, arch.ffn.num_experts
    enough = [i for i in better if tokens_per_expert(measured[i].max_concurrency, k, e)
              >= m_star_tokens(ctx, arch, deps[i])]
    pick = enough[0] if enough else max(better, key=lambda i: gains[i])
    return Fix(arch, deps[pick])


# ---- guideline 6: pipeline balance -------------------------------------------------------------

Kind = tuple[bool, bool, str, bool]  # (MoE layer?, sliding-window layer?, mixer, has an FFN?)


def layer_kinds(arch: Architecture) -> list[Kind]:
    """Each layer's kind: MoE, sliding window, token mixer (attention, a linear mixer, both or
    none) and whether it has an FFN (Nemotron-H's mixer-only blocks have none)."""
    mixers = arch.mixer.layer_mixers or (ATTENTION_MIXER,) * arch.num_layers
    widths = arch.ffn.layer_ffn_widths or (arch.ffn.intermediate_size,) * arch.num_layers
    return [(moe, sliding, mixer, moe or width > 0) for moe, sliding, mixer, width
            in zip(arch.layer_is_moe, arch.layer_is_sliding, mixers, widths, strict=True)]


def _one_kind(a: ArchArrays, layers: float, kind: Kind) -> ArchArrays:
    """`a` as `layers` layers of `kind` plus one full-attention layer of the same FFN (the cost
    model averages attention over attention layers: it needs one; differences cancel it)."""
    moe, sliding, mixer, ffn = kind
    one = lambda v: np.full((1, 1), float(v))  # noqa: E731
    return a.with_columns(
        layers=one(layers + 1), dense_layers=one((layers + 1) * (ffn and not moe)),
        moe_layers=one((layers + 1) * moe), sliding_layers=one(layers * sliding),
        mixerless_layers=one(layers * (mixer == NO_MIXER)),
        linear_layers=one(layers * (mixer in LINEAR_MIXERS)),
        parallel_layers=one(layers * (mixer == PARALLEL_MAMBA2_MIXER)))


def layer_times_s(ctx: LintContext, decode_seqs: float) -> dict[Kind, np.ndarray]:
    """Seconds one layer of each kind adds to [a prefill chunk, a decode step] (`stage_forward`)."""
    isl = ctx.workload.isl_tokens
    chunk = isl / math.ceil(isl / ctx.workload.prefill_chunk_tokens)
    a = ArchArrays.from_architectures([ctx.arch])
    d = DeployArrays.from_deployments([with_deployment(ctx.dep, pp=1)])
    args = (np.array([0.0, decode_seqs]), ctx.workload.mean_decode_context_tokens,
            np.array([chunk, 0.0]), isl / 2.0)
    forward = lambda layers, kind: stage_forward(  # noqa: E731
        _one_kind(a, layers, kind), d, ctx.env, *args).total_s.reshape(-1)
    return {kind: forward(2, kind) - forward(1, kind) for kind in set(layer_kinds(ctx.arch))}


def stage_split(arch: Architecture, times: dict[Kind, np.ndarray], stages: int):
    """Contiguous split (the first L mod S stages one layer longer): sizes and stage times."""
    layers = arch.num_layers
    sizes = [layers // stages + (s < layers % stages) for s in range(stages)]
    kinds = layer_kinds(arch)
    starts = np.cumsum([0, *sizes])
    return sizes, np.array([sum(times[kind] for kind in kinds[b:e])
                            for b, e in zip(starts[:-1], starts[1:])])


def stage_imbalance(arch: Architecture, times: dict[Kind, np.ndarray], stages: int) -> float:
    """Slowest stage over the mean, the worse of prefill and decode."""
    stage_s = stage_split(arch, times, stages)[1]
    return float(np.max(stage_s.max(axis=0) / stage_s.mean(axis=0)) - 1.0)


def _composition(arch: Architecture) -> str:
    parts = [f"{arch.num_dense_layers} dense + {arch.num_moe_layers} MoE"] \
        if arch.ffn.is_moe and arch.num_dense_layers else []
    if arch.sliding_pattern == "mixed":
        parts.append(f"{arch.num_sliding_layers} sliding + {arch.num_full_attention_layers} full")
    mixers = arch.mixer.layer_mixers
    if mixers is not None:
        counts = {m: mixers.count(m) for m in dict.fromkeys(mixers)}
        parts.append(" + ".join(f"{n} {m}" for m, n in counts.items()))
    return f" ({', '.join(parts)})" if parts else ""


def check_pipeline_balance(ctx: LintContext) -> list[Draft]:
    """Guideline 6 at the deployed PP: per-stage time of an even split by layer count, and the
    bubble. A deployment without PP has no stages to balance (a split nobody asked for is not
    linted)."""
    arch, stages = ctx.arch, ctx.dep.pp
    if stages == 1:
        return []
    times = layer_times_s(ctx, max(ctx.baseline.max_concurrency, 1.0) / stages)
    imbalance = stage_imbalance(arch, times, stages)
    if imbalance <= STAGE_IMBALANCE_LIMIT_FRAC:
        return []
    bad = {stages: imbalance}
    message, cost = _imbalance_report(ctx, times, stages, bad)
    placed = balanced_placement(ctx.arch, bad)
    if placed is not None:  # the same layers in a repeating unit: same params, alike stages
        return [Draft(6, "pipeline-imbalance", "warning", message, cost,
                      note=_placement_note(ctx, placed, times, bad))]
    fixes = _balanced_depths(ctx, times, bad)
    recounted = recounted_pattern(ctx.arch, bad)
    if recounted is not None and \
            param_change_frac(arch, recounted) <= REPORT_REACH * ctx.max_param_change_frac:
        fixes.append(recounted)
    why = "" if fixes else (f"no layer count or pattern within {ctx.budget_text(REPORT_REACH)} "
                            "of the parameters splits evenly: assign layers to stages by time")
    unseen = unmodeled_stage_factor(arch, times, stages)
    return [Draft(6, "pipeline-imbalance", "warning", message, cost, tuple(
        Fix(a, ctx.dep, unseen / unmodeled_stage_factor(a, times, stages)) for a in fixes),
        why_none=why)]


def unmodeled_stage_factor(arch: Architecture, times: dict[Kind, np.ndarray],
                           stages: int) -> float:
    """The slowest stage over what the cost model runs a stage (ceil(L/S) layers of the model's
    average mix, `cost_model.step`), the worse of prefill and decode: what a layer pattern's
    placement costs beyond the layer count (30 alike layers over 4 stages: 1)."""
    stage_s = stage_split(arch, times, stages)[1]
    modeled = math.ceil(arch.num_layers / stages) / arch.num_layers * stage_s.sum(axis=0)
    return float(np.max(stage_s.max(axis=0) / modeled))


def balanced_placement(arch: Architecture, bad: dict) -> Architecture | None:
    """The same per-layer blocks (mixer, FFN width, MoE) re-placed as a repeating unit that
    every stage of each PP degree in `bad` holds whole (guideline 6: "regular, repeatable layer
    patterns"), minority kinds last in the unit (Qwen3-Next's 3 linear then 1 full); None for
    a model without a per-layer pattern or whose block counts no unit splits so."""
    if arch.mixer.layer_mixers is None or arch.attention.layer_types is not None:
        return None
    blocks = list(zip(arch.mixer.layer_mixers,
                      arch.ffn.layer_ffn_widths or (None,) * arch.num_layers,
                      arch.ffn.layer_moe or (None,) * arch.num_layers))
    counts = {b: blocks.count(b) for b in dict.fromkeys(blocks)}
    units = math.gcd(*counts.values())
    if any(units % s or arch.num_layers % s for s in bad):
        return None
    unit = [b for b, n in sorted(counts.items(), key=lambda item: -item[1])
            for _ in range(n // units)]
    mixers, widths, moe = zip(*(unit * units))
    return with_fields(arch, layer_mixers=mixers,
                       layer_ffn_widths=None if arch.ffn.layer_ffn_widths is None else widths,
                       layer_moe=None if arch.ffn.layer_moe is None else moe)


def recounted_pattern(arch: Architecture, bad: dict) -> Architecture | None:
    """A two-mixer pattern (no per-layer FFN lists) whose minority mixer count is moved to the
    nearest multiple of every bad PP degree, the layers re-placed as a repeating unit: the
    nearest pattern that splits (it changes the parameters; the cost model measures it)."""
    if arch.mixer.layer_mixers is None or arch.ffn.layer_ffn_widths is not None or \
            arch.ffn.layer_moe is not None or len(set(arch.mixer.layer_mixers)) != 2:
        return None
    step = math.lcm(*bad)
    minority, majority = sorted(set(arch.mixer.layer_mixers), key=arch.mixer.layer_mixers.count)
    count, layers = arch.mixer.layer_mixers.count(minority), arch.num_layers
    options = sorted(range(step, layers, step), key=lambda c: (abs(c - count), c < count))
    for target in options:
        units = math.gcd(target, layers - target)
        if layers % step or units % step:
            continue
        unit = [majority] * ((layers - target) // units) + [minority] * (target // units)
        alt = with_fields(arch, layer_mixers=tuple(unit * units))
        if alt is not None:
            return alt
    return None


def _placement_note(ctx: LintContext, placed: Architecture, times, bad: dict) -> dict:
    after = {s: stage_imbalance(placed, times, s) for s in bad}
    unit = placed.num_layers // math.gcd(*(placed.mixer.layer_mixers.count(m)
                                           for m in set(placed.mixer.layer_mixers)))
    return {"summary": f"place the same {placed.num_layers} layers as a repeating unit of "
                       f"{unit} (same params): " + ", ".join(f"PP={s} {bad[s]:+.1%} → {v:+.1%}"
                                                             for s, v in after.items()),
            "architecture": {"layer_mixers": [list(ctx.arch.mixer.layer_mixers),
                                              list(placed.mixer.layer_mixers)]},
            "deployment": {}, "params_delta": 0, "active_params_delta": 0,
            "imbalance_frac": after}


DISAGGREGATION_GAIN_FRAC = 0.10  # policy: report disaggregation when it adds ≥ 10% of area


def check_disaggregation(ctx: LintContext) -> list[Draft]:
    """Guideline 6's other half ("pipeline parallelism becomes relevant when you disaggregate
    prefill and decode"): in aggregated serving every decode step also carries prompt chunks;
    separate prefill and decode pools of this deployment's shape (`cost_model.disaggregated`,
    the xPyD ratio sized per point) are reported when they raise the frontier area enough."""
    if ctx.dep.serving != "aggregated":
        return []
    split = with_deployment(ctx.dep, serving="disaggregated")
    if split is None:
        return []
    gain = change_frac(ctx.baseline.frontier_area,
                       ctx.measure([(ctx.arch, split)])[0].frontier_area)
    if not gain >= DISAGGREGATION_GAIN_FRAC:
        return []
    w = ctx.workload
    message = (f"aggregated serving: every decode step also prefills ISL/OSL = "
               f"{w.isl_tokens / w.osl_tokens:.3g} prompt tokens per generated token; "
               f"disaggregated prefill and decode pools of this deployment raise the frontier "
               f"area by {gain:+.1%}")
    return [Draft(6, "disaggregation", "info", message, {"frontier_area_change_frac": gain},
                  (Fix(ctx.arch, split),))]


def _balanced_depths(ctx: LintContext, times, bad: dict) -> list[Architecture]:
    """The nearest layer counts above and below (within ±1/8 and the parameter budget) whose
    split is balanced at every bad PP degree."""
    ok = lambda a: valid(a, ctx.dep) and a.num_layers >= max(bad) and all(  # noqa: E731
        stage_imbalance(a, times, s) <= STAGE_IMBALANCE_LIMIT_FRAC for s in bad)
    reach = max(1.0, LAYER_FIX_RANGE_FRAC * ctx.arch.num_layers)
    return nearest_values(ctx, "num_layers", ok, max_distance=reach)


def _imbalance_report(ctx: LintContext, times, stages: int, bad: dict):
    sizes, stage_s = stage_split(ctx.arch, times, stages)
    chunks = math.ceil(ctx.workload.isl_tokens / ctx.workload.prefill_chunk_tokens)
    ttft_s = (chunks + stages - 1) * float(stage_s[:, 0].max() - stage_s[:, 0].mean())
    loss = 1.0 - 1.0 / (1.0 + bad[stages])
    bubble = float(bubble_frac(stages, chunks))
    message = (f"{ctx.arch.num_layers} layers{_composition(ctx.arch)} in "
               f"PP={stages} split of {'/'.join(map(str, sizes))}: "
               f"the slowest stage is {bad[stages]:+.1%} over the mean, {loss:.1%} of pipeline "
               f"throughput lost, TTFT +{ttft_s * MS_PER_S:.2f} ms; bubble (S−1)/(S−1+m) = "
               f"{bubble:.0%} with m = {chunks} chunk(s)")
    cost = {"stages": stages, "layers_per_stage": sizes, "imbalance_frac": bad,
            "throughput_loss_frac": loss, "ttft_change_ms": ttft_s * MS_PER_S,
            "bubble_frac": bubble}
    return message, cost


# ---- guideline 7: attention vs FFN parallelism -------------------------------------------------


def check_attention_parallelism(ctx: LintContext) -> list[Draft]:
    """Guideline 7: TP beyond the KV heads (any TP with MLA) replicates the KV cache."""
    arch, dep = ctx.arch, ctx.dep
    verdict = check_kv_replication(arch, dep)
    if verdict.feasible:
        return []
    tp = 1 if arch.attention.attention_kind == "mla" else arch.attention.num_kv_heads
    fix = with_deployment(dep, tp=tp, dp=dep.dp * dep.tp // tp)
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    context = float(ctx.workload.max_context_tokens)
    kv_gib = float(kv_cache_bytes_per_sequence(a, context, ctx.env.kv.activation_bytes_per_value,
                                               d)[0, 0]) / GIB_BYTES
    helix = with_deployment(dep, tp=tp, kvp=dep.kvp * dep.tp // tp)
    message = (f"{verdict.message}; {kv_gib * MIB_PER_GIB:.1f} MiB of KV per sequence per GPU at "
               f"{context:,.0f} tokens; attention DP or Helix (KV split along the sequence over "
               f"the same GPUs, FFN still TP over all of them) keeps one copy")
    cost = {"extra_kv_copies": verdict.value, "kv_gib_per_sequence_per_gpu": kv_gib}
    fixes = tuple(Fix(arch, f) for f in (fix, helix) if f is not None and valid(arch, f))
    return [Draft(7, "kv-replication", "warning", message, cost, fixes)]
