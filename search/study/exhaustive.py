"""Exact fronts of enumerable spaces: `sampler = "exhaustive"`, or `archscout search --exhaustive`.

Every parameter set of the space Optuna would sample is enumerated on columns and checked
against the shape rules (`param_table.within_rules`, ~1 µs each); the designs inside them are
built, their twins merged (`design_identity`), those with no deployment passing the static hard
constraints dropped (they cannot be feasible), and the rest scored in batches through the
vectorized sweep (`evaluation.swept_values`; with sampled deployments each design × deployment).
The feasible designs that no other dominates in the study's objectives are the exact Pareto set:
they are scored once more by the product's own scorer (`evaluate_batch`, so their records are
the runner's) and added to the study as trials (`Study.add_trials` of `create_trial`s with the
runner's attributes, `exhaustive` set), so that `pareto`, `show`, `export`, `plot` and the
dashboard read them as any trial. The study also records the front's summary (`EXACT_ATTR`):
sizes, wall time, the front's values and the bounds of every feasible design's values, against
which the report measures a sampled run's hypervolume (`convergence.exact_fraction`).

A space above `MAX_DESIGNS` parameter sets, or whose designs inside the rules times its
deployment combinations exceed `MAX_POINTS`, is refused, naming its size and the dimensions to
narrow (largest first).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import moocore
import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution
from tqdm import tqdm

from search.study import optuna_adapter
from search.study.errors import SpecError
from search.study.evaluation import evaluate_batch, hard_constraints, stored_attrs
from search.study.param_table import NAMED, complete_columns, within_rules
from search.study.proposals import Rules, sampled_distributions
from search.study.space import Candidate, deployment_combinations, sweeps_deployments
from search.study.spec import StudySpec
from search.study.values import sampled_values, swept_values

# Parameter sets enumerated on columns (~2 s per million here): 20M is ~40 s.
MAX_DESIGNS = 20_000_000
# Designs inside the rules × deployment combinations, the cost model's work (~1-5 ms per design
# of a few deployments on this 2-core machine): 2M is the quickstart's 22,121 × 8 eleven times over.
MAX_POINTS = 2_000_000
CHUNK = 65_536  # parameter sets per column pass
SCORE_BATCH = 256  # designs per cost-model pass
EXACT_ATTR = "exact_front"  # study user attribute: the summary of the exact front
EXHAUSTIVE_ATTR = "exhaustive"  # trial user attribute: a member of the exact front


def options(spec: StudySpec) -> dict[str, list]:
    """Every option of each dimension Optuna would sample."""
    return {name: list(d.choices) if isinstance(d, CategoricalDistribution)
            else list(range(d.low, d.high + 1, d.step))
            for name, d in sampled_distributions(spec).items()}


def _sizes(opts: dict[str, list]) -> str:
    """'intermediate_size 81 × hidden_size 33 × …' (largest first)."""
    ranked = sorted(opts.items(), key=lambda kv: -len(kv[1]))
    return " × ".join(f"{name} {len(values)}" for name, values in ranked)


def check_size(spec: StudySpec, opts: dict[str, list]) -> int:
    """The number of parameter sets; refuses a space above `MAX_DESIGNS`."""
    designs = math.prod(len(v) for v in opts.values())
    if designs > MAX_DESIGNS:
        raise SpecError(f"`sampler` \"exhaustive\": the space holds {designs:,} parameter sets "
                        f"({_sizes(opts)}), above the {MAX_DESIGNS:,} an exhaustive search "
                        "enumerates; narrow the largest dimensions or use a sampler")
    return designs


def _deployments_per_design(spec: StudySpec) -> int:
    return deployment_combinations(spec.space) if sweeps_deployments(spec) else 1


def enumerate_within_rules(spec: StudySpec, opts: dict[str, list], bar: tqdm
                           ) -> list[dict]:
    """Every parameter set inside the shape rules, in enumeration order."""
    names, sizes = list(opts), [len(v) for v in opts.values()]
    arrays = {n: np.asarray(v, dtype=object if n in NAMED else np.int64) for n, v in opts.items()}
    total, kept = math.prod(sizes), []
    for start in range(0, total, CHUNK):
        index = np.unravel_index(np.arange(start, min(start + CHUNK, total)), sizes)
        columns = {n: arrays[n][i] for n, i in zip(names, index)}
        ok = np.flatnonzero(within_rules(spec, complete_columns(spec, columns, len(index[0]))))
        kept += [{n: columns[n][i].item() if hasattr(columns[n][i], "item") else columns[n][i]
                  for n in names} for i in ok]
        bar.update(len(index[0]))
    return kept


def distinct_designs(spec: StudySpec, kept: list[dict], bar: tqdm) -> list[Candidate]:
    """The models among `kept`, one per design (twins merged), that some deployment could make
    feasible (`Rules.static_ok`)."""
    rules, seen, out = Rules(spec, memo=1), set(), []  # each parameter set is checked once
    for params in kept:
        why, identity = rules.check(params, shape_checked=True)
        bar.update(1)
        if why is None and identity not in seen and rules.static_ok(params):
            seen.add(identity)
            out.append(rules.candidate(params))
    return out


def score(spec: StudySpec, cands: list[Candidate], bar: tqdm) -> tuple[np.ndarray, np.ndarray]:
    """(objective values, feasible) of every design, `SCORE_BATCH` at a time."""
    scorer = swept_values if sweeps_deployments(spec) else sampled_values
    parts = []
    for start in range(0, len(cands), SCORE_BATCH):
        parts.append(scorer(spec, cands[start:start + SCORE_BATCH]))
        bar.update(min(SCORE_BATCH, len(cands) - start))
    if not parts:
        return np.zeros((0, len(spec.objectives.names))), np.zeros(0, dtype=bool)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def front(spec: StudySpec, values: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Indices of the feasible designs no feasible design dominates (ties all kept)."""
    rows = np.flatnonzero(feasible)
    if not len(rows):
        return rows
    maximise = [d == "maximize" for d in spec.objectives.directions]
    return rows[moocore.is_nondominated(values[rows], maximise=maximise, keep_weakly=True)]


@dataclass
class ExactFront:
    designs: int  # parameter sets enumerated
    within_rules: int  # of which inside the shape rules (`param_table.rule_masks`)
    scored: int  # distinct designs some deployment could make feasible, scored
    feasible: int
    trials: list[int]  # the front's trial numbers
    wall_s: float

    @property
    def size(self) -> int:
        return len(self.trials)


def _trial(spec: StudySpec, cand: Candidate, outcome, space: dict) -> optuna.trial.FrozenTrial:
    hard = hard_constraints(spec)
    return optuna.trial.create_trial(
        params={n: cand.params[n] for n in space}, distributions=space, values=outcome.values,
        user_attrs={**stored_attrs(outcome), EXHAUSTIVE_ATTR: True},
        constraints={n: float(v.value) for n, v in outcome.constraints.items()
                     if n in hard and v.value > 0} or None)


def _summary(spec, found: ExactFront, values, feasible, on_front) -> dict:
    good = values[feasible]
    return {"designs": found.designs, "within_rules": found.within_rules,
            "scored": found.scored, "feasible": found.feasible, "trials": found.trials,
            "wall_s": found.wall_s, "objectives": list(spec.objectives.names),
            "values": values[on_front].tolist(),
            "feasible_min": good.min(axis=0).tolist() if len(good) else None,
            "feasible_max": good.max(axis=0).tolist() if len(good) else None}


def run_exhaustive(spec: StudySpec, study: optuna.Study, show_progress: bool = True,
                   write_batch: Callable[[], AbstractContextManager] = nullcontext
                   ) -> ExactFront:
    """Enumerate `spec`'s space, add its exact Pareto set to `study` and record the summary,
    in one write (`write_batch`: the storage's, `StorageHandle.write_batch`); a study holding
    its exact front already is left as it is."""
    if EXACT_ATTR in study.user_attrs:
        known = study.user_attrs[EXACT_ATTR]
        return ExactFront(known["designs"], known["within_rules"], known["scored"],
                          known["feasible"], known["trials"], known["wall_s"])
    start = time.perf_counter()
    opts = options(spec)
    designs = check_size(spec, opts)
    bar = lambda total, what: tqdm(total=total, unit=what, file=sys.stderr,  # noqa: E731
                                   disable=not show_progress, dynamic_ncols=True)
    with bar(designs, " params") as b:
        b.set_description("enumerating")
        kept = enumerate_within_rules(spec, opts, b)
    points = len(kept) * _deployments_per_design(spec)
    if points > MAX_POINTS:
        raise SpecError(f"`sampler` \"exhaustive\": {len(kept):,} designs of the space are inside "
                        f"the budget, × {_deployments_per_design(spec)} deployments = {points:,} "
                        f"to score, above {MAX_POINTS:,}; narrow the largest dimensions "
                        f"({_sizes(opts)}) or use a sampler")
    with bar(len(kept), " designs") as b:
        b.set_description("building")
        cands = distinct_designs(spec, kept, b)
    with bar(len(cands), " designs") as b:
        b.set_description("scoring")
        values, feasible = score(spec, cands, b)
    on_front = front(spec, values, feasible)
    outcomes = evaluate_batch(spec, [cands[i] for i in on_front])
    space = sampled_distributions(spec)
    trials = [_trial(spec, cands[i], o, space) for i, o in zip(on_front, outcomes)]
    with write_batch():  # the front and its summary: one write, both or neither
        first = len(study.get_trials(deepcopy=False))
        optuna_adapter.add_trials(study, trials)
        found = ExactFront(designs, len(kept), len(cands), int(feasible.sum()),
                           list(range(first, first + len(trials))), time.perf_counter() - start)
        study.set_user_attr(EXACT_ATTR, _summary(spec, found, values, feasible, on_front))
    return found

