"""Collectives with an α–β model: time = steps·α + volume / (achieved bandwidth).

Inside the scale-up domain (NVLink) α and β come from the catalog's scale-up figures; a group
larger than the domain crosses the scale-out network (NICs) for its slowest hop.
Every function broadcasts over arrays of message sizes and group sizes.
"""

from __future__ import annotations

import numpy as np

from cost_model.efficiency import Efficiency
from cost_model.hardware import HardwareSpec


def _link(group_gpus, hw: HardwareSpec, eff: Efficiency):
    """(latency_s, bytes_per_s) of the slowest link a group of `group_gpus` uses."""
    inside = np.asarray(group_gpus) <= hw.scale_up_domain_gpus
    latency = np.where(inside, hw.scale_up_latency_s, hw.scale_out_latency_s)
    bandwidth = np.where(inside, hw.scale_up_bytes_per_s * eff.scale_up_bandwidth_frac,
                         hw.scale_out_bytes_per_s * eff.scale_out_bandwidth_frac)
    return latency, bandwidth


def all_reduce_s(message_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency):
    """Ring all-reduce of `message_bytes` per GPU: α + 2(n−1)/n · bytes / β; 0 when n = 1.
    Inside the scale-up domain α is the calibrated all-reduce latency when there is one."""
    n = np.asarray(group_gpus, dtype=np.float64)
    latency, bandwidth = _link(n, hw, eff)
    if eff.all_reduce_latency_s is not None:
        latency = np.where(n <= hw.scale_up_domain_gpus, eff.all_reduce_latency_s, latency)
    time = latency + 2.0 * (n - 1.0) / n * message_bytes / bandwidth
    return np.where(n > 1, time, 0.0)


def all_to_all_s(send_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency):
    """All-to-all where each GPU sends `send_bytes` in total, spread over the others."""
    n = np.asarray(group_gpus, dtype=np.float64)
    latency, bandwidth = _link(n, hw, eff)
    time = latency + (n - 1.0) / n * send_bytes / bandwidth
    return np.where(n > 1, time, 0.0)


def point_to_point_s(message_bytes, hw: HardwareSpec, eff: Efficiency, crosses_domain=False):
    """One send between pipeline stages."""
    latency, bandwidth = _link(np.where(crosses_domain, hw.scale_up_domain_gpus + 1, 1), hw, eff)
    return latency + message_bytes / bandwidth
