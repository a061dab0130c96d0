"""`ProposalSampler`: only new designs inside the study's rules become trials, drawn from the
inner sampler's own distribution conditioned on the rules (rejection, no bias)."""

from collections import Counter
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from constraints import check_candidate
from search.study.evaluation import constraint_rules, hard_constraints
from search.study.proposals import (
    INNER_BLOCK, STATIC, ProposalSampler, _uniform_column, describe, sampled_distributions,
)  # fmt: skip
from search.study.runner import make_sampler, run_study
from search.study.space import build_candidate, complete_params, swept_candidates
from search.study.spec import load_spec, spec_from_dict
from search.study.storage import StorageHandle

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))


def _ask(sampler, spec, trials: int) -> list[dict]:
    """`trials` proposals asked in batches of 8 and told made-up values (so that NSGA-II breeds
    children from them)."""
    study = optuna.create_study(directions=spec.objectives.directions, sampler=sampler)
    space = sampled_distributions(spec)
    out, rng = [], np.random.default_rng(0)
    while len(out) < trials:
        batch = [study.ask(space) for _ in range(8)]
        for trial in batch:
            out.append(dict(trial.params))
            study.tell(trial, rng.random(len(spec.objectives.names)).tolist())
    return out


def _static_passes(spec, cand) -> bool:
    rules, hard = constraint_rules(spec), hard_constraints(spec)
    for c in swept_candidates(spec, cand):
        found = check_candidate(c.arch, c.deployment, rules, 1.0)  # memory_fit aside
        if all(found[n].value <= 0 for n in hard if n != "memory_fit"):
            return True
    return False


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_every_proposal_is_a_new_design_inside_the_rules(path, seed):
    """The product's sampler (NSGA-II, TPE or random, conditioned), any seed, any shipped
    study: 40 proposals, through NSGA-II's first generation and into its children."""
    spec = load_spec(path)
    sampler = make_sampler(spec, seed=seed)
    proposals = _ask(sampler, spec, 40)
    rules, designs = constraint_rules(spec), set()
    for params in proposals:
        cand = build_candidate(spec, complete_params(spec, params))
        assert cand.valid, cand.invalid_reason
        found = check_candidate(cand.arch, cand.deployment, rules, 1.0)
        assert found["params_budget"].value <= 0 and found["aspect_ratio"].value <= 0
        assert _static_passes(spec, cand)
        designs.add((cand.arch.design_key, cand.deployment))
    assert len(designs) == len(proposals)  # no repeat
    assert sampler.stats["accepted"] == len(proposals) and not sampler.exhausted


class _WholeProposals:
    """Proposes `self.proposals` in order, each a whole parameter set (`calls` counts them)."""

    proposals: list
    calls: int

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        self.calls += 1
        return dict(self.proposals.pop(0))

    def sample_independent(self, study, trial, name, distribution):
        raise AssertionError("every proposal is whole")


class Scripted(_WholeProposals, optuna.samplers.BaseSampler):
    """An inner sampler that proposes a fixed sequence of whole parameter sets."""

    def __init__(self, proposals):
        self.proposals, self.calls = list(proposals), 0


QUICK = {"hidden_size": 2048, "num_layers": 16, "head_dim": 64, "num_kv_heads": 4,
         "intermediate_size": 8192, "tp": 1, "precision": "bf16", "kv_precision": "bf16"}


def test_rejects_out_of_budget_and_repeats_and_keeps_the_inner_order():
    """The first proposal of the inner sampler inside the rules and new is the one handed out:
    24 layers is 57% over the 1.2B ± 25% budget, the second trial's first proposal repeats
    the first trial's design."""
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    space = sampled_distributions(spec)
    over = {**QUICK, "num_layers": 24}
    other = {**QUICK, "num_layers": 14}
    inner = Scripted([over, QUICK, QUICK, other])
    sampler = ProposalSampler(inner, spec, seed=0)
    study = optuna.create_study(directions=spec.objectives.directions, sampler=sampler)
    first, second = study.ask(space), study.ask(space)
    assert {k: first.params[k] for k in QUICK if k in space} == \
        {k: QUICK[k] for k in QUICK if k in space}
    assert second.params["num_layers"] == 14 and inner.calls == 4
    assert sampler.stats["rejected: params_budget"] == 1 and sampler.stats["rejected: repeat"] == 1
    assert describe(sampler.stats).startswith("proposals: 2 accepted of 4 drawn (50.0%)")


class ScriptedGenetic(_WholeProposals, optuna.samplers.BaseGASampler):
    """A genetic inner sampler proposing a fixed sequence of whole parameter sets, two trials
    per generation (trials 0 and 1: generation 0, trial 2: generation 1, …)."""

    def __init__(self, proposals):
        super().__init__(population_size=2)
        self.proposals, self.calls = list(proposals), 0

    def get_trial_generation(self, study, trial):
        return trial.number // 2

    def select_parent(self, study, generation):
        return []


def test_a_genetic_samplers_children_are_checked_a_block_at_a_time():
    """Children of one generation are drawn `INNER_BLOCK` at a time and handed out in draw
    order, the first new one inside the rules per trial: trial 0 takes the block's second
    (the first is over budget), trial 1 the fourth (the third repeats trial 0's design) from
    the same block; trial 2 starts generation 1 with a block of its own, the rest of
    generation 0's dropped. Only proposals looked at count as drawn."""
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    space = sampled_distributions(spec)
    over = {**QUICK, "num_layers": 24}
    designs = [{**QUICK, "num_layers": n} for n in (14, 12, 10)]
    block0 = [over, QUICK, QUICK, designs[0]] + [designs[1]] * (INNER_BLOCK - 4)
    block1 = [over, designs[2]] + [over] * (INNER_BLOCK - 2)
    inner = ScriptedGenetic(block0 + block1)
    sampler = ProposalSampler(inner, spec, seed=0)
    study = optuna.create_study(directions=spec.objectives.directions, sampler=sampler)
    layers = []
    for _ in range(3):
        layers.append(study.ask(space).params["num_layers"])
        assert inner.calls == INNER_BLOCK * (1 + (len(layers) == 3))
    assert layers == [16, 14, 10]
    assert sampler.stats["drawn"] == 6 and sampler.stats["accepted"] == 3
    assert sampler.stats["rejected: params_budget"] == 2 and sampler.stats["rejected: repeat"] == 1


def _tiny_spec(total_params: float = 2.0e6, tolerance_frac: float = 0.3, **space) -> object:
    return spec_from_dict({
        "name": "tiny", "trials": 1,
        "budget": {"total_params": total_params, "tolerance_frac": tolerance_frac,
                   "training_tokens": 1e9},
        "hardware": {"gpu": "h200", "max_gpus": 1},
        "workload": {"isl_tokens": 128, "osl_tokens": 128},
        "space": {"vocab_size": {"value": 1024}, "head_dim": {"value": 64},
                  "num_kv_heads": {"value": 2}, "q_per_kv": {"value": 2}, **space}})


TINY = {"hidden_size": {"min": 128, "max": 384, "step": 128},
        "num_layers": {"min": 2, "max": 12, "step": 2},
        "intermediate_size": {"choices": [512, 1024, 2048]}}


def test_uniform_proposals_are_uniform_over_the_designs_inside_the_rules():
    """The first proposal of a random search, over 300 seeds: every design inside the budget
    comes up alike (chi-square, p > 0.001), none outside it."""
    spec = _tiny_spec(**TINY)
    firsts = Counter()
    for seed in range(300):
        sampler = ProposalSampler(optuna.samplers.RandomSampler(seed=seed), spec, seed)
        firsts[tuple(_ask_one(sampler, spec).values())] += 1
    inside = _inside(spec)
    assert set(firsts) <= inside and len(inside) >= 4
    counts = [firsts[d] for d in sorted(inside)]
    assert stats.chisquare(counts).pvalue > 1e-3


def _ask_one(sampler, spec) -> dict:
    study = optuna.create_study(directions=spec.objectives.directions, sampler=sampler)
    return study.ask(sampled_distributions(spec)).params


def _inside(spec) -> set[tuple]:
    from search.study.param_table import column, within_rules
    from search.study.spec import Space

    space = sampled_distributions(spec)
    grid = [dict(zip(space, combo)) for combo in np.array(np.meshgrid(
        *[d.choices if isinstance(d, CategoricalDistribution) else
          range(d.low, d.high + 1, d.step) for d in space.values()])).reshape(len(space), -1).T]
    rows = [complete_params(spec, {k: int(v) for k, v in p.items()}) for p in grid]
    ok = within_rules(spec, {n: column([r[n] for r in rows], n) for n in Space.model_fields})
    return {tuple(int(p[k]) for k in space) for p, keep in zip(grid, ok) if keep}


def test_a_space_whose_designs_were_all_tried_is_exhausted():
    """Once every design inside the rules is a trial, the sampler says so (and hands out a
    repeat, which the runner does not score: it stops)."""
    spec = _tiny_spec(**TINY)
    inside = _inside(spec)
    sampler = ProposalSampler(optuna.samplers.RandomSampler(seed=0), spec, 0)
    study = optuna.create_study(directions=spec.objectives.directions, sampler=sampler)
    for _ in range(len(inside)):
        trial = study.ask(sampled_distributions(spec))
        study.tell(trial, [1.0, 1.0])
    assert not sampler.exhausted
    study.ask(sampled_distributions(spec))
    assert sampler.exhausted


def test_a_search_stops_when_the_space_is_exhausted(tmp_path):
    """Asked for more trials than the space holds designs inside its rules: every such design
    is scored once, the repeats handed out at the end are not (PRUNED: not stored), and the
    search stops."""
    spec = _tiny_spec(**TINY)
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=False)
    summary = run_study(spec, handle, 500, 0, show_progress=False)
    study = optuna.load_study(study_name=spec.name, storage=handle.storage)
    scored = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    designs = {tuple(sorted(t.params.items())) for t in scored}
    assert summary.exhausted and len(designs) == len(scored) == len(_inside(spec))
    assert all(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False))


@pytest.mark.parametrize("dist", [CategoricalDistribution([3, 5, 9]),
                                  CategoricalDistribution(["a", "b"]),
                                  IntDistribution(8, 32, step=8)], ids=str)
def test_uniform_columns_cover_their_grid_alike(dist):
    values = _uniform_column(np.random.default_rng(0), dist, 6000)
    grid = dist.choices if isinstance(dist, CategoricalDistribution) else \
        list(range(dist.low, dist.high + 1, dist.step))
    counts = Counter(values.tolist())
    assert set(counts) == set(grid)
    assert stats.chisquare([counts[v] for v in grid]).pvalue > 1e-3


def test_static_constraints_reject_designs_no_deployment_aligns():
    """An FFN width of 1,000 is no multiple of 128 under any deployment (alignment is hard):
    such a design is never proposed, though inside the budget (4.4M and 4.5M params against
    10M ± 100%); a hidden size of 1,000 is refused on columns already (`within_rules`)."""
    spec = _tiny_spec(total_params=10e6, tolerance_frac=1.0, num_layers={"value": 4},
                      hidden_size={"value": 256}, intermediate_size={"choices": [1000, 1024]})
    rejected = 0
    for seed in range(3):
        sampler = ProposalSampler(optuna.samplers.RandomSampler(seed=seed), spec, seed)
        assert _ask_one(sampler, spec)["intermediate_size"] == 1024
        rejected += sampler.stats[f"rejected: {STATIC}"]
    assert rejected >= 1  # half the uniform draws are the misaligned design
    hidden = _tiny_spec(total_params=10e6, tolerance_frac=1.0, num_layers={"value": 4},
                        hidden_size={"choices": [1000, 256]}, intermediate_size={"value": 1024})
    assert _inside(hidden) == {(256,)}
