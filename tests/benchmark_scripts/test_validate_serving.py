"""tests/benchmarks/validate_serving.py: the benchmark-run formulas its comparison applies."""

import pytest

from tests.benchmarks.validate_serving import (
    PERF_OVERVIEW,
    benchmark_drain_factor,
    offline_requests,
    offline_run_tokens_per_s,
)


def test_offline_run_over_full_and_last_waves_by_hand():
    """3,000 requests, 2,048 at a time: one full wave at 10,000 tok/s and a last one of
    3,000 − 2,048 = 952 at 6,000 tok/s take 2,048/10,000 + 952/6,000 = 0.2048 + 0.1586667
    = 0.3634667 s per output token of each request, so the run serves 3,000/0.3634667
    = 8,253.85 tok/s. Whole waves only (4,096 = 2 × 2,048): the wave's rate, 10,000."""
    assert offline_run_tokens_per_s(3000, 2048, 10_000.0, 6_000.0) == pytest.approx(8253.85,
                                                                                  rel=1e-6)
    assert offline_run_tokens_per_s(4096, 2048, 10_000.0, 0.0) == pytest.approx(10_000.0)


def test_offline_requests_come_from_the_performance_overview_only():
    """The performance overview's 128/4096 runs had 1,500 requests; other sources state none."""
    row = {"source_kind": PERF_OVERVIEW, "isl": "128.0", "osl": "4096.0"}
    assert offline_requests(row) == 1500
    assert offline_requests({**row, "source_kind": "inferencex"}) is None
    assert offline_requests({**row, "osl": "777"}) is None


def test_inferencex_drain_factor_by_hand():
    """C = 4: CV = (1 − 0.8)/√12 / 0.9 = 0.0641500, over √10 prompts per slot 0.0202860;
    z_4 = Φ⁻¹(3.625/4.25) = Φ⁻¹(0.852941) = 1.049131, so 1 + 0.0202860 · 1.049131 = 1.021283.
    One slot: no slower slot to wait for, 1."""
    assert benchmark_drain_factor(4) == pytest.approx(1.021283, rel=1e-6)
    assert benchmark_drain_factor(1) == 1.0
