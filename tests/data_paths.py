"""Where the test data lives: `tests/data/` (its SOURCES.md says where each file comes from).

Imported by the tests and by `tests/benchmarks/` scripts; no dependency but the standard library.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

TEST_DATA = Path(__file__).resolve().parent / "data"
MODEL_CONFIGS = TEST_DATA / "model_configs"  # Hugging Face config.json of public models
HF_CONFIGS = TEST_DATA / "hf_configs"  # more public configs, and small synthetic ones
MODEL_PARAMS_CSV = TEST_DATA / "model_params.csv"  # exact parameter counts of MODEL_CONFIGS
SERVING_PUBLISHED_CSV = TEST_DATA / "serving_published.csv"  # published serving measurements
SERVING_DEV_SET_CSV = TEST_DATA / "serving" / "published_ttft_tpot.csv"  # more, with TTFT
SERVING_DATA = TEST_DATA / "serving"  # the grown development set and its extract_*.py scripts


def serving_script(name: str) -> ModuleType:
    """`tests/data/serving/<name>.py` (an extractor, or schema.py) loaded as a module: the
    folder holds data and its scripts, not a package."""
    spec = importlib.util.spec_from_file_location(name, SERVING_DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
