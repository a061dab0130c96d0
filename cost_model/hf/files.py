"""Our own architecture JSON, and loading a Hugging Face config.json or our JSON from a file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cost_model.architecture import Architecture, config_error_from
from cost_model.errors import ConfigError
from cost_model.hf.importer import architecture_from_hf_config

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


def load_architecture(path: str | Path) -> Architecture:
    """Read a Hugging Face config.json (or a model folder holding one) or our own JSON."""
    file = Path(path)
    file = file / "config.json" if file.is_dir() else file
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"`{file}` cannot be read as JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"`{file}` must hold a JSON object; got {type(doc).__name__}")
    if ARCHSCOUT_RECORD_KEY in doc:  # a trial record written by `archscout export --format json`
        return architecture_from_json_dict(
            doc.get("architecture", {}), f"{file} (archscout record)"
        )
    if ARCHSCOUT_JSON_KEY in doc or "model_type" not in doc:
        return architecture_from_json_dict(doc, f"{file} (archscout JSON: no `model_type`)")
    default_name = file.parent.name if file.name == "config.json" else file.stem
    return architecture_from_hf_config(doc, name=str(doc.get("_name_or_path") or default_name))
