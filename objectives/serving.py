"""Serving objectives of candidates, from the cost model's operating points: frontier area,
first-token latency at a stated concurrency, GPUs per instance. Vectorized over candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cost_model import (
    MS_PER_S, Architecture, Deployment, HardwareSpec, OperatingPoints, Workload, evaluate_points,
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
class ServingScores:
    points: OperatingPoints
    frontier_area: np.ndarray  # (n,)
    max_concurrency: np.ndarray  # (n,)
    ttft_ms: np.ndarray  # (n,), NaN where the concurrency does not fit
    gpus: np.ndarray  # (n,)


def serving_scores(archs: Sequence[Architecture], deps: Sequence[Deployment], hw: HardwareSpec,
                   workload: Workload, window: Window, ttft_concurrency: int | None = None
                   ) -> ServingScores:
    """Frontier (sweep to the memory limit), its area, and optionally TTFT at one concurrency."""
    points = evaluate_points(archs, deps, hw, workload)
    limit = points.max_concurrency[:, 0]
    ttft = np.full(len(archs), np.nan)
    if ttft_concurrency is not None:
        at = evaluate_points(archs, deps, hw, workload, [ttft_concurrency])
        ttft = np.where(at.fits_memory[:, 0], at.ttft_s[:, 0] * MS_PER_S, np.nan)
    return ServingScores(points=points, max_concurrency=limit, ttft_ms=ttft,
                         frontier_area=points.frontier_area(window.x_lo, window.x_hi, window.log_x),
                         gpus=np.array([d.gpus for d in deps], dtype=float))
