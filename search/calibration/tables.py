"""Finding and reading measured kernel tables: aiconfigurator-core's per engine, or a user's file.

aiconfigurator-core (Apache-2.0) ships, per GPU, `systems/data/<system>/<op>/<engine>/<version>/
<table>.parquet` for the engines TensorRT-LLM (`trtllm`), vLLM and SGLang. An engine's tables of
one GPU are read at one version, its GEMM table's newest (`engine_version`): the other ops take
that version where they have it (a consistent engine build), else their newest.
`systems/silicon_sample.csv` is the project's held-out test set: no path this module builds can
name it and `table_path` refuses it by name (tests/search/calibration/test_tables.py).

A user's table (`archscout calibrate --source FILE`) is Parquet or CSV. A CSV is read here row by
row with every field checked (no NUL bytes, at most MAX_FIELD_CHARS characters, numbers finite and
within bounds, whole numbers where the column counts): a bad field is one line naming the column,
the line, the rule and the value.
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import io
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from search.calibration.errors import CalibrationError

AIC_PACKAGE = "aiconfigurator_core"  # pip install aiconfigurator-core (Apache-2.0)
AIC_DISTRIBUTION = "aiconfigurator-core"
AIC_SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "gb200": "gb200",
               "b300": "b300_sxm", "gb300": "gb300", "rtx-pro-6000": "rtx_pro_6000_server"}
# our catalog name -> aiconfigurator system
ENGINES = ("trtllm", "vllm", "sglang")  # the engines aiconfigurator-core measures
DEFAULT_ENGINE = "trtllm"
HELD_OUT_NAME = "silicon_sample.csv"  # the project's held-out test set: never opened
GEMM_TABLE = ("gemm", "gemm_perf.parquet")
MAX_FIELD_CHARS = 64  # a CSV field longer than this is refused (no number or format name is)
MAX_DIM = 1 << 31  # GEMM dimensions above this are refused (int32 index limits of every kernel)
MAX_LATENCY_MS = 1e6  # a measured kernel above 1,000 s is not a kernel


def aiconfigurator_data_dir() -> Path:
    """`…/aiconfigurator_core/systems/data` of the installed package (not imported)."""
    spec = importlib.util.find_spec(AIC_PACKAGE)
    if spec is None or not spec.origin:
        raise CalibrationError("`--source aiconfigurator` needs the measured tables of "
                               "`pip install aiconfigurator-core` (or pass a Parquet/CSV path)")
    return Path(spec.origin).parent / "systems" / "data"


def aiconfigurator_version() -> str:
    try:
        return importlib.metadata.version(AIC_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def version_key(text: str) -> tuple:
    """Natural order of version folders (numbers compare as numbers), newest last."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def table_path(path: Path) -> Path:
    """`path`, refused when it names the held-out test set."""
    if path.name == HELD_OUT_NAME:
        raise CalibrationError(f"`--source` {path} is the project's held-out test set; no fit "
                               "reads it")
    return path


def _check(hardware: str, engine: str) -> None:
    if hardware not in AIC_SYSTEMS:
        raise CalibrationError(f"`hardware` {hardware!r} has no aiconfigurator table; known: "
                               f"{', '.join(AIC_SYSTEMS)}")
    if engine not in ENGINES:
        raise CalibrationError(f"`engine` must be one of {', '.join(ENGINES)}; got {engine!r}")


def table_versions(hardware: str, op: str, engine: str, name: str) -> dict[str, Path]:
    """{version: path} of one table of an op, oldest first (empty when there is none)."""
    _check(hardware, engine)
    folder = aiconfigurator_data_dir() / AIC_SYSTEMS[hardware] / op / engine
    found = sorted(folder.glob(f"*/{name}"), key=lambda p: version_key(p.parent.name)) \
        if folder.is_dir() else []
    return {p.parent.name: table_path(p) for p in found}


def engine_version(hardware: str, engine: str) -> str:
    """The engine build whose tables a GPU is calibrated on: its GEMM table's newest version."""
    versions = table_versions(hardware, *GEMM_TABLE[:1], engine, GEMM_TABLE[1])
    if not versions:
        raise CalibrationError(f"`engine` {engine!r} has no GEMM table for {hardware}")
    return list(versions)[-1]


def aiconfigurator_table(hardware: str, op: str, engine: str, name: str,
                         version: str | None = None) -> tuple[Path, str]:
    """(path, version) of one table: at `version` (default: the engine's, `engine_version`)
    when the op has it, else the op's newest."""
    versions = table_versions(hardware, op, engine, name)
    if not versions:
        raise CalibrationError(f"`engine` {engine!r} has no {op} table {name} for {hardware}")
    wanted = version or engine_version(hardware, engine)
    chosen = wanted if wanted in versions else list(versions)[-1]
    return versions[chosen], chosen


def aic_source(hardware: str, op: str, engine: str, version: str) -> str:
    """How a fitted coefficient names its table."""
    return (f"aiconfigurator-core {aiconfigurator_version()} {AIC_SYSTEMS[hardware]} "
            f"{op}/{engine}/{version}")


def read_parquet(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(table_path(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise CalibrationError(f"`--source` {path} is not a readable Parquet table: "
                               f"{_short(exc)}") from None


def numeric_column(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64 (nulls as NaN), without pandas; one line when it is not."""
    column = table.column(name)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            or pa.types.is_null(column.type)):
        raise CalibrationError(f"`{name}` must be numbers; got a column of {column.type}")
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)


def string_column(table: pa.Table, name: str) -> np.ndarray:
    return np.array(table.column(name).cast(pa.string()).to_pylist(), dtype=object)


# ---- a user's CSV -----------------------------------------------------------------------------

def _short(value, limit: int = 40) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "...'"


def _field(text: str, column: str, line: int, kind: str, bounds: tuple[float, float]):
    """One CSV field as a number of `kind` ("whole" or "real") within `bounds`, or one line."""
    where = f"`{column}` on line {line}"
    try:
        value = int(text) if kind == "whole" else float(text)
    except ValueError:
        rule = "a whole number" if kind == "whole" else "a number"
        raise CalibrationError(f"{where} must be {rule}; got {_short(text)}") from None
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise CalibrationError(f"{where} must be within [{low:g}, {high:g}]; got "
                               f"{_short(text)}")
    return value


def read_csv_rows(path: Path, columns: dict[str, tuple[str, tuple[float, float]] | None],
                  required: tuple[str, ...]) -> dict[str, list]:
    """The columns of a CSV, each field checked: `columns` maps a name to (kind, bounds) for a
    number, None for a text field; `required` must be present. Text fields are stripped."""
    raw = table_path(path).read_bytes()
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise CalibrationError(f"`--source` {path} line {line} holds a NUL byte; a CSV is text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CalibrationError(f"`--source` {path} is not UTF-8 text (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in required if c not in header]
    if missing:
        raise CalibrationError(f"`--source` {path} needs columns {', '.join(required)}; "
                               f"missing {', '.join(missing)}")
    reader.fieldnames = header
    out: dict[str, list] = {c: [] for c in columns if c in header}
    for line, row in enumerate(reader, start=2):
        for column in out:
            value = (row.get(column) or "").strip()
            if len(value) > MAX_FIELD_CHARS:
                raise CalibrationError(f"`{column}` on line {line} must be at most "
                                       f"{MAX_FIELD_CHARS} characters; got {_short(value)}")
            spec = columns[column]
            out[column].append(value if spec is None else _field(value, column, line, *spec))
    return out


GEMM_CSV_COLUMNS = {"gemm_dtype": None, "dtype": None, "m": ("whole", (1, MAX_DIM)),
                    "n": ("whole", (1, MAX_DIM)), "k": ("whole", (1, MAX_DIM)),
                    "latency": ("real", (1e-9, MAX_LATENCY_MS))}


def read_gemm_csv(path: Path) -> pa.Table:
    """A user's GEMM table (columns m, n, k, latency in ms, gemm_dtype or dtype) as an Arrow
    table, every field checked."""
    cols = read_csv_rows(path, GEMM_CSV_COLUMNS, ("m", "n", "k", "latency"))
    if "gemm_dtype" not in cols and "dtype" not in cols:
        raise CalibrationError(f"`--source` {path} needs a gemm_dtype (or dtype) column")
    return pa.table({name: pa.array(values, type=None if GEMM_CSV_COLUMNS[name] is None
                                    else pa.float64())
                     for name, values in cols.items()})
