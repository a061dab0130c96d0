"""NSGA-II children that do not repeat a design the study already holds.

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
"""

from __future__ import annotations

from typing import Any, Callable

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

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
    so the wrapper replaces the attribute; tests check it is in place."""
    sampler._child_generation_strategy = DistinctChildren(  # noqa: SLF001
        sampler._child_generation_strategy, attempts, key)  # noqa: SLF001
    return sampler
