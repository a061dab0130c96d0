"""`sampler = "exhaustive"` / `search --exhaustive`: the exact Pareto set of an enumerable space,
in the study record as trials the other commands read; refused above its stated size."""

import json
import tomllib
from pathlib import Path

import moocore
import numpy as np
import optuna
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.cli.main import main
from search.study.evaluation import evaluate_batch, hard_constraints
from search.study.exhaustive import (
    EXACT_ATTR, EXHAUSTIVE_ATTR, MAX_DESIGNS, check_size, options, run_exhaustive,
)  # fmt: skip
from search.study.proposals import sampled_distributions
from search.study.runner import open_study, run_study
from search.study.space import build_candidate, complete_params
from search.study.spec import load_spec, spec_from_dict
from search.study.storage import StorageHandle

REPO = Path(__file__).resolve().parents[3]
TINY = """\
name = "tiny-exact"
sampler = "exhaustive"
trials = 16
batch_size = 8

[budget]
total_params = 1.2e9
tolerance_frac = 0.35
training_tokens = 1.0e12

[hardware]
gpu = "h200"
max_gpus = 2

[workload]
isl_tokens = 1024
osl_tokens = 512
interactivity_min = 20.0
interactivity_max = 2000.0

[space]
hidden_size = { choices = [1536, 2048, 2560] }
num_layers = { min = 12, max = 20, step = 4 }
head_dim = { value = 128 }
num_kv_heads = { choices = [4, 8] }
q_per_kv = { value = 4 }
intermediate_size = { choices = [4096, 6144, 8192] }
tp = { choices = [1, 2] }
precision = { choices = ["bf16", "fp8"] }
kv_precision = { value = "fp8" }

[constraints]
alignment = 128
aspect_ratio_min = 32
aspect_ratio_max = 256
"""


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def _memory_study(spec):
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=False)
    return handle, open_study(spec, handle, 0)


def _brute_force_front(spec) -> set[tuple]:
    """Every design of the space scored by the runner's own scorer, one at a time; the
    feasible ones no other dominates (ties kept)."""
    names = list(options(spec))
    combos = [dict(zip(names, c)) for c in np.array(np.meshgrid(*options(spec).values(),
                                                                 indexing="ij"),
                                                     dtype=object).reshape(len(names), -1).T]
    hard, rows = hard_constraints(spec), []
    for params in combos:
        cand = build_candidate(spec, complete_params(spec, params))
        if cand.valid:
            [outcome] = evaluate_batch(spec, [cand])
            if outcome.feasible(hard):
                rows.append((tuple(params[n] for n in names), outcome.values))
    values = np.array([v for _, v in rows])
    maximise = [d == "maximize" for d in spec.objectives.directions]
    keep = moocore.is_nondominated(values, maximise=maximise, keep_weakly=True)
    return {p for (p, _), k in zip(rows, keep) if k}


def test_the_exact_front_is_the_brute_force_front(tiny):
    spec = load_spec(tiny)
    _, study = _memory_study(spec)
    found = run_exhaustive(spec, study, show_progress=False)
    names = list(options(spec))
    stored = study.get_trials(deepcopy=False)
    assert {tuple(t.params[n] for n in names) for t in stored} == _brute_force_front(spec)
    assert found.size == len(stored) > 0 and found.designs == 3 * 3 * 2 * 3
    for trial in stored:  # the runner's record, marked
        assert trial.user_attrs[EXHAUSTIVE_ATTR] and trial.user_attrs["feasible"]
        assert trial.distributions == {n: sampled_distributions(spec)[n] for n in trial.params}
    summary = study.user_attrs[EXACT_ATTR]
    assert summary["values"] == [t.values for t in stored]
    # a second run finds the front in place and adds nothing
    assert run_exhaustive(spec, study, show_progress=False).trials == found.trials
    assert len(study.get_trials(deepcopy=False)) == len(stored)


@pytest.mark.parametrize("sampler", ["random", "nsga2"])
@settings(max_examples=2, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1))
def test_the_exact_front_weakly_dominates_every_sampled_design(tiny, sampler, seed):
    """A sampled search of the same space, after the exact front is in the study: every
    feasible sampled value is weakly dominated by a front value, the sampled trials do not
    count the front's and do not sample from it, and the report measures their hypervolume
    against it (at most 100%)."""
    from search.study.report import pareto_document

    spec = load_spec(tiny).model_copy(update={"sampler": sampler})
    handle, study = _memory_study(spec)
    run_exhaustive(spec, study, show_progress=False)
    exact = np.array(study.user_attrs[EXACT_ATTR]["values"])
    summary = run_study(spec, handle, 12, seed, show_progress=False)
    assert summary.ran == 12 and summary.finished == 12
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in spec.objectives.directions])
    for trial in study.get_trials(deepcopy=False):
        if trial.user_attrs.get(EXHAUSTIVE_ATTR) or not trial.user_attrs.get("feasible"):
            continue
        mine = np.array(trial.values) * sign
        assert np.any(np.all(exact * sign <= mine + 1e-12, axis=1)), trial.number
    doc = pareto_document(spec, study)
    share = doc["exact_front"]["hypervolume_frac"]
    assert doc["exact_front"]["sampled_trials"] == 12 and 0 < share <= 1 + 1e-12


def test_search_exhaustive_writes_the_front_that_pareto_show_and_export_read(tiny, capsys):
    assert main(["search", str(tiny), "--no-progress", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["exact_front"]["designs"] == 54 and doc["pareto"]
    first = doc["pareto"][0]["trial"]
    assert main(["pareto", str(tiny), "--top", "1", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert [i["trial"] for i in top["pareto"]] == [first] and top["pareto_size"] == \
        len(doc["pareto"])
    assert main(["show", str(tiny), str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trial"] == first
    out = tiny.parent / "cfg.json"
    assert main(["export", str(tiny), str(first), "--format", "hf", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["num_hidden_layers"] >= 12


def test_a_space_above_the_stated_size_is_refused_naming_its_dimensions():
    doc = tomllib.loads(TINY)
    doc["space"]["hidden_size"] = {"min": 128, "max": 128 * 4000, "step": 128}
    doc["space"]["intermediate_size"] = {"min": 128, "max": 128 * 2000, "step": 128}
    spec = spec_from_dict(doc)
    from search.study.errors import SpecError

    with pytest.raises(SpecError) as raised:
        check_size(spec, options(spec))
    message = str(raised.value)
    assert f"above the {MAX_DESIGNS:,}" in message
    assert "hidden_size 4000 × intermediate_size 2000 × num_layers 3" in message
