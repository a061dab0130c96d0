"""The calibration's output files: one efficiency TOML per engine folder and GPU (the layout of
`cost_model/data/efficiency/`, `cost_model.efficiency`), the folders' `default.toml` (medians of
the calibrated GPUs) and the shipped grid of measured GEMM times (`gemm_points.toml`).

Files are built as TOML documents (dicts: `{ value, source }` entries, plain values, nested tables)
and written by one serializer, so a section a run does not refit is carried over from the file it
replaces exactly as it was.
"""

from __future__ import annotations

import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np

from cost_model.efficiency import DEFAULT_FILE, MOE_EP1_KEY, POINTS_FILE
from search.calibration.gemm import (
    COEFFICIENTS,
    STEP_COEFFICIENTS,
    GemmFitResult,
    MeasuredGemms,
)
from search.calibration.moe import MoeFitResult

EFFICIENCY_PACKAGE = "cost_model.data.efficiency"
SIGNIFICANT = 4  # digits written for fitted coefficients and measured times
POINT_M = (1, 16, 64, 256, 1024, 4096, 16384)  # the grid of measured times shipped for lookups
POINT_NK = (512, 1024, 2048, 4096, 7168, 8192, 16384)
PINNED_SOURCE = ("pinned to gemm.bf16.fixed_overhead_us: a GEMM kernel's launch and pipeline "
                 "fill do not depend on the format; the rest of the measured floor is the "
                 "quantization side of the op (quantize_fixed_us)")
NO_BF16_SOURCE = "set to 0: without BF16 rows the whole measured floor is the GEMM kernel's"
UNSEEN_STEP_SOURCE = ("set to 0: every measured shape of gemm.{fmt}.fit is on one side of this "
                      "dispatch step, so the table cannot show it")
FIT_KEYS = ("median_abs_error_frac", "p90_abs_error_frac", "roofline_median_abs_error_frac",
            "roofline_p90_abs_error_frac")
SECTION_ORDER = ("gemm", "attention", "communication", "moe")
PER_GPU_KEYS = ("kernels", "chosen_because")  # a generic entry's choice: not a default's


def package_dir() -> Path:
    return Path(str(resources.files(EFFICIENCY_PACKAGE)))


def rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}") if math.isfinite(value) else value


def _toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string (JSON's escapes)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def sourced(value: float, source: str) -> dict:
    return {"value": rounded(float(value)), "source": source}


def _is_sourced(entry) -> bool:
    return isinstance(entry, dict) and "value" in entry and "source" in entry


def _table_lines(prefix: str, table: dict) -> list[str]:
    """`[prefix]` with its entries, then its nested tables (a header only when it has entries)."""
    own = [(k, v) for k, v in table.items() if _is_sourced(v) or not isinstance(v, dict)]
    lines = [f"[{prefix}]"] if own else []
    for key, entry in own:
        if _is_sourced(entry):
            lines.append(f"{key} = {{ value = {_toml_value(float(entry['value']))}, "
                         f"source = {_toml_value(str(entry['source']))} }}")
        else:
            lines.append(f"{key} = {_toml_value(entry)}")
    for key, entry in table.items():
        if isinstance(entry, dict) and not _is_sourced(entry):
            lines += _table_lines(f"{prefix}.{key}", entry)
    return lines


def dump(doc: dict, comment: list[str]) -> str:
    """A TOML document: `comment` lines, top-level values, then the sections in SECTION_ORDER
    (others after), a blank line between sections."""
    lines = [f"# {line}" for line in comment]
    lines += [f"{k} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    sections = sorted((k for k, v in doc.items() if isinstance(v, dict)),
                      key=lambda k: (SECTION_ORDER.index(k) if k in SECTION_ORDER else 99, k))
    for section in sections:
        for name, table in ([(f"{section}.{f}", t) for f, t in doc[section].items()]
                            if section in ("gemm", "moe") else [(section, doc[section])]):
            lines += [""] + _table_lines(name, table)
    return "\n".join(lines).strip() + "\n"


# ---- entries --------------------------------------------------------------------------------

def _snapped(name: str, value: float) -> float:
    """A fitted value within 1e-4 of its range from a bound is that bound (e.g. 0, not 1e-12)."""
    _, low, high, _ = COEFFICIENTS[name]
    if low is None:
        return value
    tolerance = 1e-4 * (high - low)
    return low if abs(value - low) < tolerance else high if abs(value - high) < tolerance else value


def gemm_entry(r: GemmFitResult) -> dict:
    """A `[gemm.<format>]` table of a fit, with its `fit` record."""
    fitted = f"fitted by archscout calibrate to the measured {r.dtype} GEMMs of gemm.{r.dtype}.fit"
    entry = {}
    for name in (n for n in COEFFICIENTS if n in r.coefficients):
        pinned = NO_BF16_SOURCE if name == "quantize_fixed_us" else \
            UNSEEN_STEP_SOURCE.format(fmt=r.dtype) if name in STEP_COEFFICIENTS else PINNED_SOURCE
        entry[name] = sourced(_snapped(name, r.coefficients[name]),
                              pinned if name in r.pinned else fitted)
    entry["fit"] = {"source": r.source, "points": r.points,
                    **{key: rounded(getattr(r, key)) for key in FIT_KEYS}}
    return entry


def moe_entry(r: MoeFitResult, path: str = "") -> dict:
    """A `[moe.<format>]` table of a fit, with its `fit` record (the table and the errors) and
    its `[moe.<format>.ep1]` table where the fit has one (`path`: the table's, "" for the
    format's own)."""
    path = path or f"moe.{r.dtype}"
    source = f"fitted by archscout calibrate to the fused-MoE rows of {path}.fit"
    entry = {name: sourced(value, source) for name, value in r.coefficients.items()}
    entry["fit"] = {"source": r.source, "points": r.points,
                    "median_abs_error_frac": rounded(r.error[0]),
                    "p90_abs_error_frac": rounded(r.error[1])}
    if r.ep1 is not None:
        entry[MOE_EP1_KEY] = moe_entry(r.ep1, f"{path}.{MOE_EP1_KEY}")
    return entry


def sourced_section(values: dict[str, tuple[float, str]]) -> dict:
    """A section of fitted (value, source) pairs."""
    return {key: sourced(value, source) for key, (value, source) in values.items()}


# ---- files ----------------------------------------------------------------------------------

def previous_doc(output: Path, kernels: str, name: str) -> dict:
    """The file a run starts from (sections it does not refit are kept): the output folder's,
    else the package's, for this GPU, else the folder's default."""
    for folder in (output / kernels, package_dir() / kernels):
        for candidate in (name, DEFAULT_FILE):
            path = folder / f"{candidate}.toml"
            if path.is_file():
                doc = tomllib.loads(path.read_text())
                return doc if candidate == name else {**doc, "hardware": name}
    return {}


def efficiency_text(doc: dict, kernels: str) -> str:
    comment = [f"Efficiency coefficients of {doc.get('hardware', '?')} on {kernels}'s kernels, "
               "written by `archscout calibrate`", "(cost_model/efficiency.py documents every "
               "coefficient; each source names its measured table and fit error)."]
    return dump(doc, comment)


def _median(entries: list[dict], source: str) -> dict:
    """Per key, the median of the entries' values (sourced), their plain values taken from the
    first; a nested `fit` dropped, a nested `ep1` entry the median of those that have one."""
    first = entries[0]
    out = {}
    for key, entry in first.items():
        if _is_sourced(entry):
            values = [float(e[key]["value"]) for e in entries if key in e]
            out[key] = sourced(float(np.median(values)), source)
        elif not isinstance(entry, dict) and key not in PER_GPU_KEYS:
            out[key] = entry
    ep1 = [e[MOE_EP1_KEY] for e in entries if MOE_EP1_KEY in e]
    if ep1:  # the EP = 1 entry: its median over the GPUs that have one
        out[MOE_EP1_KEY] = _median(ep1, source)
    return out


def default_doc(docs: dict[str, dict], kernels: str) -> dict:
    """`default.toml` of a folder: every entry the median of the calibrated GPUs' files."""
    gpus = ", ".join(docs)
    source = f"median of the calibrated {gpus} entries"
    out = {"hardware": DEFAULT_FILE, "kernels": kernels,
           "version": f"median of the calibrated GPUs ({gpus})"}
    for section in ("gemm", "moe"):
        formats = dict.fromkeys(f for d in docs.values() for f in d.get(section, {}))
        out[section] = {f: _median([d[section][f] for d in docs.values() if f in
                                    d.get(section, {})], source) for f in formats}
    for section in ("attention", "communication"):
        out[section] = _median([d[section] for d in docs.values() if section in d], source)
    return out


# ---- shipped measured points ----------------------------------------------------------------

def _grid_times(data: MeasuredGemms) -> list[float]:
    """Measured µs on the POINT_M × POINT_NK × POINT_NK grid (m-major), nan where not measured."""
    lookup = {(int(m), int(n), int(k)): t for m, n, k, t in
              zip(data.m, data.n, data.k, data.time_s)}
    return [rounded(lookup.get((m, n, k), math.nan) * 1e6) for m in POINT_M for n in POINT_NK
            for k in POINT_NK]


def _times(value) -> list[float]:
    """Grid times from a list or from the file's space-separated string."""
    return [float(v) for v in (value.split() if isinstance(value, str) else value)]


def points_text(previous: dict, tables: dict[str, list[MeasuredGemms]], engine: str,
                versions: dict[str, str]) -> str:
    """The shipped grid of measured GEMM times of one engine: refreshed GPUs replace theirs."""
    merged = {hw: doc for hw, doc in previous.items() if hw not in tables and isinstance(doc, dict)}
    for hw, datas in tables.items():
        merged[hw] = {"source": datas[0].source, "framework": engine,
                      "framework_version": versions[hw],
                      **{d.dtype: {"time_us": _grid_times(d)} for d in datas}}
    lines = ["# Measured GEMM times (µs) shipped for `archscout gemm` lookups: a grid subset of",
             f"# {engine}'s calibration tables (BF16 activations quantized inside the timed op).",
             "# Each time_us lists m-major, then n, then k, as one space-separated string (nan:",
             "# not measured): tomllib reads one long string far faster than a long float array.",
             f"m = {list(POINT_M)}", f"n = {list(POINT_NK)}", f"k = {list(POINT_NK)}", ""]
    for hw, doc in sorted(merged.items()):
        lines.append(f"[{json.dumps(hw)}]")
        lines += [f"{key} = {_toml_value(doc[key])}" for key in ("source", "framework",
                                                                  "framework_version")]
        for fmt, entry in doc.items():
            if isinstance(entry, dict):
                values = " ".join(_toml_value(float(v)) for v in _times(entry["time_us"]))
                lines += [f"[{json.dumps(hw)}.{fmt}]", f"time_us = {_toml_value(values)}"]
        lines.append("")
    return "\n".join(lines)


def points_path(output: Path, engine: str) -> Path:
    return output / engine / f"{POINTS_FILE}.toml"


# ---- a user's serving terms (`archscout calibrate --source RESULTS…`) ------------------------

SERVING_PACKAGE = "cost_model.data.serving"
SERVING_COMMENTS = {
    "host.toml": ["The serving engine's host (CPU) seconds per scheduled sequence per forward "
                  "step, by host CPU kind", "(cost_model/host.py), refitted by `archscout "
                  "calibrate --source RESULTS…` on a user's own benchmark runs;",
                  "a kind not refitted keeps the file's previous entry."],
    "benchmark.toml": ["What a benchmark client adds to the engine's own TTFT "
                       "(cost_model/benchmark_ttft.py), per engine table,", "refitted by "
                       "`archscout calibrate --source RESULTS…` on a user's own benchmark runs;",
                       "a table not refitted keeps the file's previous entry."],
}


def serving_path(output: Path, name: str) -> Path:
    from cost_model import SERVING_FOLDER

    return output / SERVING_FOLDER / name


def previous_serving_doc(output: Path, name: str) -> dict:
    """The serving file a run starts from: the output folder's, else the package's."""
    path = serving_path(output, name)
    text = path.read_text(encoding="utf-8") if path.is_file() else \
        resources.files(SERVING_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def fit_record(files: list[str], points: int, **more) -> dict:
    """The `fit` table of a refitted entry: which files and how many points it was fitted on."""
    return {"files": list(files), "points": points, **more}


def serving_text(doc: dict, name: str) -> str:
    return dump(doc, SERVING_COMMENTS[name])
