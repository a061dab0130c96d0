"""`check_candidate`: every name, in a stable order, on every real model of the development set."""

from functools import cache

import pytest

from constraints import CONSTRAINT_NAMES, ConstraintRules, Violation, check_candidate
from constraints.violation import NOT_CONSTRAINED
from cost_model import Architecture, Deployment, load_architecture

from tests.data_paths import MODEL_CONFIGS

CONFIG_STEMS = sorted(path.stem for path in MODEL_CONFIGS.glob("*.json"))
SOME_SEQUENCES = 16.0
UNSET_BY_DEFAULT = ("params_budget", "gpus", "aspect_ratio")


@cache
def _model(stem: str) -> Architecture:
    return load_architecture(MODEL_CONFIGS / f"{stem}.json")


def test_names_are_stable_and_distinct():
    assert len(set(CONSTRAINT_NAMES)) == len(CONSTRAINT_NAMES) == 8


@pytest.mark.parametrize("stem", CONFIG_STEMS)
def test_every_model_gets_every_name(stem):
    arch = _model(stem)
    dep = Deployment(tp=8, ep=8 if arch.ffn.is_moe else 1)
    found = check_candidate(arch, dep, ConstraintRules(), SOME_SEQUENCES)
    assert tuple(found) == CONSTRAINT_NAMES
    for name, violation in found.items():
        assert isinstance(violation, Violation) and violation.name == name
        assert isinstance(violation.value, float) and "\n" not in violation.message
        assert violation.message.startswith("ok:") is (violation.value <= 0), violation.message
    for name in UNSET_BY_DEFAULT:
        assert (found[name].value, found[name].message) == (0.0, NOT_CONSTRAINED)


def test_llama_3_1_8b_at_tp8_is_feasible():
    rules = ConstraintRules(alignment=128, total_params=8e9, max_gpus=8, aspect_ratio_min=64,
                            aspect_ratio_max=256)
    found = check_candidate(_model("Llama-3.1-8B"), Deployment(tp=8), rules, SOME_SEQUENCES)
    assert all(v.value <= 0 for v in found.values()), [v.message for v in found.values()]


def test_mixtral_at_tp8_with_alignment_512_is_infeasible():
    rules = ConstraintRules(alignment=512)
    found = check_candidate(_model("Mixtral-8x7B-v0.1"), Deployment(tp=8), rules, SOME_SEQUENCES)
    infeasible = [name for name, v in found.items() if v.value > 0]
    assert infeasible == ["alignment"]


def test_nothing_fits_is_reported_as_memory_fit():
    found = check_candidate(_model("Llama-3.1-8B"), Deployment(tp=8), ConstraintRules(), 0.0)
    assert found["memory_fit"].value == 1.0
