"""Frontier and frontier area as docs/DESIGN.md defines them."""

import itertools

import numpy as np
import pytest

from cost_model.frontier import concurrency_grid, frontier_area, pareto_mask


def _brute_force_hypervolume(points, x_lo, x_hi, log_x):
    """2-D hypervolume against (x_lo, 0) by slicing the x axis at every point (reference)."""
    to_u = (lambda x: np.log10(x / x_lo)) if log_x else (lambda x: x - x_lo)
    pts = [(to_u(min(max(x, x_lo), x_hi)), y) for x, y in points if y > 0]
    cuts = sorted({0.0, *(u for u, _ in pts)})
    area = 0.0
    for left, right in itertools.pairwise(cuts):
        height = max([y for u, y in pts if u >= right] or [0.0])
        area += height * (right - left)
    return area


@pytest.mark.parametrize("log_x", [True, False], ids=["log10", "linear"])
@pytest.mark.parametrize("seed", range(5))
def test_area_equals_hypervolume(seed, log_x):
    rng = np.random.default_rng(seed)
    x = 10 ** rng.uniform(0, 3.5, size=12)
    y = rng.uniform(0, 1e4, size=12)
    got = frontier_area(x[None], y[None], 10.0, 1000.0, log_x)[0]
    assert got == pytest.approx(_brute_force_hypervolume(zip(x, y), 10.0, 1000.0, log_x))


def test_single_point_spanning_the_window_is_a_rectangle():
    # one point at x = 1000 (the window's top) and y = 5: 2 decades × 5
    assert frontier_area([[1000.0]], [[5.0]], 10.0, 1000.0)[0] == pytest.approx(10.0)
    # a point beyond x_hi is clipped; a point below x_lo adds nothing
    assert frontier_area([[1e6, 1.0]], [[5.0, 1e9]], 10.0, 1000.0)[0] == pytest.approx(10.0)


def test_dominated_and_nan_points_do_not_count():
    x = np.array([[100.0, 50.0, np.nan]])
    y = np.array([[10.0, 5.0, 1e9]])
    assert frontier_area(x, y, 10.0, 1000.0)[0] == pytest.approx(10.0)
    assert pareto_mask(x, y).tolist() == [[True, False, False]]


def test_vectorized_over_candidates():
    x = np.array([[100.0], [1000.0]])
    y = np.array([[1.0], [1.0]])
    assert frontier_area(x, y, 10.0, 1000.0).tolist() == pytest.approx([1.0, 2.0])


def test_concurrency_grid_stops_at_the_memory_limit():
    grid = concurrency_grid([5, 0])
    assert grid[0][np.isfinite(grid[0])].tolist() == [1, 2, 4, 5]
    assert not np.isfinite(grid[1]).any()


def test_a_tie_on_one_axis_is_dominated_by_the_better_other():
    """Pareto dominance (maximize x and y): j dominates i when it is no worse on both axes and
    strictly better on at least one. (1, 1) ties (1, 2) on x and is worse on y: dominated; it
    ties (2, 1) on y and is worse on x: dominated. (1, 2) and (2, 1) trade x for y: both stay.
    Two equal points (3, 0.5) dominate neither the other: both stay (and are beaten by nobody:
    (2, 1) is worse on x)."""
    x = np.array([[1.0, 1.0, 2.0, 3.0, 3.0]])
    y = np.array([[2.0, 1.0, 1.0, 0.5, 0.5]])
    assert pareto_mask(x, y).tolist() == [[True, False, True, True, True]]
    assert pareto_mask(x[:, :3][:, [1, 2]], y[:, :3][:, [1, 2]]).tolist() == [[False, True]]


def _pairwise_pareto_mask(x, y):
    """The definition, pair by pair: j dominates i when both are finite, j is no worse on both
    axes and better on one."""
    valid = np.isfinite(x) & np.isfinite(y)
    xi, xj, yi, yj = x[:, :, None], x[:, None, :], y[:, :, None], y[:, None, :]
    dominates = (xj >= xi) & (yj >= yi) & ((xj > xi) | (yj > yi)) & valid[:, None, :]
    return valid & ~np.any(dominates, axis=2)


@pytest.mark.parametrize("seed", range(40))
def test_pareto_mask_is_the_pairwise_definition(seed):
    """Rows of few distinct values (many ties on x, on y and whole points), NaN and infinite
    points, negative values: the sorted mask equals the pairwise definition exactly."""
    rng = np.random.default_rng(seed)
    rows, points = int(rng.integers(1, 5)), int(rng.integers(1, 40))
    levels = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.nan, np.inf])[:int(rng.integers(3, 9))]
    x, y = (rng.choice(levels, size=(rows, points)) for _ in range(2))
    assert pareto_mask(x, y).tolist() == _pairwise_pareto_mask(x, y).tolist()
    x, y = rng.uniform(0, 10, (rows, points)), rng.uniform(0, 10, (rows, points))
    assert pareto_mask(x, y).tolist() == _pairwise_pareto_mask(x, y).tolist()
