"""Constraints on size and resources: parameter budget, memory fit, GPU count, aspect ratio."""

from __future__ import annotations

import math

from cost_model import Architecture, Deployment, count_params
from constraints.errors import ConstraintError
from constraints.violation import ConstraintRules, Violation, unconstrained

PARAMS_PER_BILLION = 1e9
MIN_SEQUENCES = 1  # memory must hold at least one sequence at the workload's full context


def _billions(params: float) -> str:
    return f"{params / PARAMS_PER_BILLION:.3g}B"


def check_params_budget(arch: Architecture, rules: ConstraintRules) -> Violation:
    """Total (and active) params within `params_tolerance_frac` of their targets;
    value = max |actual/target − 1| − tolerance."""
    counts = count_params(arch)
    pairs = [(field, actual, target) for field, actual, target in (
        ("total_params", counts.total_params, rules.total_params),
        ("active_params", counts.active_params, rules.active_params),
    ) if target is not None]
    if not pairs:
        return unconstrained("params_budget")
    tolerance = rules.params_tolerance_frac
    deviations = [abs(actual / target - 1.0) for _, actual, target in pairs]
    field, actual, target = pairs[max(range(len(pairs)), key=deviations.__getitem__)]
    worst = max(deviations)
    verdict = "ok: " if worst <= tolerance else ""
    return Violation("params_budget", worst - tolerance,
                     f"{verdict}`{field}` {_billions(actual)} is {worst:.1%} from the target "
                     f"{_billions(target)} (tolerance {tolerance:.0%})")


def check_memory_fit(max_concurrency: float) -> Violation:
    """At least one sequence fits next to the weights; value = 1 − max_concurrency."""
    if not math.isfinite(max_concurrency) or max_concurrency < 0:
        raise ConstraintError(
            f"`max_concurrency` must be a finite number >= 0; got {max_concurrency}")
    sequences = float(max_concurrency)
    value = MIN_SEQUENCES - sequences
    if value <= 0:
        return Violation("memory_fit", value, f"ok: {sequences:g} sequences fit in memory")
    return Violation("memory_fit", value, f"{sequences:g} sequences fit in memory: the weights "
                     "and workspace leave no room for one sequence's KV cache at the full context")


def check_gpus(dep: Deployment, max_gpus: int | None) -> Violation:
    """GPUs per model instance (TP·DP·PP, ·KVP under Helix) at most `max_gpus`;
    value = gpus − max_gpus."""
    if max_gpus is None:
        return unconstrained("gpus")
    value = float(dep.gpus - max_gpus)
    verdict = "ok: " if value <= 0 else ""
    relation = "<=" if value <= 0 else "exceeds"
    names, sizes = "TP·DP·PP", f"{dep.tp}·{dep.dp}·{dep.pp}"
    if dep.kvp > 1:
        names, sizes = f"{names}·KVP", f"{sizes}·{dep.kvp}"
    return Violation("gpus", value, f"{verdict}{names} = {sizes} = {dep.gpus} "
                     f"GPUs {relation} `max_gpus` ({max_gpus})")


def check_aspect_ratio(arch: Architecture, low: float | None, high: float | None) -> Violation:
    """`hidden_size`/`num_layers` within [low, high]; value = relative distance outside the band
    (negative inside: the relative margin to the nearest set bound)."""
    if low is None and high is None:
        return unconstrained("aspect_ratio")
    ratio = arch.hidden_size / arch.num_layers
    distances = [(low - ratio) / low] if low is not None else []
    distances += [(ratio - high) / high] if high is not None else []
    value = max(distances)
    verdict = "ok: " if value <= 0 else ""
    band = f"[{'−∞' if low is None else f'{low:g}'}, {'∞' if high is None else f'{high:g}'}]"
    return Violation("aspect_ratio", value, f"{verdict}`hidden_size`/`num_layers` = "
                     f"{arch.hidden_size}/{arch.num_layers} = {ratio:.1f}, band {band}")
