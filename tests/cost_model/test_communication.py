"""α–β collectives inside and across the scale-up domain."""

import numpy as np
import pytest

from cost_model.communication import all_reduce_s, all_to_all_s, point_to_point_s
from cost_model.efficiency import get_efficiency
from cost_model.hardware import get_hardware

H200 = get_hardware("h200")
EFF = get_efficiency("h200")


def test_one_gpu_needs_no_collective():
    assert all_reduce_s(1e6, 1, H200, EFF) == 0.0
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


def test_leaving_the_domain_uses_the_network():
    """16 GPUs on 8-GPU HGX boards cross the NICs; 16 GPUs of an NVL72 rack stay on NVLink."""
    inside, outside = all_reduce_s(64e6, np.array([8, 16]), H200, EFF)
    assert outside > 5 * inside
    gb300 = get_hardware("gb300")
    rack = all_reduce_s(64e6, 16, gb300, get_efficiency("gb300"))
    assert rack < outside


def test_point_to_point():
    assert point_to_point_s(0.0, H200, EFF) == pytest.approx(H200.scale_up_latency_s)
