"""NSGA-II as archscout runs it: children that do not repeat a design the study already holds,
and generation bookkeeping whose cost per trial does not grow with the study.

On our discrete spaces NSGA-II's uniform crossover of two similar parents, with polynomial
mutation rounded to the grid, very often reproduces a design it has already evaluated: of 2,000
quickstart trials only ~650 feasible ones are distinct (tests/benchmarks/bench_search_quality.py).
Each repeat spends a trial on nothing new. `DistinctChildren` wraps the sampler's own child
generation and draws again (up to `attempts` times, with the sampler's random state, so a seed
still reproduces a run) while the child equals a design already asked in the study or handed out
earlier in this batch. What counts as the same design is the `key` of a parameter set: by
default the params themselves; the runner passes `search.study.space.design_identity`, under which
params that differ only in a field the model does not use (2,037 of 8,000 moe-400b trials were
such twins of an earlier design) are one design.

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
from typing import Any, Callable

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from search.study import optuna_adapter

ChildStrategy = Callable[[optuna.Study, dict[str, BaseDistribution], list[FrozenTrial]],
                         dict[str, Any]]
DesignKey = Callable[[dict[str, Any]], Any]  # params → a hashable design identity (None: none)
REDRAW_ATTEMPTS = 8  # redraws per child before a repeat is accepted (a converged population)


class DistinctChildren:
    """A `child_generation_strategy` for `NSGAIISampler` that avoids repeated designs."""

    def __init__(self, inner: ChildStrategy, attempts: int = REDRAW_ATTEMPTS,
                 key: DesignKey | None = None):
        if attempts < 1:
            raise ValueError(f"`attempts` must be >= 1; got {attempts}")
        self._inner, self._attempts, self._key = inner, attempts, key
        self._seen: set[tuple] = set()
        self._trials_read = 0
        self._generation: tuple | None = None  # parents of the generation last read for

    def __call__(self, study: optuna.Study, search_space: dict[str, BaseDistribution],
                 parent_population: list[FrozenTrial]) -> dict[str, Any]:
        names = tuple(sorted(search_space))
        generation = tuple(t.number for t in parent_population)
        if generation != self._generation:  # read the study once per generation, not per child
            self._read_new_trials(study, names)
            self._generation = generation
        child: dict[str, Any] = {}
        for _ in range(self._attempts):
            child = self._inner(study, search_space, parent_population)
            if len(child) < len(names):  # a parameter left to independent (random) sampling
                return child
            if self._design(child, names) not in self._seen:
                break
        if len(child) == len(names):
            self._seen.add(self._design(child, names))
        return child

    def _design(self, params: dict[str, Any], names: tuple[str, ...]) -> Any:
        raw = tuple(params[name] for name in names)
        if self._key is None:
            return raw
        identity = self._key({name: params[name] for name in names})
        return raw if identity is None else identity

    def _read_new_trials(self, study: optuna.Study, names: tuple[str, ...]) -> None:
        """Add the designs of trials created since the last call. A running trial whose params
        are not suggested yet (this batch's) stops the scan, so it is read once it has them."""
        trials = study.get_trials(deepcopy=False)
        for trial in trials[self._trials_read:]:
            if all(name in trial.params for name in names):
                self._seen.add(self._design(trial.params, names))
            elif not trial.state.is_finished():
                break
            self._trials_read += 1


def with_distinct_children(sampler: optuna.samplers.NSGAIISampler,
                           attempts: int = REDRAW_ATTEMPTS, key: DesignKey | None = None
                           ) -> optuna.samplers.NSGAIISampler:
    """`sampler` with its own child generation (crossover, mutation, random state) wrapped in
    `DistinctChildren`. Optuna 5 builds that strategy inside the constructor from private parts,
    so the wrapper replaces it (`search.study.optuna_adapter`); tests check it is in place."""
    optuna_adapter.replace_child_generation_strategy(
        sampler, lambda inner: DistinctChildren(inner, attempts, key))
    return sampler


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

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        space = self._index.update(study).search_space or {}
        return {name: space[name] for name in sorted(space) if not space[name].single()}

    def next_generation(self, study: optuna.Study) -> int:
        return self._index.update(study).next_generation(self.population_size)

    def get_trial_generation(self, study: optuna.Study, trial: FrozenTrial) -> int:
        generation = trial.system_attrs.get(self.generation_key)
        if generation is None:
            generation = self.next_generation(study)
            optuna_adapter.set_trial_system_attr(study, trial, self.generation_key, generation)
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
