"""Benchmark TTFT: t_request + T_steady + q·(C_g − 1)·S_prompt + w·W_round + W_poll
(cost_model/benchmark_ttft.py), with the terms of the workload's engine."""

import tomllib
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.benchmark_ttft import (
    BenchmarkTerms, adp_round_wait_s, benchmark_ttft_s, prompt_queue_s, recv_poll_wait_s,
    shipped_terms, slot_wait_s,
)
from cost_model.deployment import ENGINES, Deployment, Workload, make_workload
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware


def test_formula_by_hand():
    """t_request 50 ms, q = 0.5, T_steady 40 ms, S_prompt 10 ms: at C_g = 1 → 50 + 40 = 90 ms; at
    C_g = 9 → 90 + 0.5·8·10 = 130 ms; with w = 0.5 and W_round = 100 ms, 50 ms more."""
    terms = BenchmarkTerms(request_overhead_s=0.05, queue_share_frac=0.5,
                           round_wait_share_frac=0.5)
    queue = prompt_queue_s(0.010, np.array([1.0, 9.0]))
    assert queue == pytest.approx([0.0, 0.08])
    assert benchmark_ttft_s(0.040, queue, terms) == pytest.approx([0.090, 0.130])
    assert benchmark_ttft_s(0.040, queue, terms, 0.1) == pytest.approx([0.140, 0.180])


def test_round_wait_by_hand():
    """DP 8, C = 64, lifetime 24 s, step 24 ms, timeout 60 steps: dp − 1 = 7 more arrivals at
    64/24 s⁻¹ take 7·24/64 = 2.625 s, the timeout 60·0.024 = 1.44 s comes first → 1.44 s. At
    C = 256 (7·24/256 = 0.656 s) the round fills first. One group, C ≤ dp (not every rank
    generating), or no timeout (balancer off): 0."""
    wait = adp_round_wait_s(0.024, 8, np.array([64.0, 256.0]), 24.0, 60)
    assert wait == pytest.approx([1.44, 0.65625])
    assert adp_round_wait_s(0.024, 1, 64.0, 24.0, 60) == 0.0
    assert adp_round_wait_s(0.024, 8, 8.0, 24.0, 60) == 0.0
    assert adp_round_wait_s(0.024, 8, 64.0, 24.0, 0) == 0.0


def test_poll_wait_by_hand():
    """SGLang `--scheduler-recv-interval 30`, decode step 22 ms: (30 − 1)/2 · 22 = 319 ms; N = 1
    (the default) or an idle engine (c = 1): 0."""
    assert recv_poll_wait_s(0.022, 30, 64.0) == pytest.approx(0.319)
    assert recv_poll_wait_s(0.022, 1, 64.0) == 0.0
    assert recv_poll_wait_s(0.022, 30, 1.0) == 0.0


@pytest.mark.parametrize("engine", [None, *ENGINES])
def test_shipped_terms_are_sourced_and_in_range(engine):
    terms = shipped_terms(engine)
    assert 0.0 <= terms.request_overhead_s < 1.0
    assert 0.0 <= terms.queue_share_frac <= 1.0 and 0.0 <= terms.round_wait_share_frac <= 1.0


def test_an_engine_without_terms_uses_the_generic_ones():
    """An engine gets a table of its own only from enough rows (fit_benchmark_ttft.py); one the
    file does not name gets the generic table."""
    doc = tomllib.loads(resources.files("cost_model.data.serving").joinpath("benchmark.toml")
                        .read_text())
    for engine in ENGINES:
        if engine not in doc:
            assert shipped_terms(engine) == shipped_terms(None)
    assert shipped_terms("no-such-engine") == shipped_terms(None)


def test_workload_refuses_an_unknown_engine():
    with pytest.raises(ConfigError, match="`engine`"):
        make_workload(engine="tgi")


def test_benchmark_ttft_adds_to_the_engine_ttft(load_model):
    """At c = 1 the client adds t_request only; with more requests per group it also waits for
    their prompts, and DP groups split that queue (⌈c/dp⌉ requests per group)."""
    llama = load_model("Llama-3.1-8B")
    hw, workload = get_hardware("h200"), Workload(isl_tokens=2048, osl_tokens=256)
    c = np.array([1.0, 16.0])
    one = evaluate_points([llama], [Deployment(tp=1)], hw, workload, c)
    terms = shipped_terms()
    assert one.benchmark_ttft_s[0, 0] == pytest.approx(
        one.ttft_s[0, 0] + terms.request_overhead_s, rel=1e-6)
    assert one.prompt_queue_s[0, 0] == 0.0 and one.prompt_queue_s[0, 1] > 0.0
    four = evaluate_points([llama], [Deployment(tp=1, dp=4)], hw, workload, c)
    assert four.prompt_queue_s[0, 1] < one.prompt_queue_s[0, 1]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([None, *ENGINES]), st.integers(1, 64), st.sampled_from([1, 2, 4]),
       st.integers(0, 100), st.integers(1, 40))
def test_benchmark_ttft_never_below_the_steady_state(load_model, engine, c, dp, timeout, poll):
    """Every client term is a wait, never a saving: benchmark TTFT ≥ steady-state TTFT, for any
    engine, polling interval and balancer timeout; polling only adds time (the steps are the
    same). The balancer also changes the steps (the groups prefill together,
    `step_load.PromptSchedule`), so it is checked against its own steady state."""
    llama = load_model("Llama-3.1-8B")
    hw = get_hardware("h200")
    base = dict(isl_tokens=1024, osl_tokens=256, engine=engine)
    at = lambda **extra: evaluate_points(  # noqa: E731
        [llama], [Deployment(tp=1, dp=dp)], hw, Workload(**base, **extra), np.array([float(c)]))
    plain, slow = at(), at(scheduler_recv_interval_steps=poll)
    balanced = at(adp_balance_timeout_steps=timeout, scheduler_recv_interval_steps=poll)
    assert plain.benchmark_ttft_s[0, 0] >= plain.ttft_s[0, 0]
    assert slow.benchmark_ttft_s[0, 0] >= plain.benchmark_ttft_s[0, 0] - 1e-12
    assert slow.ttft_s[0, 0] == plain.ttft_s[0, 0]
    assert balanced.benchmark_ttft_s[0, 0] >= balanced.ttft_s[0, 0]
    assert balanced.round_wait_s[0, 0] >= 0.0


def test_mean_and_median_terms_by_hand():
    """Median: t_request 50 ms, share q̃ 0.02; mean: 80 ms and q̄ 0.4. T_steady 100 ms,
    (C_g − 1)·S_prompt 1 s: median 50 + 100 + 0.02·1000 = 170 ms, mean 80 + 100 + 400 = 580 ms.
    Without mean terms the mean is the median; a mean share below the median's is raised to it
    (the waves' waits pull the mean up, never down)."""
    terms = BenchmarkTerms(request_overhead_s=0.05, queue_share_frac=0.02,
                           mean_request_overhead_s=0.08, mean_queue_share_frac=0.4)
    assert benchmark_ttft_s(0.1, 1.0, terms, statistic="median") == pytest.approx(0.17)
    assert benchmark_ttft_s(0.1, 1.0, terms, statistic="mean") == pytest.approx(0.58)
    plain = BenchmarkTerms(request_overhead_s=0.05, queue_share_frac=0.02)
    assert benchmark_ttft_s(0.1, 1.0, plain, statistic="mean") == pytest.approx(0.17)
    low = BenchmarkTerms(request_overhead_s=0.05, queue_share_frac=0.02, mean_queue_share_frac=0.0)
    assert benchmark_ttft_s(0.1, 1.0, low, statistic="mean") == pytest.approx(0.17)


def test_slot_wait_by_hand():
    """C = 300 requests against an engine that holds L = 200 and completes 50 requests/s: the
    100 beyond wait 100/50 = 2 s; at C ≤ L none."""
    assert slot_wait_s(np.array([300.0, 200.0, 150.0]), np.array([200.0, 200.0, 150.0]),
                       50.0) == pytest.approx([2.0, 0.0, 0.0])


def test_requests_past_the_engines_cap_queue_for_a_slot(load_model):
    """Llama-3.1-8B on one H200 with a batch cap of 32 sequences: at c = 64 the engine keeps 32
    in flight (TPOT and tokens/s/GPU those of c = 32) and the other 32 wait (64 − 32)/R, R the
    requests per second 32 in flight complete (c/lifetime), in the mean and the median alike
    (the prompts a request then finds in flight are those of 32, as at c = 32)."""
    llama = load_model("Llama-3.1-8B")
    hw, work = get_hardware("h200"), Workload(isl_tokens=1024, osl_tokens=256,
                                              max_batch_sequences=32)
    p = evaluate_points([llama], [Deployment()], hw, work, np.array([32.0, 64.0]))
    assert p.tpot_s[0, 1] == p.tpot_s[0, 0]
    assert p.tokens_per_s_per_gpu[0, 1] == p.tokens_per_s_per_gpu[0, 0]
    lifetime = max(p.ttft_s[0, 0] + 255 * p.tpot_s[0, 0], 256 * p.tpot_s[0, 0])
    wait = 32 / (32 / lifetime)
    assert p.slot_wait_s[0, 1] == pytest.approx(wait, rel=1e-9)
    for field in ("benchmark_ttft_s", "benchmark_ttft_median_s"):
        got = getattr(p, field)[0]
        assert got[1] - got[0] == pytest.approx(wait, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([None, *ENGINES]), st.integers(1, 512), st.sampled_from([1, 2, 4]))
def test_the_mean_request_never_waits_less_than_the_median(load_model, engine, c, dp):
    """The wave's requests wait, the others do not: mean ≥ median, for every engine's terms."""
    llama = load_model("Llama-3.1-8B")
    p = evaluate_points([llama], [Deployment(dp=dp)], get_hardware("h200"),
                        Workload(isl_tokens=4096, osl_tokens=256, engine=engine),
                        np.array([float(c)]))
    assert p.benchmark_ttft_s[0, 0] >= p.benchmark_ttft_median_s[0, 0] - 1e-12
