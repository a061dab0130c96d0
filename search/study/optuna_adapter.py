"""Every use of Optuna's private internals, in one place, for the Optuna versions pyproject.toml
pins (`optuna>=5.0,<5.1`); tests/search/study/test_optuna_adapter.py checks each against the
installed version. Nothing else in archscout names a private Optuna module or attribute.

All three serve `search.study.distinct_children`'s NSGA-II, which pays (issue 17: Optuna's own
bookkeeping scans the whole study for every trial, 100 -> 20 trials/s at 20,000 trials):
- a genetic sampler's generation key (`BaseGASampler._get_generation_key`), so archscout's
  sampler reads and writes the same key as Optuna's NSGA-II and studies resume with either;
- writing a trial's generation as a system attribute (what `BaseGASampler.get_trial_generation`
  does through the study's storage: Optuna 5 has no public setter of system attributes);
- NSGA-II's child generation, built by Optuna inside its constructor from private parts, read
  and replaced by a wrapper (`DistinctChildren`).
"""

from __future__ import annotations

from typing import Any, Callable

import optuna
from optuna.trial import FrozenTrial

ChildStrategy = Callable[..., dict[str, Any]]
PINNED = ((5, 0), (5, 1))  # [first, past the last) supported major.minor: pyproject's pin


def supported(version: str = optuna.__version__) -> bool:
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    return PINNED[0] <= major_minor < PINNED[1]


def generation_key(sampler_class: type[optuna.samplers.BaseGASampler]) -> str:
    """The system attribute a genetic sampler stores each trial's generation under."""
    return sampler_class._get_generation_key()  # noqa: SLF001


def set_trial_system_attr(study: optuna.Study, trial: FrozenTrial, key: str, value: Any) -> None:
    """`trial`'s system attribute `key` set in `study`'s storage (as Optuna's samplers do)."""
    study._storage.set_trial_system_attr(trial._trial_id, key, value)  # noqa: SLF001


def child_generation_strategy(sampler: optuna.samplers.NSGAIISampler) -> ChildStrategy:
    return sampler._child_generation_strategy  # noqa: SLF001


def replace_child_generation_strategy(sampler: optuna.samplers.NSGAIISampler,
                                      wrap: Callable[[ChildStrategy], ChildStrategy]) -> None:
    """Replace NSGA-II's child generation (crossover, mutation and its random state) by
    `wrap(itself)`."""
    sampler._child_generation_strategy = wrap(child_generation_strategy(sampler))  # noqa: SLF001


def share_keys(subclass: type[optuna.samplers.BaseGASampler],
               base: type[optuna.samplers.BaseGASampler]) -> None:
    """Optuna names a genetic sampler subclass's keys after the class (`__init_subclass__`):
    give `subclass` the keys of `base`, so studies written by either resume with the other."""
    subclass._GENERATION_KEY = base._GENERATION_KEY  # noqa: SLF001
    subclass._PARENT_CACHE_KEY_PREFIX = base._PARENT_CACHE_KEY_PREFIX  # noqa: SLF001
