"""Where the fitted serving terms are read from: `serving/host.toml` (the scheduler's host time,
`cost_model.host`) and `serving/benchmark.toml` (the benchmark-TTFT terms,
`cost_model.benchmark_ttft`) of the user's calibration folder (`ARCHSCOUT_CALIBRATION_DIR`, what
`archscout calibrate --source RESULTS…` writes) when it holds them, else the package's, exactly
as the kernels' efficiency files are found (`cost_model.efficiency.get_efficiency`)."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from cost_model.efficiency import calibration_dir
from cost_model.errors import ConfigError

SERVING_FOLDER = "serving"  # under the calibration folder, as under cost_model/data/
SERVING_FILES = ("host.toml", "benchmark.toml")
PACKAGE_ORIGIN = "package"
_PACKAGE = "cost_model.data.serving"


def serving_file(name: str) -> tuple[dict, str]:
    """(the document, where it came from: the user file's path or "package") of the serving
    file `name` (one of SERVING_FILES)."""
    user_dir = calibration_dir()
    path = None if user_dir is None else user_dir / SERVING_FOLDER / name
    return _load(name, path, _modified_ns(path))


def _modified_ns(path: Path | None) -> int | None:
    """The file's modification time (a rewritten file is read again), None when absent."""
    try:
        return None if path is None else path.stat().st_mtime_ns
    except OSError:
        return None


@cache
def _load(name: str, path: Path | None, modified_ns: int | None) -> tuple[dict, str]:
    if path is not None and modified_ns is not None:
        return _parse(path.read_text(encoding="utf-8"), str(path)), str(path)
    text = resources.files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    return _parse(text, f"cost_model/data/serving/{name}"), PACKAGE_ORIGIN


def _parse(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"serving file {where} is not valid TOML: {exc}") from None


def serving_origins() -> dict[str, str]:
    """{file name: its user path or "package"} for each serving file the cost model reads now."""
    return {name: serving_file(name)[1] for name in SERVING_FILES}
