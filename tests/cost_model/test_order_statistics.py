"""cost_model/order_statistics.py: the expected largest of n draws, in standard deviations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.order_statistics import expected_largest_z


def test_blom_values_by_hand():
    """z_n = Φ⁻¹((n − 0.375)/(n + 0.25)): n = 1 → 0 (one draw is its own mean); n = 2 →
    Φ⁻¹(1.625/2.25) = Φ⁻¹(0.722222) = 0.589456 (the exact 1/√π = 0.564190 is 4% lower);
    n = 8 → Φ⁻¹(7.625/8.25) = Φ⁻¹(0.924242) = 1.434200; n = 32 → Φ⁻¹(31.625/32.25) =
    Φ⁻¹(0.980620) = 2.066729. Non-integer counts round to whole draws (7.6 → 8)."""
    z = expected_largest_z(np.array([[1.0], [2.0], [8.0], [32.0], [7.6]]))
    assert z.shape == (5, 1)
    assert np.ravel(z) == pytest.approx([0.0, 0.589456, 1.434200, 2.066729, 1.434200],
                                        abs=1e-6)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 4096), st.integers(1, 4096))
def test_more_draws_never_lower_the_largest(n1, n2):
    """The largest of more draws is never expected lower, and never below the mean."""
    lo, hi = sorted((n1, n2))
    assert 0.0 <= expected_largest_z(lo) <= expected_largest_z(hi)
