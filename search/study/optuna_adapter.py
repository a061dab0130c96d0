"""Every use of Optuna's private internals, in one place, for the Optuna versions pyproject.toml
pins (`optuna>=5.0,<5.1`); tests/search/study/test_optuna_adapter.py checks each against the
installed version. Nothing else in archscout names a private Optuna module or attribute.

`add_trials`: a batch of finished trials added to an RDB storage in one transaction of multi-row
inserts, where Optuna's `Study.add_trials` takes ~42 statements and a commit per trial (64
quickstart trials into PostgreSQL on this 2-core VM under load: 77 s through Optuna, one
transaction here; tests/benchmarks/bench_search_speed.py --postgres). Any other storage: Optuna's.

The rest serve `search.study.distinct_children`'s NSGA-II, which pays (issue 17: Optuna's own
bookkeeping scans the whole study for every trial, 100 -> 20 trials/s at 20,000 trials):
- a genetic sampler's generation key (`BaseGASampler._get_generation_key`), so archscout's
  sampler reads and writes the same key as Optuna's NSGA-II and studies resume with either;
- writing a trial's generation as a system attribute (what `BaseGASampler.get_trial_generation`
  does through the study's storage: Optuna 5 has no public setter of system attributes).
"""

from __future__ import annotations

import json
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.storages._rdb import models as rdb_models
from optuna.trial import FrozenTrial

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


def share_keys(subclass: type[optuna.samplers.BaseGASampler],
               base: type[optuna.samplers.BaseGASampler]) -> None:
    """Optuna names a genetic sampler subclass's keys after the class (`__init_subclass__`):
    give `subclass` the keys of `base`, so studies written by either resume with the other."""
    subclass._GENERATION_KEY = base._GENERATION_KEY  # noqa: SLF001
    subclass._PARENT_CACHE_KEY_PREFIX = base._PARENT_CACHE_KEY_PREFIX  # noqa: SLF001


def add_trials(study: optuna.Study, trials: list[FrozenTrial]) -> None:
    """`study.add_trials(trials)` (finished trials); on an RDB storage in one transaction under
    the study row's lock (the lock Optuna's trial creation takes, so numbers stay dense)."""
    rdb = getattr(study._storage, "_backend", study._storage)  # noqa: SLF001 - Optuna's cache
    if not isinstance(rdb, optuna.storages.RDBStorage) or not trials or any(
            t.intermediate_values or not t.state.is_finished() for t in trials):
        study.add_trials(trials)
        return
    model = rdb_models.TrialModel
    study_id = study._study_id  # noqa: SLF001
    with sqlalchemy.orm.Session(rdb.engine) as session, session.begin():
        rdb_models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
        first = session.scalar(sqlalchemy.select(sqlalchemy.func.count())
                               .where(model.study_id == study_id))
        rows = [model(study_id=study_id, number=first + i, state=t.state,
                      datetime_start=t.datetime_start, datetime_complete=t.datetime_complete)
                for i, t in enumerate(trials)]
        session.add_all(rows)
        session.flush()  # assigns the trial ids
        tables: dict[type, list[dict]] = {}
        for row, trial in zip(rows, trials):
            for table, values in _trial_rows(row.trial_id, trial):
                tables.setdefault(table, []).append(values)
        for table, values in tables.items():  # one multi-row INSERT per table
            session.execute(sqlalchemy.insert(table), values)


def _trial_rows(trial_id: int, trial: FrozenTrial) -> list[tuple[type, dict]]:
    """(table, row) of a finished trial's params, values and attributes (Optuna's tables)."""
    m = rdb_models
    rows: list[tuple[type, dict]] = [
        (m.TrialParamModel, {"trial_id": trial_id, "param_name": name,
                             "param_value": trial.distributions[name].to_internal_repr(v),
                             "distribution_json": optuna.distributions.distribution_to_json(
                                 trial.distributions[name])})
        for name, v in trial.params.items()]
    for objective, value in enumerate(trial.values or ()):
        stored, kind = m.TrialValueModel.value_to_stored_repr(value)
        rows.append((m.TrialValueModel, {"trial_id": trial_id, "objective": objective,
                                         "value": stored, "value_type": kind}))
    for table, attrs in ((m.TrialUserAttributeModel, trial.user_attrs),
                         (m.TrialSystemAttributeModel, trial.system_attrs)):
        rows += [(table, {"trial_id": trial_id, "key": k, "value_json": json.dumps(v)})
                 for k, v in attrs.items()]
    return rows
