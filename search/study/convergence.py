"""Whether a search has settled, and where its Pareto set meets the edges of the space.

- Convergence: the hypervolume of the feasible front after the first 80% of the finished trials
  against after all of them, as a relative change. The front is the trials' objective values,
  each scaled to [0, 1] over the final feasible set (0 the best), against the reference point
  `HV_REFERENCE` in every objective: the same measure `plot --kind history` draws. A change above
  `MOVING_HV_CHANGE_FRAC` means the front still moved in the last 20% of trials.
- Bounds: the searched numeric dimensions at whose smallest or largest option some Pareto entry
  sits (with two options, where every value is an edge: every entry), using the value the
  design uses (none when the field is unused, e.g. the dense width of an MoE without dense
  layers).
  Natural edges are not reported: a lower edge of 0 or 1 (no experts, one KV head, tp1) and an
  upper edge of a parallel degree that cannot double within `max_gpus`.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import moocore
import numpy as np
from optuna.trial import FrozenTrial, TrialState

from search.study.space import Candidate, searched_dimensions, used_values
from search.study.spec import Dimension, StudySpec

HV_REFERENCE = 1.1  # reference point in normalized objectives: the worst feasible value + 10%
LATE_FRAC = 0.2  # the last fifth of the trials
# A relative hypervolume gain above this in the last fifth: the front still moved. Measured
# (seed 0): quickstart +2.1% at 384 trials, +3.0% at 1,000, +0.26% at 2,000; moe-400b-gb300-nvl72
# +7.0% at 2,000, +0.26% at 8,000; a ~30B/3B MoE on 8x H200 +0.07% at 8,000.
MOVING_HV_CHANGE_FRAC = 0.001
PARALLEL_DEGREES = ("tp", "ep", "pp", "dp")
NATURAL_FLOOR = 1


def feasible_trial(trial: FrozenTrial, hard: Sequence[str]) -> bool:
    return (trial.state == TrialState.COMPLETE and trial.values is not None
            and all(np.isfinite(trial.values))
            and all(trial.constraints.get(n, 0.0) <= 0 for n in hard))


def normalized(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Objectives mapped to [0, 1], 0 the best and 1 the worst of `values` (all minimized)."""
    lo, hi = values.min(axis=0), values.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = (values - lo) / span
    maximize = np.array([d == "maximize" for d in directions])
    return np.where(maximize, 1.0 - z, z)


def hypervolume(z: np.ndarray) -> float:
    return float(moocore.hypervolume(z, ref=HV_REFERENCE)) if len(z) else 0.0


def convergence(spec: StudySpec, finished: Iterable[FrozenTrial], hard: Sequence[str]) -> dict:
    """The hypervolume trend over the last `LATE_FRAC` of the finished trials (by number)."""
    trials = sorted(finished, key=lambda t: t.number)
    early_count = math.ceil(len(trials) * (1 - LATE_FRAC))
    doc = {"trials": len(trials), "early_trials": early_count,
           "hypervolume_early": None, "hypervolume": None, "relative_change_frac": None,
           "still_moving": None, "moving_threshold_frac": MOVING_HV_CHANGE_FRAC}
    feasible = [(i < early_count, t.values) for i, t in enumerate(trials)
                if feasible_trial(t, hard)]
    if not feasible:
        return doc
    z = normalized(np.array([v for _, v in feasible], dtype=float), spec.objectives.directions)
    early = np.array([e for e, _ in feasible])
    final, before = hypervolume(z), hypervolume(z[early])
    change = (final - before) / final if final > 0 else 0.0
    return {**doc, "hypervolume_early": before, "hypervolume": final,
            "relative_change_frac": change, "still_moving": change > MOVING_HV_CHANGE_FRAC}


# The exact front's hypervolume measure (tests/benchmarks/bench_search_quality.py, issue 12):
# objectives normalized with the bounds of every feasible design of the space (0 the best), the
# reference point that nadir plus this margin.
EXACT_REF_MARGIN = 0.01


def exact_fraction(spec: StudySpec, exact: dict, trials: Iterable[FrozenTrial],
                   hard: Sequence[str]) -> float | None:
    """The hypervolume of the feasible `trials`' values as a fraction of the exact front's
    (`exact`: the study's `exhaustive.EXACT_ATTR` record); None without a feasible design."""
    if not exact.get("values") or exact.get("feasible_min") is None:
        return None
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in spec.objectives.directions])
    bounds = np.array([exact["feasible_min"], exact["feasible_max"]]) * sign
    lo, hi = bounds.min(axis=0), bounds.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    ref = np.full(len(sign), 1.0 + EXACT_REF_MARGIN)

    def volume(values) -> float:
        z = (np.asarray(values, dtype=float).reshape(-1, len(sign)) * sign - lo) / span
        return float(moocore.hypervolume(z, ref=ref)) if len(z) else 0.0

    found = [t.values for t in trials if feasible_trial(t, hard)]
    whole = volume(exact["values"])
    return volume(found) / whole if whole > 0 else None


def exact_line(doc: dict) -> str:
    """'exact front: 162 designs (every one of 138,996 parameter sets, 22,121 inside the rules,
    1256.2 s); the 2,000 sampled trials reach 99.1% of its hypervolume' (the quickstart)."""
    e = doc["exact_front"]
    head = (f"exact front: {len(e['trials'])} designs (every one of {e['designs']:,} parameter "
            f"sets, {e['within_rules']:,} inside the rules, {e['wall_s']:.1f} s)")
    if not e.get("sampled_trials"):
        return head
    share = e.get("hypervolume_frac")
    reach = "none feasible" if share is None else f"{share:.1%} of its hypervolume"
    return f"{head}; the {e['sampled_trials']:,} sampled trials reach {reach}"


def _natural(spec: StudySpec, name: str, side: str, edge: int) -> bool:
    if side == "min":
        return edge <= NATURAL_FLOOR
    return name in PARALLEL_DEGREES and 2 * edge > spec.hardware.max_gpus


def _edges(dim: Dimension) -> tuple[int, int] | None:
    """The smallest and largest option of a numeric dimension (a range is not materialized);
    None for a fixed dimension or one of names (precisions)."""
    if dim.value is not None:
        return None
    if dim.choices is None:
        return dim.min, dim.max
    if not all(isinstance(o, int) for o in dim.choices):
        return None
    return min(dim.choices), max(dim.choices)


def bounds_reached(spec: StudySpec, ranked: Sequence[tuple[int, Sequence[Candidate]]]
                   ) -> list[dict]:
    """Each (dimension, edge) some Pareto entry sits at: the edge and the ranks that use it.
    `ranked` gives each entry's rank and the candidates (deployments) realizing its frontier."""
    used = [(rank, [used_values(c) for c in cands]) for rank, cands in ranked]
    hits = []
    for name, dim in searched_dimensions(spec.space).items():
        edges = _edges(dim)
        if edges is None:
            continue
        needed = len(used) if len(dim.options) == 2 else 1  # two options: a unanimous edge only
        for side, edge in zip(("min", "max"), edges):
            ranks = [rank for rank, values in used if any(v[name] == edge for v in values)]
            if len(ranks) >= needed and ranks and not _natural(spec, name, side, edge):
                hits.append({"dimension": name, "bound": side, "value": edge,
                             "entries": len(ranks), "ranks": ranks})
    return hits


def convergence_line(doc: dict) -> str:
    c = doc
    if c["still_moving"] is None:
        return "convergence: no feasible trial yet"
    trend = (f"hypervolume {c['relative_change_frac']:+.2%} from {c['early_trials']:,} to "
             f"{c['trials']:,} trials")
    if c["still_moving"]:
        return (f"convergence: the front still moved in the last {LATE_FRAC:.0%} of trials "
                f"({trend}); more trials may find better designs")
    return f"convergence: the front did not move in the last {LATE_FRAC:.0%} of trials ({trend})"


def bounds_line(hits: list[dict], entries: int) -> str:
    """'bounds: the Pareto set presses against the space at num_layers min 32 (1 of 28 entries,
    rank 1), …' or that it does not."""
    if not hits:
        return "bounds: no Pareto entry sits at an edge of a searched range"
    parts = [f"{h['dimension']} {h['bound']} {h['value']:,} ({h['entries']} of {entries} "
             f"entries, best rank {min(h['ranks'])})" for h in hits]
    return ("bounds: the Pareto set presses against the space at " + ", ".join(parts)
            + "; widen these to search past them")
