"""NSGA-II as archscout runs it: generation bookkeeping whose cost per trial does not grow with
the study. (Repeated designs are kept out before they become trials, by the proposal sampler:
`search.study.proposals`.)

`FlatNSGAIISampler` is Optuna's NSGA-II with the same generations, parents and children, but
its study reads are incremental. Optuna 5's `BaseGASampler` scans every COMPLETE trial for each
new trial (`get_trial_generation`), filters all trials for each child (`get_parent_population`)
and its `IntersectionSearchSpace` filters all trials per trial too: at 20,000 trials that took
the quickstart from ~100 to ~20 trials/s (issue 17). Here one `GenerationIndex` reads each
trial once it is finished (a list copy of the storage's trials per call, no scan), and keeps the
COMPLETE trials by generation and the intersection of their distributions.
"""

from __future__ import annotations

import copy
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from search.study import optuna_adapter


class GenerationIndex:
    """The COMPLETE trials of a study by NSGA-II generation, and the intersection of their
    distributions, updated from the trials not seen finished yet. Trials are read by position
    in the study's list (their number): `_read` positions were seen, `_waiting` are those of
    them that were not finished then."""

    def __init__(self, generation_key: str):
        self._key = generation_key
        self.by_generation: dict[int, list[FrozenTrial]] = {}
        self.search_space: dict[str, BaseDistribution] | None = None
        self._read = 0
        self._waiting: list[int] = []

    def update(self, study: optuna.Study) -> GenerationIndex:
        trials = study.get_trials(deepcopy=False)
        waiting = []
        for position in [*self._waiting, *range(self._read, len(trials))]:
            trial = trials[position]
            if not trial.state.is_finished():
                waiting.append(position)
            elif trial.state == TrialState.COMPLETE:
                self._add(trial)
        self._waiting, self._read = waiting, len(trials)
        return self

    def _add(self, trial: FrozenTrial) -> None:
        generation = trial.system_attrs.get(self._key)
        if generation is not None:  # Optuna counts only trials with a generation
            self.by_generation.setdefault(generation, []).append(trial)
        if self.search_space is None:
            self.search_space = dict(trial.distributions)
        else:
            self.search_space = {name: d for name, d in self.search_space.items()
                                 if trial.distributions.get(name) == d}

    def next_generation(self, population_size: int) -> int:
        """Optuna's rule: the latest generation until it holds `population_size` COMPLETE
        trials, then the one after it."""
        latest = max(self.by_generation, default=0)
        full = len(self.by_generation.get(latest, ())) >= population_size
        return latest + 1 if full else latest

    def population(self, generation: int) -> list[FrozenTrial]:
        return sorted(self.by_generation.get(generation, ()), key=lambda t: t.number)


class FlatNSGAIISampler(optuna.samplers.NSGAIISampler):
    """`NSGAIISampler` reading the study through a `GenerationIndex` (see the module's
    docstring). Parent populations are kept in memory: a run samples in its own in-memory copy
    of the study (`search.study.runner`), where Optuna would cache them in study attributes."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.generation_key = optuna_adapter.generation_key(optuna.samplers.NSGAIISampler)
        self._index = GenerationIndex(self.generation_key)
        self._parents: dict[int, list[FrozenTrial]] = {}
        self._generations: dict[int, int] = {}  # trial number -> the generation set on it

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        space = self._index.update(study).search_space or {}
        return {name: space[name] for name in sorted(space) if not space[name].single()}

    def next_generation(self, study: optuna.Study) -> int:
        return self._index.update(study).next_generation(self.population_size)

    def get_trial_generation(self, study: optuna.Study, trial: FrozenTrial) -> int:
        """`trial`'s generation, set once: the frozen trial a sampler is handed is the one asked,
        without the attribute set since, so the generations set are kept here too (by trial
        number: this run's copy of the study) rather than computed and written again for each
        proposal."""
        generation = trial.system_attrs.get(self.generation_key,
                                            self._generations.get(trial.number))
        if generation is None:
            generation = self.next_generation(study)
            optuna_adapter.set_trial_system_attr(study, trial, self.generation_key, generation)
            self._generations[trial.number] = generation
        return generation

    def get_population(self, study: optuna.Study, generation: int) -> list[FrozenTrial]:
        return self._index.update(study).population(generation)

    def get_parent_population(self, study: optuna.Study, generation: int) -> list[FrozenTrial]:
        if generation == 0:
            return []
        if generation in self._parents:
            return self._parents[generation]
        self._known_parents_below(study, generation)
        parents = self.select_parent(study, generation)
        # as Optuna: the selection's own order this once, trial order from its cache after
        self._parents[generation] = sorted(parents, key=lambda t: t.number)
        return parents

    def _known_parents_below(self, study: optuna.Study, generation: int) -> None:
        """Parents of every generation below `generation` in memory, selected from the lowest
        unknown one upwards: a resumed run (whose copy of the study holds no parents) selects
        them in a loop, where Optuna's recursion would go one call deeper per generation."""
        missing = []
        below = generation - 1
        while below > 0 and below not in self._parents:
            missing.append(below)
            below -= 1
        for g in reversed(missing):
            self._parents[g] = sorted(self.select_parent(study, g), key=lambda t: t.number)


def adopt(sampler: optuna.samplers.BaseSampler, study: optuna.Study,
          trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """`trials` finished by other workers, ready to be added to this worker's own copy of the
    study: for NSGA-II, as members of the generation its sampler is filling now (their own
    generation numbers count another worker's generations, not this one's)."""
    sampler = getattr(sampler, "inner", sampler)  # a `ProposalSampler` wraps the NSGA-II
    if not isinstance(sampler, FlatNSGAIISampler) or not trials:
        return trials
    generation = sampler.next_generation(study)
    adopted = []
    for trial in trials:
        twin = copy.copy(trial)
        twin.system_attrs = {**trial.system_attrs, sampler.generation_key: generation}
        adopted.append(twin)
    return adopted


optuna_adapter.share_keys(FlatNSGAIISampler, optuna.samplers.NSGAIISampler)
