"""archscout layer 1: feasibility of a candidate as violation floats (<= 0 feasible) with
messages: one `Violation` per name in `CONSTRAINT_NAMES`, from `check_candidate`; the serving
engines' rules (`engine_violations`, `format_refusal`) and the layer-pattern rules a search space
filters by; the GEMM dims after sharding and their alignment checks, which `archscout lint` prices.

`__all__` is what other packages and users call; the modules are this package's own."""

from constraints.budget import check_aspect_ratio, check_params_budget
from constraints.check import CONSTRAINT_NAMES, check_candidate
from constraints.columns import (
    DeploymentColumns, aligned_counts, constraint_values, linear_broken, memory_fit_values,
    pattern_broken, sharding_broken, static_values,
)
from constraints.engines import ENGINE_LABELS, ENGINE_NAMES, engine_violations, format_refusal
from constraints.errors import ConstraintError
from constraints.shapes import GemmDim, gemm_dims
from constraints.sharding import (
    check_alignment, check_kv_replication, check_nvfp4_block, linear_attention_violations,
    padding_waste_frac, pattern_stage_violations,
)
from constraints.violation import ConstraintRules, Violation

__all__ = [
    "CONSTRAINT_NAMES", "ConstraintError", "ConstraintRules", "DeploymentColumns",
    "ENGINE_LABELS", "ENGINE_NAMES", "GemmDim", "Violation", "aligned_counts", "check_alignment",
    "check_aspect_ratio", "check_candidate",
    "check_kv_replication", "check_nvfp4_block", "check_params_budget", "constraint_values",
    "engine_violations",
    "format_refusal", "gemm_dims", "linear_attention_violations", "linear_broken",
    "memory_fit_values", "padding_waste_frac", "pattern_broken", "pattern_stage_violations",
    "sharding_broken", "static_values",
]
