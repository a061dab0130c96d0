"""`archscout calibrate`: fit the efficiency layer on measured kernel tables, per serving engine,
and write the coefficients (with their source, version and fit error) as efficiency TOML files.

    archscout calibrate                          # every GPU, every engine, then the generic kernels
    archscout calibrate --engine vllm --hardware gb300
    archscout calibrate --hardware h200 --source my_gemms.csv --output fitted/
    archscout calibrate --part attention         # only [attention] (also: comm, moe, gemm, all)
    archscout calibrate --part accuracy          # the loss proxy, on its declared calibration set
    archscout calibrate --write-package-data     # a maintainer regenerating the shipped files

Files go to `--output`, else `$ARCHSCOUT_CALIBRATION_DIR`, else the user's data folder
(`~/.local/share/archscout/calibration`), laid out as the package's `cost_model/data/efficiency/`
(one folder per engine and `generic`); the cost model reads them when ARCHSCOUT_CALIBRATION_DIR
names that folder. The shipped package data is written only with `--write-package-data`, and an
`--output` inside it is refused. Each engine is fitted on its own aiconfigurator-core tables
(GEMMs, attention, the all-reduce, the fused MoE per format: `search/calibration/`); then each
GPU's generic kernels take the fastest engine's entry per part (`search.calibration.generic`;
engines not refitted in the run are read from the output folder, else the package). A
`--source` file holds GEMMs: it refits `[gemm]` of one GPU in the `--engine` folder (default:
generic, what a run without an engine uses).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cost_model import (
    CALIBRATION_DIR_ENV, DEFAULT_FILE, GENERIC, efficiency_from_toml, get_hardware,
)
from search.atomic import write_text_atomic
from search.calibration import files
from search.calibration.fitting import FIT_SAMPLE_POINTS
from search.calibration.gemm import (
    AIC_SYSTEMS,
    GemmFitResult,
    MeasuredGemms,
    fit_hardware,
    gemm_source,
    gemm_table,
    measured_gemms,
    read_table,
)
from search.calibration.tables import ENGINES, aic_source, read_parquet
from search.cli.errors import CommandError
from search.records.tables import format_table, print_json

ACCURACY_PACKAGE, ACCURACY_FILE = "objectives.data", "accuracy_coefficients.toml"  # loss proxy
AIC_SOURCE = "aiconfigurator"
MIN_SAMPLE = 100  # rows a fit samples at least
USER_DATA = Path("~/.local/share")  # $XDG_DATA_HOME's default
USER_FOLDER = ("archscout", "calibration")
PARTS = ("gemm", "attention", "comm", "moe")


# ---- where files go -------------------------------------------------------------------------

def _user_folder() -> Path:
    if os.environ.get(CALIBRATION_DIR_ENV, "").strip():
        return Path(os.environ[CALIBRATION_DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME", "").strip() or USER_DATA).expanduser()
    return base.joinpath(*USER_FOLDER)


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.expanduser().resolve(), folder.resolve()
    return path == folder or folder in path.parents


PROTECTED_PACKAGES = ("cost_model", "objectives")  # no calibration output lands inside these


def _protected() -> list[Path]:
    from importlib import resources

    return [Path(str(resources.files(name))) for name in PROTECTED_PACKAGES]


def output_folder(args: argparse.Namespace, package: Path) -> Path:
    """`--output`, else the user's folder; the package's data folder (`package`) only with
    `--write-package-data`, and nothing else inside the installed packages (module docstring)."""
    if args.write_package_data:
        if args.output and not _inside(Path(args.output), package):
            raise CommandError(f"`--write-package-data` writes the package's data ({package}); "
                               f"drop `--output` {args.output!r}")
        return package
    folder = Path(args.output) if args.output else _user_folder()
    if any(_inside(folder, root) for root in (package, *_protected())):
        raise CommandError(f"`--output` {str(folder)!r} is inside the package's shipped data; "
                           "pass `--write-package-data` to regenerate it")
    return folder.expanduser()


# ---- one engine on one GPU ------------------------------------------------------------------

@dataclass
class Run:
    """What a calibration run produced, written only once every fit has succeeded."""

    texts: dict[Path, str] = field(default_factory=dict)
    docs: dict[tuple[str, str], dict] = field(default_factory=dict)  # (engine, gpu) -> doc
    gemm_rows: list[dict] = field(default_factory=list)
    kernel_rows: list[dict] = field(default_factory=list)
    tables: dict[str, dict[str, list[MeasuredGemms]]] = field(default_factory=dict)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)


def _gemm_tables(args: argparse.Namespace, name: str, engine: str
                 ) -> tuple[list[MeasuredGemms], str, str]:
    if args.source == AIC_SOURCE:
        path, version = gemm_table(name, engine, args.engine_version)
        source = gemm_source(name, engine, version)
    else:
        path, version = Path(args.source), Path(args.source).name
        source = f"measured table {path.name}"
    tables, skipped = measured_gemms(read_table(path), name, source)
    if not tables:
        raise CommandError(f"`--source` {path} has no rows of a modeled format (skipped: "
                           f"{', '.join(skipped) or 'none'})")
    return tables, version, source


def _fit_gemm(args, run: Run, doc: dict, name: str, engine: str) -> None:
    datas, version, source = _gemm_tables(args, name, engine)
    results = fit_hardware(datas, get_hardware(name), args.sample)
    fitted = {r.dtype: files.gemm_entry(r) for r in results}
    # an engine's tables replace its formats (one it does not measure is not kept); a file adds
    doc["gemm"] = fitted if args.source == AIC_SOURCE else {**doc.get("gemm", {}), **fitted}
    doc["version"] = f"calibrated: {source}"
    run.gemm_rows += [_summary(engine, r) for r in results]
    run.tables.setdefault(engine, {})[name] = datas
    run.versions.setdefault(engine, {})[name] = version


def _summary(engine: str, r: GemmFitResult) -> dict:
    return {"engine": engine, "hardware": r.hardware, "dtype": r.dtype, "points": r.points,
            "roofline_median": r.roofline_median_abs_error_frac,
            "roofline_p90": r.roofline_p90_abs_error_frac,
            "median": r.median_abs_error_frac, "p90": r.p90_abs_error_frac}


def _fit_attention(args, run: Run, doc: dict, name: str, engine: str) -> None:
    from search.calibration.attention import (
        attention_tables,
        fit_attention,
        fit_source,
        measured_attention,
    )

    paths, version = attention_tables(name, engine, args.engine_version)
    tables = {phase: measured_attention(read_parquet(p), phase) for phase, p in paths.items()}
    source = aic_source(name, "attention", engine, version) + " context+generation_attention_perf"
    r = fit_attention(tables, get_hardware(name), efficiency_from_toml(doc, engine), name,
                      source, args.sample)
    doc.setdefault("attention", {}).update(files.sourced_section(
        {k: (v, fit_source(r)) for k, v in r.coefficients.items()}))
    run.kernel_rows += [{"engine": engine, "hardware": name, "part": f"attention {p}",
                         "rows": r.points[p], "median": e[0], "p90": e[1]}
                        for p, e in r.errors.items()]


def _fit_comm(args, run: Run, doc: dict, name: str, engine: str) -> None:
    from search.calibration.comm import (
        comm_table,
        fit_all_reduce,
        fit_source,
        measured_all_reduce,
    )

    path, version = comm_table(name, engine, args.engine_version)
    source = aic_source(name, "comm", engine, version) + " custom_allreduce_perf"
    r = fit_all_reduce(measured_all_reduce(read_parquet(path)), get_hardware(name),
                       efficiency_from_toml(doc, engine), name, source)
    doc.setdefault("communication", {}).update(files.sourced_section(
        {k: (v, fit_source(r)) for k, v in r.coefficients.items()}))
    run.kernel_rows.append({"engine": engine, "hardware": name, "part": "all-reduce",
                            "rows": r.points, "median": r.errors[0], "p90": r.errors[1]})


def _fit_moe(args, run: Run, doc: dict, name: str, engine: str) -> None:
    from search.calibration.moe import fit_moe, measured_moe, moe_table

    path, version = moe_table(name, engine, args.engine_version)
    tables, _ = measured_moe(read_parquet(path))
    source = aic_source(name, "moe", engine, version) + " moe_perf balanced"
    results = fit_moe(tables, get_hardware(name), efficiency_from_toml(doc, engine), name,
                      source, args.sample)
    doc["moe"] = {r.dtype: files.moe_entry(r) for r in results}
    run.kernel_rows += [{"engine": engine, "hardware": name, "part": part,
                         "rows": fit.points, "median": fit.error[0], "p90": fit.error[1]}
                        for r in results for part, fit in ((f"moe {r.dtype}", r),
                                                           (f"moe {r.dtype} ep1", r.ep1))
                        if fit is not None]


FITS = {"gemm": _fit_gemm, "attention": _fit_attention, "comm": _fit_comm, "moe": _fit_moe}


def _calibrate(args, run: Run, output: Path, parts: set[str], engine: str, name: str) -> None:
    doc = files.previous_doc(output, engine, name)
    if not doc:
        raise CommandError(f"no efficiency file to start {engine}/{name} from")
    doc.update(hardware=name, kernels=engine)
    for part in PARTS:
        if part in parts:
            FITS[part](args, run, doc, name, engine)
    efficiency_from_toml(doc, engine)  # the written file must load
    run.docs[(engine, name)] = doc
    run.texts[output / engine / f"{name}.toml"] = files.efficiency_text(doc, engine)


# ---- folders --------------------------------------------------------------------------------

def _defaults(run: Run, output: Path, kernels: str) -> None:
    docs = {gpu: doc for (k, gpu), doc in run.docs.items() if k == kernels}
    if set(docs) == set(AIC_SYSTEMS):
        doc = files.default_doc(docs, kernels)
        efficiency_from_toml(doc, kernels)
        run.texts[output / kernels / f"{DEFAULT_FILE}.toml"] = files.efficiency_text(doc, kernels)


def _points(run: Run, output: Path, engine: str) -> None:
    if engine not in run.tables:
        return
    path = files.points_path(output, engine)
    shipped = files.points_path(files.package_dir(), engine)
    previous = path if path.is_file() else shipped
    doc = tomllib.loads(previous.read_text()) if previous.is_file() else {}
    run.texts[path] = files.points_text(doc, run.tables[engine], engine, run.versions[engine])


def _generic(run: Run, output: Path, names: list[str]) -> None:
    """The generic kernels of every GPU whose three engines are at hand (this run's files, else
    the output folder's or the package's)."""
    from search.calibration.generic import generic_doc

    for name in names:
        docs = {e: run.docs.get((e, name)) or files.previous_doc(output, e, name)
                for e in ENGINES}
        effs = {e: efficiency_from_toml(doc, e) for e, doc in docs.items()}
        doc, _ = generic_doc(get_hardware(name), docs, effs)
        efficiency_from_toml(doc, GENERIC)
        run.docs[(GENERIC, name)] = doc
        run.texts[output / GENERIC / f"{name}.toml"] = files.efficiency_text(doc, GENERIC)
    _defaults(run, output, GENERIC)


# ---- the command ----------------------------------------------------------------------------

def _parts(args: argparse.Namespace) -> set[str]:
    part = args.part or ("all" if args.source == AIC_SOURCE else "gemm")
    if part != "gemm" and args.source != AIC_SOURCE:
        raise CommandError(f"`--part` {part} needs `--source {AIC_SOURCE}` (a file holds GEMMs)")
    return set(PARTS) if part == "all" else {part}


def _hardware_names(args: argparse.Namespace) -> list[str]:
    names = list(dict.fromkeys(args.hardware or AIC_SYSTEMS))
    if args.source != AIC_SOURCE and len(names) != 1:
        raise CommandError("`--hardware` must name exactly one GPU when `--source` is a file")
    for name in names:
        get_hardware(name)  # a clear error for unknown names
    return names


def _engines(args: argparse.Namespace) -> list[str]:
    """The engines to fit: `--engine`, else all three; a file refits one folder (default: the
    generic kernels, what a run without an engine uses)."""
    given = list(dict.fromkeys(args.engine or []))
    if args.source == AIC_SOURCE:
        return given or list(ENGINES)
    if len(given) > 1:
        raise CommandError("`--engine` must name one engine when `--source` is a file; got "
                           f"{', '.join(given)}")
    return given or [GENERIC]


def _write(run: Run, output: Path) -> None:
    for path, text in run.texts.items():
        write_text_atomic(path, text, "--output", mode=0o644, make_parents=True)


def _report(args, run: Run, output: Path, package: Path) -> None:
    use = "" if _inside(output, package) else \
        f"; the cost model reads it with {CALIBRATION_DIR_ENV}={output}"
    written = sorted({f"{p.parent.name}/{p.name}" for p in run.texts})
    if args.json:
        print_json({"output": str(output), "written": written, "gemm": run.gemm_rows,
                    "kernels": run.kernel_rows})
        return
    for rows in (run.gemm_rows, run.kernel_rows):
        if rows:
            print(format_table(rows) + "\n")
    print(f"wrote {len(written)} file(s) to {output}{use}")


def _dispatch_source(args: argparse.Namespace) -> list[dict] | None:
    """`--source`: "aiconfigurator", a GEMM table (args.source becomes its path) or benchmark
    outputs (their rows returned), told by content (`calibrate_serving.classify`)."""
    sources = args.source if isinstance(args.source, list) else [args.source]
    if sources == [AIC_SOURCE] or args.part == "accuracy":
        args.source = sources[0] if len(sources) == 1 else sources
        return None
    from search.cli.calibrate_serving import classify

    kind, rows = classify(sources)
    args.source = sources[0]
    return rows if kind == "serving" else None


def run_calibrate(args: argparse.Namespace) -> int:
    rows = _dispatch_source(args)
    if args.part == "accuracy":
        return run_accuracy(args)
    if rows is not None:
        from search.cli.calibrate_serving import run_serving

        return run_serving(args, rows, output_folder(args, files.package_dir()))
    if args.sample < MIN_SAMPLE:
        raise CommandError(f"`--sample` must be at least {MIN_SAMPLE}; got {args.sample}")
    package = files.package_dir()
    output, parts = output_folder(args, package), _parts(args)
    names, engines, run = _hardware_names(args), _engines(args), Run()
    for engine in engines:
        for name in names:
            _calibrate(args, run, output, parts, engine, name)
        _defaults(run, output, engine)
        if args.source == AIC_SOURCE:
            _points(run, output, engine)
    if args.source == AIC_SOURCE:  # the generic kernels follow every engine's refit
        _generic(run, output, names)
    _write(run, output)
    _report(args, run, output, package)
    return 0


def run_accuracy(args: argparse.Namespace) -> int:
    """`--part accuracy`: refit the loss proxy on the declared (or a given) calibration set."""
    from importlib import resources

    from objectives import (
        CALIBRATION_SET_FILE, SHIPPED_RECORDS, coefficients_toml, fit_coefficients, read_rows,
        shipped_calibration_set,
    )

    rows_path = (shipped_calibration_set() if args.source == AIC_SOURCE
                 else Path(args.source))
    folder = output_folder(args, Path(str(resources.files(ACCURACY_PACKAGE))))
    fit = fit_coefficients(read_rows(rows_path))
    target = folder / ACCURACY_FILE
    set_name = (f"objectives/data/{CALIBRATION_SET_FILE}"
                if args.source == AIC_SOURCE else str(rows_path))
    write_text_atomic(target, coefficients_toml(fit, SHIPPED_RECORDS, set_name),
                      "--output", mode=0o644, make_parents=True)
    families = [{"family": f, "rows": len(ff.rows), "fitted": ", ".join(ff.coefficients) or "-",
                 "rms_log_error": ff.rms_log_error, "max_abs_log_error": ff.max_abs_log_error}
                for f, ff in fit.families.items()]
    coefficients = {name: getattr(fit.coefficients, name) for name in SHIPPED_RECORDS}
    if args.json:
        print_json({"output": str(target), "calibration_set": set_name, "rows": fit.rows,
                    "families": families, "coefficients": coefficients})
        return 0
    print(format_table([{**f, "rms_log_error": f"{f['rms_log_error']:.2%}",
                         "max_abs_log_error": f"{f['max_abs_log_error']:.2%}"}
                        for f in families]))
    print(f"\nwrote {target} (fitted on {fit.rows} rows of {set_name})")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    cal = sub.add_parser("calibrate", help="fit the efficiency layer to measured kernels, per "
                         "serving engine")
    cal.add_argument("--hardware", action="append",
                     help="catalog GPU to fit (repeatable; default: every GPU with a table)")
    cal.add_argument("--engine", "--framework", action="append", choices=ENGINES,
                     help="serving engine whose measured tables to fit (repeatable; default: "
                          "all three, then the generic kernels)")
    cal.add_argument("--engine-version", "--framework-version", dest="engine_version",
                     help="the engine's table version (default: its GEMM table's newest)")
    cal.add_argument("--source", nargs="+", default=[AIC_SOURCE], metavar="SOURCE",
                     help="'aiconfigurator' (pip install aiconfigurator-core), a Parquet/CSV "
                          "with columns gemm_dtype,m,n,k,latency (ms), or serving-benchmark "
                          "outputs (the files `compare` reads: refit the host time and the "
                          "benchmark-TTFT terms; give --study/--trial or --model)")
    cal.add_argument("--output", help=f"folder for the TOML files (default: ${CALIBRATION_DIR_ENV}"
                     ", else ~/.local/share/archscout/calibration); never the package's data")
    cal.add_argument("--write-package-data", action="store_true",
                     help="regenerate the shipped package data (maintainers)")
    cal.add_argument("--sample", type=int, default=FIT_SAMPLE_POINTS,
                     help=f"rows each fit uses (default {FIT_SAMPLE_POINTS:,}); errors use all")
    cal.add_argument("--part", choices=("all", *PARTS, "accuracy"),
                     help="what to fit (default: all = gemm, attention, comm and moe; gemm with "
                          "a `--source` file); accuracy: the loss proxy on its calibration set "
                          "(`--source ROWS.csv` for another)")
    cal.add_argument("--json", action="store_true", help="one JSON document on stdout")
    from search.cli.calibrate_serving import add_arguments

    add_arguments(cal)
    cal.set_defaults(func=run_calibrate)
