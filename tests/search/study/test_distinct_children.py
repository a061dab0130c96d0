"""`FlatNSGAIISampler`: Optuna's NSGA-II with incremental study reads (the proposal sampler keeps
repeated designs out itself: `proposals`)."""

import optuna
import pytest
from optuna.distributions import IntDistribution

from search.study import optuna_adapter

# ---- FlatNSGAIISampler: Optuna's NSGA-II, read incrementally -----------------------------------

SPACE = {"a": IntDistribution(0, 9), "b": IntDistribution(0, 9)}
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
