"""The serving fits (search/calibration/serving.py): golden values on tiny hand-derived sets."""

import numpy as np
import pytest

from search.calibration.serving import (
    MIN_MEAN_ROWS, OVERHEAD_GRID_S, SHARE_GRID, TtftInputs, best_host_index, fit_ttft_terms,
    predict_ttft,
)


def _inputs(fixed, queue, measured, mean):
    n = len(measured)
    return TtftInputs(np.array(fixed, float), np.array(queue, float), np.zeros(n),
                      np.array(measured, float), np.array(mean, bool))


def test_host_fit_takes_the_least_mean_error_and_the_smaller_h_on_ties():
    """Mean |log error| per h: 3/2, 1/2, 1/2, 2/2 → index 1 (the first of the tie); a grid
    value with no scored figure is never chosen (its 0/0 is not a zero error), and nothing
    scored at all gives None."""
    assert best_host_index([3.0, 1.0, 1.0, 2.0], [2, 2, 2, 2]) == 1
    assert best_host_index([0.0, 1.0, 0.5], [0, 2, 2]) == 2
    assert best_host_index([0.0, 0.0], [0, 0]) is None


def test_ttft_fit_golden_three_mean_runs():
    """TTFT = t + fixed + q · queue with fixed 10 ms: runs at queues 0, 100, 200 ms measured
    30, 40, 50 ms are matched exactly by t = 30 − 10 = 20 ms and q = (40 − 30)/100 = 0.10,
    both on the grids (2 ms and 0.02 steps), so that point has zero median error and any other
    misses at least two of the three runs. Fewer than MIN_MEAN_ROWS mean rows: the median's
    terms are fitted on every row and the mean takes them (None)."""
    x = _inputs([0.010] * 3, [0.0, 0.1, 0.2], [0.030, 0.040, 0.050], [True] * 3)
    t, q, w, t_mean, q_mean = fit_ttft_terms(x)
    assert (t, q, w, t_mean, q_mean) == (pytest.approx(0.020), pytest.approx(0.10), 0.0, None,
                                         None)
    assert np.allclose(predict_ttft((t, q, w, t_mean, q_mean), x), x.measured_s)


def test_ttft_fit_splits_mean_and_median_from_enough_rows():
    """MIN_MEAN_ROWS median runs measured at fixed + 10 ms and as many mean runs at fixed +
    30 ms (no queue): t̃ = 10 ms, t̄ = 30 ms, q 0 (ties keep the grid's first) for both."""
    n = MIN_MEAN_ROWS
    fixed = list(np.linspace(0.01, 0.05, n)) * 2
    measured = [f + 0.010 for f in fixed[:n]] + [f + 0.030 for f in fixed[n:]]
    x = _inputs(fixed, [0.0] * 2 * n, measured, [False] * n + [True] * n)
    t, q, w, t_mean, q_mean = fit_ttft_terms(x)
    assert (t, t_mean) == (pytest.approx(0.010), pytest.approx(0.030))
    assert (q, w, q_mean) == (0.0, 0.0, 0.0)


def test_grids_are_the_shipped_fits():
    """t_request 0 … 300 ms by 2 ms, q 0 … 1 by 0.02 (tests/benchmarks/fit_benchmark_ttft.py)."""
    assert (OVERHEAD_GRID_S.size, OVERHEAD_GRID_S[-1]) == (151, pytest.approx(0.3))
    assert (SHARE_GRID.size, SHARE_GRID[1]) == (51, 0.02)
