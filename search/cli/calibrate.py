"""`archscout calibrate`: fit the GEMM efficiency layer on measured kernel tables and write the
coefficients (with their source, version and fit error) as the package's efficiency TOML files.

    archscout calibrate                          # every catalog GPU, aiconfigurator-core tables
    archscout calibrate --hardware gb300 --framework sglang
    archscout calibrate --hardware h200 --source my_gemms.parquet --output fitted/
    archscout calibrate --part attention         # only [attention] (also: comm, moe, gemm, all)
    archscout calibrate --part accuracy          # the loss proxy, on its declared calibration set

Attention, the all-reduce and the MoE layer's non-GEMM terms are fitted on aiconfigurator's
attention, comm and moe tables (only with `--source aiconfigurator`); the MoE fit uses the GEMM
coefficients already shipped, so `--part all` fits it after the GEMMs are written.
`--part accuracy` refits the accuracy proxy's free coefficients (`objectives.accuracy_fit`) on
its declared calibration set (`objectives/data/accuracy_calibration.csv`, or `--source ROWS.csv`
with the same columns) and writes `accuracy_coefficients.toml` (to `--output`, default the
package data), printing the fit error per family.
"""

from __future__ import annotations

import argparse
import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np

from cost_model import DEFAULT_FILE, POINTS_FILE, get_hardware
from search.atomic import write_text_atomic
from search.calibration.gemm import (
    AIC_SYSTEMS,
    COEFFICIENTS,
    DEFAULT_FRAMEWORK,
    FIT_SAMPLE_POINTS,
    GemmFitResult,
    MeasuredGemms,
    aiconfigurator_table,
    aiconfigurator_version,
    fit_hardware,
    measured_gemms,
    read_table,
)
from search.cli.errors import CommandError
from search.records.tables import format_table, print_json

EFFICIENCY_PACKAGE = "cost_model.data.efficiency"
ACCURACY_PACKAGE, ACCURACY_FILE = "objectives.data", "accuracy_coefficients.toml"  # loss proxy
AIC_SOURCE = "aiconfigurator"
POINT_M = (1, 16, 64, 256, 1024, 4096, 16384)  # the grid of measured times shipped for lookups
POINT_NK = (512, 1024, 2048, 4096, 7168, 8192, 16384)
SIGNIFICANT = 4  # digits written for fitted coefficients and measured times
MIN_SAMPLE = 100  # rows a fit needs to pin ten coefficients
PINNED_SOURCE = ("pinned to gemm.bf16.fixed_overhead_us: a GEMM kernel's launch and pipeline "
                 "fill do not depend on the format; the rest of the measured floor is the "
                 "quantization kernel's (quantize_fixed_us)")
NO_BF16_SOURCE = "set to 0: without BF16 rows the whole measured floor is the GEMM kernel's"


def _package_dir(package: str = EFFICIENCY_PACKAGE) -> Path:
    return Path(str(resources.files(package)))


def _round(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}") if math.isfinite(value) else value


def _toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string (same escapes as JSON)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return repr(value)


def _sourced(name: str, value: float, source: str) -> str:
    return f"{name} = {{ value = {_toml_value(_round(value))}, source = {json.dumps(source)} }}"


# ---- efficiency files -----------------------------------------------------------------------

def _fit_source(r: GemmFitResult) -> str:
    return f"fitted by archscout calibrate to the measured {r.dtype} GEMMs of gemm.{r.dtype}.fit"


def _snapped(name: str, value: float) -> float:
    """A fitted value within 1e-4 of its range from a bound is that bound (e.g. 0, not 1e-12)."""
    _, low, high, _ = COEFFICIENTS[name]
    if low is None:
        return value
    tolerance = 1e-4 * (high - low)
    return low if abs(value - low) < tolerance else high if abs(value - high) < tolerance else value


def _gemm_section(r: GemmFitResult) -> list[str]:
    lines = [f"[gemm.{r.dtype}]"]
    for name in (n for n in COEFFICIENTS if n in r.coefficients):
        pinned = NO_BF16_SOURCE if name == "quantize_fixed_us" else PINNED_SOURCE
        source = pinned if name in r.pinned else _fit_source(r)
        lines.append(_sourced(name, _snapped(name, r.coefficients[name]), source))
    lines += [f"[gemm.{r.dtype}.fit]", f"source = {json.dumps(r.source)}",
              f"points = {r.points}"]
    for key in ("median_abs_error_frac", "p90_abs_error_frac", "roofline_median_abs_error_frac",
                "roofline_p90_abs_error_frac"):
        lines.append(f"{key} = {_round(getattr(r, key))}")
    return lines + [""]


def _kept_section(prefix: str, table: dict) -> list[str]:
    """Re-emit a `{ value, source }` section (and nested tables) of the previous file, laid out
    as `_gemm_section` writes them (a nested table right below its section)."""
    lines = [f"[{prefix}]"]
    nested = []
    for key, entry in table.items():
        if isinstance(entry, dict) and "value" in entry:
            lines.append(_sourced(key, float(entry["value"]), str(entry["source"])))
        elif isinstance(entry, dict):
            nested += _kept_section(f"{prefix}.{key}", entry)[:-1]
        else:
            lines.append(f"{key} = {_toml_value(entry)}")
    return lines + nested + [""]


def efficiency_toml(hardware: str, version: str, results: list[GemmFitResult],
                    previous: dict) -> str:
    """The efficiency file of one GPU: fitted GEMM entries, the previous file's other GEMM
    entries (formats not refitted) and its attention and communication coefficients."""
    fitted = {r.dtype for r in results}
    lines = [
        f"# Efficiency coefficients of {hardware}: GEMM entries fitted by `archscout calibrate`",
        "# (cost_model/efficiency.py documents every coefficient).",
        f"hardware = {json.dumps(hardware)}",
        f"version = {json.dumps(version)}",
        "",
    ]
    for r in results:
        lines += _gemm_section(r)
    for fmt, table in previous.get("gemm", {}).items():
        if fmt not in fitted:
            lines += _kept_section(f"gemm.{fmt}", table)
    for section in ("attention", "communication", "moe"):
        if section in previous:
            lines += _kept_section(section, previous[section])
    return "\n".join(lines).rstrip() + "\n"


def default_results(all_results: dict[str, list[GemmFitResult]]) -> list[GemmFitResult]:
    """Per format, the median of every GPU's fitted coefficients: priors for unknown GPUs."""
    by_format: dict[str, list[GemmFitResult]] = {}
    for results in all_results.values():
        for r in results:
            by_format.setdefault(r.dtype, []).append(r)
    out = []
    for fmt, rs in by_format.items():
        names = list(rs[0].coefficients)
        coefficients = {n: float(np.median([r.coefficients[n] for r in rs])) for n in names}
        source = "median of the fitted " + ", ".join(r.hardware for r in rs) + " entries"
        out.append(GemmFitResult(
            hardware=DEFAULT_FILE, dtype=fmt, coefficients=coefficients, pinned=(),
            points=sum(r.points for r in rs),
            **{key: float(np.median([getattr(r, key) for r in rs])) for key in (
                "median_abs_error_frac", "p90_abs_error_frac", "roofline_median_abs_error_frac",
                "roofline_p90_abs_error_frac")}, source=source))
    return out


def write_package_data(path: Path, text: str) -> None:
    """A coefficient file, atomically; readable by everyone, like the package data it
    replaces."""
    write_text_atomic(path, text, "--output", mode=0o644, make_parents=True)


def _previous(output: Path, name: str) -> dict:
    for folder in (output, _package_dir()):
        for candidate in (name, DEFAULT_FILE):
            path = folder / f"{candidate}.toml"
            if path.is_file():
                return tomllib.loads(path.read_text())
    raise CommandError(f"no efficiency file to take {name}'s attention/communication entries from")


# ---- shipped measured points ----------------------------------------------------------------

def _grid_times(data: MeasuredGemms) -> list[float]:
    """Measured µs on the POINT_M × POINT_NK × POINT_NK grid (m-major), nan where not measured."""
    lookup = {(int(m), int(n), int(k)): t for m, n, k, t in
              zip(data.m, data.n, data.k, data.time_s)}
    return [_round(lookup.get((m, n, k), math.nan) * 1e6) for m in POINT_M for n in POINT_NK
            for k in POINT_NK]


def _times(value) -> list[float]:
    """Grid times from a list or from the file's space-separated string."""
    return [float(v) for v in (value.split() if isinstance(value, str) else value)]


def points_toml(previous: dict, tables: dict[str, list[MeasuredGemms]],
                framework: str, versions: dict[str, str]) -> str:
    """The shipped grid of measured GEMM times: refreshed GPUs replace their previous entries."""
    merged = {hw: doc for hw, doc in previous.items() if hw not in tables}
    for hw, datas in tables.items():
        merged[hw] = {"source": datas[0].source, "framework": framework,
                      "framework_version": versions[hw],
                      **{d.dtype: {"time_us": _grid_times(d)} for d in datas}}
    lines = ["# Measured GEMM times (µs) shipped for `archscout gemm` lookups: a grid subset of",
             "# the calibration tables (BF16 activations quantized inside the timed op). Each",
             "# time_us lists m-major, then n, then k, as one space-separated string (nan: not",
             "# measured): tomllib reads one long string far faster than a long float array.",
             f"m = {list(POINT_M)}", f"n = {list(POINT_NK)}", f"k = {list(POINT_NK)}", ""]
    for hw, doc in sorted(merged.items()):
        if not isinstance(doc, dict):
            continue
        lines.append(f"[{json.dumps(hw)}]")
        lines += [f"{key} = {_toml_value(doc[key])}" for key in ("source", "framework",
                                                                  "framework_version")]
        for fmt, entry in doc.items():
            if isinstance(entry, dict):
                values = " ".join(_toml_value(float(v)) for v in _times(entry["time_us"]))
                lines += [f"[{json.dumps(hw)}.{fmt}]", f"time_us = {json.dumps(values)}"]
        lines.append("")
    return "\n".join(lines)


# ---- the command ----------------------------------------------------------------------------

def _load(args: argparse.Namespace, hardware: str) -> tuple[list[MeasuredGemms], str]:
    if args.source == AIC_SOURCE:
        path, version = aiconfigurator_table(hardware, args.framework, args.framework_version)
        source = (f"aiconfigurator-core {aiconfigurator_version()} {AIC_SYSTEMS[hardware]} "
                  f"gemm/{args.framework}/{version}")
    else:
        path, version = Path(args.source), Path(args.source).name
        source = f"measured table {path.name}"
    tables, skipped = measured_gemms(read_table(path), hardware, source)
    if not tables:
        raise CommandError(f"`--source` {path} has no rows of a modeled format (skipped: "
                          f"{', '.join(skipped) or 'none'})")
    return tables, version


def _hardware_names(args: argparse.Namespace) -> list[str]:
    names = args.hardware or list(AIC_SYSTEMS)
    if args.source != AIC_SOURCE and len(names) != 1:
        raise CommandError("`--hardware` must name exactly one GPU when `--source` is a file")
    for name in names:
        get_hardware(name)  # a clear error for unknown names
    return names


def _summary(r: GemmFitResult) -> dict:
    c = r.coefficients
    return {"hardware": r.hardware, "dtype": r.dtype, "points": r.points,
            "roofline_median": r.roofline_median_abs_error_frac,
            "roofline_p90": r.roofline_p90_abs_error_frac,
            "median": r.median_abs_error_frac, "p90": r.p90_abs_error_frac,
            **{name: c.get(name, math.nan) for name in (
                "compute_ceiling_frac", "bandwidth_ceiling_frac", "fixed_overhead_us",
                "quantize_fixed_us")}}


# ---- attention and all-reduce ----------------------------------------------------------------

def _aic_source(hardware: str, folder: str, version: str) -> str:
    return (
        f"aiconfigurator-core {aiconfigurator_version()} {AIC_SYSTEMS[hardware]} {folder}/{version}"
    )


def _fit_attention(args: argparse.Namespace, name: str) -> dict[str, tuple[float, str]]:
    from cost_model import get_efficiency
    from search.calibration.attention import (
        aiconfigurator_attention_tables,
        fit_attention,
        fit_source,
        measured_attention,
    )

    paths, version = aiconfigurator_attention_tables(name, args.framework, args.framework_version)
    tables = {
        phase: measured_attention(read_table_any(path), phase) for phase, path in paths.items()
    }
    source = _aic_source(name, f"attention/{args.framework}", version) + \
        " context+generation_attention_perf"
    r = fit_attention(tables, get_hardware(name), get_efficiency(name), name, source, args.sample)
    print(
        f"{name} attention: "
        + ", ".join(f"{k} {v:.4g}" for k, v in r.coefficients.items())
        + "; "
        + "; ".join(
            f"{p} median {e[0]:.1%} p90 {e[1]:.1%} (prior {r.prior_errors[p][0]:.1%}"
            f", {r.prior_errors[p][1]:.1%})"
            for p, e in r.errors.items()
        )
    )
    return {k: (v, fit_source(r)) for k, v in r.coefficients.items()}


def _fit_comm(args: argparse.Namespace, name: str) -> dict[str, tuple[float, str]]:
    from cost_model import get_efficiency
    from search.calibration.comm import (
        aiconfigurator_comm_table,
        fit_all_reduce,
        fit_source,
        measured_all_reduce,
    )

    path, version = aiconfigurator_comm_table(name, args.framework, args.framework_version)
    source = _aic_source(name, f"comm/{args.framework}", version) + " custom_allreduce_perf"
    r = fit_all_reduce(measured_all_reduce(read_table_any(path)), get_hardware(name),
                       get_efficiency(name), name, source)
    print(f"{name} all-reduce: " + ", ".join(f"{k} {v:.4g}" for k, v in r.coefficients.items())
          + f"; median {r.errors[0]:.1%} p90 {r.errors[1]:.1%} (prior {r.prior_errors[0]:.1%}, "
            f"{r.prior_errors[1]:.1%})")
    return {k: (v, fit_source(r)) for k, v in r.coefficients.items()}


def _fit_moe(args: argparse.Namespace, name: str) -> dict[str, tuple[float, str]]:
    from cost_model import get_efficiency
    from search.calibration.moe import aiconfigurator_moe_table, fit_moe, fit_source, measured_moe

    path, version = aiconfigurator_moe_table(name, args.framework, args.framework_version)
    tables, skipped = measured_moe(read_table_any(path))
    source = _aic_source(name, f"moe/{args.framework}", version) + " moe_perf balanced"
    r = fit_moe(tables, get_hardware(name), get_efficiency(name), name, source, args.sample)
    print(f"{name} moe: " + ", ".join(f"{k} {v:.4g}" for k, v in r.coefficients.items())
          + "; " + "; ".join(f"{f} median {e[0]:.1%} p90 {e[1]:.1%} (GEMMs alone "
                             f"{r.prior_errors[f][0]:.1%}, {r.prior_errors[f][1]:.1%})"
                             for f, e in r.errors.items())
          + "; left out " + ", ".join(f"{n} {reason}" for reason, n in skipped.items() if n))
    return {k: (v, fit_source(r)) for k, v in r.coefficients.items()}


def read_table_any(path: Path):
    import pyarrow.parquet as pq
    return pq.read_table(path)


def _with_fitted(previous: dict, section: str, fitted: dict[str, tuple[float, str]]) -> dict:
    """`previous` with the `[section]` entries replaced by fitted (value, source) pairs."""
    table = dict(previous.get(section, {}))
    table.update({k: {"value": v, "source": src} for k, (v, src) in fitted.items()})
    return {**previous, section: table}


def _with_moe_engine(previous: dict, framework: str) -> dict:
    """`previous` with its fitted `[moe]` terms only (an older file's other terms dropped) and
    `engine` naming the framework whose fused-MoE tables they were fitted on: that engine's
    serving steps pay the size terms (`Efficiency.for_engine`)."""
    from search.calibration.moe import COEFFICIENTS

    fitted = {k: v for k, v in previous.get("moe", {}).items() if k in COEFFICIENTS}
    return {**previous, "moe": {**fitted, "engine": framework}}


def _median_fits(fits: dict[str, dict[str, tuple[float, str]]]) -> dict[str, tuple[float, str]]:
    names = next(iter(fits.values()))
    source = "median of the fitted " + ", ".join(fits) + " entries"
    return {k: (float(np.median([f[k][0] for f in fits.values()])), source) for k in names}


def _parts(args: argparse.Namespace) -> set[str]:
    part = args.part or ("all" if args.source == AIC_SOURCE else "gemm")
    if part != "gemm" and args.source != AIC_SOURCE:
        raise CommandError(f"`--part` {part} needs `--source {AIC_SOURCE}` (a file holds GEMMs)")
    return {"gemm", "attention", "comm", "moe"} if part == "all" else {part}


def run_accuracy(args: argparse.Namespace) -> int:
    """`--part accuracy`: refit the loss proxy on the declared (or a given) calibration set."""
    from objectives import accuracy_coefficients as coef
    from objectives import accuracy_fit

    rows_path = (accuracy_fit.shipped_calibration_set() if args.source == AIC_SOURCE
                 else Path(args.source))
    fit = accuracy_fit.fit_coefficients(accuracy_fit.read_rows(rows_path))
    folder = Path(args.output) if args.output else _package_dir(ACCURACY_PACKAGE)
    target = folder / ACCURACY_FILE
    set_name = (f"objectives/data/{accuracy_fit.CALIBRATION_SET_FILE}"
                if args.source == AIC_SOURCE else str(rows_path))
    write_package_data(target, accuracy_fit.coefficients_toml(
        fit, coef.SHIPPED_RECORDS, set_name))
    families = [{"family": f, "rows": len(ff.rows), "fitted": ", ".join(ff.coefficients) or "-",
                 "rms_log_error": ff.rms_log_error, "max_abs_log_error": ff.max_abs_log_error}
                for f, ff in fit.families.items()]
    coefficients = {name: getattr(fit.coefficients, name) for name in coef.SHIPPED_RECORDS}
    if args.json:
        print_json({"output": str(target), "calibration_set": set_name, "rows": fit.rows,
                    "families": families, "coefficients": coefficients})
        return 0
    print(format_table([{**f, "rms_log_error": f"{f['rms_log_error']:.2%}",
                         "max_abs_log_error": f"{f['max_abs_log_error']:.2%}"}
                        for f in families]))
    print(f"\nwrote {target} (fitted on {fit.rows} rows of {set_name})")
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    if args.part == "accuracy":
        return run_accuracy(args)
    if args.sample < MIN_SAMPLE:
        raise CommandError(f"`--sample` must be at least {MIN_SAMPLE}; got {args.sample}")
    output = Path(args.output) if args.output else _package_dir()
    parts = _parts(args)
    all_results, tables, versions, kernel_fits = {}, {}, {}, {
        "attention": {}, "communication": {}, "moe": {}}
    for name in _hardware_names(args):
        previous = _previous(output, name)
        all_results[name], version = [], str(previous.get("version", ""))
        if "gemm" in parts:
            datas, versions[name] = _load(args, name)
            all_results[name] = fit_hardware(datas, get_hardware(name), args.sample)
            tables[name] = datas
            version = f"calibrated: {datas[0].source}"
        for section, part, fit in (("attention", "attention", _fit_attention),
                                   ("communication", "comm", _fit_comm), ("moe", "moe", _fit_moe)):
            if part in parts:
                kernel_fits[section][name] = fit(args, name)
                previous = _with_fitted(previous, section, kernel_fits[section][name])
        if "moe" in parts:
            previous = _with_moe_engine(previous, args.framework)
        write_package_data(output / f"{name}.toml", efficiency_toml(
            name, version, all_results[name], previous))
    if args.source == AIC_SOURCE and set(all_results) == set(AIC_SYSTEMS):
        previous = _previous(output, DEFAULT_FILE)
        for section, fits in kernel_fits.items():
            if fits:
                previous = _with_fitted(previous, section, _median_fits(fits))
        if kernel_fits["moe"]:
            previous = _with_moe_engine(previous, args.framework)
        version = "median of the calibrated GPUs" if "gemm" in parts else str(previous["version"])
        write_package_data(output / f"{DEFAULT_FILE}.toml", efficiency_toml(
            DEFAULT_FILE, version, default_results(all_results) if "gemm" in parts else [],
            previous))
    if "gemm" not in parts:
        print(f"\nwrote {', '.join(sorted(all_results))} to {output}")
        return 0
    if args.source == AIC_SOURCE:
        points = output / f"{POINTS_FILE}.toml"
        previous = tomllib.loads(points.read_text()) if points.is_file() else {}
        write_package_data(points, points_toml(previous, tables, args.framework, versions))
    rows = [_summary(r) for results in all_results.values() for r in results]
    if args.json:
        print_json({"output": str(output), "fits": rows})
    else:
        print(format_table(rows))
        print(f"\nwrote {', '.join(sorted(all_results))} to {output}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    cal = sub.add_parser("calibrate", help="fit the GEMM efficiency layer to measured kernels")
    cal.add_argument("--hardware", action="append",
                     help="catalog GPU to fit (repeatable; default: every GPU with a table)")
    cal.add_argument("--source", default=AIC_SOURCE,
                     help="'aiconfigurator' (pip install aiconfigurator-core) or a Parquet/CSV "
                          "with columns gemm_dtype,m,n,k,latency (ms)")
    cal.add_argument("--framework", default=DEFAULT_FRAMEWORK,
                     help=f"aiconfigurator framework tables (default {DEFAULT_FRAMEWORK})")
    cal.add_argument("--framework-version", help="its version folder (default: the newest)")
    cal.add_argument("--output", help="folder for the TOML files (default: the package data)")
    cal.add_argument("--sample", type=int, default=FIT_SAMPLE_POINTS,
                     help=f"rows each fit uses (default {FIT_SAMPLE_POINTS:,}); errors use all")
    cal.add_argument("--part", choices=("all", "gemm", "attention", "comm", "moe", "accuracy"),
                     help="what to fit (default: all = gemm, attention, comm and moe; gemm with "
                          "a `--source` file); accuracy: the loss proxy on its calibration set "
                          "(`--source ROWS.csv` for another)")
    cal.add_argument("--json", action="store_true", help="one JSON document on stdout")
    cal.set_defaults(func=run_calibrate)
