"""Hugging Face `config.json` <-> `Architecture`, and loading either format from a file.

- `importer`: `architecture_from_hf_config`, dispatching on `model_type` to a `Family` of
  `gqa` (GQA/sliding/chunked transformers), `mla` (DeepSeek MLA and DSA), `hybrid` (linear-
  attention layers: Qwen3-Next/3.5, Nemotron-H, Bamba, Kimi Linear, Falcon-H1) or `nas`
  (Nemotron-NAS, remote code); `common` holds what the readers share.
- `export`: `architecture_to_hf_config`, the most natural exact `model_type`.
- `files`: our own JSON, `load_architecture` and `load_model` (with the checkpoint's formats
  and the defaults assumed).
- `schema`: the guards on a config file and its keys (size, nesting, bounds, RoPE, nearest key).
- `quantization` / `checkpoint` / `quant_export`: a checkpoint's `quantization_config` per
  component (`checkpoint_formats`), a deployment's formats from flags, checkpoint and GPU
  (`deployment_formats`), and the formats back as a `quantization_config`
  (`quantization_config_for`).
"""

from cost_model.hf.checkpoint import DeploymentFormats, deployment_formats, formats_document

from cost_model.hf.export import EXPORT_ORDER, architecture_to_hf_config, export_gap
from cost_model.hf.files import (
    ARCHSCOUT_JSON_KEY, ARCHSCOUT_JSON_VERSION, ARCHSCOUT_RECORD_KEY, LoadedModel,
    architecture_from_json_dict, architecture_to_json_dict, load_architecture, load_model,
)
from cost_model.hf.importer import (
    REMOTE_CODE_DEFAULTS, SUPPORTED_MODEL_TYPES, TEXT_CONFIG_WRAPPERS, TRANSFORMERS_DEFAULTS,
    TRANSFORMERS_MODEL_TYPES, architecture_from_hf_config,
)
from cost_model.hf.quant_export import quantization_config_for
from cost_model.hf.quantization import CheckpointFormats, checkpoint_formats

__all__ = [
    "ARCHSCOUT_JSON_KEY", "ARCHSCOUT_JSON_VERSION", "ARCHSCOUT_RECORD_KEY", "EXPORT_ORDER",
    "REMOTE_CODE_DEFAULTS", "SUPPORTED_MODEL_TYPES", "TEXT_CONFIG_WRAPPERS",
    "TRANSFORMERS_DEFAULTS", "TRANSFORMERS_MODEL_TYPES", "CheckpointFormats", "DeploymentFormats",
    "LoadedModel", "architecture_from_hf_config", "architecture_from_json_dict",
    "architecture_to_hf_config", "architecture_to_json_dict", "checkpoint_formats",
    "deployment_formats", "export_gap", "formats_document", "load_architecture", "load_model",
    "quantization_config_for",
]
