"""A feasible-only view of a study for optuna-dashboard.

optuna-dashboard (0.21) draws the Pareto front from every COMPLETE trial's values: it does not
read Optuna 5's `trial.set_constraint`, so on a study of ours much of its front is designs that
break a hard constraint (20 of its 43 front trials on the 384-trial quick-start study, 0 of 26 on
this view: tests/benchmarks/dashboard_screenshot.py). The study itself must
keep those trials (NSGA-II ranks by their violations, and `pareto`, `show` and resume read
them), so the dashboard gets a view instead: a separate journal file holding only the feasible
COMPLETE trials, one per distinct design (`search.study.report.load_records`: every hard
constraint <= 0, the test
`pareto` applies), each with its values, params, distributions and attributes, plus
`feasible` = True and `study_trial` (its number in the study, for `archscout show`). The view
study has the study's name, directions, metric names (`study.metric_names`) and user
attributes, and `archscout_view` saying what it is a view of. A journal file because the
dashboard opens one by path (`optuna-dashboard PATH`), it is written in one append and one
fsync (`JournalFile.batch`), and any storage (journal or PostgreSQL) can be viewed this
way. The view is rebuilt from scratch on each call and replaces the old one atomically
(`search.atomic.write_atomic`): refresh it by writing it again (a dashboard serving the old
file must be restarted).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.atomic import write_atomic
from search.study.journal_file import JournalFile
from search.study.report import load_records
from search.study.spec import StudySpec
from search.study.storage import default_journal_path

VIEW_NAME = "dashboard.journal"  # beside the study's journal: out/<study>/dashboard.journal
VIEW_ATTR = "archscout_view"  # study user attribute: what the view holds, of what, when
FEASIBLE_ATTR = "feasible"  # the runner's own column attribute (search.study.evaluation)
STUDY_TRIAL_ATTR = "study_trial"  # the trial's number in the study (view numbers are 0 … n-1)
FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


@dataclass(frozen=True)
class DashboardView:
    path: Path
    study: str
    finished: int  # finished trials of the study (COMPLETE + FAIL)
    complete: int
    feasible: int  # trials in the view


def default_view_path(spec_path: Path, study_name: str) -> Path:
    return default_journal_path(spec_path, study_name).with_name(VIEW_NAME)


def feasible_trials(spec: StudySpec, study: optuna.Study) -> list[FrozenTrial]:
    """The study's feasible COMPLETE trials, one per distinct design (`Architecture.design_key`,
    as `pareto` groups them: NSGA-II repeats designs, and the dashboard drew every repeat as its
    own "best trial"), the first trial of each design with the best values, in trial order."""
    best: dict = {}
    for record in load_records(spec, study):
        if not record.feasible or record.arch_key is None:
            continue
        kept = best.get(record.arch_key)
        if kept is None or _better(spec, record.trial, kept.trial):
            best[record.arch_key] = record
    return [_view_trial(r.trial) for r in sorted(best.values(), key=lambda r: r.trial.number)]


def _better(spec: StudySpec, trial: FrozenTrial, than: FrozenTrial) -> bool:
    """`trial` dominates `than` in the study's objectives (a twin with equal values keeps the
    earlier trial)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in spec.objectives.directions]
    pairs = [(s * a, s * b) for s, a, b in zip(signs, trial.values, than.values)]
    return all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)


def _view_trial(trial: FrozenTrial) -> FrozenTrial:
    view = copy.copy(trial)  # shallow: only the user attributes are replaced
    view.user_attrs = {**trial.user_attrs, FEASIBLE_ATTR: True, STUDY_TRIAL_ATTR: trial.number}
    return view


def _fill(path: Path, spec: StudySpec, study: optuna.Study, trials: list[FrozenTrial],
          about: dict) -> None:
    backend = JournalFile(path)
    with backend.batch():  # one append, one fsync
        _fill_view(backend, spec, study, trials, about)
    backend.close()


def _fill_view(backend: JournalFile, spec: StudySpec, study: optuna.Study,
               trials: list[FrozenTrial], about: dict) -> None:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # no "A new study created" line
    try:
        view = optuna.create_study(study_name=spec.name, directions=study.directions,
                                   storage=optuna.storages.JournalStorage(backend))
    finally:
        optuna.logging.set_verbosity(verbosity)
    with warnings.catch_warnings():  # set_metric_names is experimental in Optuna 5.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        view.set_metric_names(list(spec.objectives.names))
    for key, value in {**study.user_attrs, VIEW_ATTR: about}.items():
        view.set_user_attr(key, value)
    view.add_trials(trials)


def write_view(spec: StudySpec, study: optuna.Study, path: Path, source: str,
               option: str = "-o") -> DashboardView:
    """Write the feasible-only view of `study` (run with `spec`, read from `source`) to `path`,
    replacing any earlier view there."""
    trials = feasible_trials(spec, study)
    finished = study.get_trials(deepcopy=False, states=FINISHED)
    complete = sum(t.state == TrialState.COMPLETE for t in finished)
    about = {"of": source, "holds": "feasible COMPLETE trials, one per distinct design",
             "finished": len(finished),
             "complete": complete, "feasible": len(trials),
             "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomic(path, lambda tmp: _fill(tmp, spec, study, trials, about), option,
                 make_parents=True)
    return DashboardView(Path(path), spec.name, len(finished), complete, len(trials))
