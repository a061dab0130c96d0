"""The feasible-only view for optuna-dashboard (search/records/dashboard.py), read back the way
optuna-dashboard opens a journal file (Optuna's JournalFileBackend on the path)."""

import re
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from search.cli.main import main
from search.cli.study import load_study, open_storage
from search.records.dashboard import (
    FEASIBLE_ATTR,
    STUDY_TRIAL_ATTR,
    VIEW_ATTR,
    default_view_path,
    write_view,
)  # fmt: skip
from search.study.evaluation import hard_constraints
from search.study.spec import load_spec

from tests.search.cli.test_inspect import QUICKSTART, make_study


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("dashboard"))


def stored_trials(path: Path) -> list:
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=True)
    try:
        return load_study(spec, handle).get_trials(deepcopy=False)
    finally:
        handle.close()


def write(path: Path, out: Path):
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=True)
    try:
        return write_view(spec, load_study(spec, handle), out, handle.description)
    finally:
        handle.close()


def read_view(path: Path, name: str) -> optuna.Study:
    """The view as optuna-dashboard opens `optuna-dashboard PATH` (its get_journal_file_storage:
    JournalStorage over JournalFileBackend)."""
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    return optuna.load_study(study_name=name, storage=storage)


def feasible_by_the_runner(trials: list) -> dict[int, object]:
    """COMPLETE trials the search marked feasible when it scored them (the `feasible` column
    attribute; the view decides from the stored constraints: two independent records)."""
    return {t.number: t for t in trials
            if t.state == TrialState.COMPLETE and t.user_attrs.get(FEASIBLE_ATTR)}


def one_per_design(study: Path, feasible: dict) -> dict:
    """The feasible trials the view keeps: per design (`Architecture.design_key`), the first
    trial no other trial of the design dominates (the `pareto` table's grouping)."""
    from search.study.evaluation import trial_candidate

    spec = load_spec(study)
    signs = [1 if d == "maximize" else -1 for d in spec.objectives.directions]
    best: dict = {}
    for number in sorted(feasible):
        t = feasible[number]
        key = trial_candidate(spec, t.params, t.user_attrs).arch.design_key
        kept = best.get(key)
        pairs = [] if kept is None else [(s * a, s * b) for s, a, b in
                                         zip(signs, t.values, kept.values)]
        if kept is None or (all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)):
            best[key] = t
    return {t.number: t for t in best.values()}


def test_view_holds_one_feasible_complete_trial_per_design(study, tmp_path):
    """NSGA-II repeats designs; the dashboard drew each repeat as another "best trial" (83 on a
    study whose `pareto` has 18): the view keeps one trial per design."""
    trials = stored_trials(study)
    every = feasible_by_the_runner(trials)
    feasible = one_per_design(study, every)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert 0 < len(feasible) < len(complete)  # the study has infeasible trials to keep out
    assert any(t.state == TrialState.FAIL for t in trials)  # and a FAIL trial (make_study)
    view = write(study, tmp_path / "view.journal")
    shown = read_view(view.path, load_spec(study).name).get_trials(deepcopy=False)
    hard = hard_constraints(load_spec(study))
    assert (view.feasible, view.complete, view.finished) == (len(feasible), len(complete),
                                                             len(trials))
    assert len(feasible) <= len(every)
    assert sorted(t.user_attrs[STUDY_TRIAL_ATTR] for t in shown) == sorted(feasible)
    assert [t.number for t in shown] == list(range(len(shown)))  # the view's own numbering
    for t in shown:
        original = feasible[t.user_attrs[STUDY_TRIAL_ATTR]]
        assert t.state == TrialState.COMPLETE
        assert t.values == original.values and t.params == original.params
        assert t.distributions == original.distributions
        assert t.user_attrs[FEASIBLE_ATTR] is True
        assert {k: v for k, v in t.user_attrs.items() if k != STUDY_TRIAL_ATTR} == \
            original.user_attrs
        assert all(t.constraints.get(n, 0.0) <= 0 for n in hard)


def test_view_names_the_objectives_and_says_what_it_is(study, tmp_path):
    spec = load_spec(study)
    view = read_view(write(study, tmp_path / "view.journal").path, spec.name)
    assert view.metric_names == list(spec.objectives.names)
    assert [d.name.lower() for d in view.directions] == list(spec.objectives.directions)
    about = view.user_attrs[VIEW_ATTR]
    assert about["holds"] == "feasible COMPLETE trials, one per distinct design"
    assert about["feasible"] == len(view.trials)
    assert view.user_attrs["archscout_spec"]  # the study's own attributes come along


def test_view_is_rewritten_on_refresh_with_nothing_left_behind(tmp_path):
    """A second write after more trials replaces the view (same path, the new counts); no
    temporary file stays beside it."""
    text = QUICKSTART.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^trials = \d+", "trials = 32", text)
    path = tmp_path / "grow.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["search", str(path), "--no-progress"]) == 0
    out = default_view_path(path, load_spec(path).name)
    first = write(path, out)
    assert main(["search", str(path), "--trials", "96", "--no-progress"]) == 0
    second = write(path, out)
    assert (first.finished, second.finished) == (32, 96)
    assert len(read_view(out, load_spec(path).name).trials) == second.feasible
    assert sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".")) == []
