"""Hugging Face `config.json` -> `Architecture`: dispatch on `model_type` to its `Family`.

Import reads the keys transformers' modeling code reads for each supported `model_type`, with
the defaults of transformers' config class for absent keys (`TRANSFORMERS_DEFAULTS`, checked
against transformers in the tests). A key not read whose name suggests a shape (hidden, head,
layer, expert, lora, window, bias, …) is refused, as is a read key whose value cannot be
represented; other keys (token ids, rope, dropout, dtype, quantization) are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from cost_model.architecture import Architecture, config_error_from
from cost_model.errors import ConfigError
from cost_model.hf import gqa, hybrid, mla, nas
from cost_model.hf.common import Family, check_keys, common_fields, resolve_aliases
from cost_model.hf.schema import assumed_defaults, check_bounds, check_rope
from cost_model.sourced import shown

# Families transformers 5.x builds (its config class's defaults) and those it has no class for
# (their repos ship remote code: Nemotron-NAS).
_FAMILIES: dict[str, Family] = {**gqa.FAMILIES, **mla.FAMILIES, **hybrid.FAMILIES}
_REMOTE_CODE_FAMILIES: dict[str, Family] = dict(nas.FAMILIES)
TRANSFORMERS_DEFAULTS: dict[str, Mapping[str, Any]] = {
    model_type: family.defaults for model_type, family in _FAMILIES.items()
}
REMOTE_CODE_DEFAULTS: dict[str, Mapping[str, Any]] = {
    model_type: family.defaults for model_type, family in _REMOTE_CODE_FAMILIES.items()
}
# Families whose config class transformers names differently (Kimi-K2 is DeepSeek-V3).
TRANSFORMERS_MODEL_TYPES = {"kimi_k2": "deepseek_v3"}
# Multimodal wrappers whose language model is read from `text_config` (the vision tower and its
# projector are not modelled): wrapper model_type -> the text model_type.
TEXT_CONFIG_WRAPPERS = {"llama4": "llama4_text", "kimi_k25": "kimi_k2",
                        "qwen3_5_moe": "qwen3_5_moe_text", "qwen3_5": "qwen3_5_text",
                        "gemma4": "gemma4_text"}
SUPPORTED_MODEL_TYPES = (*TRANSFORMERS_DEFAULTS, *REMOTE_CODE_DEFAULTS)
_ALL_FAMILIES = {**_FAMILIES, **_REMOTE_CODE_FAMILIES}


def architecture_from_hf_config(config: Mapping[str, Any], name: str | None = None) -> Architecture:
    """The `Architecture` of a Hugging Face config dict (one of `SUPPORTED_MODEL_TYPES`)."""
    config, family, given = _family_config(config)
    model_type = config["model_type"]
    merged = {**family.defaults, **given}
    label = name or str(config.get("_name_or_path") or model_type)
    fields = {"name": label, "family": model_type, **common_fields(merged), **family.read(merged)}
    try:
        return Architecture.model_validate(fields)
    except ValidationError as exc:
        raise config_error_from(exc, f"{label} ({model_type})") from exc


def omitted_defaults(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(model_type, the keys the family reads that `config` omits -> the default assumed)."""
    config, family, given = _family_config(config)
    return config["model_type"], assumed_defaults(given, family.defaults)


def _family_config(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], Family, dict]:
    """The language model's config, its family and its keys (aliases resolved), checked: known
    model_type, no unread shape key, integers within bounds, a well-formed RoPE scaling."""
    config = _language_model_config(config)
    model_type = config.get("model_type")
    if model_type not in _ALL_FAMILIES:
        supported = ", ".join((*SUPPORTED_MODEL_TYPES, *TEXT_CONFIG_WRAPPERS))
        raise ConfigError(f"`model_type` ({shown(model_type)}) is not supported; supported: "
                          f"{supported}")
    family = _ALL_FAMILIES[model_type]
    given = resolve_aliases(config, family)
    check_keys(given, model_type, family)
    check_bounds(given, family.defaults)
    check_rope(given)
    return config, family, given


def _language_model_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """`config` itself, or the `text_config` of a multimodal wrapper (e.g. Llama 4)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError(f"`model_type` must be a string naming the model family; got "
                          f"{shown(model_type)}")
    text_type = TEXT_CONFIG_WRAPPERS.get(model_type)
    if text_type is None:
        return config
    text = config.get("text_config") or {}  # absent: the text model's defaults, as transformers
    if not isinstance(text, Mapping):
        raise ConfigError(f"`text_config` ({shown(text)}) must be the language model's config "
                          f"(a dict) for model_type `{config['model_type']}`")
    name = text.get("_name_or_path") or config.get("_name_or_path") or config["model_type"]
    return {**text, "model_type": text_type, "_name_or_path": name}
