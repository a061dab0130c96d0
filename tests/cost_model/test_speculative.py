"""Speculative decoding (MTP / EAGLE): k draft tokens verified in one step at per-token
acceptance a (cost_model/step.py: draft_pass; cost_model/serving_steps.py: serving_times)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.deployment import Deployment, Workload, expected_tokens_per_step, make_deployment
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import PRECISIONS

from tests.cost_model.test_serving_properties import DENSE, MOE, model


def test_expected_tokens_per_step_by_hand():
    """Σ a^i: k = 1, a = 0.85 → 1.85; k = 3, a = 0.5 → 1 + .5 + .25 + .125 = 1.875; a = 1 → k + 1;
    a = 0 → 1 (only the verified token)."""
    assert expected_tokens_per_step(1, 0.85) == pytest.approx(1.85)
    assert expected_tokens_per_step(3, 0.5) == pytest.approx(1.875)
    assert expected_tokens_per_step(4, 1.0) == 5.0
    assert expected_tokens_per_step(2, 0.0) == 1.0


def test_bad_spec_method_is_one_clear_error():
    with pytest.raises(ConfigError, match="`spec_method` must be one of mtp, eagle"):
        make_deployment(spec_method="medusa")


def _tpot(stem, gpu, dep, concurrency, workload=Workload()):
    p = evaluate_points([model(stem)], [dep], get_hardware(gpu), workload,
                        np.array([float(concurrency)]))
    return float(p.tpot_s[0, 0])


def test_deepseek_v3_mtp_speed_up_matches_the_report():
    """DeepSeek-V3 technical report (arXiv 2412.19437) §5.4.3: one MTP token accepted 85-90% of
    the time gives "1.8 times TPS". 8× H200, FP8 (block-scaled), EP 8, concurrency 1, chat
    1k/1k: the model's speed-up at a = 0.85 is 1.68 (tolerance ±15% of 1.8)."""
    dep = Deployment(tp=8, ep=8, precision="fp8_block")
    plain = _tpot("DeepSeek-V3", "h200", dep, 1)
    mtp = _tpot("DeepSeek-V3", "h200", dep.model_copy(update={"spec_tokens": 1,
                                                              "spec_acceptance_frac": 0.85}), 1)
    assert plain / mtp == pytest.approx(1.8, rel=0.15)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(catalog_names()), st.sampled_from(DENSE + MOE),
       st.sampled_from([1, 8, 64, 512]), st.integers(1, 4))
def test_speculation_that_is_never_accepted_never_helps(gpu, stem, concurrency, spec_tokens):
    """At acceptance 0 every step still yields one token but pays the drafts and the wider
    verification: never faster than no speculation."""
    precision = "fp8" if get_hardware(gpu).supports(PRECISIONS["fp8"]) else "bf16"
    dep = Deployment(tp=8 if stem == "DeepSeek-V3" else 1, ep=8 if stem == "DeepSeek-V3" else 1,
                     precision=precision)
    rejected = dep.model_copy(update={"spec_tokens": spec_tokens, "spec_acceptance_frac": 0.0})
    assert _tpot(stem, gpu, rejected, concurrency) >= _tpot(stem, gpu, dep, concurrency)


def test_more_acceptance_is_faster():
    dep = Deployment(tp=1, precision="fp8", spec_tokens=3)
    tpots = [_tpot("Llama-3.1-8B", "h200", dep.model_copy(update={"spec_acceptance_frac": a}), 8)
             for a in (0.2, 0.5, 0.8, 1.0)]
    assert tpots == sorted(tpots, reverse=True)
