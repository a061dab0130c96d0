"""The largest of n equal random draws, in standard deviations above their mean.

The busiest of n expert-parallel GPUs under random routing (`cost_model.layers`) and the slowest
of n benchmark slots (tests/benchmarks/validate_serving.py, `benchmark_drain_factor`) both wait
for the largest of n draws. For draws near normal its expectation is z_n standard deviations
above the mean, with Blom's approximation (G. Blom, Statistical Estimates and Transformed
Beta-Variables, 1958, the plotting position (i − 3/8)/(n + 1/4) for the largest, i = n):
    z_n = Φ⁻¹((n − 0.375) / (n + 0.25)),
0.0 for n = 1, 0.589 for n = 2 (exact: 1/√π = 0.564), 1.434 for n = 8, 2.067 for n = 32.
"""

from __future__ import annotations

from functools import cache
from statistics import NormalDist

import numpy as np

BLOM_OFFSET = 0.375  # the 3/8 of Blom's plotting position
BLOM_SPAN = 0.25  # the 1/4 of Blom's plotting position


@cache
def _largest_z(n: int) -> float:
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - BLOM_OFFSET) / (n + BLOM_SPAN))


def expected_largest_z(n):
    """z_n for every entry of `n` (draws; rounded to whole draws, at least 1); broadcasts."""
    counts = np.maximum(np.rint(np.asarray(n, dtype=np.float64)), 1.0)
    values, index = np.unique(counts, return_inverse=True)
    z = np.array([_largest_z(int(v)) for v in values])
    return z[index].reshape(counts.shape)
