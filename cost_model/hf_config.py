"""The import path callers use for Hugging Face config import/export and file loading; the code
lives in the `cost_model.hf` package (one module per family group, the common reader, export,
files). Kept so that `from cost_model.hf_config import load_architecture` keeps working."""

from cost_model.hf import (
    ARCHSCOUT_JSON_KEY, ARCHSCOUT_JSON_VERSION, ARCHSCOUT_RECORD_KEY, EXPORT_ORDER,
    REMOTE_CODE_DEFAULTS, SUPPORTED_MODEL_TYPES, TEXT_CONFIG_WRAPPERS, TRANSFORMERS_DEFAULTS,
    TRANSFORMERS_MODEL_TYPES, architecture_from_hf_config, architecture_from_json_dict,
    architecture_to_hf_config, architecture_to_json_dict, load_architecture,
)  # fmt: skip

__all__ = [
    "ARCHSCOUT_JSON_KEY", "ARCHSCOUT_JSON_VERSION", "ARCHSCOUT_RECORD_KEY", "EXPORT_ORDER",
    "REMOTE_CODE_DEFAULTS", "SUPPORTED_MODEL_TYPES", "TEXT_CONFIG_WRAPPERS",
    "TRANSFORMERS_DEFAULTS", "TRANSFORMERS_MODEL_TYPES", "architecture_from_hf_config",
    "architecture_from_json_dict", "architecture_to_hf_config", "architecture_to_json_dict",
    "load_architecture",
]  # fmt: skip
