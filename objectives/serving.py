"""Serving objectives of candidates, from the cost model's operating points: frontier area,
first-token latency at a stated concurrency, GPUs per instance. Vectorized over candidates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from cost_model import (
    MS_PER_S, Architecture, Deployment, HardwareSpec, OperatingPoints, Workload, evaluate_points,
    frontier_area,
)


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "maximize" | "minimize"
    unit: str
    description: str


OBJECTIVES = {o.name: o for o in (
    Objective("frontier_area", "maximize", "tokens/s/GPU × decades of tokens/s/user",
              "area under the throughput–interactivity frontier inside the study's window"),
    Objective("loss", "minimize", "nats", "predicted pre-training loss (accuracy proxy)"),
    Objective("ttft_ms", "minimize", "ms", "time to first token at the stated concurrency"),
    Objective("gpus", "minimize", "GPUs", "GPUs one model instance uses"),
)}


@dataclass(frozen=True)
class Window:
    """The interactivity window of the frontier area (tokens/s/user) and its x scale."""

    x_lo: float
    x_hi: float
    log_x: bool = True


@dataclass(frozen=True)
class ServiceLevel:
    """Limits every frontier point must meet (None: no limit): mean TPOT, and the TTFT a
    benchmark client measures at the point's concurrency (`OperatingPoints.benchmark_ttft_s`,
    what published serving results report)."""

    ttft_max_s: float | None = None
    tpot_max_s: float | None = None

    def meets(self, points: OperatingPoints) -> np.ndarray:
        """Whether each point meets every limit (NaN points do not)."""
        ok = np.ones(points.tpot_s.shape, dtype=bool)
        if self.tpot_max_s is not None:
            ok &= points.tpot_s <= self.tpot_max_s
        if self.ttft_max_s is not None:
            ok &= points.benchmark_ttft_s <= self.ttft_max_s
        return ok


@dataclass(frozen=True)
class ServingScores:
    points: OperatingPoints
    frontier_area: np.ndarray  # (n,)
    max_concurrency: np.ndarray  # (n,)
    ttft_ms: np.ndarray  # (n,), NaN where the concurrency does not fit
    gpus: np.ndarray  # (n,)
    meets_sla: np.ndarray | None = None  # (n, points): meets the service level (None: all do)

    @property
    def usable(self) -> np.ndarray:
        """Points that count on a frontier: they fit memory and meet the service level."""
        fits = self.points.fits_memory
        return fits if self.meets_sla is None else fits & self.meets_sla


def fleet_points(points: OperatingPoints, gpus: np.ndarray, fleet_gpus: int) -> OperatingPoints:
    """`points` served by a fleet of `fleet_gpus` GPUs: ⌊fleet/instance⌋ instances of `gpus`
    each, so the throughput per fleet GPU is the instance's times ⌊G/g⌋·g/G (the GPUs left over
    serve nothing)."""
    instances = np.floor(fleet_gpus / gpus)
    packed = (instances * gpus / fleet_gpus).reshape(-1, 1)
    return replace(points, tokens_per_s_per_gpu=points.tokens_per_s_per_gpu * packed)


def serving_scores(archs: Sequence[Architecture], deps: Sequence[Deployment], hw: HardwareSpec,
                   workload: Workload, window: Window, ttft_concurrency: int | None = None,
                   service: ServiceLevel | None = None, fleet_gpus: int | None = None
                   ) -> ServingScores:
    """Frontier (sweep to the memory limit), its area, and optionally TTFT at one concurrency.
    With a `service` level the frontier counts only the points that meet it; with
    `fleet_gpus`, throughput is per GPU of that fleet (`fleet_points`)."""
    points = evaluate_points(archs, deps, hw, workload)
    gpus = np.array([d.gpus for d in deps], dtype=float)
    if fleet_gpus is not None:
        points = fleet_points(points, gpus, fleet_gpus)
    limit = points.max_concurrency[:, 0]
    ttft = np.full(len(archs), np.nan)
    if ttft_concurrency is not None:
        at = evaluate_points(archs, deps, hw, workload, [ttft_concurrency])
        ttft = np.where(at.fits_memory[:, 0], at.ttft_s[:, 0] * MS_PER_S, np.nan)
    meets = None if service is None else service.meets(points)
    usable = points.fits_memory if meets is None else points.fits_memory & meets
    area = frontier_area(points.tokens_per_s_per_user,
                         np.where(usable, points.tokens_per_s_per_gpu, np.nan),
                         window.x_lo, window.x_hi, window.log_x)
    return ServingScores(points=points, max_concurrency=limit, ttft_ms=ttft,
                         frontier_area=area, gpus=gpus, meets_sla=meets)
