"""The config transformers reads for a Hugging Face config file or dict, for the meta-device tests.

Families transformers names differently are loaded as the class that builds them (Kimi-K2's
`kimi_k2` is DeepSeek-V3: `TRANSFORMERS_MODEL_TYPES`); families it has no class for
(`REMOTE_CODE_DEFAULTS`: Nemotron-NAS) are skipped there and hand-counted in test_params.py.
"""

import json
from pathlib import Path

import pytest

from cost_model.hf import (
    REMOTE_CODE_DEFAULTS,
    TEXT_CONFIG_WRAPPERS,
    TRANSFORMERS_MODEL_TYPES,
)


def config_dict(source: dict | Path) -> dict:
    if isinstance(source, dict):
        return dict(source)
    path = source / "config.json" if source.is_dir() else source
    return json.loads(path.read_text(encoding="utf-8"))


def in_transformers(source: dict | Path) -> bool:
    """False for a family transformers has no class for (its repo's remote code builds it)."""
    doc = config_dict(source)
    model_type = TEXT_CONFIG_WRAPPERS.get(doc.get("model_type"), doc.get("model_type"))
    return model_type not in REMOTE_CODE_DEFAULTS


def transformers_config(source: dict | Path):
    """transformers' config object of `source` (a dict, a config.json or a folder holding one)."""
    transformers = pytest.importorskip("transformers")
    doc = config_dict(source)
    if not in_transformers(doc):
        pytest.skip(f"transformers has no class for model_type {doc.get('model_type')!r}")
    model_type = doc.get("model_type")
    if model_type in TRANSFORMERS_MODEL_TYPES:
        doc = {**doc, "model_type": TRANSFORMERS_MODEL_TYPES[model_type]}
        doc.pop("auto_map", None)
    if isinstance(source, Path) and doc == config_dict(source):
        return transformers.AutoConfig.from_pretrained(source)
    return transformers.AutoConfig.for_model(**doc)


def meta_model(config):
    """The causal LM transformers builds for `config`'s language model, on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config.get_text_config())
