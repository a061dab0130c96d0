"""Score a batch of candidates in one vectorized pass: objectives, constraints, attributes.

Everything a trial records comes from here, so the runner, `pareto` and `show` agree.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np

from constraints import CONSTRAINT_NAMES, ConstraintRules, Violation, check_candidate
from constraints import DeploymentColumns, aligned_counts, memory_fit_values, static_values
from cost_model import (
    MS_PER_S, Architecture, ConfigError, count_params, get_hardware, make_workload,
)
from objectives import (
    LossProxy, ServiceLevel, ServingScores, Window, predict_loss, ptq_estimate, ranking_loss_nats,
    serving_scores,
)
from search.study.space import (
    DEPLOYMENT_PARAMS,
    Candidate,
    build_candidate,
    complete_params,
    runnable,
    runnable_columns,
    sweeps_deployments,
)
from search.study.sweep import Envelope, envelopes
from search.study.spec import StudySpec

# User attributes written on every trial as their own columns (optuna-dashboard shows them; its
# 0.21 release does not show Optuna 5's set_constraint feasibility, hence `feasible`). The rest
# goes into one `details` attribute: each attribute is a storage write (a transaction on RDB).
COLUMN_ATTRS = ("frontier_area", "loss_proxy", "params_total", "params_active", "deployment",
                "feasible")
DETAILS_ATTR = "details"
# TTFT objective of a candidate whose TTFT concurrency does not fit memory: finite (samplers need
# numbers) and worse than any real TTFT.
UNREACHED_TTFT_MS = 1e9


DEPLOYMENT_PARAMS_ATTR = "deployment_params"  # a swept trial's chosen deployment (its params)


def trial_details(user_attrs: dict) -> dict:
    """The `details` of a stored trial (constraints, flags, …); {} when absent."""
    return dict(user_attrs.get(DETAILS_ATTR) or {})


def trial_candidate(spec: StudySpec, params: dict, user_attrs: dict) -> Candidate:
    """The candidate a stored trial evaluated: its params, the fixed dimensions, and (when the
    study sweeps deployments) the deployment the sweep chose for it."""
    chosen = trial_details(user_attrs).get(DEPLOYMENT_PARAMS_ATTR) or {}
    return build_candidate(spec, {**complete_params(spec, params), **chosen})


def deployment_label(dep) -> str:
    """`tp8 ep8 pp1 dp1 fp8 kv-fp8` (+ `kvp2`, `mtp1`, `disagg` when used): how reports name a
    deployment."""
    experts = dep.expert_precision
    extra = (f" moe-{experts}" if experts != dep.precision else "") + \
        (f" kvp{dep.kvp}" if dep.kvp > 1 else "") + \
        (f" mtp{dep.spec_tokens}" if dep.spec_tokens else "") + \
        (" disagg" if dep.serving == "disaggregated" else "")
    return (f"tp{dep.tp} ep{dep.ep} pp{dep.pp} dp{dep.dp} {dep.precision} "
            f"kv-{dep.kv_cache_precision}{extra}")


@dataclass
class Outcome:
    """What one trial records: objective values (None = the candidate is not a model),
    every constraint, and user attributes for reports and the dashboard."""

    values: list[float] | None
    constraints: dict[str, Violation] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)

    def feasible(self, hard: Sequence[str]) -> bool:
        return self.values is not None and all(self.constraints[n].value <= 0 for n in hard)


def constraint_rules(spec: StudySpec) -> ConstraintRules:
    return ConstraintRules(
        alignment=spec.constraints.alignment, total_params=spec.budget.total_params,
        active_params=spec.budget.active_params, params_tolerance_frac=spec.budget.tolerance_frac,
        max_gpus=spec.hardware.max_gpus, aspect_ratio_min=spec.constraints.aspect_ratio_min,
        aspect_ratio_max=spec.constraints.aspect_ratio_max,
    )


# Soft unless a study names it in `constraints.hard`: KV replication is already priced by the
# cost model (memory and attention time), so it is reported, not forbidden.
DEFAULT_SOFT = ("kv_replication",)


def hard_constraints(spec: StudySpec) -> tuple[str, ...]:
    chosen = spec.constraints.hard
    if chosen is None:
        return tuple(n for n in CONSTRAINT_NAMES if n not in DEFAULT_SOFT)
    return tuple(n for n in CONSTRAINT_NAMES if n in chosen)


def window(spec: StudySpec) -> Window:
    w = spec.workload
    return Window(w.interactivity_min, w.interactivity_max, w.x_scale == "log")


def score_valid(spec: StudySpec, cands: Sequence[Candidate]) -> ServingScores:
    ttft_c = spec.objectives.ttft_concurrency if "ttft_ms" in spec.objectives.names else None
    workload = make_workload(isl_tokens=spec.workload.isl_tokens,
                             osl_tokens=spec.workload.osl_tokens,
                             prefix_cached_frac=spec.workload.prefix_cached_frac,
                             engine=spec.engine,
                             adp_balance_timeout_steps=spec.workload.adp_balance_timeout_steps)
    return serving_scores([c.arch for c in cands], [c.deployment for c in cands],
                          get_hardware(spec.hardware.gpu), workload, window(spec), ttft_c,
                          service_level(spec), spec.hardware.total_gpus)


def service_level(spec: StudySpec) -> ServiceLevel | None:
    """The study's `[sla]` in seconds (None without one)."""
    sla = spec.sla
    if sla is None:
        return None
    tpot_ms = sla.tpot_max_ms if sla.interactivity_min is None else \
        MS_PER_S / sla.interactivity_min
    to_s = lambda ms: None if ms is None else ms / MS_PER_S  # noqa: E731
    return ServiceLevel(ttft_max_s=to_s(sla.ttft_max_ms), tpot_max_s=to_s(tpot_ms))


def _ptq_attrs(serving_precision: str, tokens_per_param: float) -> dict:
    """Serving quantization's accuracy estimate, reported beside the loss, never folded in."""
    try:
        ptq = ptq_estimate(serving_precision, tokens_per_param)
    except ConfigError:  # formats without PTQ evidence (bf16 needs none; mxfp4 has none)
        return {}
    return {"ptq_accuracy_delta_points": list(ptq.accuracy_delta_points),
            "ptq_flags": list(ptq.flags)}


@lru_cache(maxsize=8192)
def _loss(arch: Architecture, tokens: float, trained_in: str) -> tuple[LossProxy, float]:
    """The central loss proxy and the ranked loss of `arch` (it depends on the architecture
    only, and a search revisits architectures under other deployments)."""
    loss = predict_loss(arch, tokens, trained_in)
    # §7.2 of the accuracy notes: rank on the pessimistic end of the bands when a hard flag fires
    return loss, ranking_loss_nats(arch, tokens, trained_in, central=loss)


def _finite_or(value: float, fallback: float) -> float:
    return value if math.isfinite(value) else fallback


def _outcome(spec: StudySpec, cand: Candidate, scores: ServingScores, i: int,
             rules: ConstraintRules, counted: tuple = (None, None)) -> Outcome:
    """`cand`'s outcome from row `i` of `scores` (`counted`: `check_candidate`'s)."""
    counts = count_params(cand.arch)
    tokens, trained_in = spec.budget.training_tokens, spec.budget.training_precision
    loss, ranked = _loss(cand.arch, tokens, trained_in)
    metrics = {"frontier_area": float(scores.frontier_area[i]), "loss": ranked,
               "ttft_ms": _finite_or(float(scores.ttft_ms[i]), UNREACHED_TTFT_MS),
               "gpus": float(scores.gpus[i])}
    checks = check_candidate(cand.arch, cand.deployment, rules, float(scores.max_concurrency[i]),
                             counted)
    dep = cand.deployment
    attrs = {
        "architecture": cand.arch.name, "frontier_area": metrics["frontier_area"],
        "loss_proxy": ranked, "params_total": counts.total_params,
        "params_active": counts.active_params, "gpus": dep.gpus,
        "deployment": deployment_label(dep),
        "max_concurrency": int(scores.max_concurrency[i]), "loss_flags": list(loss.flags),
        "loss_central": loss.loss_nats, **_ptq_attrs(dep.precision, tokens / loss.effective_params),
    }
    return Outcome([metrics[n] for n in spec.objectives.names], checks, attrs)


# Outcomes of recently scored candidates: NSGA-II proposes the same design again and again (2,000
# quickstart trials hold ~650 distinct feasible designs), and an outcome is a deterministic
# function of the study and the design, so a repeat is copied instead of scored. A design is its
# `design_key` and deployment: params that differ only in a field the model does not use (the
# dense width of an MoE without dense layers) are one design.
MEMO_CANDIDATES = 8192  # ~3 KB each
_memo: OrderedDict[tuple, Outcome] = OrderedDict()


def _copy(outcome: Outcome, cand: Candidate) -> Outcome:
    """A caller's own copy of a memo entry, labelled with `cand`'s name."""
    return Outcome(None if outcome.values is None else list(outcome.values),
                   dict(outcome.constraints), {**outcome.attrs, "architecture": cand.arch.name})


def evaluate_batch(spec: StudySpec, cands: Sequence[Candidate]) -> list[Outcome]:
    """Outcomes of `cands`, in order; invalid shapes get `values=None` and their reason. Designs
    scored before for the same study (this process, the `MEMO_CANDIDATES` most recently scored)
    are copied."""
    study = spec.model_dump_json()
    keys = [(study, c.arch.design_key, c.deployment) if c.valid else None for c in cands]
    new = {key: cand for key, cand in zip(keys, cands) if key is not None and key not in _memo}
    for key, outcome in zip(new, score_batch(spec, list(new.values()))):
        _memo[key] = outcome
    outcomes = [_copy(_memo[key], cand) if key is not None else score_batch(spec, [cand])[0]
                for key, cand in zip(keys, cands)]
    while len(_memo) > MEMO_CANDIDATES:  # only now: this batch's hits may be the oldest
        _memo.popitem(last=False)
    return outcomes


def score_batch(spec: StudySpec, cands: Sequence[Candidate]) -> list[Outcome]:
    """Outcomes of `cands` scored in one vectorized pass (no memo). A study that sweeps
    deployments scores each architecture under every deployment of its space (`_swept`)."""
    valid = [i for i, c in enumerate(cands) if c.valid]
    outcomes = [Outcome(None, attrs={"invalid": c.invalid_reason}) for c in cands]
    if valid:
        scored = (_swept(spec, [cands[i] for i in valid]) if sweeps_deployments(spec)
                  else _sampled(spec, [cands[i] for i in valid]))
        for i, outcome in zip(valid, scored):
            outcomes[i] = outcome
    hard = hard_constraints(spec)
    for outcome in outcomes:
        outcome.attrs["feasible"] = outcome.feasible(hard)
        outcome.attrs["constraints"] = {n: [float(v.value), v.message]
                                        for n, v in outcome.constraints.items()}
    return outcomes


def _sampled(spec: StudySpec, cands: Sequence[Candidate]) -> list[Outcome]:
    """Each candidate under its own (sampled) deployment."""
    scores, rules = score_valid(spec, cands), constraint_rules(spec)
    return [_outcome(spec, cand, scores, j, rules) for j, cand in enumerate(cands)]


def _swept(spec: StudySpec, cands: Sequence[Candidate]) -> list[Outcome]:
    """Each candidate's architecture under every deployment of the space, all scored in one
    pass; its outcome is that of the deployment with the largest frontier area of its own,
    with the architecture's objectives: the envelope's area over every feasible deployment and
    the lowest TTFT among them (`_envelope_outcome`). Constraints are checked on columns, one
    architecture at a time (`constraints.columns`), before the cost model: a deployment that
    breaks a hard constraint the cost model has no part in (all but `memory_fit`) is never on
    the envelope, so only the others are scored; an architecture none of whose deployments
    passes is scored under all of them (to report the one closest to feasible), as is one whose
    passing deployments all break `memory_fit`, in a second pass."""
    groups = [swept_deployments(spec, c) for c in cands]
    rules, hard = constraint_rules(spec), hard_constraints(spec)
    first = [passes_static(c.arch, cols, rules, hard) for c, (_, cols) in zip(cands, groups)]

    def outcome(flat, scores, span, usable, env):
        if not usable and not span[3]:
            return None  # scored again under all its deployments, below
        return _envelope_outcome(spec, flat, scores, span, usable, env, rules)

    outcomes = score_groups(spec, cands, groups, first, rules, hard, outcome)
    again = [i for i, o in enumerate(outcomes) if o is None]
    if again:
        every = [np.ones(len(groups[i][0]), dtype=bool) for i in again]
        redone = score_groups(spec, [cands[i] for i in again], [groups[i] for i in again],
                               every, rules, hard, outcome)
        for i, found in zip(again, redone):
            outcomes[i] = found
    return outcomes


def passes_static(arch: Architecture, cols: DeploymentColumns, rules: ConstraintRules,
                   hard: Sequence[str], every_if_none: bool = True) -> np.ndarray:
    """Deployments that pass every hard constraint but `memory_fit` (all of them when none
    does and `every_if_none`: the closest to feasible is then looked for among all)."""
    values = static_values(arch, cols, rules)
    ok = np.ones(len(cols), dtype=bool)
    for name in hard:
        if name in values:
            ok &= values[name] <= 0
    return ok if ok.any() or not every_if_none else np.ones(len(cols), dtype=bool)


def score_groups(spec: StudySpec, cands: Sequence[Candidate], groups: list, masks: list,
                  rules: ConstraintRules, hard: Sequence[str], make) -> list:
    """`make(flat, scores, span, usable rows, envelope)` of each candidate scored under the
    deployments its mask keeps (span: its rows, their summed hard violations, its deployments,
    whether the mask kept them all, a function of a row giving `aligned_counts` of its
    deployment)."""
    flat = [c for (group, _), mask in zip(groups, masks) for c, keep in zip(group, mask) if keep]
    scores = score_valid(spec, flat)
    spans, usable, start = [], [], 0
    for cand, (group, cols), mask in zip(cands, groups, masks):
        rows = range(start, start + int(mask.sum()))
        values = {**{n: v[mask] for n, v in static_values(cand.arch, cols, rules).items()},
                  "memory_fit": memory_fit_values(scores.max_concurrency[rows])}
        violation = np.sum([np.maximum(values[n], 0.0) for n in hard], axis=0)
        spans.append((rows, violation, len(group), bool(mask.all()),
                      _counter(cand, cols, np.flatnonzero(mask), rows.start, rules)))
        usable.append([k for k, v in zip(rows, violation) if v <= 0])
        start = rows.stop
    found = envelopes(scores, usable, window(spec))
    return [make(flat, scores, span, rows, env) for span, rows, env in zip(spans, usable, found)]


def _counter(cand: Candidate, cols: DeploymentColumns, kept: np.ndarray, start: int,
             rules: ConstraintRules):
    """Row (of the scored ones, from `start`) -> `aligned_counts` of its deployment."""
    return lambda row: aligned_counts(cand.arch, cols, int(kept[row - start]), rules)


def swept_deployments(spec: StudySpec, cand: Candidate
                      ) -> tuple[list[Candidate], DeploymentColumns]:
    """The candidates of `cand`'s architecture under every valid deployment of the space, and
    those deployments' columns; `cand` alone when there is none."""
    grid, kept = runnable(spec, cand.arch)
    if not len(kept):
        return [cand], DeploymentColumns.of([cand.deployment])
    cols = runnable_columns(spec, cand.arch)
    return [Candidate({**cand.params, **grid.params[i]}, cand.arch, dep)
            for i, dep in zip(kept, cols.deployments)], cols


def sweep_outcome(spec: StudySpec, cand: Candidate) -> Outcome:
    """What a sweeping study records for `cand`'s architecture (recomputed: deterministic)."""
    return _swept(spec, [cand])[0]


def swept_envelope(spec: StudySpec, scores: ServingScores, rows: Sequence[int]) -> tuple:
    """(area, points on the envelope as (row, column)) of the frontier over `rows`' points."""
    found = envelopes(scores, [list(rows)], window(spec))[0]
    return found.area, found.points


def _envelope_outcome(spec, flat, scores, span, usable: list[int], env: Envelope,
                      rules: ConstraintRules) -> Outcome:
    rows, violation, evaluated, _, counted = span
    if not usable:  # no deployment works: report the one closest to feasible
        best = rows[int(np.argmin(violation))]
        return _with_deployment(_outcome(spec, flat[best], scores, best, rules, counted(best)),
                                flat[best], evaluated, 0)
    areas = scores.frontier_area[usable]
    chosen = usable[int(np.argmax(areas))]
    ttft = min(_finite_or(float(scores.ttft_ms[k]), UNREACHED_TTFT_MS) for k in usable)
    outcome = _with_deployment(_outcome(spec, flat[chosen], scores, chosen, rules,
                                        counted(chosen)), flat[chosen], evaluated, len(usable))
    metrics = dict(zip(spec.objectives.names, outcome.values))
    metrics.update({n: v for n, v in (("frontier_area", env.area), ("ttft_ms", ttft))
                    if n in metrics})
    outcome.values = [metrics[n] for n in spec.objectives.names]
    p = scores.points
    outcome.attrs.update(
        frontier_area=env.area, deployment_frontier_area=float(scores.frontier_area[chosen]),
        frontier_deployments=[[deployment_label(flat[k].deployment),
                               int(p.concurrency[k, j]), float(p.tokens_per_s_per_user[k, j]),
                               float(p.tokens_per_s_per_gpu[k, j])] for k, j in env.points])
    return outcome


def _with_deployment(outcome: Outcome, cand: Candidate, evaluated: int, feasible: int
                     ) -> Outcome:
    """`outcome` (a copy) naming the swept deployment it is for."""
    attrs = {**outcome.attrs, DEPLOYMENT_PARAMS_ATTR: {n: cand.params[n] for n in
                                                       DEPLOYMENT_PARAMS},
             "deployments_evaluated": evaluated, "deployments_feasible": feasible}
    return Outcome(list(outcome.values), dict(outcome.constraints), attrs)


def stored_attrs(outcome: Outcome) -> dict:
    """The user attributes a trial stores: the dashboard columns plus one `details` dict."""
    columns = {k: outcome.attrs[k] for k in COLUMN_ATTRS if k in outcome.attrs}
    details = {k: v for k, v in outcome.attrs.items() if k not in COLUMN_ATTRS}
    return {**columns, DETAILS_ATTR: details}
