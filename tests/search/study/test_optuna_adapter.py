"""Each private Optuna access of `search.study.optuna_adapter`, checked against the installed
Optuna, which must lie in the range pyproject.toml pins (a new minor version is admitted by
widening the pin once these pass on it); and no other module of archscout touches Optuna's
internals."""

import ast
import re
from pathlib import Path

import optuna
import pytest
from optuna.distributions import IntDistribution

from search.study import optuna_adapter
from search.study.distinct_children import FlatNSGAIISampler

REPO = Path(__file__).resolve().parents[3]
SPACE = {"x": IntDistribution(0, 9), "y": IntDistribution(0, 9)}


def test_the_installed_optuna_is_in_the_pinned_range():
    pin = re.search(r'"optuna>=([\d.]+),<([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert pin, "pyproject.toml must pin optuna to a range: optuna>=5.0,<5.1"
    low, high = (tuple(int(p) for p in v.split(".")) for v in pin.groups())
    assert (low, high) == optuna_adapter.PINNED
    assert optuna_adapter.supported(), optuna.__version__
    assert not optuna_adapter.supported("5.1.0") and not optuna_adapter.supported("4.9.0")


def test_the_generation_key_is_the_one_optunas_nsga2_writes():
    study = optuna.create_study(sampler=optuna.samplers.NSGAIISampler(population_size=2, seed=0))
    trial = study.ask(SPACE)
    study.tell(trial, 1.0)
    key = optuna_adapter.generation_key(optuna.samplers.NSGAIISampler)
    assert study.trials[0].system_attrs == {key: 0}
    assert optuna_adapter.generation_key(FlatNSGAIISampler) == key  # `share_keys`


def test_a_system_attribute_set_is_stored_on_the_trial():
    study = optuna.create_study()
    trial = study.ask(SPACE)
    optuna_adapter.set_trial_system_attr(study, trial, "k", 3)
    study.tell(trial, 1.0)
    assert study.trials[0].system_attrs == {"k": 3}


@pytest.mark.parametrize("path", sorted((REPO / "search").rglob("*.py")), ids=lambda p: str(
    p.relative_to(REPO)))
def test_no_other_module_touches_optunas_internals(path):
    """Outside the adapter: no import of a private Optuna module or name, no `noqa: SLF001`."""
    text = path.read_text()
    if path.name == "optuna_adapter.py":
        assert len(re.findall(r"noqa: SLF001", text)) == 6  # each access below, and no more
        return
    assert "SLF001" not in text
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna"):
            assert not any(part.startswith("_") for part in node.module.split(".")), node.module
            assert not any(alias.name.startswith("_") for alias in node.names)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("optuna") and "._" in a.name for a in node.names)


def test_added_trials_are_what_optunas_add_trials_stores(tmp_path):
    """`add_trials` on an RDB storage (one transaction) stores what `Study.add_trials` stores:
    number, state, params, distributions, values, attributes, datetimes; elsewhere it is
    `Study.add_trials` itself."""
    source = optuna.create_study(directions=["maximize", "minimize"])
    for i in range(5):
        trial = source.ask(SPACE)
        trial.set_user_attr("details", {"i": i, "nested": [1.5, None]})
        trial.set_constraint("c", float(i) - 2.0)
        if i == 3:
            source.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            source.tell(trial, [float(i), float("inf") if i == 4 else -float(i)])
    trials = source.get_trials()
    stored = []
    for name, add in (("ours", optuna_adapter.add_trials),
                      ("optunas", lambda study, ts: study.add_trials(ts))):
        study = optuna.create_study(study_name=name, directions=["maximize", "minimize"],
                                    storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
        add(study, trials[:2])
        add(study, trials[2:])
        stored.append([(t.number, t.state, t.params, t.distributions, t.values, t.user_attrs,
                        t.system_attrs, t.datetime_start, t.datetime_complete)
                       for t in study.get_trials()])
    assert stored[0] == stored[1] and len(stored[0]) == 5
