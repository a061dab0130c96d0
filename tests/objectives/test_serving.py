"""Serving objectives: a service level keeps the frontier to the points that meet it, a fleet
counts the GPUs its instances leave over (golden numbers by hand)."""

from dataclasses import replace

import numpy as np
import pytest

from cost_model import (
    evaluate_points, get_hardware, make_architecture, make_deployment, make_workload,
)
from objectives.serving import ServiceLevel, Window, fleet_points, serving_scores

H200 = get_hardware("h200")
ARCH = make_architecture(name="t", vocab_size=32000, hidden_size=2048, num_layers=16,
                         num_attention_heads=16, num_kv_heads=4, head_dim=128,
                         intermediate_size=8192, max_position_embeddings=4096)
WORKLOAD = make_workload(isl_tokens=1024, osl_tokens=512)
WINDOW = Window(20.0, 2000.0)


def _points():
    return evaluate_points([ARCH], [make_deployment(tp=1)], H200, WORKLOAD, [1.0, 8.0, 64.0])


def test_service_level_golden():
    """TPOT 10, 20, 30 ms and benchmark TTFT 100, 600, 200 ms against TPOT ≤ 20 ms and TTFT ≤
    500 ms: the first point meets both (20 ms is at the limit: it meets it), the second breaks
    the TTFT limit, the third the TPOT limit; a NaN point meets nothing."""
    p = replace(_points(), tpot_s=np.array([[0.010, 0.020, 0.030]]),
                benchmark_ttft_s=np.array([[0.100, 0.600, 0.200]]))
    level = ServiceLevel(ttft_max_s=0.5, tpot_max_s=0.020)
    assert level.meets(p).tolist() == [[True, False, False]]
    assert ServiceLevel(tpot_max_s=0.020).meets(p).tolist() == [[True, True, False]]
    assert ServiceLevel(ttft_max_s=0.5).meets(
        replace(p, benchmark_ttft_s=np.array([[np.nan, 0.1, 0.1]]))).tolist() == \
        [[False, True, True]]


@pytest.mark.parametrize(("gpus", "fleet", "share"), [
    (3.0, 8, 0.75),  # 2 instances of 3 GPUs in 8: 6 of 8 GPUs serve
    (4.0, 8, 1.0),  # 2 instances of 4: all serve
    (8.0, 12, 8 / 12),  # 1 instance of 8 in 12
])
def test_fleet_throughput_per_gpu_golden(gpus, fleet, share):
    p = replace(_points(), tokens_per_s_per_gpu=np.array([[100.0, 200.0, 400.0]]))
    got = fleet_points(p, np.array([gpus]), fleet).tokens_per_s_per_gpu[0]
    assert got.tolist() == pytest.approx([100 * share, 200 * share, 400 * share], rel=1e-15)


def test_the_frontier_counts_only_points_that_meet_the_service_level():
    """No limit: the area of every point fitting memory; a TPOT limit below the fastest point's
    TPOT leaves nothing (area 0); a limit between keeps fewer points (a smaller area), and
    `usable` says which."""
    free = serving_scores([ARCH], [make_deployment(tp=1)], H200, WORKLOAD, WINDOW)
    tpot = free.points.tpot_s[free.points.fits_memory]
    none = serving_scores([ARCH], [make_deployment(tp=1)], H200, WORKLOAD, WINDOW,
                          service=ServiceLevel(tpot_max_s=float(tpot.min()) * 0.99))
    some = serving_scores([ARCH], [make_deployment(tp=1)], H200, WORKLOAD, WINDOW,
                          service=ServiceLevel(tpot_max_s=float(np.median(tpot))))
    assert none.frontier_area[0] == 0.0 and not none.usable.any()
    assert 0 < some.frontier_area[0] < free.frontier_area[0]
    assert some.usable.sum() < free.usable.sum()
    assert free.meets_sla is None and np.array_equal(free.usable, free.points.fits_memory)
