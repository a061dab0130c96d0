"""Objective values and feasibility of many candidates, as their trials would record them,
without building the trials' outcomes: what an exhaustive enumeration scores every design of a
space with (`search.study.exhaustive`); only the front's outcomes are built, by the runner's own
scorer (`evaluation.evaluate_batch`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from constraints import DeploymentColumns, constraint_values
from search.study.evaluation import (
    UNREACHED_TTFT_MS, _finite_or, _loss, constraint_rules, hard_constraints, passes_static,
    score_groups, score_valid, swept_deployments,
)  # fmt: skip
from search.study.space import Candidate
from search.study.spec import StudySpec


def _ranked_loss(spec: StudySpec, arch) -> float:
    return _loss(arch, spec.budget.training_tokens, spec.budget.training_precision)[1]


def swept_values(spec: StudySpec, cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """(objective values, shape (n, objectives); whether each is feasible) of each candidate's
    architecture as `_swept` records them, without building outcomes (an exhaustive enumeration
    scores every design of a space and keeps the front's outcomes only). An architecture none of
    whose deployments passes the static constraints is infeasible without being scored; the
    values of an infeasible one are NaN."""
    groups = [swept_deployments(spec, c) for c in cands]
    rules, hard = constraint_rules(spec), hard_constraints(spec)
    masks = [passes_static(c.arch, cols, rules, hard, every_if_none=False)
             for c, (_, cols) in zip(cands, groups)]
    names = spec.objectives.names

    def values(flat, scores, span, usable, env):
        if not usable:
            return [np.nan] * len(names)
        chosen = usable[int(np.argmax(scores.frontier_area[usable]))]
        metrics = {"frontier_area": env.area, "gpus": float(scores.gpus[chosen]),
                   "loss": _ranked_loss(spec, flat[chosen].arch),
                   "ttft_ms": min(_finite_or(float(scores.ttft_ms[k]), UNREACHED_TTFT_MS)
                                  for k in usable)}
        return [metrics[n] for n in names]

    scored = [i for i, mask in enumerate(masks) if mask.any()]
    out = np.full((len(cands), len(names)), np.nan)
    if scored:
        out[scored] = score_groups(spec, [cands[i] for i in scored], [groups[i] for i in scored],
                                    [masks[i] for i in scored], rules, hard, values)
    return out, np.isfinite(out).all(axis=1)




def sampled_values(spec: StudySpec, cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """(objective values, feasible) of each candidate under its own deployment, as `_sampled`
    records them: constraints checked on columns per architecture; candidates that break a
    static hard constraint are infeasible without being scored; NaN values where infeasible."""
    rules, hard, names = constraint_rules(spec), hard_constraints(spec), spec.objectives.names
    by_arch: dict = defaultdict(list)
    for i, cand in enumerate(cands):
        by_arch[cand.arch].append(i)
    keep = []
    for arch, rows in by_arch.items():
        cols = DeploymentColumns.of([cands[i].deployment for i in rows])
        ok = passes_static(arch, cols, rules, hard, every_if_none=False)
        keep += [i for i, good in zip(rows, ok) if good]
    out = np.full((len(cands), len(names)), np.nan)
    if not keep:
        return out, np.zeros(len(cands), dtype=bool)
    scores = score_valid(spec, [cands[i] for i in keep])
    for j, i in enumerate(keep):
        cand = cands[i]
        values = constraint_values(cand.arch, DeploymentColumns.of([cand.deployment]), rules,
                                   scores.max_concurrency[j:j + 1])
        if all(values[n][0] <= 0 for n in hard):
            metrics = {"frontier_area": float(scores.frontier_area[j]),
                       "loss": _ranked_loss(spec, cand.arch),
                       "ttft_ms": _finite_or(float(scores.ttft_ms[j]), UNREACHED_TTFT_MS),
                       "gpus": float(scores.gpus[j])}
            out[i] = [metrics[n] for n in names]
    return out, np.isfinite(out).all(axis=1)
