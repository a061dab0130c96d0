"""Shared fixtures: the real model configs in tests/data (paths in tests/data_paths.py)."""

import pytest

from cost_model import load_architecture

from tests.data_paths import MODEL_CONFIGS

__all__ = ["MODEL_CONFIGS"]  # re-exported: `from tests.conftest import MODEL_CONFIGS`


@pytest.fixture(scope="session")
def load_model():
    """Load a config of tests/data/model_configs by stem, e.g. load_model("Llama-3.1-8B")."""
    return lambda stem: load_architecture(MODEL_CONFIGS / f"{stem}.json")
