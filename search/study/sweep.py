"""The frontier of each architecture over the deployments it was scored under, for a batch.

A study that sweeps deployments scores every architecture of a batch under every deployment its
space allows in one cost-model pass (`evaluation.score_valid`); each architecture's frontier is
the Pareto envelope of the operating points of its usable deployments, its area the study's
`frontier_area`. Here all envelopes of a batch are computed together: architectures with as many
usable deployments are stacked into one (architectures, points) array, so each area comes out
of `frontier_area` exactly as for that architecture alone (`swept_envelope` is the one-at-a-time
form `report` uses). Points the study's SLA rules out do not count (`ServingScores.usable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cost_model import frontier_area, pareto_mask
from objectives import ServingScores, Window


@dataclass(frozen=True)
class Envelope:
    """One architecture's frontier over its usable rows: its area and the (row, column) of
    each point on it, in the rows' order."""

    area: float
    points: list[tuple[int, int]]


def _stacked(scores: ServingScores, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of `rows`' points on one line: interactivity and throughput, NaN where a point
    does not count (`ServingScores.usable`: out of memory, or missing the SLA)."""
    p = scores.points
    return p.tokens_per_s_per_user[rows].reshape(-1), \
        np.where(scores.usable[rows], p.tokens_per_s_per_gpu[rows], np.nan).reshape(-1)


def envelopes(scores: ServingScores, usable: Sequence[Sequence[int]], w: Window
              ) -> list[Envelope]:
    """The envelope of each architecture's `usable` rows (lists of row indices; an empty one
    gets area 0 and no points)."""
    out: list[Envelope | None] = [None] * len(usable)
    columns = scores.points.concurrency.shape[1]
    by_size: dict[int, list[int]] = {}
    for i, rows in enumerate(usable):
        by_size.setdefault(len(rows), []).append(i)
    for size, members in by_size.items():
        if size == 0:
            for i in members:
                out[i] = Envelope(0.0, [])
            continue
        lines = [_stacked(scores, list(usable[i])) for i in members]
        x, y = np.stack([a for a, _ in lines]), np.stack([b for _, b in lines])
        areas = frontier_area(x, y, w.x_lo, w.x_hi, w.log_x)
        on = pareto_mask(x, y)
        for line, i in enumerate(members):
            rows = list(usable[i])
            out[i] = Envelope(float(areas[line]), [(rows[j // columns], j % columns)
                                                   for j in np.flatnonzero(on[line])])
    return out
