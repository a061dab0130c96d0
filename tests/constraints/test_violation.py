"""`Violation` and `ConstraintRules`: frozen, strict, cross-field rules naming the fields."""

import dataclasses

import pytest
from pydantic import ValidationError

from constraints.violation import NOT_CONSTRAINED, ConstraintRules, Violation, unconstrained


def test_violation_is_frozen_and_knows_feasibility():
    violation = Violation("gpus", 0.0, "ok: …")
    assert violation.feasible and not Violation("gpus", 0.5, "too many").feasible
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.value = 1.0


def test_unconstrained_is_feasible_with_the_stable_message():
    assert unconstrained("aspect_ratio") == Violation("aspect_ratio", 0.0, NOT_CONSTRAINED)
    assert NOT_CONSTRAINED == "ok: not constrained"


def test_rules_defaults_leave_budgets_unset():
    rules = ConstraintRules()
    assert rules.alignment == 128 and rules.params_tolerance_frac == 0.1
    assert rules.total_params is rules.active_params is rules.max_gpus is None


@pytest.mark.parametrize("fields", [
    {"alignment": 100}, {"unknown": 1}, {"total_params": -1.0}, {"max_gpus": 0},
    {"params_tolerance_frac": -0.1},
], ids=["alignment-off-ladder", "extra-field", "negative-target", "zero-gpus", "negative-tol"])
def test_rules_reject_bad_fields(fields):
    with pytest.raises(ValidationError):
        ConstraintRules(**fields)


def test_rules_reject_an_inverted_band_naming_both_fields():
    with pytest.raises(ValidationError, match="`aspect_ratio_min` .* `aspect_ratio_max`"):
        ConstraintRules(aspect_ratio_min=200, aspect_ratio_max=100)


def test_rules_are_frozen():
    with pytest.raises(ValidationError):
        ConstraintRules().alignment = 256
