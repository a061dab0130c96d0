"""The fits of the serving terms, one place each, on whatever rows a caller scores:

- the scheduler's host time h per host CPU kind (`cost_model.host`): the h of `HOST_GRID_US`
  minimizing the mean |log(pred/meas)| of the rows' TPOT and output tokens/s/GPU pooled (the L1
  loss: robust to the outliers of a mixed set, smooth in h, exactly reproducible;
  `best_host_index`);
- the benchmark-TTFT terms of one engine table (`cost_model.benchmark_ttft`): t_request and the
  queue share q (and the round-wait share w where its grid allows) minimizing the median
  |log(pred/meas)| of TTFT on `TERMS_GRIDS` (`fit_ttft_terms`); the median request's terms on the
  rows that report a median (on every row where fewer than MIN_MEAN_ROWS do), the mean request's
  (q̄ ≥ q̃) on the rows that report a mean where at least MIN_MEAN_ROWS do, else the mean takes
  the median's.

Callers: tests/benchmarks/fit_host_overhead.py and fit_benchmark_ttft.py (the shipped terms, on
every source's published rows), leave-one-source-out (tests/benchmarks/serving/folds.py) and
`archscout calibrate --source RESULTS…` (a user's own runs, `search.calibration.serving_runs`,
which also holds the minimum rows each term needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOST_GRID_US = np.arange(0.0, 60.5, 1.0)  # the host times tried, µs per sequence per step
OVERHEAD_GRID_S = np.arange(0.0, 0.3005, 0.002)  # t_request tried: 0 … 300 ms by 2 ms
SHARE_GRID = np.round(np.arange(0.0, 1.0001, 0.02), 2)  # q tried
ROUND_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)  # w tried (leave-one-source-out ablations)
NO_ROUND_GRID = np.zeros(1)
# (q, w): the shipped fit fits t_request and q and holds w at 0 (leave-one-source-out showed w
# helps only the rows it is fitted on: tests/benchmarks/fit_benchmark_ttft.py)
TERMS_GRIDS = (SHARE_GRID, NO_ROUND_GRID)
MIN_MEAN_ROWS = 20  # fewer mean rows: the mean's terms are the median's (and vice versa: `fit`)

# (median t_request s, q̃, w, mean t_request s or None, q̄ or None)
TtftTerms = tuple[float, float, float, float | None, float | None]


# ---- host time -------------------------------------------------------------------------------

def best_host_index(error_sum: np.ndarray, count: np.ndarray) -> int | None:
    """The index into the host grid of the least mean |log error|: `error_sum[j]` the summed
    |log(pred/meas)| of every scored figure at the grid's j-th h, `count[j]` how many there are
    (ties: the smallest h). None when no figure is scored."""
    error_sum, count = np.asarray(error_sum, float), np.asarray(count)
    if not count.any():
        return None
    return int(np.argmin(np.where(count > 0, error_sum / np.maximum(count, 1), np.inf)))


def abs_log_errors(predicted, measured) -> np.ndarray:
    """|log(pred/meas)| of each figure, NaN where either is missing or not positive."""
    predicted, measured = np.asarray(predicted, float), np.asarray(measured, float)
    ok = (predicted > 0) & (measured > 0) & np.isfinite(predicted) & np.isfinite(measured)
    return np.where(ok, np.abs(np.log(np.where(ok, predicted / np.where(ok, measured, 1.0),
                                               1.0))), np.nan)


# ---- benchmark TTFT --------------------------------------------------------------------------

@dataclass(frozen=True)
class TtftInputs:
    """Per row: `fixed_s` (what no fitted term touches: the steady-state TTFT and the polling
    and slot waits), `queue_s` ((C_g − 1)·S_prompt), `round_s` (the attention-DP round wait),
    `measured_s` and `is_mean` (the row reports the mean over requests, else the median)."""

    fixed_s: np.ndarray
    queue_s: np.ndarray
    round_s: np.ndarray
    measured_s: np.ndarray
    is_mean: np.ndarray

    def subset(self, mask: np.ndarray) -> TtftInputs:
        return TtftInputs(*(np.asarray(getattr(self, f))[mask] for f in
                            ("fixed_s", "queue_s", "round_s", "measured_s", "is_mean")))

    def __len__(self) -> int:
        return len(self.measured_s)


def predict_ttft(terms: TtftTerms, x: TtftInputs) -> np.ndarray:
    """t_request + fixed + share · queue + w · round of each row's statistic (the mean's terms
    never below the median's, `BenchmarkTerms.overhead_s`)."""
    overhead_s, share, round_share, mean_overhead_s, mean_share = terms
    mean_overhead_s = overhead_s if mean_overhead_s is None else max(mean_overhead_s, overhead_s)
    mean_share = share if mean_share is None else max(mean_share, share)
    return np.where(x.is_mean, mean_overhead_s, overhead_s) + x.fixed_s \
        + np.where(x.is_mean, mean_share, share) * x.queue_s + round_share * x.round_s


def ttft_log_errors(terms: TtftTerms, x: TtftInputs) -> np.ndarray:
    return np.log(predict_ttft(terms, x) / x.measured_s)


def grid_fit(base, queue, rounds, measured, shares, w_grid, overheads=OVERHEAD_GRID_S
             ) -> tuple[float, float, float]:
    """(t_request s, share, w) of least median |log error| for predictions
    t + base + share · queue + w · rounds, t on `overheads` (ties: the first)."""
    best = (np.inf, 0.0, 0.0, 0.0)
    for w in w_grid:
        pred = (overheads[:, None, None] + (base + w * rounds)[None, None, :]
                + shares[None, :, None] * queue[None, None, :])
        cost = np.median(np.abs(np.log(pred / measured)), axis=2)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        if cost[i, j] < best[0]:
            best = (float(cost[i, j]), float(overheads[i]), float(shares[j]), float(w))
    return best[1:]


def fit_ttft_terms(x: TtftInputs, grids=TERMS_GRIDS, search=grid_fit) -> TtftTerms:
    """One engine table's terms (module docstring): the median's on the median rows (on every
    row when fewer than MIN_MEAN_ROWS are medians: a few rows must not set the terms the mean's
    can only exceed), the mean's on the mean rows when there are at least MIN_MEAN_ROWS (q̄ ≥ q̃,
    w the median's); q and w on `grids`; `search` the grid search (`grid_fit`, or a faster one
    with the same optimum)."""
    share_grid, round_grid = grids
    mean = np.asarray(x.is_mean, bool)
    median = ~mean if np.sum(~mean) >= MIN_MEAN_ROWS else np.ones_like(mean)
    w_grid = round_grid if np.any(x.round_s[median] > 0) else NO_ROUND_GRID
    m = x.subset(median)
    t, share, w = search(m.fixed_s, m.queue_s, m.round_s, m.measured_s, share_grid, w_grid)
    if int(np.sum(mean)) < MIN_MEAN_ROWS:
        return t, share, w, None, None
    a = x.subset(mean)
    t_mean, share_mean, _ = search(a.fixed_s, a.queue_s, a.round_s, a.measured_s,
                                   share_grid[share_grid >= share], np.array([w]))
    return t, share, w, t_mean, share_mean
