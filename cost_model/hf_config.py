"""The import path callers use for Hugging Face config import/export and file loading; the code
lives in the `cost_model.hf` package (one module per family group, the common reader, export,
files). Kept so that `from cost_model.hf_config import load_architecture` keeps working."""

from cost_model.hf import *  # noqa: F403 - the package's public names, listed once there
from cost_model.hf import __all__  # noqa: F401
