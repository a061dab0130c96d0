"""Frontier of a candidate and its area (docs/DESIGN.md "Frontier", "Frontier area").

Points are (x, y) = (interactivity tokens/s/user, throughput tokens/s/GPU), both maximized. The
frontier is their Pareto envelope; its area is the area under the staircase
f(x) = max{ y_i : x_i ≥ x } for x in the window [x_lo, x_hi], measured on a log10 x axis by default
(one decade of interactivity counts the same anywhere) or a linear one. This equals the 2-D
hypervolume of the points against the reference (x_lo, 0) with x clipped to x_hi.
Everything is vectorized over candidates (axis 0); points run along axis 1.
"""

from __future__ import annotations

import numpy as np

MAX_CONCURRENCY_EXPONENT = 14  # the sweep: 1, 2, 4, …, 16384 sequences, plus the memory limit


def concurrency_grid(max_concurrency) -> np.ndarray:
    """Per candidate: powers of two up to its memory limit, then the limit itself; entries beyond
    the limit are NaN (shape (n, 16))."""
    limit = np.asarray(max_concurrency, dtype=np.float64).reshape(-1, 1)
    powers = 2.0 ** np.arange(MAX_CONCURRENCY_EXPONENT + 1)[None, :]
    grid = np.concatenate([np.broadcast_to(powers, (limit.shape[0], powers.shape[1])), limit], 1)
    return np.where((grid <= limit) & (grid >= 1), grid, np.nan)


def _metric(x, x_lo: float, x_hi: float, log_x: bool):
    clipped = np.clip(x, x_lo, x_hi)
    return np.log10(clipped / x_lo) if log_x else clipped - x_lo


def frontier_area(x, y, x_lo: float, x_hi: float, log_x: bool = True) -> np.ndarray:
    """Area under each row's staircase inside [x_lo, x_hi]; NaN points are ignored (shape (n,))."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    valid = np.isfinite(x) & np.isfinite(y) & (y > 0)
    u = np.where(valid, _metric(np.where(valid, x, x_lo), x_lo, x_hi, log_x), 0.0)
    height = np.where(valid, y, 0.0)
    order = np.argsort(-u, axis=1)
    u_sorted = np.take_along_axis(u, order, 1)
    best = np.maximum.accumulate(np.take_along_axis(height, order, 1), axis=1)
    widths = u_sorted - np.concatenate([u_sorted[:, 1:], np.zeros_like(u_sorted[:, :1])], axis=1)
    return np.sum(best * widths, axis=1)


def pareto_mask(x, y) -> np.ndarray:
    """True where a point is not dominated by another point of the same row (max x, max y):
    no valid point is at least as good on both axes and better on one. With the row sorted by
    x, then y, descending, a point is on the front when its y beats every y of a larger x and is
    the largest of its own x (equal points both stay). O(P log P) per row: a swept
    architecture's row holds every deployment's points (hundreds)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    valid = np.isfinite(x) & np.isfinite(y)
    xv, yv = np.where(valid, x, -np.inf), np.where(valid, y, -np.inf)  # invalid: beat nobody
    by_y = np.argsort(-yv, axis=1, kind="stable")
    order = np.take_along_axis(by_y, np.argsort(-np.take_along_axis(xv, by_y, 1), axis=1,
                                                 kind="stable"), 1)
    xs, ys = np.take_along_axis(xv, order, 1), np.take_along_axis(yv, order, 1)
    position = np.broadcast_to(np.arange(xs.shape[1]), xs.shape)
    starts = np.ones(xs.shape, dtype=bool)
    starts[:, 1:] = xs[:, 1:] != xs[:, :-1]  # the first (largest-y) point of each x
    start = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    best = np.maximum.accumulate(ys, axis=1)
    larger_x = np.where(start > 0, np.take_along_axis(best, np.maximum(start - 1, 0), 1), -np.inf)
    front = (ys > larger_x) & (ys == np.take_along_axis(ys, start, 1))
    out = np.empty_like(front)
    np.put_along_axis(out, order, front, 1)
    return valid & out
