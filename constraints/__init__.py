"""archscout layer 1: feasibility of a candidate as violation floats (<= 0 feasible) with
messages: one `Violation` per name in `CONSTRAINT_NAMES`, from `check_candidate`."""

from constraints.budget import check_aspect_ratio, check_gpus, check_memory_fit, check_params_budget
from constraints.check import CONSTRAINT_NAMES, check_candidate
from constraints.errors import ConstraintError
from constraints.shapes import GemmDim, gemm_dims
from constraints.sharding import (
    check_alignment, check_divisibility, check_kv_replication, check_nvfp4_block,
    padding_waste_frac,
)
from constraints.violation import ConstraintRules, Violation

__all__ = [
    "CONSTRAINT_NAMES", "ConstraintError", "ConstraintRules", "GemmDim", "Violation",
    "check_alignment", "check_aspect_ratio", "check_candidate", "check_divisibility", "check_gpus",
    "check_kv_replication", "check_memory_fit", "check_nvfp4_block", "check_params_budget",
    "gemm_dims", "padding_waste_frac",
]
