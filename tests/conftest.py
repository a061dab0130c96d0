"""Shared fixtures: the development set in ../shared/validation (beside the repository)."""

from pathlib import Path

import pytest

from cost_model.hf_config import load_architecture

REPO = Path(__file__).resolve().parents[1]
VALIDATION = REPO.parent / "shared" / "validation"
MODEL_CONFIGS = VALIDATION / "model_configs"


@pytest.fixture(scope="session")
def load_model():
    """Load a validation config by stem, e.g. load_model("Llama-3.1-8B")."""
    return lambda stem: load_architecture(MODEL_CONFIGS / f"{stem}.json")
