"""The Pareto set of a study, ranked by frontier area, read from its storage.

One entry per distinct design: trials are grouped by `Architecture.design_key`, so params that
differ only in a field the model does not use (the dense width of an MoE without dense layers)
are one design. A design's frontier is the envelope of the operating points of every feasible
deployment evaluated for it, and its objective values (`design_values`) are the best those
deployments reach: the envelope's area, the loss, the lowest TTFT, the fewest GPUs. The Pareto
set is the designs that no other design dominates in those values; each entry says which
deployment realizes each part of its frontier.

Rescoring every design's envelope would cost as much as the search's own scoring, so designs
are first pruned with bounds from the stored trial values: a design's envelope area lies between
its best deployment's area and the sum of its deployments' areas (the envelope's region is the
union of theirs). A design whose optimistic values are dominated by another design's
pessimistic ones cannot be on the front; the others are rescored in one vectorized pass and
filtered on their exact values, so no reported entry dominates another.

At the end of a search on the default journal the document is kept in a small side file
(`write_cached_document`): `pareto` on a study that has not changed since reads it instead of
decoding the whole journal and rescoring (a 20,000-trial journal is ~60 MB). It is used only
while the journal has the size and modification time it was computed at and the study file
holds the same spec; anything else (a later run, a killed one, an edited study file) is
recomputed from the trials.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import moocore
import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from cost_model import field_value
from constraints import check_candidate
from objectives import ServingScores
from search.study.convergence import bounds_reached, convergence, exact_fraction
from search.study.evaluation import (
    DEPLOYMENT_PARAMS_ATTR,
    UNREACHED_TTFT_MS,
    constraint_rules,
    deployment_label,
    hard_constraints,
    score_valid,
    swept_envelope,
    trial_candidate,
    trial_details,
)
from search.atomic import write_text_atomic
from search.study.exhaustive import EXACT_ATTR, EXHAUSTIVE_ATTR
from search.study.record import recorded_spec
from search.study.sla import binding
from search.study.space import Candidate, sweeps_deployments, swept_candidates
from search.study.spec import StudySpec

AREA = "frontier_area"


@dataclass(frozen=True)
class Record:
    """One completed trial as the report needs it; its candidate is rebuilt when first read
    (only the feasible trials' are: a third of a study's, or less), once per distinct params
    and chosen deployment among the records sharing `builds` (NSGA-II repeats designs: 9,651
    feasible trials of a 20,000-trial quickstart held 4,122 distinct params)."""

    trial: FrozenTrial
    spec: StudySpec
    feasible: bool
    builds: dict = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def candidate(self) -> Candidate:
        attrs = self.trial.user_attrs
        key = (tuple(sorted(self.trial.params.items())),
               json.dumps(trial_details(attrs).get(DEPLOYMENT_PARAMS_ATTR), sort_keys=True))
        if key not in self.builds:
            self.builds[key] = trial_candidate(self.spec, self.trial.params, attrs)
        return self.builds[key]

    @property
    def arch_key(self) -> tuple | None:
        """The design (`Architecture.design_key`); None for a shape that is not a model."""
        return self.candidate.arch.design_key if self.candidate.valid else None

    @property
    def area(self) -> float:
        return float(self.trial.user_attrs.get(AREA, 0.0))


def load_records(spec: StudySpec, study: optuna.Study) -> list[Record]:
    """Completed trials (one storage read, no deep copies)."""
    hard = hard_constraints(spec)
    records, builds = [], {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        feasible = all(t.constraints.get(n, 0.0) <= 0 for n in hard)
        records.append(Record(t, spec, feasible, builds))
    return records


def _usable(records: list[Record]) -> list[Record]:
    return [r for r in records if r.feasible and r.candidate.valid]


def pareto_records(spec: StudySpec, records: list[Record]) -> list[Record]:
    """Feasible trials not dominated in the study's objectives (trial by trial, as the sampler
    sees them; the report's entries are designs, `pareto_items`)."""
    feasible = _usable(records)
    if not feasible:
        return []
    values = np.array([r.trial.values for r in feasible], dtype=float)
    maximise = [d == "maximize" for d in spec.objectives.directions]
    keep = moocore.is_nondominated(values, maximise=maximise, keep_weakly=True)
    return [r for r, k in zip(feasible, keep) if k]


# ---- designs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Design:
    """The feasible trials of one design: `records` has one per distinct deployment (the
    earliest trial of each), `trials` counts every trial, repeats and twins included."""

    records: list[Record]
    trials: int

    @property
    def best(self) -> Record:
        """The trial whose own deployment has the largest frontier area."""
        return max(self.records, key=lambda r: (r.area, -r.trial.number))


def group_designs(records: list[Record]) -> list[Design]:
    """Feasible, valid records by design, in order of first appearance."""
    by_key: dict[tuple, dict] = {}
    counts: dict[tuple, int] = {}
    for r in sorted(_usable(records), key=lambda rec: rec.trial.number):
        by_key.setdefault(r.arch_key, {}).setdefault(r.candidate.deployment, r)
        counts[r.arch_key] = counts.get(r.arch_key, 0) + 1
    return [Design(list(deps.values()), counts[key]) for key, deps in by_key.items()]


def _minimized(spec: StudySpec, values: np.ndarray) -> np.ndarray:
    """(n, objectives) values with maximized objectives negated, so that less is better."""
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in spec.objectives.directions])
    return values * sign


def _stored_bounds(spec: StudySpec, design: Design) -> tuple[list[float], list[float]]:
    """(pessimistic, optimistic) objective values of a design from its stored trial values."""
    values = np.array([r.trial.values for r in design.records], dtype=float)
    pessimistic, optimistic = [], []
    for j, (name, direction) in enumerate(zip(spec.objectives.names, spec.objectives.directions)):
        column = values[:, j]
        best = column.max() if direction == "maximize" else column.min()
        pessimistic.append(best)  # the envelope's area is at least its best deployment's
        optimistic.append(column.sum() if name == AREA else best)  # and at most their sum
    return pessimistic, optimistic


def _may_be_optimal(spec: StudySpec, designs: list[Design]) -> list[Design]:
    """Designs whose optimistic values no design's pessimistic values dominate."""
    bounds = [_stored_bounds(spec, d) for d in designs]
    pessimistic = _minimized(spec, np.array([b[0] for b in bounds], dtype=float))
    optimistic = _minimized(spec, np.array([b[1] for b in bounds], dtype=float))
    front = pessimistic[moocore.is_nondominated(pessimistic, keep_weakly=True)]
    no_worse = np.all(front[None, :, :] <= optimistic[:, None, :], axis=2)
    better = np.any(front[None, :, :] < optimistic[:, None, :], axis=2)
    dominated = np.any(no_worse & better, axis=1)
    return [d for d, out in zip(designs, dominated) if not out]


# ---- a design's frontier, rescored --------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """The rows of a batch score that belong to one design: which trial and deployment label
    each row is, and whether the deployment is usable (feasible under the hard constraints)."""

    rows: slice
    trials: list[int]
    labels: list[str]
    usable: np.ndarray  # bool per row


def _envelope(spec: StudySpec, scores: ServingScores, part: Rows) -> dict:
    """The frontier of one design over its usable deployments (`swept_envelope`, the same
    pooling a sweeping study's trials were scored with)."""
    p, start = scores.points, part.rows.start
    rows = [start + i for i in np.flatnonzero(part.usable)]
    area, on_front = swept_envelope(spec, scores, rows)
    points = sorted(
        ({"tokens_per_s_per_user": float(p.tokens_per_s_per_user[r, j]),
          "tokens_per_s_per_gpu": float(p.tokens_per_s_per_gpu[r, j]),
          "concurrency": int(p.concurrency[r, j]), "trial": part.trials[r - start],
          "deployment": _with_ratio(part.labels[r - start], p.ratio(r, j))}
         for r, j in on_front), key=lambda q: q["tokens_per_s_per_user"])
    return {AREA: area, "frontier": points}


def _with_ratio(label: str, ratio: str | None) -> str:
    """A disaggregated point's deployment with the xPyD ratio that realizes it."""
    return label if ratio is None else f"{label} {ratio}"


def _design_values(spec: StudySpec, design: Design, scores: ServingScores, part: Rows,
                   area: float) -> dict:
    """The best each objective reaches over the design's usable deployments."""
    rows = part.rows
    ttft = np.where(np.isfinite(scores.ttft_ms[rows]) & part.usable, scores.ttft_ms[rows],
                    UNREACHED_TTFT_MS)
    gpus = np.where(part.usable, scores.gpus[rows], np.inf)
    rescored = {AREA: area, "ttft_ms": float(ttft.min()), "gpus": float(gpus.min())}
    values = {}
    for j, (name, direction) in enumerate(zip(spec.objectives.names, spec.objectives.directions)):
        stored = [r.trial.values[j] for r in design.records]
        values[name] = rescored.get(name, max(stored) if direction == "maximize" else min(stored))
    return values


def _architecture_doc(cand: Candidate) -> dict:
    fields = ("name", "hidden_size", "num_layers", "num_attention_heads", "num_kv_heads",
              "head_dim", "intermediate_size", "vocab_size", "num_experts", "experts_per_token",
              "moe_intermediate_size", "num_shared_experts", "first_dense_layers")
    arch = cand.arch
    assert arch is not None, "a Pareto entry is a valid candidate"
    return {f: field_value(arch, f) for f in fields}


def _deployment_doc(cand: Candidate) -> dict:
    d = cand.deployment
    return {"tp": d.tp, "ep": d.ep, "pp": d.pp, "dp": d.dp, "precision": d.precision,
            "kv_precision": d.kv_cache_precision, "kvp": d.kvp, "spec_tokens": d.spec_tokens,
            "serving": d.serving, "gpus": d.gpus}


def _item(spec: StudySpec, design: Design, scores: ServingScores, part: Rows) -> dict:
    best = design.best
    attrs = best.trial.user_attrs
    envelope = _envelope(spec, scores, part)
    return {
        "trial": best.trial.number, AREA: envelope[AREA],
        "trial_frontier_area": attrs.get(AREA), "loss_proxy": attrs.get("loss_proxy"),
        "params_total": attrs.get("params_total"), "params_active": attrs.get("params_active"),
        "architecture": _architecture_doc(best.candidate),
        "deployment": _deployment_doc(best.candidate),
        "deployments_evaluated": sorted(set(np.array(part.labels)[part.usable].tolist())),
        "frontier": envelope["frontier"], "flags": trial_details(attrs).get("loss_flags", []),
        "values": dict(zip(spec.objectives.names, best.trial.values)),
        "design_values": _design_values(spec, design, scores, part, envelope[AREA]),
        "design_trials": design.trials,
    }


def _deployments(spec: StudySpec, design: Design) -> list[tuple[Candidate, Record]]:
    """What a design's envelope is over: the deployments its trials evaluated, or, when the
    study sweeps deployments, every deployment of the space (as its trials' sweep did)."""
    if sweeps_deployments(spec):
        best = design.best
        return [(cand, best) for cand in swept_candidates(spec, best.candidate)]
    return [(r.candidate, r) for r in design.records]


def _passes_hard_constraints(spec: StudySpec, cands: list[Candidate], scores: ServingScores
                             ) -> np.ndarray:
    """Whether each scored candidate passes every hard constraint."""
    rules, hard = constraint_rules(spec), hard_constraints(spec)
    checks = (check_candidate(c.arch, c.deployment, rules, float(limit))
              for c, limit in zip(cands, scores.max_concurrency))
    return np.array([all(v[n].value <= 0 for n in hard) for v in checks], dtype=bool)


def design_items(spec: StudySpec, designs: list[Design]) -> list[dict]:
    """The entry of each design, every deployment of every design scored in one pass."""
    groups = [_deployments(spec, d) for d in designs]
    cands = [c for group in groups for c, _ in group]
    scores = score_valid(spec, cands)
    usable = _passes_hard_constraints(spec, cands, scores) if sweeps_deployments(spec) else \
        np.ones(len(cands), dtype=bool)  # a sampled study's design records are its feasible trials
    items, start = [], 0
    for design, group in zip(designs, groups):
        rows = slice(start, start + len(group))
        part = Rows(rows, [r.trial.number for _, r in group],
                    [deployment_label(c.deployment) for c, _ in group], usable[rows])
        items.append(_item(spec, design, scores, part))
        start = rows.stop
    return items


def _pareto_designs(spec: StudySpec, records: list[Record]) -> list[tuple[dict, Design]]:
    designs = _may_be_optimal(spec, group_designs(records)) if _usable(records) else []
    if not designs:
        return []
    items = design_items(spec, designs)
    exact = np.array([[i["design_values"][n] for n in spec.objectives.names] for i in items])
    keep = moocore.is_nondominated(_minimized(spec, exact), keep_weakly=True)
    ranked = sorted(((i, d) for i, d, k in zip(items, designs, keep) if k),
                    key=lambda pair: (-pair[0][AREA], pair[0]["trial"]))
    for rank, (item, _) in enumerate(ranked, start=1):
        item["rank"] = rank
    return ranked


def pareto_items(spec: StudySpec, records: list[Record]) -> list[dict]:
    """Pareto-optimal designs, ranked by the area of their envelope frontier."""
    return [item for item, _ in _pareto_designs(spec, records)]


def pareto_document(spec: StudySpec, study: optuna.Study) -> dict:
    """`pareto --json`: the Pareto set of the study as it ran (its stored spec; a note on stderr
    when `spec`, the file's, differs), with its convergence and the space edges it reaches."""
    spec = recorded_spec(study, spec)
    records = load_records(spec, study)
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    sampled = [t for t in finished if not t.user_attrs.get(EXHAUSTIVE_ATTR)]
    ranked = _pareto_designs(spec, records)
    return {
        "study": spec.name, "trials": len(finished),
        "feasible": sum(r.feasible for r in records), "objectives": spec.objectives.names,
        "pareto": [item for item, _ in ranked],
        "convergence": convergence(spec, sampled, hard_constraints(spec)),
        "bounds": bounds_reached(spec, [(i["rank"], _frontier_candidates(spec, i, d))
                                        for i, d in ranked]),
        **_exact_document(spec, study, sampled), **_sla_document(spec, ranked),
    }


def _sla_document(spec: StudySpec, ranked: list[tuple[dict, Design]]) -> dict:
    """With an `[sla]`: which of its limits bind on the top design (`sla.binding`)."""
    if spec.sla is None or not ranked:
        return {}
    item, design = ranked[0]
    limits = binding(spec, item[AREA],
                     lambda lifted: design_items(lifted, [design])[0][AREA])
    return {"sla": {"trial": item["trial"], "area": item[AREA], "binding": limits}}


def _exact_document(spec: StudySpec, study: optuna.Study, sampled: list[FrozenTrial]) -> dict:
    """The study's exact front when it holds one (`exhaustive`): its summary, and the
    hypervolume the sampled trials reach against it."""
    exact = study.user_attrs.get(EXACT_ATTR)
    if exact is None:
        return {}
    share = exact_fraction(spec, exact, sampled, hard_constraints(spec)) if sampled else None
    summary = {k: v for k, v in exact.items() if k != "values"}
    return {"exact_front": {**summary, "sampled_trials": len(sampled),
                            "hypervolume_frac": share}}


def _frontier_candidates(spec: StudySpec, item: dict, design: Design) -> list[Candidate]:
    """The candidates (deployments) that realize some part of an entry's frontier."""
    labels = {p["deployment"] for p in item["frontier"]}  # a disaggregated one ends in its ratio
    every = [c for c, _ in _deployments(spec, design)]
    named = lambda c: deployment_label(c.deployment)  # noqa: E731
    found = [c for c in every if any(label == named(c) or label.startswith(named(c) + " ")
                                     for label in labels)]
    return found or [design.best.candidate]


# ---- the document, cached beside the journal ----------------------------------------------------

CACHE_NAME = "study.pareto.json"


def _cache_key(journal: Path, spec: StudySpec) -> dict:
    """What the cached document was computed from: the journal's bytes (size and modification
    time; the journal is only ever appended to) and the study file's spec."""
    stat = journal.stat()
    return {"journal_bytes": stat.st_size, "journal_mtime_ns": stat.st_mtime_ns,
            "spec": spec.model_dump_json()}


def write_cached_document(journal: Path, spec: StudySpec, doc: dict) -> None:
    """Keep `doc` (the `pareto_document` of the journal as it is now) beside the journal. A
    cache that cannot be written is no error: readers then recompute."""
    text = json.dumps({"key": _cache_key(journal, spec), "document": doc})
    try:
        write_text_atomic(journal.with_name(CACHE_NAME), text, make_parents=False)
    except Exception:  # noqa: BLE001 - any write failure: no cache, nothing else changes
        pass


def read_cached_document(journal: Path, spec: StudySpec) -> dict | None:
    """The cached document if it was computed from this very journal and spec; else None."""
    try:
        cached = json.loads(journal.with_name(CACHE_NAME).read_text(encoding="utf-8"))
        if cached["key"] == _cache_key(journal, spec):
            return cached["document"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None
