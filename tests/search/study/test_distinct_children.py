"""`DistinctChildren`: NSGA-II children that repeat a design already in the study are drawn
again (the default sampler proposes only new designs itself: `proposals`)."""

import optuna
import pytest
from optuna.distributions import IntDistribution

from search.study import optuna_adapter
from search.study.distinct_children import DistinctChildren
from search.study.spec import load_spec
from tests.search.study.test_search import REPO

SPACE = {"a": IntDistribution(0, 9), "b": IntDistribution(0, 9)}


class Scripted:
    """A child strategy that hands out a fixed sequence of children."""

    def __init__(self, children):
        self.children, self.calls = list(children), 0

    def __call__(self, study, search_space, parent_population):
        self.calls += 1
        return self.children.pop(0)


def _study_with(*designs):
    study = optuna.create_study()
    for a, b in designs:
        study.add_trial(optuna.trial.create_trial(params={"a": a, "b": b}, distributions=SPACE,
                                                  value=0.0))
    return study


def test_a_child_that_repeats_a_trial_is_drawn_again():
    study = _study_with((1, 2))
    inner = Scripted([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    assert DistinctChildren(inner)(study, SPACE, study.trials) == {"a": 3, "b": 4}
    assert inner.calls == 2


def test_children_of_one_batch_do_not_repeat_each_other():
    study = _study_with((0, 0))
    strategy = DistinctChildren(Scripted([{"a": 5, "b": 5}, {"a": 5, "b": 5}, {"a": 6, "b": 6}]))
    parents = study.trials
    assert strategy(study, SPACE, parents) == {"a": 5, "b": 5}
    assert strategy(study, SPACE, parents) == {"a": 6, "b": 6}


def test_a_repeat_is_accepted_after_the_last_attempt_and_partial_children_pass():
    study = _study_with((1, 2))
    inner = Scripted([{"a": 1, "b": 2}] * 3)
    assert DistinctChildren(inner, attempts=3)(study, SPACE, study.trials) == {"a": 1, "b": 2}
    assert inner.calls == 3
    partial = Scripted([{"a": 1}])  # b left to independent sampling: new by chance, not checked
    assert DistinctChildren(partial)(study, SPACE, study.trials) == {"a": 1}


def test_attempts_must_be_positive():
    with pytest.raises(ValueError, match="`attempts` must be >= 1; got 0"):
        DistinctChildren(Scripted([]), attempts=0)


def test_twins_of_a_design_count_as_seen():
    """With `design_identity` as the key, a child that differs from an earlier trial only in a
    field the model does not use (the dense width of an MoE without dense layers) is redrawn."""
    from search.study.space import design_identity

    spec = load_spec(REPO / "studies" / "moe-400b-gb300-nvl72.toml")
    base = {"hidden_size": 4608, "num_layers": 32, "num_kv_heads": 8, "q_per_kv": 16,
            "intermediate_size": 18432, "num_experts": 256, "experts_per_token": 6,
            "moe_intermediate_size": 3072, "num_shared_experts": 1, "first_dense_layers": 0}
    twin = {**base, "intermediate_size": 12288}
    inner = Scripted([twin, {**base, "num_layers": 36}])
    strategy = DistinctChildren(inner, attempts=2, key=lambda p: design_identity(spec, p))
    strategy._seen.add(strategy._design(base, tuple(sorted(base))))
    strategy._generation = ()  # nothing to read from a study
    child = strategy(optuna.create_study(), dict.fromkeys(base), [])
    assert child["num_layers"] == 36 and inner.calls == 2


# ---- FlatNSGAIISampler: Optuna's NSGA-II, read incrementally -----------------------------------

TOY_SPACE = {"x": IntDistribution(0, 40), "y": IntDistribution(0, 40),
             "z": optuna.distributions.CategoricalDistribution(["a", "b", "c"])}


def _toy_run(sampler: optuna.samplers.BaseSampler, trials: int, batch: int = 12) -> list:
    """Ask-and-tell in batches (as the runner) on a two-objective toy problem with a constraint
    and failed trials; returns every trial's (params, state, values, generation)."""
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    while len(study.trials) < trials:
        asked = [study.ask(TOY_SPACE) for _ in range(batch)]
        for t in asked:
            x, y, z = t.params["x"], t.params["y"], t.params["z"]
            if (x + y) % 11 == 0:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                continue
            t.set_constraint("c", float(x - 35))
            study.tell(t, [(x - 5) ** 2 + y + "abc".index(z), (y - 30) ** 2 + x])
    key = "NSGAIISampler:generation"
    return [(t.params, t.state, t.values, t.system_attrs.get(key)) for t in study.trials]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_flat_nsga2_samples_exactly_what_optunas_does(seed):
    """Same seed, same batches: every trial's params, values and generation are those of
    Optuna's own NSGAIISampler (12 or more generations of population 8, so parents are selected from
    populations and parents many times, constraints and failed trials included)."""
    from search.study.distinct_children import FlatNSGAIISampler

    ours = _toy_run(FlatNSGAIISampler(population_size=8, seed=seed), 160)
    optunas = _toy_run(optuna.samplers.NSGAIISampler(population_size=8, seed=seed), 160)
    assert ours == optunas
    assert max(g for *_, g in ours if g is not None) >= 12


def test_flat_nsga2_index_reads_each_trial_once_finished():
    """The index holds every COMPLETE trial once, by generation, and the intersection of their
    distributions; a trial still running when read is added once it finishes."""
    from search.study.distinct_children import GenerationIndex

    study = optuna.create_study()
    index = GenerationIndex("g")
    running = study.ask(SPACE)
    done = study.ask({**SPACE, "c": IntDistribution(0, 1)})
    done.set_user_attr("u", 1)
    optuna_adapter.set_trial_system_attr(study, done, "g", 0)
    study.tell(done, 1.0)
    index.update(study)
    assert [t.number for t in index.population(0)] == [done.number]
    assert set(index.search_space) == {"a", "b", "c"}
    optuna_adapter.set_trial_system_attr(study, running, "g", 0)
    study.tell(running, 2.0)
    index.update(study).update(study)  # read twice: added once
    assert [t.number for t in index.population(0)] == [running.number, done.number]
    assert set(index.search_space) == {"a", "b"}  # "c" is not in every COMPLETE trial
    assert index.next_generation(2) == 1 and index.next_generation(3) == 0


def test_trials_of_other_workers_join_the_generation_being_filled():
    """`adopt`: trials another worker finished (numbered by its own generations) enter this
    worker's copy as members of the generation its NSGA-II fills now; other samplers' trials
    are left as they are."""
    from search.study.distinct_children import FlatNSGAIISampler, adopt

    sampler = FlatNSGAIISampler(population_size=2, seed=0)
    study = optuna.create_study(sampler=sampler)
    for _ in range(5):  # generations 0, 0, 1, 1, 2
        trial = study.ask(SPACE)
        study.tell(trial, float(trial.params["a"]))
    key = "NSGAIISampler:generation"
    assert [t.system_attrs[key] for t in study.trials] == [0, 0, 1, 1, 2]
    theirs = optuna.trial.create_trial(params={"a": 1, "b": 1}, distributions=SPACE, value=0.0,
                                       system_attrs={key: 7})
    [joined] = adopt(sampler, study, [theirs])
    assert joined.system_attrs[key] == 2 and theirs.system_attrs[key] == 7
    assert adopt(optuna.samplers.RandomSampler(), study, [theirs]) == [theirs]
