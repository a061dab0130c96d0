"""The cost model's verdict on a change for `archscout lint` (`search/lint/support.py` has the
rest): TPOT at concurrency 1, tokens/s/GPU at the throughput end and the frontier area of an
(architecture, deployment) from `evaluate_points`, and the before → after documents and text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cost_model.architecture import Architecture
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import HardwareSpec
from cost_model.units import MS_PER_S

# policy: the least frontier-area gain that counts as raising it (what "+0.1%" prints: below it
# the change is the sweep's rounding, not a gain)
MIN_FRONTIER_GAIN_FRAC = 0.001


@dataclass(frozen=True)
class Measured:
    """One (architecture, deployment) on the linted hardware and workload."""

    tpot_s: float  # at concurrency 1 (computed even when memory does not hold one sequence)
    communication_s: float  # TPOT breakdown at concurrency 1
    other_s: float
    tokens_per_s_per_gpu: float  # the best point that fits memory: the throughput end
    frontier_area: float
    max_concurrency: float


def measure(pairs: Sequence[tuple[Architecture, Deployment]], hw: HardwareSpec,
            workload: Workload, window: tuple[float, float]) -> list[Measured]:
    """Every pair through `evaluate_points`: one swept call, one at concurrency 1."""
    archs, deps = [p[0] for p in pairs], [p[1] for p in pairs]
    sweep = evaluate_points(archs, deps, hw, workload)
    one = evaluate_points(archs, deps, hw, workload, np.array([1.0]))
    fits = np.where(sweep.fits_memory, sweep.tokens_per_s_per_gpu, np.nan)
    best = [float(np.nanmax(row)) if np.isfinite(row).any() else math.nan for row in fits]
    area = sweep.frontier_area(*window)
    return [Measured(float(one.tpot_s[i, 0]), float(one.communication_s[i, 0]),
                     float(one.other_s[i, 0]), best[i], float(area[i]),
                     float(sweep.max_concurrency[i, 0])) for i in range(len(pairs))]


def raises_frontier(before: Measured, after: Measured, factor: float = 1.0) -> bool:
    """`after`'s frontier area (× `factor`, `Fix.frontier_factor`) above `before`'s (any area
    above none: a model that did not fit)."""
    if not (math.isfinite(before.frontier_area) and before.frontier_area > 0):
        return math.isfinite(after.frontier_area) and after.frontier_area > 0
    return after.frontier_area * factor >= before.frontier_area * (1 + MIN_FRONTIER_GAIN_FRAC)


def change_frac(before: float, after: float) -> float:
    ok = math.isfinite(before) and math.isfinite(after) and before > 0
    return after / before - 1.0 if ok else math.nan


def change_document(before: Measured, after: Measured, factor: float = 1.0) -> dict:
    """Before → after: TPOT@1, tokens/s/GPU at the throughput end, frontier area, concurrency;
    with `factor` (`Fix.frontier_factor`) ≠ 1, the frontier area change with it too."""
    pairs = {"tpot_ms": (before.tpot_s * MS_PER_S, after.tpot_s * MS_PER_S),
             "tokens_per_s_per_gpu": (before.tokens_per_s_per_gpu, after.tokens_per_s_per_gpu),
             "frontier_area": (before.frontier_area, after.frontier_area),
             "max_concurrency": (before.max_concurrency, after.max_concurrency)}
    doc = {key: list(pair) for key, pair in pairs.items()}
    doc.update(tpot_change_frac=change_frac(*pairs["tpot_ms"]),
               throughput_change_frac=change_frac(*pairs["tokens_per_s_per_gpu"]),
               frontier_area_change_frac=change_frac(*pairs["frontier_area"]))
    if factor != 1.0:
        doc.update(frontier_factor=factor, balanced_frontier_area_change_frac=change_frac(
            before.frontier_area, after.frontier_area * factor))
    return doc


def _number(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) and value > 0 else "no fit"


def _pct(frac: float) -> str:
    return "" if not math.isfinite(frac) else f" ({frac:+.1%})"


def change_text(doc: dict) -> str:
    """"TPOT@1 2.88→2.81 ms (−2.4%), 9,369→9,800 tok/s/GPU (+4.6%), frontier area +3.1%"."""
    (t0, t1), (y0, y1) = doc["tpot_ms"], doc["tokens_per_s_per_gpu"]
    area = doc["frontier_area_change_frac"]
    before, after = _number(y0), _number(y1)
    tokens = before if before == after == "no fit" else f"{before}→{after}"
    balanced = doc.get("balanced_frontier_area_change_frac", math.nan)
    return (f"TPOT@1 {t0:.3g}→{t1:.3g} ms{_pct(doc['tpot_change_frac'])}, {tokens} tok/s/GPU"
            f"{_pct(doc['throughput_change_frac'])}"
            + (f", frontier area {area:+.1%}" if math.isfinite(area) else "")
            + (f" ({balanced:+.1%} with the stage balance the cost model does not see)"
               if math.isfinite(balanced) else ""))
