"""Parameter budget, memory fit, GPU count and aspect ratio."""

from functools import cache

import pytest

from constraints.budget import check_aspect_ratio, check_gpus, check_memory_fit, check_params_budget
from constraints.errors import ConstraintError
from constraints.violation import NOT_CONSTRAINED, ConstraintRules
from cost_model import Architecture, Deployment, count_params, load_architecture

from tests.data_paths import MODEL_CONFIGS

B = 1e9


@cache
def _model(stem: str) -> Architecture:
    return load_architecture(MODEL_CONFIGS / f"{stem}.json")


# ---- params_budget ------------------------------------------------------------------------------


def test_no_target_is_not_constrained():
    violation = check_params_budget(_model("Llama-3.1-8B"), ConstraintRules())
    assert (violation.value, violation.message) == (0.0, NOT_CONSTRAINED)


def test_llama_8b_meets_an_8b_budget():
    arch = _model("Llama-3.1-8B")
    violation = check_params_budget(arch, ConstraintRules(total_params=8 * B))
    expected = abs(count_params(arch).total_params / (8 * B) - 1) - 0.1
    assert violation.value == pytest.approx(expected) and violation.value < 0
    assert violation.message.startswith("ok: `total_params` 8.03B")


def test_llama_8b_misses_a_10b_budget_with_the_numbers():
    violation = check_params_budget(_model("Llama-3.1-8B"), ConstraintRules(total_params=10 * B))
    assert violation.value == pytest.approx(abs(8.03 / 10 - 1) - 0.1, abs=1e-3)  # 8.03B exact
    assert "`total_params` 8.03B is 19.7% from the target 10B (tolerance 10%)" == violation.message


def test_the_worse_of_total_and_active_counts():
    arch = _model("Mixtral-8x7B-v0.1")
    counts = count_params(arch)
    rules = ConstraintRules(total_params=counts.total_params, active_params=20 * B)
    violation = check_params_budget(arch, rules)
    assert violation.value == pytest.approx(abs(counts.active_params / (20 * B) - 1) - 0.1)
    assert "`active_params`" in violation.message and "20B" in violation.message


# ---- memory_fit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sequences, value", [(0.0, 1.0), (1.0, 0.0), (37.0, -36.0)])
def test_memory_fit_value(sequences, value):
    violation = check_memory_fit(sequences)
    assert violation.value == value
    assert f"{sequences:g} sequences fit" in violation.message
    assert violation.message.startswith("ok:") is (value <= 0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_memory_fit_rejects_bad_input_naming_the_field(bad):
    with pytest.raises(ConstraintError, match="`max_concurrency`"):
        check_memory_fit(bad)


# ---- gpus ---------------------------------------------------------------------------------------


def test_gpus():
    assert check_gpus(Deployment(tp=8, pp=2), None).message == NOT_CONSTRAINED
    over = check_gpus(Deployment(tp=8, pp=2), 8)
    assert over.value == 8.0 and "= 16 GPUs exceeds `max_gpus` (8)" in over.message
    assert check_gpus(Deployment(tp=8), 8).value == 0.0


@pytest.mark.parametrize("dep, value, shown", [
    (Deployment(tp=2, dp=4, pp=2), 16.0 - 8.0, "TP·DP·PP = 2·4·2 = 16 GPUs exceeds"),
    (Deployment(tp=1, dp=8, ep=8), 8.0 - 8.0, "ok: TP·DP·PP = 1·8·1 = 8 GPUs <="),
    (Deployment(tp=4, kvp=4), 16.0 - 8.0, "TP·DP·PP·KVP = 4·1·1·4 = 16 GPUs exceeds"),
], ids=["dp-and-pp", "attention-dp-at-the-limit", "helix-kvp"])
def test_gpus_count_every_parallel_dimension(dep, value, shown):
    """Every GPU of an instance counts, DP and Helix KVP too: 2·4·2 = 16 and 4·4 = 16 GPUs are
    8 over `max_gpus` = 8; 8 DP ranks are exactly at it (feasible, value 0)."""
    violation = check_gpus(dep, 8)
    assert violation.value == value and shown in violation.message


# ---- aspect_ratio -------------------------------------------------------------------------------


@pytest.mark.parametrize("low, high, value", [
    (64, 256, -0.5), (150, 300, (150 - 128) / 150), (None, 100, 0.28), (None, None, 0.0),
], ids=["inside", "below", "above-max-only", "unset"])
def test_aspect_ratio(low, high, value):
    violation = check_aspect_ratio(_model("Llama-3.1-8B"), low, high)  # 4096/32 = 128
    assert violation.value == pytest.approx(value)
    if low is None and high is None:
        assert violation.message == NOT_CONSTRAINED
    else:
        assert "`hidden_size`/`num_layers` = 4096/32 = 128.0" in violation.message
