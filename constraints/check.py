"""Every constraint on one candidate (architecture + deployment), keyed by a stable name."""

from __future__ import annotations

from cost_model import Architecture, Deployment
from constraints.budget import check_aspect_ratio, check_gpus, check_memory_fit, check_params_budget
from constraints.sharding import (
    check_alignment, check_divisibility, check_kv_replication, check_nvfp4_block,
)
from constraints.violation import ConstraintRules, Violation

CONSTRAINT_NAMES: tuple[str, ...] = (
    "params_budget", "alignment", "divisibility", "kv_replication", "nvfp4_block", "memory_fit",
    "gpus", "aspect_ratio",
)


def check_candidate(arch: Architecture, dep: Deployment, rules: ConstraintRules,
                    max_concurrency: float, counted: tuple[int | None, int | None] = (None, None)
                    ) -> dict[str, Violation]:
    """All constraints, in `CONSTRAINT_NAMES` order. `max_concurrency`: the cost model's largest
    concurrency that fits memory (0 = nothing fits), computed by the caller. `counted`: the
    distinct GEMM dims and K dims under `dep` where the caller counted them aligned and whole
    blocks (`constraints.columns.aligned_counts`; None where not)."""
    found = (
        check_params_budget(arch, rules),
        check_alignment(arch, dep, rules.alignment, counted[0]),
        check_divisibility(arch, dep),
        check_kv_replication(arch, dep),
        check_nvfp4_block(arch, dep, counted[1]),
        check_memory_fit(max_concurrency),
        check_gpus(dep, rules.max_gpus),
        check_aspect_ratio(arch, rules.aspect_ratio_min, rules.aspect_ratio_max),
    )
    return {violation.name: violation for violation in found}
