"""`archscout calibrate --source RESULTS… (--study STUDY.toml --trial N | --model CONFIG
--hardware NAME [--tp …])`: the serving terms refitted on a user's own benchmark runs.

What `--source` holds is told by content (`source_kind`): a GEMM table (CSV or Parquet with
columns gemm_dtype, m, n, k, latency: `calibrate`'s kernel fit) or the serving-benchmark outputs
`archscout compare` reads (`search.records.benchmarks`). A benchmark output does not say what ran,
so the deployment is given as `compare` takes it: a study and trial, or a model config with
`--hardware` and the deployment flags. The host time of the GPU's host CPU kind and the
benchmark-TTFT terms of each engine table the runs name are fitted
(`search.calibration.serving_runs`) and written to `serving/host.toml` and
`serving/benchmark.toml` of the calibration folder, which the cost model reads before the
package's (`cost_model.serving_files`); a term with too few points keeps its value, said in one
line. Nothing is written until every fit has run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from search.atomic import write_text_atomic
from search.calibration import files
from search.cli.errors import CommandError
from search.records.tables import format_table, print_json

# a header naming any of these is a GEMM table's (search.calibration.gemm: REQUIRED_COLUMNS,
# DTYPE_COLUMNS), whose reader then names what it lacks; no benchmark output is a CSV
GEMM_COLUMNS = ("m", "n", "k", "latency", "gemm_dtype", "dtype")
PARQUET_MAGIC = b"PAR1"
EXPECTED = ("a GEMM table (CSV or Parquet with columns gemm_dtype,m,n,k,latency) or a serving "
            "benchmark output (a \"Serving Benchmark Result\" block, vLLM/SGLang result JSON(L), "
            "a trtllm-bench report or a genai-perf/AIPerf profile export)")


def source_kind(path_text: str) -> tuple[str, list[dict]]:
    """("gemm", []) or ("serving", the file's benchmark rows), from the file's content."""
    from search.records.benchmarks import read_benchmark_output
    from search.records.errors import ExportError

    path = Path(path_text)
    if not path.is_file():
        raise CommandError(f"`--source` file {path_text!r} does not exist (expected {EXPECTED})")
    with path.open("rb") as handle:
        head = handle.read(4096)
    first = head.decode("utf-8", errors="replace").splitlines()[:1]
    columns = {c.strip().strip('"').lower() for c in (first[0].split(",") if first else [])}
    if head.startswith(PARQUET_MAGIC) or path.suffix.lower() in (".csv", ".parquet") \
            or columns & set(GEMM_COLUMNS):
        return "gemm", []
    try:
        return "serving", read_benchmark_output(path)
    except ExportError:
        raise CommandError(f"`--source` {path_text}: holds neither {EXPECTED}") from None


def classify(sources: list[str]) -> tuple[str, list[dict]]:
    """The one kind of every `--source` file and the benchmark rows of all of them."""
    kinds, rows = {}, []
    for path in sources:
        kind, found = source_kind(path)
        kinds.setdefault(kind, path)
        rows += found
    if len(kinds) > 1:
        raise CommandError(f"`--source` mixes a GEMM table ({kinds['gemm']}) and a benchmark "
                           f"output ({kinds['serving']}); calibrate one kind per run")
    if "gemm" in kinds and len(sources) > 1:
        raise CommandError(f"`--source` takes one GEMM table per run; got {len(sources)} files")
    return next(iter(kinds)), rows


# ---- the deployment the runs measured --------------------------------------------------------

def _single(values: list[str] | None, flag: str) -> str | None:
    given = list(dict.fromkeys(values or []))
    if len(given) > 1:
        raise CommandError(f"`{flag}` must name one value with benchmark outputs; got "
                           f"{', '.join(given)}")
    return given[0] if given else None


def target_of(args: argparse.Namespace):
    """The deployment as `compare` takes it (`compare.study_target`/`model_target`)."""
    from search.calibration.serving_runs import Target
    from search.cli.compare import model_target, study_target

    ns = argparse.Namespace(**{**vars(args), "hardware": _single(args.hardware, "--hardware"),
                               "engine": _single(args.engine, "--engine")})
    if args.study and args.model:
        raise CommandError("give `--study` (with `--trial`) or `--model`, not both")
    if args.study:
        if args.trial is None:
            raise CommandError("`--study` needs `--trial N`: the trial the runs measured")
        arch, dep, hardware, engine, _ = study_target(ns)
    elif args.model:
        arch, dep, hardware, engine, _ = model_target(ns, args.model)
    else:
        raise CommandError("`--source` benchmark outputs need the deployment they measured: "
                           "`--study STUDY.toml --trial N`, or `--model CONFIG --hardware NAME "
                           "[--tp …]`")
    return Target(arch, dep, hardware, engine)


# ---- the command -----------------------------------------------------------------------------

def _fits(runs, target):
    from cost_model import trial_host_us
    from search.calibration.serving_runs import fit_host, fit_ttft

    host = fit_host(runs, target)
    with trial_host_us({host.table: host.after}):  # the TTFT terms on top of the fitted h
        ttft = fit_ttft(runs, target)
    return host, ttft


def _source(fit, what: str) -> str:
    return (f"fitted by `archscout calibrate --source` on {fit.points} {what} of "
            f"{', '.join(fit.files)}; error before {fit.error_before:.3f}, after "
            f"{fit.error_after:.3f}")


def host_doc(output: Path, host) -> dict:
    doc = files.previous_serving_doc(output, "host.toml")
    doc[host.table] = {
        "request_step_us": files.sourced(host.after, _source(
            host, "measured TPOT and tokens/s/GPU (mean |log error|)")),
        "fit": files.fit_record(host.files, host.points, **host.extra)}
    return doc


def benchmark_doc(output: Path, ttft: list) -> dict:
    """The previous file with each refitted table replaced (q kept where it could not be
    fitted; the mean's terms dropped: fewer mean runs than a split needs take the median's)."""
    doc = files.previous_serving_doc(output, "benchmark.toml")
    for fit in (f for f in ttft if f.term == "request_overhead_ms" and not f.kept_because):
        t, q, w, t_mean, q_mean = fit.extra["terms"]
        share = next(f for f in ttft if f.table == fit.table and f.term == "queue_share_frac")
        source = _source(fit, "measured TTFT (median |log error|)")
        q_source = source if not share.kept_because else f"kept: {share.kept_because}"
        table = {"request_overhead_ms": files.sourced(t * 1e3, source),
                 "queue_share_frac": files.sourced(q, q_source),
                 "round_wait_share_frac": files.sourced(w, source)}
        if t_mean is not None:
            table |= {"mean_request_overhead_ms": files.sourced(t_mean * 1e3, source),
                      "mean_queue_share_frac": files.sourced(q_mean, source)}
        doc[fit.table] = table | {"fit": files.fit_record(fit.files, fit.points)}
    return doc


def _texts(output: Path, host, ttft: list) -> dict[Path, str]:
    texts = {}
    if not host.kept_because:
        texts[files.serving_path(output, "host.toml")] = files.serving_text(
            host_doc(output, host), "host.toml")
    if any(f.term == "request_overhead_ms" and not f.kept_because for f in ttft):
        texts[files.serving_path(output, "benchmark.toml")] = files.serving_text(
            benchmark_doc(output, ttft), "benchmark.toml")
    return texts


def _row(fit) -> dict:
    return {"term": fit.term, "table": fit.table, "before": round(fit.before, 4),
            "after": round(fit.after, 4), "points": fit.points,
            "error_before": fit.error_before, "error_after": fit.error_after,
            "fitted": not fit.kept_because, "kept_because": fit.kept_because,
            "note": fit.note, "files": fit.files}


def _print(rows: list[dict], output: Path, written: list[str]) -> None:
    shown = [{k: ("-" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()
              if k in ("term", "table", "before", "after", "points", "error_before",
                       "error_after")} for r in rows if r["fitted"]]
    if shown:
        print(format_table(shown))
    for r in rows:
        if not r["fitted"]:
            print(f"kept {r['table']}.{r['term']} = {r['before']:g}: {r['kept_because']}")
        elif r["note"]:
            print(f"note: {r['note']}")
    from cost_model import CALIBRATION_DIR_ENV

    use = f"; the cost model reads it with {CALIBRATION_DIR_ENV}={output}" if written else ""
    print(f"wrote {len(written)} file(s) to {output}{use}" + (
        "" if not written else f": {', '.join(written)}"))


def run_serving(args: argparse.Namespace, rows: list[dict], output: Path) -> int:
    from search.calibration.serving_runs import measured_runs

    if args.part not in (None, "all"):
        raise CommandError(f"`--part` {args.part} fits kernels; benchmark outputs refit the "
                           "serving terms (drop `--part`)")
    if args.write_package_data:
        raise CommandError("`--write-package-data` regenerates the shipped files from the "
                           "published rows (tests/benchmarks/fit_*.py), not from a user's runs")
    target = target_of(args)
    runs = measured_runs(rows, target)
    host, ttft = _fits(runs, target)
    texts = _texts(output, host, ttft)
    for path, text in texts.items():
        write_text_atomic(path, text, "--output", mode=0o644, make_parents=True)
    written = sorted(f"{p.parent.name}/{p.name}" for p in texts)
    rows_out = [_row(f) for f in (host, *ttft)]
    if args.json:
        print_json({"output": str(output), "written": written, "runs": len(runs),
                    "terms": rows_out})
    else:
        _print(rows_out, output, written)
    return 0


def add_arguments(cal: argparse.ArgumentParser) -> None:
    """The deployment flags of benchmark outputs (`compare`'s)."""
    cal.add_argument("--study", help="benchmark outputs: the study whose trial the runs measured")
    cal.add_argument("--trial", type=int, help="benchmark outputs: that trial's number")
    cal.add_argument("--storage", default=None, help="the study's Optuna storage URL")
    cal.add_argument("--model", help="benchmark outputs: the model config the runs served "
                     "(with --hardware and the deployment flags)")
    for flag in ("--tp", "--ep", "--pp", "--dp"):
        cal.add_argument(flag, type=int, default=1, help="--model: degree (default 1)")
    cal.add_argument("--precision", default=None, help="--model: linear layers' format")
    cal.add_argument("--moe-precision", default=None, help="--model: routed experts' format")
    cal.add_argument("--kv-precision", default=None, help="--model: KV cache format")
