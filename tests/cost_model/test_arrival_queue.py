"""TTFT under Poisson arrivals and in an offline run (cost_model/arrival_queue.py): the M/D/1
prompt queue (Pollaczek–Khinchine), its exponential-tail quantiles, the M/G/1 queue and
own-prefill spread of varying input lengths, Little's law's fixed point and the clients' TTFT,
by hand and as properties over the catalog."""

import functools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_model.arrival_queue import (
    ClientInputs, client_ttft_s, concurrency_at_rate, md1_mean_wait_s, mg1_mean_wait_s,
    mixture_quantile_s, offline_wait_s, own_prefill_s, poisson_wait_s, wait_quantile_s,
    wait_tail_frac,
)
from cost_model.benchmark_ttft import BenchmarkTerms
from cost_model.deployment import ARRIVALS, Deployment, Workload, make_workload
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.hardware import catalog_names, get_hardware
from cost_model.hf import load_architecture
from cost_model.precision import PRECISIONS
from tests.conftest import MODEL_CONFIGS

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
F32_REL = 1e-5  # step times compute in float32


def test_md1_mean_wait_by_hand():
    """λ_g = 20/s, S = 25 ms: ρ = 0.5, W̄ = ρ·S / (2(1 − ρ)) = 0.5·0.025 / 1.0 = 12.5 ms;
    λ_g = 32/s: ρ = 0.8, W̄ = 0.8·0.025 / 0.4 = 50 ms; λ_g = 40/s: ρ = 1, no steady state."""
    assert md1_mean_wait_s(np.array([20.0, 32.0, 40.0]), 0.025) == pytest.approx(
        [0.0125, 0.050, np.inf])


def test_wait_quantiles_by_hand():
    """ρ = 0.5, W̄ = 12.5 ms: P(W > 0) = 0.5, so the median waits 0; the p99 waits
    (W̄/ρ)·ln(ρ/0.01) = 0.025·ln 50 = 0.025 × 3.9120230 = 97.80 ms. ρ = 0.8, W̄ = 50 ms: the
    median (0.05/0.8)·ln(0.8/0.5) = 0.0625 × 0.4700036 = 29.375 ms."""
    assert wait_quantile_s(0.0125, 0.5, 0.5) == 0.0
    assert wait_quantile_s(0.0125, 0.5, 0.99) == pytest.approx(0.0978006, rel=1e-6)
    assert wait_quantile_s(0.050, 0.8, 0.5) == pytest.approx(0.0293752, rel=1e-6)
    assert poisson_wait_s(32.0, 0.025, "median") == pytest.approx(0.0293752, rel=1e-6)
    assert poisson_wait_s(40.0, 0.025, "p99") == np.inf


@given(st.floats(0.01, 0.99), st.floats(1.0, 1000.0), st.floats(0.01, 0.999))
def test_the_tail_is_exact_for_mm1(rho, mu, q):
    """M/M/1 (Kleinrock ch. 5): P(W > t) = ρ·e^{−(μ − λ)t}, W̄ = ρ/(μ − λ). Fed that mean, the
    quantile t_q has P(W > t_q) = 1 − q wherever ρ > 1 − q."""
    lam = rho * mu
    t = float(wait_quantile_s(rho / (mu - lam), rho, q))
    if rho > 1 - q:
        assert rho * np.exp(-(mu - lam) * t) == pytest.approx(1 - q, rel=1e-9)
    else:
        assert t == 0.0


@given(st.floats(0.1, 1000.0), st.floats(1e-4, 0.5), st.floats(0.0, 0.98), st.floats(0.0, 0.98))
def test_waits_grow_with_the_rate_and_order_by_statistic(rate, service, a, b):
    """Every statistic's wait is non-decreasing in λ; median ≤ mean at every ρ < 1, and
    mean ≤ p99 once ρ ≥ 0.02 (below ρ = 0.01 the p99 request finds the queue empty:
    ln(100ρ) ≥ ρ is what p99 ≥ W̄ takes)."""
    lo, hi = sorted((a, b))
    rates = np.array([lo, hi]) / service  # ρ = lo, hi
    for statistic in ("mean", "median", "p99"):
        waits = poisson_wait_s(rates, service, statistic)
        assert waits[1] >= waits[0]
    median, mean, p99 = (poisson_wait_s(rates, service, s) for s in ("median", "mean", "p99"))
    assert np.all(median <= mean + 1e-15)
    busy = np.array([lo, hi]) >= 0.02
    assert np.all((mean <= p99 + 1e-15) | ~busy)


def test_offline_waits_by_hand():
    """(C_g − 1)·S_prompt = 0.2 s, slot wait of the last request 0.6 s: waits uniform over
    [0, 0.8 s]: mean and median 0.4 s, p99 0.792 s."""
    assert offline_wait_s(0.2, 0.6, "mean") == pytest.approx(0.4)
    assert offline_wait_s(0.2, 0.6, "median") == pytest.approx(0.4)
    assert offline_wait_s(0.2, 0.6, "p99") == pytest.approx(0.792)


def _inputs(rate_per_s, saturated=False):
    return ClientInputs(steady_ttft_s=np.array(0.040), prompt_queue_s=np.array(0.2),
                        prompt_s=np.array(0.025), round_s=np.array(0.1), poll_s=np.array(0.003),
                        slot_s=np.array(0.6), group_rate_per_s=np.array(rate_per_s),
                        saturated=np.array(saturated))


def test_client_ttft_by_hand():
    """t_request 10 ms (mean 15 ms), q 0.3, w 0.5, T_steady 40 ms, W_round 100 ms, W_poll 3 ms,
    S_prompt 25 ms, λ_g 20/s (W̄ 12.5 ms, median 0, p99 97.80 ms):
    Poisson mean 15 + 40 + 50 + 3 + 12.5 = 120.5 ms; median 10 + 40 + 50 + 3 = 103 ms;
    p99 15 + 40 + 50 + 3 + 97.80 = 205.80 ms. Offline (no round, no poll): mean and median
    t_request + 40 + 400 ms (455, 450 ms); p99 15 + 40 + 792 = 847 ms. Closed loop: the
    closed-loop formula, mean 15 + 40 + 0.3·200 + 50 + 3 + 600 = 768 ms, no p99."""
    terms = BenchmarkTerms(0.010, 0.3, 0.5, mean_request_overhead_s=0.015)
    poisson = client_ttft_s("poisson", _inputs(20.0), terms)
    assert [float(poisson[s]) for s in ("mean", "median", "p99")] == pytest.approx(
        [0.1205, 0.103, 0.2058006], rel=1e-6)
    offline = client_ttft_s("offline", _inputs(20.0), terms)
    assert [float(offline[s]) for s in ("mean", "median", "p99")] == pytest.approx(
        [0.455, 0.450, 0.847])
    closed = client_ttft_s("closed_loop", _inputs(20.0), terms)
    assert float(closed["mean"]) == pytest.approx(0.768) and closed["p99"] is None
    assert np.isinf(client_ttft_s("poisson", _inputs(20.0, True), terms)["mean"])


def test_poisson_ttft_at_zero_rate_is_the_closed_form():
    """λ → 0: no prompt ahead (W̄ = 0, every quantile 0): the Poisson TTFT is t_request +
    T_steady + w·W_round + W_poll, the closed loop's with no queue and no slot wait."""
    terms = BenchmarkTerms(0.010, 0.3, 0.5, mean_request_overhead_s=0.015)
    idle = replace(_inputs(0.0), prompt_queue_s=np.array(0.0), slot_s=np.array(0.0))
    poisson, closed = client_ttft_s("poisson", idle, terms), client_ttft_s("closed_loop", idle,
                                                                            terms)
    assert float(poisson["mean"]) == pytest.approx(float(closed["mean"])) == 0.108
    assert float(poisson["median"]) == pytest.approx(float(closed["median"])) == 0.103
    assert float(poisson["p99"]) == pytest.approx(0.108)


def test_concurrency_at_rate_by_hand():
    """c = 1, 2, 4, 8 completing 1, 1.8, 3, 4 req/s: 2.4 req/s lies halfway between 1.8 and 3,
    so L = 2 + 0.5·(4 − 2) = 3; above 4 req/s: none; below the first point: 1 (a lone request);
    a point not allowed is not used (4 req/s at c = 8 left out: 3.5 req/s has none)."""
    c, rps = np.array([1.0, 2.0, 4.0, 8.0]), np.array([1.0, 1.8, 3.0, 4.0])
    assert concurrency_at_rate(2.4, c, rps) == pytest.approx(3.0)
    assert concurrency_at_rate(5.0, c, rps) is None
    assert concurrency_at_rate(0.5, c, rps) == 1.0
    assert concurrency_at_rate(3.5, c, rps, np.array([True, True, True, False])) is None


def test_workload_arrivals_field():
    assert Workload().arrivals == "closed_loop"
    assert {make_workload(arrivals=a).arrivals for a in ARRIVALS} == set(ARRIVALS)
    with pytest.raises(ConfigError, match="`arrivals`"):
        make_workload(arrivals="bursty")


# ---- properties of the cost model under Poisson arrivals, over the catalog ------------------


@functools.cache
def _model(stem: str):
    return load_architecture(MODEL_CONFIGS / f"{stem}.json")


def _sweep(gpu, stem, precision, tp, isl, arrivals):
    grid = np.unique(np.round(2.0 ** (np.arange(0, 13 * 4 + 1) / 4.0)))
    workload = Workload(isl_tokens=isl, osl_tokens=256, arrivals=arrivals)
    return evaluate_points([_model(stem)], [Deployment(tp=tp, precision=precision)],
                           get_hardware(gpu), workload, grid)


@st.composite
def _case(draw):
    gpu = draw(st.sampled_from(catalog_names()))
    formats = [f for f in ("bf16", "fp8", "nvfp4") if get_hardware(gpu).supports(PRECISIONS[f])]
    return (gpu, draw(st.sampled_from(("Llama-3.1-8B", "Qwen3-30B-A3B"))),
            draw(st.sampled_from(formats)), draw(st.sampled_from((1, 2, 4))),
            draw(st.sampled_from((128, 1000, 8000))))


@PROPERTY
@given(_case())
def test_poisson_ttft_is_monotone_in_the_rate_and_closed_form_at_zero(case):
    """Over every GPU: along the sweep (each point the steady state of the rate it completes)
    the Poisson mean, median and p99 TTFT never decrease with the rate while the engine admits
    every request and its prompt queue is stable (ρ < 1; up to the sweep's highest rate: where
    throughput falls again the rate does not grow with c), p99 and mean ≥ median; at c = 1 the
    median request finds the prompt queue empty (ρ < ½) and its TTFT is the closed loop's at
    C = 1, t_request + T_steady alone."""
    p = _sweep(*case, "poisson")
    closed = _sweep(*case, "closed_loop")
    ok = p.fits_memory[0] & (p.concurrency[0] <= p.max_concurrency[0, 0])
    rate = np.where(ok, p.tokens_per_s_per_gpu[0], -np.inf)
    ok &= (np.arange(ok.size) <= np.argmax(rate)) & np.isfinite(p.benchmark_ttft_p99_s[0])
    assert ok[0]
    for values in (p.benchmark_ttft_s, p.benchmark_ttft_median_s, p.benchmark_ttft_p99_s):
        v = values[0][ok]
        assert np.all(np.diff(v) >= -F32_REL * v[1:])
    median = p.benchmark_ttft_median_s[0][ok] * (1 - F32_REL)
    assert np.all(p.benchmark_ttft_p99_s[0][ok] >= median)
    assert np.all(p.benchmark_ttft_s[0][ok] >= median)
    assert p.benchmark_ttft_s[0, 0] >= closed.benchmark_ttft_s[0, 0] * (1 - F32_REL)
    assert p.benchmark_ttft_median_s[0, 0] == pytest.approx(
        closed.benchmark_ttft_median_s[0, 0], rel=F32_REL)
    # the client sets the TTFT only: TPOT and throughput are the closed loop's
    assert np.array_equal(p.tpot_s, closed.tpot_s, equal_nan=True)
    assert closed.benchmark_ttft_p99_s is None


@PROPERTY
@given(_case())
def test_offline_ttft_is_at_most_the_closed_loops_full_queue(case):
    """An offline run's mean request waits half of what the last one waits, which is the whole
    prompt queue and slot wait a closed-loop request at the same C sees: mean ≤ p99, and the
    mean below t_request + T_steady + (C_g − 1)·S_prompt + slot wait."""
    p = _sweep(*case, "offline")
    ok = p.fits_memory[0]
    full = p.ttft_s + p.prompt_queue_s + p.slot_wait_s + 1.0  # t_request < 1 s
    assert np.all(p.benchmark_ttft_s[0][ok] <= p.benchmark_ttft_p99_s[0][ok])
    assert np.all(p.benchmark_ttft_s[0][ok] <= full[0][ok])


# ---- varying input lengths: the M/G/1 queue and the own prefill's spread --------------------

TWO_POINT = (0.5, 1.5)


def _mix_inputs():
    return ClientInputs(steady_ttft_s=np.array([0.2]), prompt_queue_s=np.array([0.0]),
                        prompt_s=np.array([0.1]), round_s=np.array([0.0]),
                        poll_s=np.array([0.0]), slot_s=np.array([0.0]),
                        group_rate_per_s=np.array([5.0]), saturated=np.array([False]))


def test_mg1_mean_wait_by_hand():
    """λ_g = 5/s, S = 0.1 s: ρ = 0.5; lengths ½ and 3/2 of the mean: E[r²] = (0.25 + 2.25)/2 =
    1.25, W̄ = ρ·S·E[r²] / (2(1 − ρ)) = 0.5·0.1·1.25 / 1 = 62.5 ms (M/D/1: 50 ms)."""
    assert float(mg1_mean_wait_s(5.0, 0.1, 1.25)) == pytest.approx(0.0625)
    assert float(mg1_mean_wait_s(5.0, 0.1)) == float(md1_mean_wait_s(5.0, 0.1)) == 0.05


def test_mixture_ttft_by_hand():
    """T_steady 0.2 s, S 0.1 s, λ_g 5/s, lengths ½ and 3/2 (t_request 0, no round, no poll):
    own prefill 0.2 ∓ 0.5·0.1 = 0.15 and 0.25 s; W̄ 62.5 ms, ρ 0.5, so a busy arrival's wait
    is exponential at rate ρ/W̄ = 8/s. Mean: 0.2 + 0.0625 = 0.2625 s. P(T > t) = ½[P(W > t −
    0.15) + P(W > t − 0.25)]: for t in [0.15, 0.25) it is ½[0.5e^{−8(t−0.15)} + 1] > ½, at
    t = 0.25 ½[0.5e^{−0.8} + 0.5] = 0.362 ≤ ½: median 0.25 s. p99, t > 0.25:
    0.25·e^{−8(t−0.25)}(e^{−0.8} + 1) = 0.01 → t = 0.25 + ln(1.4493290/0.04)/8 = 0.25 +
    3.5899765/8 = 0.6987471 s. One length (M/D/1): p99 0.2 + (W̄/ρ)·ln(ρ/0.01) = 0.2 +
    0.1·ln 50 = 0.5912023 s, median 0.2, mean 0.25."""
    terms = BenchmarkTerms(0.0, 0.0, 0.0)
    spread = client_ttft_s("poisson", _mix_inputs(), terms, TWO_POINT)
    assert [float(spread[s][0]) for s in ("mean", "median", "p99")] == pytest.approx(
        [0.2625, 0.25, 0.6987471], rel=1e-6)
    alone = client_ttft_s("poisson", _mix_inputs(), terms)
    assert [float(alone[s][0]) for s in ("mean", "median", "p99")] == pytest.approx(
        [0.25, 0.2, 0.5912023], rel=1e-6)


def test_own_prefill_slope_is_capped_by_the_steady_ttft():
    """T_own(r) = T + (r − 1)·min(S, T): T 0.2, S 0.1 → 0.15 / 0.4 at r ½ / 3; S 0.5 (a
    budget step dearer than the request's own): slope 0.2 → 0.1 / 0.6, never below 0."""
    assert own_prefill_s(0.2, 0.1, np.array([0.5, 3.0])) == pytest.approx([0.15, 0.4])
    assert own_prefill_s(0.2, 0.5, np.array([0.5, 3.0, 1e-9])) == pytest.approx(
        [0.1, 0.6, 0.0], abs=1e-9)


@pytest.mark.parametrize("mix", [(1.0,), (1.0, 1.0, 1.0), (2.0, 2.0)],
                         ids=["one", "three-equal", "scaled"])
def test_no_spread_is_the_md1_queue(mix):
    """Every request at the mean length (the fractions are normalized to mean 1): the mixture's
    statistics are the M/D/1 closed forms; the empty mix takes those closed forms themselves."""
    terms = BenchmarkTerms(0.010, 0.3, 0.5, mean_request_overhead_s=0.015)
    for rate in (2.0, 20.0, 36.0):
        closed, mixed = (client_ttft_s("poisson", _inputs(rate), terms, m) for m in ((), mix))
        for s in ("mean", "median", "p99"):
            assert float(mixed[s]) == pytest.approx(float(closed[s]), rel=1e-12, abs=1e-15)


_MIXES = st.lists(st.floats(0.05, 20.0), min_size=2, max_size=12)


@given(_MIXES, st.floats(0.0, 0.97), st.floats(1e-4, 1.0), st.floats(1e-4, 1.0),
       st.floats(0.01, 0.999))
def test_mixture_quantile_meets_its_definition(mix, rho, service, steady, q):
    """The q-quantile t_q of T_own(r) + W: P(T > t_q) ≤ 1 − q and P(T > t) > 1 − q just below
    it (the tail as the model states it); p99 ≥ median; the mean wait ≥ the M/D/1 one
    (E[r²] ≥ 1)."""
    r = np.asarray(mix) / np.mean(mix)
    mean = float(mg1_mean_wait_s(rho / service, service, float(np.mean(r * r))))
    assert mean >= float(md1_mean_wait_s(rho / service, service)) * (1 - 1e-12)
    own = own_prefill_s(np.array([steady]), np.array([service]), r)
    t = float(mixture_quantile_s(own, np.array([mean]), np.array([rho]), q)[0])

    def tail(x):
        return float(np.mean(wait_tail_frac(x - own[0], mean, rho)))
    assert tail(t) <= (1 - q) * (1 + 1e-9)
    assert tail(t - 1e-9 * max(t, 1.0) - 1e-12) > (1 - q) * (1 - 1e-9) or t <= own.min() + 1e-12
    median = float(mixture_quantile_s(own, np.array([mean]), np.array([rho]), 0.5)[0])
    p99 = float(mixture_quantile_s(own, np.array([mean]), np.array([rho]), 0.99)[0])
    assert p99 >= median


@given(st.floats(0.0, 0.97), st.floats(1e-4, 1.0), st.floats(1e-4, 1.0))
def test_a_vanishing_spread_reaches_the_md1_quantiles(rho, service, steady):
    """Lengths 1 ∓ ε: as ε → 0 the mixture's median and p99 reach the M/D/1 closed forms."""
    terms = BenchmarkTerms(0.0, 0.0, 0.0)
    x = replace(_mix_inputs(), steady_ttft_s=np.array([steady]), prompt_s=np.array([service]),
                group_rate_per_s=np.array([rho / service]))
    closed = client_ttft_s("poisson", x, terms)
    near = client_ttft_s("poisson", x, terms, (1 - 1e-7, 1 + 1e-7))
    for s in ("mean", "median", "p99"):
        assert float(near[s][0]) == pytest.approx(float(closed[s][0]), rel=1e-6)


def test_workload_isl_mix_field():
    """Default: no spread; fractions must be positive and average 1 (±1%)."""
    assert Workload().isl_mix_frac == ()
    assert make_workload(isl_mix_frac=(0.5, 1.5)).isl_mix_frac == (0.5, 1.5)
    for bad in ((0.5, 2.0), (-1.0, 3.0), (0.0, 2.0), (float("nan"), 1.0)):
        with pytest.raises(ConfigError, match="`isl_mix_frac`"):
            make_workload(isl_mix_frac=bad)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_spread_over_the_catalog(case):
    """Over every GPU, with OpenOrca-like lengths (½, 1, 3/2 of the mean): the Poisson mean TTFT
    is at least the one-length model's (E[r²] > 1), p99 ≥ median, and TPOT and throughput are
    untouched (the client sets the TTFT only)."""
    gpu, stem, precision, tp, isl = case
    grid = np.unique(np.round(2.0 ** (np.arange(0, 13 * 2 + 1) / 2.0)))
    points = [evaluate_points([_model(stem)], [Deployment(tp=tp, precision=precision)],
                              get_hardware(gpu), Workload(isl_tokens=isl, osl_tokens=256,
                                                          arrivals="poisson", isl_mix_frac=mix),
                              grid) for mix in ((), (0.5, 1.0, 1.5))]
    alone, spread = points
    ok = alone.fits_memory[0] & np.isfinite(alone.benchmark_ttft_s[0])
    assert np.all(spread.benchmark_ttft_s[0][ok] >= alone.benchmark_ttft_s[0][ok]
                  * (1 - F32_REL))
    assert np.all(spread.benchmark_ttft_p99_s[0][ok]
                  >= spread.benchmark_ttft_median_s[0][ok] * (1 - F32_REL))
    assert np.array_equal(spread.tpot_s, alone.tpot_s, equal_nan=True)
