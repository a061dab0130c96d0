"""Our own architecture JSON, and loading a Hugging Face config.json or our JSON from a file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cost_model.architecture import Architecture, config_error_from
from cost_model.errors import ConfigError
from cost_model.hf.importer import architecture_from_hf_config, omitted_defaults
from cost_model.hf.quantization import CheckpointFormats, checkpoint_formats
from cost_model.hf.schema import assumed_line, read_json_document

ARCHSCOUT_JSON_KEY = "archscout_architecture"  # marker (and format version) of our own JSON
ARCHSCOUT_JSON_VERSION = 1

def architecture_to_json_dict(arch: Architecture) -> dict[str, Any]:
    """Our own JSON: `arch.model_dump()` plus the `archscout_architecture` marker (format
    version)."""
    return {ARCHSCOUT_JSON_KEY: ARCHSCOUT_JSON_VERSION, **arch.model_dump(mode="json")}


def architecture_from_json_dict(
    doc: Mapping[str, Any], source: str = "architecture"
) -> Architecture:
    fields = dict(doc)
    version = fields.pop(ARCHSCOUT_JSON_KEY, ARCHSCOUT_JSON_VERSION)
    if version != ARCHSCOUT_JSON_VERSION:
        raise ConfigError(
            f"{source}: `{ARCHSCOUT_JSON_KEY}` ({version!r}) must be {ARCHSCOUT_JSON_VERSION}"
        )
    try:
        return Architecture.model_validate(fields)
    except ValidationError as exc:
        raise config_error_from(exc, source) from exc


ARCHSCOUT_RECORD_KEY = "archscout_record"  # marker (and format version) of a full trial record


HF_QUANT_CONFIG = "hf_quant_config.json"  # ModelOpt's file beside config.json


@dataclass(frozen=True)
class LoadedModel:
    """A model file read: its architecture and, for a Hugging Face config, the checkpoint's
    formats (`checkpoint_formats`) and the defaults assumed for the keys it omits."""

    arch: Architecture
    checkpoint: CheckpointFormats | None = None
    assumed: Mapping[str, Any] = field(default_factory=dict)
    model_type: str | None = None

    @property
    def assumed_note(self) -> str | None:
        """The one line naming the defaults assumed (None: none)."""
        return assumed_line(self.model_type or "", self.assumed)


def load_model(path: str | Path) -> LoadedModel:
    """Read a Hugging Face config.json (or a model folder holding one, with ModelOpt's
    hf_quant_config.json beside it when its config has no quantization_config) or our JSON."""
    file = Path(path)
    file = file / "config.json" if file.is_dir() else file
    doc = read_json_document(file)
    if ARCHSCOUT_RECORD_KEY in doc:  # a trial record written by `archscout export --format json`
        return LoadedModel(architecture_from_json_dict(
            doc.get("architecture", {}), f"{file} (archscout record)"))
    if ARCHSCOUT_JSON_KEY in doc or "model_type" not in doc:
        return LoadedModel(architecture_from_json_dict(
            doc, f"{file} (archscout JSON: no `model_type`)"))
    default_name = file.parent.name if file.name == "config.json" else file.stem
    arch = architecture_from_hf_config(doc, name=str(doc.get("_name_or_path") or default_name))
    model_type, assumed = omitted_defaults(doc)
    return LoadedModel(arch, checkpoint_formats(doc, _hf_quant_config(file)), assumed,
                       model_type)


def _hf_quant_config(config_file: Path) -> dict[str, Any] | None:
    beside = config_file.parent / HF_QUANT_CONFIG
    if config_file.name != "config.json" or not beside.is_file():
        return None
    return read_json_document(beside)


def load_architecture(path: str | Path) -> Architecture:
    """Read a Hugging Face config.json (or a model folder holding one) or our own JSON."""
    return load_model(path).arch
