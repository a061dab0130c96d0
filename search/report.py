"""The Pareto set of a study, ranked by frontier area, read from its storage.

Feasible, non-dominated trials (moocore on the objective values) are grouped by architecture;
each architecture's frontier is the envelope of the operating points of every deployment
evaluated for it, and the report says which deployment realizes each part of that envelope.
"""

from __future__ import annotations

from dataclasses import dataclass

import moocore
import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from cost_model.frontier import frontier_area, pareto_mask
from search.evaluation import hard_constraints, score_valid, trial_details, window
from search.space import DEPLOYMENT_PARAMS, Candidate, build_candidate, complete_params
from search.spec import StudySpec


@dataclass(frozen=True)
class Record:
    """One finished, valid trial as the report needs it."""

    trial: FrozenTrial
    candidate: Candidate
    feasible: bool

    @property
    def arch_key(self) -> tuple:
        params = self.candidate.params
        return tuple(sorted((k, v) for k, v in params.items() if k not in DEPLOYMENT_PARAMS))


def load_records(spec: StudySpec, study: optuna.Study) -> list[Record]:
    """Completed trials (one storage read, no deep copies) with their rebuilt candidates."""
    hard = hard_constraints(spec)
    records = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        feasible = all(t.constraints.get(n, 0.0) <= 0 for n in hard)
        records.append(Record(t, build_candidate(spec, complete_params(spec, t.params)), feasible))
    return records


def pareto_records(spec: StudySpec, records: list[Record]) -> list[Record]:
    """Feasible records not dominated in the study's objectives."""
    feasible = [r for r in records if r.feasible and r.candidate.valid]
    if not feasible:
        return []
    values = np.array([r.trial.values for r in feasible], dtype=float)
    maximise = [d == "maximize" for d in spec.objectives.directions]
    keep = moocore.is_nondominated(values, maximise=maximise, keep_weakly=True)
    return [r for r, k in zip(feasible, keep) if k]


def _envelope(spec: StudySpec, group: list[Record]) -> dict:
    """The frontier of one architecture over the deployments evaluated for it."""
    unique = {tuple(sorted(r.candidate.params.items())): r for r in group}
    group = sorted(unique.values(), key=lambda r: r.trial.number)
    scores = score_valid(spec, [r.candidate for r in group])
    p = scores.points
    y = np.where(p.fits_memory, p.tokens_per_s_per_gpu, np.nan)
    x, y = p.tokens_per_s_per_user.reshape(1, -1), y.reshape(1, -1)
    w = window(spec)
    on_front = pareto_mask(x, y)[0]
    owner = np.repeat(np.arange(len(group)), p.concurrency.shape[1])
    c = p.concurrency.reshape(-1)
    points = sorted(
        ({"tokens_per_s_per_user": float(x[0, i]), "tokens_per_s_per_gpu": float(y[0, i]),
          "concurrency": int(c[i]), "trial": group[owner[i]].trial.number,
          "deployment": group[owner[i]].trial.user_attrs.get("deployment", "")}
         for i in np.flatnonzero(on_front)), key=lambda q: q["tokens_per_s_per_user"])
    return {"frontier_area": float(frontier_area(x, y, w.x_lo, w.x_hi, w.log_x)[0]),
            "frontier": points}


def _architecture_doc(cand: Candidate) -> dict:
    fields = ("name", "hidden_size", "num_layers", "num_attention_heads", "num_kv_heads",
              "head_dim", "intermediate_size", "vocab_size", "num_experts", "experts_per_token",
              "moe_intermediate_size", "num_shared_experts", "first_dense_layers")
    return {f: getattr(cand.arch, f) for f in fields}


def _deployment_doc(cand: Candidate) -> dict:
    d = cand.deployment
    return {"tp": d.tp, "ep": d.ep, "pp": d.pp, "dp": d.dp, "precision": d.precision,
            "kv_precision": d.kv_cache_precision, "gpus": d.gpus}


def _item(spec: StudySpec, best: Record, group: list[Record]) -> dict:
    attrs = best.trial.user_attrs
    envelope = _envelope(spec, group)
    return {
        "trial": best.trial.number, "frontier_area": envelope["frontier_area"],
        "trial_frontier_area": attrs.get("frontier_area"), "loss_proxy": attrs.get("loss_proxy"),
        "params_total": attrs.get("params_total"), "params_active": attrs.get("params_active"),
        "architecture": _architecture_doc(best.candidate),
        "deployment": _deployment_doc(best.candidate),
        "deployments_evaluated": sorted({r.trial.user_attrs.get("deployment", "") for r in group}),
        "frontier": envelope["frontier"], "flags": trial_details(attrs).get("loss_flags", []),
        "values": dict(zip(spec.objectives.names, best.trial.values)),
    }


def pareto_items(spec: StudySpec, records: list[Record]) -> list[dict]:
    """Pareto-optimal architectures, ranked by the area of their envelope frontier."""
    front = pareto_records(spec, records)
    feasible = [r for r in records if r.feasible and r.candidate.valid]
    by_arch: dict[tuple, list[Record]] = {}
    for r in feasible:
        by_arch.setdefault(r.arch_key, []).append(r)
    items, seen = [], set()
    for r in sorted(front, key=lambda rec: -rec.trial.user_attrs.get("frontier_area", 0.0)):
        if r.arch_key in seen:
            continue
        seen.add(r.arch_key)
        items.append(_item(spec, r, by_arch[r.arch_key]))
    items.sort(key=lambda item: -item["frontier_area"])
    for rank, item in enumerate(items, start=1):
        item["rank"] = rank
    return items


def pareto_document(spec: StudySpec, study: optuna.Study) -> dict:
    records = load_records(spec, study)
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    return {
        "study": spec.name, "trials": len(finished),
        "feasible": sum(r.feasible for r in records), "objectives": spec.objectives.names,
        "pareto": pareto_items(spec, records),
    }
