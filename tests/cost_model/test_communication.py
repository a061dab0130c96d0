"""α–β collectives inside and across the scale-up domain."""

import numpy as np
import pytest

from cost_model.communication import all_gather_s, all_reduce_s, all_to_all_s, point_to_point_s
from cost_model.efficiency import get_efficiency
from cost_model.hardware import get_hardware

H200 = get_hardware("h200")
EFF = get_efficiency("h200", "trtllm")  # the values the goldens below pin


def test_one_gpu_needs_no_collective():
    assert all_reduce_s(1e6, 1, H200, EFF) == 0.0
    assert all_gather_s(1e6, 1, H200, EFF) == 0.0
    assert all_to_all_s(1e6, 1, H200, EFF) == 0.0


def test_ring_all_reduce_alpha_beta():
    """Ring all-reduce: α + 2(n−1)/n · bytes / (achieved NVLink bandwidth)."""
    bytes_ = 64e6
    bandwidth = H200.scale_up_bytes_per_s * EFF.scale_up_bandwidth_frac
    alpha = EFF.all_reduce_latency_s if EFF.all_reduce_latency_s is not None \
        else H200.scale_up_latency_s  # the calibrated all-reduce α overrides the catalog's
    expected = alpha + 2 * 7 / 8 * bytes_ / bandwidth
    assert all_reduce_s(bytes_, 8, H200, EFF) == pytest.approx(expected)


def test_small_messages_are_latency_bound():
    assert all_reduce_s(16e3, 8, H200, EFF) < 1.1 * H200.scale_up_latency_s


def test_hierarchical_all_reduce_across_domains():
    """16 H200s on two 8-GPU HGX boards (D = 8, d = 2 domains), 64 MB per GPU, by hand:
    latency α + 2⌈log2 2⌉·α_out = 3.085 + 2·15 = 33.085 µs;
    inside 2·7/8 · 64e6 / (450e9 · 0.6508) = 382.43 µs;
    across 2·(2−1)/2 · 64e6 / (8 · 50e9 · 0.85) = 188.24 µs; total 603.76 µs.
    The catalog/efficiency values are asserted so that a change to them is seen here."""
    assert H200.scale_up_domain_gpus == 8
    assert (H200.scale_out_latency_s, EFF.all_reduce_latency_s) == pytest.approx((15e-6, 3.085e-6))
    assert EFF.scale_up_bandwidth_frac == pytest.approx(0.6508)
    assert (H200.scale_out_bytes_per_s, EFF.scale_out_bandwidth_frac) == pytest.approx((50e9, 0.85))
    assert all_reduce_s(64e6, 16, H200, EFF) == pytest.approx(603.76e-6, rel=1e-4)
    gb300 = get_hardware("gb300")  # 16 GPUs of an NVL72 rack stay on NVLink
    assert all_reduce_s(64e6, 16, gb300, get_efficiency("gb300", "trtllm")) < \
        all_reduce_s(64e6, 16, H200, EFF)


def test_all_to_all_across_domains_by_hand():
    """32 H200s (4 domains), 8 MB sent per GPU: latency 8 + ⌈log2 4⌉·15 = 38 µs (scale-up α of
    the catalog: 8 µs); inside 7/8 · 8e6 / (450e9 · 0.6508) = 23.90 µs; across (32−8)/32 · 8e6
    / 42.5e9 = 141.18 µs; total 203.08 µs."""
    assert H200.scale_up_latency_s == pytest.approx(8e-6)
    assert all_to_all_s(8e6, 32, H200, EFF) == pytest.approx(203.08e-6, rel=1e-4)


def test_collective_latency_grows_past_the_domain():
    """The latency part (a zero-byte message) is flat inside the domain and grows with every
    doubling of the domains spanned."""
    sizes = np.array([2, 8, 16, 32, 64, 128])
    reduce_latency = all_reduce_s(0.0, sizes, H200, EFF)
    a2a_latency = all_to_all_s(0.0, sizes, H200, EFF)
    for latency in (reduce_latency, a2a_latency):
        assert latency[0] == latency[1]
        assert np.all(np.diff(latency[1:]) > 0)


def test_point_to_point():
    assert point_to_point_s(0.0, H200, EFF) == pytest.approx(H200.scale_up_latency_s)


def test_all_gather_by_hand():
    """All-gather of a 64 MB tensor over 8 H200s, one ring pass: latency the scale-up α 8 µs
    (not the custom all-reduce's calibrated one), 7/8 · 64e6 / (450e9 · 0.6508) = 191.21 µs;
    total 199.21 µs. Over 16 (two domains): α + ⌈log2 2⌉ · 15 = 23 µs, inside 191.21 µs, across
    (2−1)/2 · 64e6 / (8 · 50e9 · 0.85) = 94.12 µs; total 308.33 µs: half an all-reduce's
    bandwidth terms, one tree across."""
    assert all_gather_s(64e6, 8, H200, EFF) == pytest.approx(199.21e-6, rel=1e-4)
    assert all_gather_s(64e6, 16, H200, EFF) == pytest.approx(308.33e-6, rel=1e-4)


def test_all_gather_grows_with_the_group():
    sizes = np.array([2, 4, 8, 16, 32, 64])
    assert np.all(np.diff(all_gather_s(64e6, sizes, H200, EFF)) > 0)
