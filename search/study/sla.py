"""Which of a study's service-level limits bind: the top design's frontier area with every
limit, against its area with each limit lifted (the others kept). A limit that, lifted, lets
the frontier grow rules out points the design would otherwise put on it: it binds."""

from __future__ import annotations

from typing import Callable

from search.study.spec import StudySpec

# Relative growth of the area below which a lifted limit counts as not binding (float noise)
BINDING_REL = 1e-9
LIMITS = (("ttft_max_ms", "TTFT ≤ {:g} ms"), ("tpot_max_ms", "TPOT ≤ {:g} ms"),
          ("interactivity_min", "interactivity ≥ {:g} tokens/s/user"))


def lifted(spec: StudySpec, field: str) -> StudySpec:
    """`spec` without the SLA limit `field` (without an `[sla]` when it was the only one)."""
    rest = {name: getattr(spec.sla, name) for name, _ in LIMITS if name != field}
    kept = {name: value for name, value in rest.items() if value is not None}
    sla = spec.sla.model_copy(update={field: None}) if kept else None
    return spec.model_copy(update={"sla": sla})


def binding(spec: StudySpec, area: float, area_of: Callable[[StudySpec], float]) -> list[dict]:
    """Each limit of `spec.sla`: its label, the top design's area without it (`area_of` a
    spec), and whether it binds (`area` is the design's area with every limit)."""
    if spec.sla is None:
        return []
    out = []
    for field, label in LIMITS:
        value = getattr(spec.sla, field)
        if value is None:
            continue
        without = area_of(lifted(spec, field))
        out.append({"limit": field, "value": value, "label": label.format(value),
                    "area_without": without, "binds": without > area * (1 + BINDING_REL)})
    return out


def binding_line(doc: dict) -> str:
    """'sla: TPOT ≤ 20 ms binds (the top design's frontier area 1.2e+04, 3.4e+04 without it);
    TTFT ≤ 500 ms does not bind'."""
    sla = doc["sla"]
    parts = []
    for limit in sla["binding"]:
        if limit["binds"]:
            parts.append(f"{limit['label']} binds (the top design's frontier area "
                         f"{sla['area']:.4g}, {limit['area_without']:.4g} without it)")
        else:
            parts.append(f"{limit['label']} does not bind")
    return "sla: " + "; ".join(parts)
