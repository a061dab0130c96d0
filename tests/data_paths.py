"""Where the test data lives: `tests/data/` (its SOURCES.md says where each file comes from).

Imported by the tests and by `tests/benchmarks/` scripts; no dependency but the standard library.
"""

from pathlib import Path

TEST_DATA = Path(__file__).resolve().parent / "data"
MODEL_CONFIGS = TEST_DATA / "model_configs"  # Hugging Face config.json of public models
HF_CONFIGS = TEST_DATA / "hf_configs"  # more public configs, and small synthetic ones
MODEL_PARAMS_CSV = TEST_DATA / "model_params.csv"  # exact parameter counts of MODEL_CONFIGS
SERVING_PUBLISHED_CSV = TEST_DATA / "serving_published.csv"  # published serving measurements
SERVING_DEV_SET_CSV = TEST_DATA / "serving" / "published_ttft_tpot.csv"  # more, with TTFT
