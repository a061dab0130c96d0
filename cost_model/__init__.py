"""archscout layer 0: the analytic hardware cost model (numpy + pydantic only).

Its public API is `__all__`: what the other packages (constraints, objectives, search), their
tests, the benchmark scripts and users import, always as `from cost_model import name`. How one
TPOT is computed, module by module, is `cost_model/README.md`.

Importing `cost_model` loads none of its modules: each name is imported from its module the
first time it is read (`__getattr__`), so that a command loads only what it runs (the CLI's
start-up, tests/search/cli/test_startup_imports.py). The same names are listed three times, each
list for its reader: `__all__` for users and linters, the `TYPE_CHECKING` imports for type
checkers, `_HOMES` for the loader; tests/cost_model/test_public_api.py checks that they agree.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cost_model.architecture import (
        ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, LINEAR_MIXERS,
        MAMBA2_MIXER, NO_MIXER, PARALLEL_MAMBA2_MIXER, SLIDING_ATTENTION, Architecture,
        config_error_from, design_name, field_value, make_architecture, periodic_layer_types,
    )
    from cost_model.attention import (
        decode_attention_s, kv_cache_bytes_per_sequence, prefill_attention_s,
    )
    from cost_model.batch import ArchArrays, DeployArrays, Env
    from cost_model.benchmark_ttft import BenchmarkTerms, shipped_terms
    from cost_model.communication import all_reduce_s
    from cost_model.deployment import (
        ARRIVALS, DEFAULT_MAX_BATCH_SEQUENCES, DEFAULT_PREFILL_CHUNK_TOKENS,
        DEFAULT_SPEC_ACCEPTANCE_FRAC, ENGINES, SERVING_MODES, SPEC_METHODS, Deployment, Workload,
        deployment_violations, make_deployment, make_workload, validate_deployment,
    )
    from cost_model.disaggregated import DisaggregatedPoints, PoolLimits, evaluate_disaggregated
    from cost_model.efficiency import (
        CALIBRATION_DIR_ENV, DEFAULT_FILE, GENERIC, POINTS_FILE, Efficiency, GemmEfficiency,
        efficiency_from_toml, get_efficiency,
    )
    from cost_model.errors import ConfigError, CostModelError
    from cost_model.evaluate import concurrency_limits, evaluate_points
    from cost_model.frontier import frontier_area, pareto_mask
    from cost_model.gemm import (
        DEFAULT_OUT_PRECISION, HOT_DTYPE, GemmRates, gemm_cost, gemm_time_s,
        intensity_cap_flop_per_byte, quantize_time_s, tile_efficiency,
    )
    from cost_model.hardware import HardwareSpec, catalog_names, get_hardware
    from cost_model.host import request_step_s, trial_host_us
    from cost_model.hf import (
        ARCHSCOUT_RECORD_KEY, LoadedModel, architecture_from_hf_config, architecture_from_json_dict,
        architecture_to_hf_config, architecture_to_json_dict, deployment_formats, export_gap,
        formats_document, load_architecture, load_model, quantization_config_for,
    )
    from cost_model.layers import (
        GemmList, ffn_gemms, layer_gemms, moe_overhead_s, tokens_per_expert,
    )
    from cost_model.memory import (
        kv_bytes_per_gpu_per_sequence, usable_bytes_per_gpu, weight_bytes_per_gpu,
        workspace_bytes_per_gpu,
    )
    from cost_model.operating_points import OperatingPoints
    from cost_model.order_statistics import expected_largest_z
    from cost_model.params import count_params
    from cost_model.precision import PRECISIONS, Precision, get_precision
    from cost_model.serving_files import SERVING_FOLDER, serving_origins
    from cost_model.sharded_gemms import Dim, Term, WeightGemm, per_gpu_n, rows_of
    from cost_model.sourced import first_line, key_shown, shown, unknown_key_message
    from cost_model.step import bubble_frac, stage_forward, uncalibrated_components
    from cost_model.step_load import StepLoad
    from cost_model.units import FLOP_PER_MAC, GIB_BYTES, GIGA, MS_PER_S, TERA, US_PER_S

# module (under cost_model) -> the public names it defines
_HOMES: dict[str, tuple[str, ...]] = {
    "architecture": (
        "ATTENTION_MIXER", "FULL_ATTENTION", "GATED_DELTANET_MIXER", "KIMI_DELTA_MIXER",
        "LINEAR_MIXERS", "MAMBA2_MIXER", "NO_MIXER", "PARALLEL_MAMBA2_MIXER", "SLIDING_ATTENTION",
        "Architecture", "config_error_from", "design_name", "field_value", "make_architecture",
        "periodic_layer_types",
    ),
    "attention": ("decode_attention_s", "kv_cache_bytes_per_sequence", "prefill_attention_s"),
    "batch": ("ArchArrays", "DeployArrays", "Env"),
    "benchmark_ttft": ("BenchmarkTerms", "shipped_terms"),
    "communication": ("all_reduce_s",),
    "deployment": (
        "ARRIVALS", "DEFAULT_MAX_BATCH_SEQUENCES", "DEFAULT_PREFILL_CHUNK_TOKENS",
        "DEFAULT_SPEC_ACCEPTANCE_FRAC", "ENGINES", "SERVING_MODES", "SPEC_METHODS", "Deployment",
        "Workload", "deployment_violations", "make_deployment", "make_workload",
        "validate_deployment",
    ),
    "disaggregated": ("DisaggregatedPoints", "PoolLimits", "evaluate_disaggregated"),
    "efficiency": (
        "CALIBRATION_DIR_ENV", "DEFAULT_FILE", "GENERIC", "POINTS_FILE", "Efficiency",
        "GemmEfficiency", "efficiency_from_toml", "get_efficiency",
    ),
    "errors": ("ConfigError", "CostModelError"),
    "evaluate": ("concurrency_limits", "evaluate_points"),
    "frontier": ("frontier_area", "pareto_mask"),
    "gemm": (
        "DEFAULT_OUT_PRECISION", "HOT_DTYPE", "GemmRates", "gemm_cost", "gemm_time_s",
        "intensity_cap_flop_per_byte", "quantize_time_s", "tile_efficiency",
    ),
    "hardware": ("HardwareSpec", "catalog_names", "get_hardware"),
    "hf": (
        "ARCHSCOUT_RECORD_KEY", "LoadedModel", "architecture_from_hf_config",
        "architecture_from_json_dict", "architecture_to_hf_config", "architecture_to_json_dict",
        "deployment_formats", "export_gap", "formats_document", "load_architecture", "load_model",
        "quantization_config_for",
    ),
    "host": ("request_step_s", "trial_host_us"),
    "layers": ("GemmList", "ffn_gemms", "layer_gemms", "moe_overhead_s", "tokens_per_expert"),
    "memory": (
        "kv_bytes_per_gpu_per_sequence", "usable_bytes_per_gpu", "weight_bytes_per_gpu",
        "workspace_bytes_per_gpu",
    ),
    "operating_points": ("OperatingPoints",),
    "order_statistics": ("expected_largest_z",),
    "params": ("count_params",),
    "precision": ("PRECISIONS", "Precision", "get_precision"),
    "serving_files": ("SERVING_FOLDER", "serving_origins"),
    "sharded_gemms": ("Dim", "Term", "WeightGemm", "per_gpu_n", "rows_of"),
    "sourced": ("first_line", "key_shown", "shown", "unknown_key_message"),
    "step": ("bubble_frac", "stage_forward", "uncalibrated_components"),
    "step_load": ("StepLoad",),
    "units": ("FLOP_PER_MAC", "GIB_BYTES", "GIGA", "MS_PER_S", "TERA", "US_PER_S"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "all_reduce_s",
    "ArchArrays",
    "Architecture",
    "architecture_from_hf_config",
    "architecture_from_json_dict",
    "architecture_to_hf_config",
    "architecture_to_json_dict",
    "ARCHSCOUT_RECORD_KEY",
    "ARRIVALS",
    "ATTENTION_MIXER",
    "BenchmarkTerms",
    "bubble_frac",
    "CALIBRATION_DIR_ENV",
    "catalog_names",
    "concurrency_limits",
    "config_error_from",
    "ConfigError",
    "CostModelError",
    "count_params",
    "decode_attention_s",
    "DEFAULT_FILE",
    "DEFAULT_MAX_BATCH_SEQUENCES",
    "DEFAULT_OUT_PRECISION",
    "DEFAULT_PREFILL_CHUNK_TOKENS",
    "DEFAULT_SPEC_ACCEPTANCE_FRAC",
    "DeployArrays",
    "Deployment",
    "deployment_formats",
    "deployment_violations",
    "design_name",
    "Dim",
    "DisaggregatedPoints",
    "Efficiency",
    "efficiency_from_toml",
    "ENGINES",
    "Env",
    "evaluate_disaggregated",
    "evaluate_points",
    "expected_largest_z",
    "export_gap",
    "ffn_gemms",
    "field_value",
    "first_line",
    "FLOP_PER_MAC",
    "formats_document",
    "frontier_area",
    "FULL_ATTENTION",
    "GATED_DELTANET_MIXER",
    "gemm_cost",
    "gemm_time_s",
    "GemmEfficiency",
    "GemmList",
    "GemmRates",
    "GENERIC",
    "get_efficiency",
    "get_hardware",
    "get_precision",
    "GIB_BYTES",
    "GIGA",
    "HardwareSpec",
    "HOT_DTYPE",
    "intensity_cap_flop_per_byte",
    "key_shown",
    "KIMI_DELTA_MIXER",
    "kv_bytes_per_gpu_per_sequence",
    "kv_cache_bytes_per_sequence",
    "layer_gemms",
    "LINEAR_MIXERS",
    "load_architecture",
    "load_model",
    "LoadedModel",
    "make_architecture",
    "make_deployment",
    "make_workload",
    "MAMBA2_MIXER",
    "moe_overhead_s",
    "MS_PER_S",
    "NO_MIXER",
    "OperatingPoints",
    "PARALLEL_MAMBA2_MIXER",
    "pareto_mask",
    "per_gpu_n",
    "periodic_layer_types",
    "POINTS_FILE",
    "PoolLimits",
    "Precision",
    "PRECISIONS",
    "prefill_attention_s",
    "quantization_config_for",
    "quantize_time_s",
    "request_step_s",
    "rows_of",
    "SERVING_FOLDER",
    "SERVING_MODES",
    "serving_origins",
    "shipped_terms",
    "shown",
    "SLIDING_ATTENTION",
    "SPEC_METHODS",
    "stage_forward",
    "StepLoad",
    "TERA",
    "Term",
    "tile_efficiency",
    "tokens_per_expert",
    "trial_host_us",
    "uncalibrated_components",
    "unknown_key_message",
    "US_PER_S",
    "usable_bytes_per_gpu",
    "validate_deployment",
    "weight_bytes_per_gpu",
    "WeightGemm",
    "Workload",
    "workspace_bytes_per_gpu",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (then it is a plain attribute)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'cost_model' has no attribute {name!r}")
    value = getattr(import_module(f"cost_model.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
