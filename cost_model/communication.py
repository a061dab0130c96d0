"""Collectives with an α–β model: time = latency + volume / (achieved bandwidth).

Inside the scale-up domain (NVLink) α and β come from the catalog's scale-up figures (and the
calibrated all-reduce α); a group larger than the domain is hierarchical: the part inside each
domain on NVLink, the part across domains on each GPU's NIC (scale-out α and β), with latency
growing in the tree hops across domains.
Every function broadcasts over arrays of message sizes and group sizes.
"""

from __future__ import annotations

import numpy as np

from cost_model.efficiency import Efficiency
from cost_model.hardware import HardwareSpec


def _domains(group_gpus, hw: HardwareSpec):
    """(GPUs of the group inside one scale-up domain, scale-up domains the group spans)."""
    n = np.asarray(group_gpus, dtype=np.float64)
    local = np.minimum(n, hw.scale_up_domain_gpus)
    return local, np.ceil(n / hw.scale_up_domain_gpus)


def _tree_steps(domains):
    """⌈log2(domains)⌉: the hops of a tree (NCCL's inter-node tree / recursive doubling) across
    `domains` scale-up domains; 0 inside one."""
    return np.ceil(np.log2(np.maximum(domains, 1.0)))


def _bandwidths(hw: HardwareSpec, eff: Efficiency):
    """Achieved (scale-up, scale-out) bytes/s per GPU per direction."""
    return (hw.scale_up_bytes_per_s * eff.scale_up_bandwidth_frac,
            hw.scale_out_bytes_per_s * eff.scale_out_bandwidth_frac)


def _ring_s(message_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency, passes, alpha):
    """`passes` ring passes (a reduce-scatter or an all-gather is one, an all-reduce two) of
    `message_bytes` over n GPUs spanning d = ⌈n/D⌉ scale-up domains of D GPUs (n_l = min(n, D)
    in each): inside the domain passes·(n_l−1)/n_l · bytes / β_up, across domains each GPU moves
    its 1/n_l share over its own NIC, passes·(d−1)/d · bytes / (n_l · β_out) (NCCL's
    rail-aligned multi-node bus bandwidth ≈ the domain's aggregate NIC rate). Latency α inside
    plus passes·⌈log2 d⌉ · α_out across (a tree per pass), so it grows with the group past the
    domain. 0 when n = 1."""
    n = np.asarray(group_gpus, dtype=np.float64)
    local, domains = _domains(n, hw)
    up, out = _bandwidths(hw, eff)
    latency = alpha + passes * _tree_steps(domains) * hw.scale_out_latency_s
    inside = passes * (local - 1.0) / local * message_bytes / up
    across = passes * (domains - 1.0) / domains * message_bytes / (local * out)
    return np.where(n > 1, latency + inside + across, 0.0)


def all_reduce_s(message_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency):
    """Hierarchical all-reduce of `message_bytes` per GPU: a reduce-scatter and an all-gather,
    two ring passes (`_ring_s`), 2(n_l−1)/n_l · bytes / β_up inside the domain and
    2(d−1)/d · bytes / (n_l · β_out) across. Latency: the calibrated all-reduce latency when
    there is one (measured up to a domain: the one-shot NVLink kernels keep it flat there),
    else the scale-up α, plus 2⌈log2 d⌉ · α_out across domains."""
    alpha = hw.scale_up_latency_s if eff.all_reduce_latency_s is None else eff.all_reduce_latency_s
    return _ring_s(message_bytes, group_gpus, hw, eff, 2.0, alpha)


def all_gather_s(total_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency):
    """Ring all-gather that leaves each of n GPUs the whole `total_bytes` tensor, of which each
    held 1/n: one ring pass (`_ring_s`), (n_l−1)/n_l · bytes / β_up inside the domain; latency
    the scale-up α plus ⌈log2 d⌉ · α_out across domains. A reduce-scatter of a `total_bytes`
    tensor of partial sums moves the same bytes and costs the same."""
    return _ring_s(total_bytes, group_gpus, hw, eff, 1.0, hw.scale_up_latency_s)


def all_to_all_s(send_bytes, group_gpus, hw: HardwareSpec, eff: Efficiency):
    """All-to-all where each GPU sends `send_bytes` in total, spread evenly over the n GPUs: the
    share for the n_l − 1 peers of its scale-up domain over NVLink, (n_l−1)/n_l · bytes / β_up
    (the share of a full domain: hierarchical kernels such as DeepEP's forward over NVLink what
    leaves the domain), and the share (n − D)/n for peers outside it over its own NIC,
    bytes · (n − D)/n / β_out. Latency α_up plus ⌈log2 d⌉ · α_out across d domains. Each term
    is non-decreasing in n. 0 when n = 1."""
    n = np.asarray(group_gpus, dtype=np.float64)
    local, domains = _domains(n, hw)
    up, out = _bandwidths(hw, eff)
    latency = hw.scale_up_latency_s + _tree_steps(domains) * hw.scale_out_latency_s
    inside = (local - 1.0) / local * send_bytes / up
    across = np.maximum(n - hw.scale_up_domain_gpus, 0.0) / n * send_bytes / out
    return np.where(n > 1, latency + inside + across, 0.0)


def _link(group_gpus, hw: HardwareSpec, eff: Efficiency):
    """(latency_s, bytes_per_s) of the slowest link a group of `group_gpus` uses."""
    inside = np.asarray(group_gpus) <= hw.scale_up_domain_gpus
    up, out = _bandwidths(hw, eff)
    latency = np.where(inside, hw.scale_up_latency_s, hw.scale_out_latency_s)
    return latency, np.where(inside, up, out)


def point_to_point_s(message_bytes, hw: HardwareSpec, eff: Efficiency, crosses_domain=False):
    """One send between pipeline stages."""
    latency, bandwidth = _link(np.where(crosses_domain, hw.scale_up_domain_gpus + 1, 1), hw, eff)
    return latency + message_bytes / bandwidth
