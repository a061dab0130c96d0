"""The vectorized sweep (`evaluation._swept`: constraints on columns, statically infeasible
deployments left out of the cost model, every envelope of a batch at once) records exactly what
the per-candidate sweep it replaced recorded: the same values, constraints, messages and
attributes, on every shipped study's space, for feasible and infeasible designs alike."""

import tomllib
from pathlib import Path

import numpy as np
import pytest

from constraints import engine_violations, linear_attention_violations, pattern_stage_violations
from cost_model import ConfigError, deployment_violations
import search.study.evaluation as evaluation
from search.study.evaluation import (
    DEPLOYMENT_PARAMS, UNREACHED_TTFT_MS, Outcome, _finite_or, _swept,
    constraint_rules, deployment_label, hard_constraints, score_valid, swept_envelope,
)  # fmt: skip
from search.study.space import (
    Candidate, build_candidate, build_deployment, complete_params, deployment_grid,
    gpus_allowed, searched_dimensions, swept_candidates,
)  # fmt: skip
from search.study.spec import spec_from_dict

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))


# ---- the per-candidate sweep (search/study/space.py and evaluation.py before the columns; the
# GPU budget, `max_gpus` then, is `gpus_allowed` now: `gpus` exactly and `total_gpus` too) -------

def reference_swept_candidates(spec, cand):
    seen, out = set(), []
    for combo in deployment_grid(spec.space):
        params = {**cand.params, **combo}
        try:
            dep = build_deployment(params, cand.arch.ffn.is_moe)
        except ConfigError:
            continue
        if dep in seen or not gpus_allowed(spec, dep) or deployment_violations(
                cand.arch, dep) or engine_violations(spec.engine, cand.arch, dep):
            continue
        seen.add(dep)
        if not (linear_attention_violations(cand.arch, dep)
                or pattern_stage_violations(cand.arch, dep)):
            out.append(Candidate(params, cand.arch, dep))
    return out


def _with(outcome, cand, evaluated, feasible):
    attrs = {**outcome.attrs, "deployment_params": {n: cand.params[n] for n in DEPLOYMENT_PARAMS},
             "deployments_evaluated": evaluated, "deployments_feasible": feasible}
    return Outcome(list(outcome.values), dict(outcome.constraints), attrs)


def reference_swept(spec, cands):
    groups = [reference_swept_candidates(spec, c) or [c] for c in cands]
    flat = [c for group in groups for c in group]
    scores, rules, hard = score_valid(spec, flat), constraint_rules(spec), hard_constraints(spec)
    outcomes, start = [], 0
    for group in groups:
        rows = range(start, start + len(group))
        each = [evaluation._outcome(spec, flat[k], scores, k, rules) for k in rows]
        usable = [k for k, o in zip(rows, each) if o.feasible(hard)]
        start = rows.stop
        if not usable:
            best = min(range(len(each)), key=lambda j: sum(
                max(each[j].constraints[n].value, 0.0) for n in hard))
            outcomes.append(_with(each[best], flat[rows[best]], len(each), 0))
            continue
        chosen = max(usable, key=lambda k: float(scores.frontier_area[k]))
        area, points = swept_envelope(spec, scores, usable)
        ttft = min(_finite_or(float(scores.ttft_ms[k]), UNREACHED_TTFT_MS) for k in usable)
        out = _with(each[chosen - rows.start], flat[chosen], len(each), len(usable))
        metrics = dict(zip(spec.objectives.names, out.values))
        metrics.update({n: v for n, v in (("frontier_area", area), ("ttft_ms", ttft))
                        if n in metrics})
        out.values = [metrics[n] for n in spec.objectives.names]
        p = scores.points
        out.attrs.update(
            frontier_area=area, deployment_frontier_area=float(scores.frontier_area[chosen]),
            frontier_deployments=[[deployment_label(flat[k].deployment), int(p.concurrency[k, j]),
                                   float(p.tokens_per_s_per_user[k, j]),
                                   float(p.tokens_per_s_per_gpu[k, j])] for k, j in points])
        outcomes.append(out)
    return outcomes


# ---- the comparisons ----------------------------------------------------------------------------

def _candidates(spec, count: int, seed: int) -> list[Candidate]:
    rng = np.random.default_rng(seed)
    dims = {n: d for n, d in searched_dimensions(spec.space).items() if n not in DEPLOYMENT_PARAMS}
    out = []
    while len(out) < count:
        params = {n: list(d.options)[rng.integers(len(d.options))] for n, d in dims.items()}
        cand = build_candidate(spec, complete_params(spec, params))
        if cand.valid:
            out.append(cand)
    return out


def _recorded(o: Outcome):
    return (o.values, {n: (v.value, v.message) for n, v in o.constraints.items()}, o.attrs)


def _spec(path: Path, **changes):
    doc = tomllib.loads(path.read_text())
    for key, value in changes.items():
        section, _, field = key.partition("__")
        doc.setdefault(section, {})[field] = value
    return spec_from_dict({**doc, "deployments": "sweep"}, path.name)


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_sweep_records_what_the_per_candidate_sweep_did(path):
    """Random designs of the space, in budget or not (most fail some constraint)."""
    spec = _spec(path)
    cands = _candidates(spec, 6, seed=len(path.stem))
    assert [_recorded(o) for o in _swept(spec, cands)] == \
        [_recorded(o) for o in reference_swept(spec, cands)]
    for cand in cands:
        assert [(c.params, c.deployment) for c in swept_candidates(spec, cand)] == \
            [(c.params, c.deployment) for c in reference_swept_candidates(spec, cand)]


def test_designs_whose_passing_deployments_do_not_fit_memory(monkeypatch):
    """A 10M-token context: no deployment of the quickstart's designs holds one sequence
    (`memory_fit` breaks on every deployment that passes the other constraints), so each design
    is scored again under all its deployments and reports the one closest to feasible."""
    spec = _spec(REPO / "studies" / "quickstart.toml", workload__isl_tokens=10_000_000)
    cands = _candidates(spec, 4, seed=3)
    passes = []
    score_groups = evaluation.score_groups
    monkeypatch.setattr(evaluation, "score_groups",
                        lambda *a: passes.append(len(a[1])) or score_groups(*a))
    ours, theirs = _swept(spec, cands), reference_swept(spec, cands)
    assert passes[0] == 4 and passes[1] >= 1  # some were scored again, under all deployments
    assert all(not o.attrs["deployments_feasible"] for o in ours)
    assert [_recorded(o) for o in ours] == [_recorded(o) for o in theirs]


@pytest.mark.parametrize("name", ["moe-400b-gb300-nvl72", "quickstart-sla"])
def test_a_search_records_what_the_per_candidate_sweep_gives(name):
    """The search loop as it runs (proposals checked a block at a time, candidates reused from
    the proposal sampler, outcomes memoized, trials shared with the storage, not deep-copied):
    every trial it stores holds the values and attributes the per-candidate reference sweep
    gives its params (two batches, NSGA-II's first generation and its children)."""
    import optuna

    from search.study.evaluation import stored_attrs
    from search.study.runner import run_study
    from search.study.storage import StorageHandle

    path = REPO / "studies" / f"{name}.toml"
    spec = spec_from_dict({**tomllib.loads(path.read_text()), "deployments": "sweep",
                           "batch_size": 24}, path.name)
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=False)
    run_study(spec, handle, 48, seed=1, show_progress=False)
    trials = optuna.load_study(study_name=spec.name, storage=handle.storage).get_trials()
    assert len(trials) == 48 and all(t.state.name == "COMPLETE" for t in trials)
    cands = [build_candidate(spec, complete_params(spec, t.params)) for t in trials]
    hard = hard_constraints(spec)
    for trial, expected in zip(trials, reference_swept(spec, cands)):
        expected.attrs.update(feasible=expected.feasible(hard), constraints={
            n: [float(v.value), v.message] for n, v in expected.constraints.items()})
        assert trial.values == expected.values
        assert trial.user_attrs == stored_attrs(expected)
