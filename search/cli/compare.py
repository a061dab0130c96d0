"""`archscout compare STUDY.toml TRIAL RESULTS…` (or `compare MODEL --hardware NAME [--tp …]
RESULTS…`): the engines' benchmark outputs (`search.records.benchmarks.read_benchmark_output`)
next to the cost model's prediction at each measured point (`search.records.comparison`): TPOT
and benchmark TTFT at the requests in flight, and output tokens/s/GPU of the finite run (its
waves, ramp-down included), measured and predicted, with the prediction's error and which
statistic (mean or median over requests) each measured figure is."""

from __future__ import annotations

import argparse
import math
import sys

from cost_model import (
    deployment_formats, get_hardware, load_model, make_deployment, validate_deployment,
)
from search.cli.errors import CommandError
from search.records.benchmarks import read_benchmark_output
from search.records.comparison import LONGEST_OVER_MEAN, compare_row
from search.records.documents import serving_terms_document, serving_terms_line
from search.records.tables import format_table, print_json

COLUMNS = ("file", "requests", "concurrency", "isl", "osl", "stat", "tpot_ms",
           "predicted_tpot_ms", "ttft_ms", "predicted_ttft_ms", "tokens_per_s_per_gpu",
           "predicted_tokens_per_s_per_gpu")


def _target(args: argparse.Namespace):
    """(architecture, deployment, hardware, engine, label, result files)."""
    if str(args.target).endswith(".toml"):
        if len(args.rest) < 2:
            raise CommandError("`compare STUDY.toml TRIAL RESULTS…`: give the trial number and "
                               "at least one results file")
        try:
            args.trial = int(args.rest[0])
        except ValueError:
            raise CommandError(f"`TRIAL` ({args.rest[0]!r}) must be a trial number") from None
        args.study = args.target
        return (*study_target(args), args.rest[1:])
    return (*model_target(args, args.target), args.rest)


def study_target(args: argparse.Namespace):
    """(architecture, deployment, hardware, engine, label) of trial `args.trial` of the study
    `args.study` (`args.storage`; `args.engine` over the study's): what a benchmark output
    measured, for `compare` and `calibrate --source`."""
    from search.cli.inspect import read_one_trial

    spec, trial, cand = read_one_trial(args)
    return (cand.arch, cand.deployment, spec.hardware.gpu, args.engine or spec.engine,
            f"trial {trial.number} of `{spec.name}`")


def model_target(args: argparse.Namespace, path: str):
    """The same for a model config at `args.hardware` and the deployment flags (`--tp` …,
    `--precision` …)."""
    if args.hardware is None:
        raise CommandError("`--hardware` is required when comparing a model config")
    model = load_model(path)
    formats = deployment_formats(model.checkpoint, model.arch, get_hardware(args.hardware),
                                 args.precision, args.moe_precision, args.kv_precision)
    for note in filter(None, (formats.note, model.assumed_note)):
        print(f"archscout: note: {note}", file=sys.stderr)
    dep = make_deployment(tp=args.tp, ep=args.ep, pp=args.pp, dp=args.dp, **formats.fields)
    validate_deployment(model.arch, dep)
    return model.arch, dep, args.hardware, args.engine, model.arch.name


def _median_abs(rows: list[dict], key: str) -> float:
    values = sorted(abs(r[key]) for r in rows if math.isfinite(r[key]))
    return values[len(values) // 2] if values else math.nan


def _engine(given: str | None, row: dict) -> str | None:
    """The engine whose TTFT terms apply: the flag's (or the study's), else the output's."""
    return given or row.get("engine")


def _notes(rows: list[dict]) -> list[str]:
    """What each measured figure is: the statistic over requests, and the run behind tokens/s
    (its waves; a run that lasted longer than equal-length waves would: its longest request)."""
    lines = ["measured tokens/s/GPU: the run's generated tokens over its duration (all its "
             "requests, ramp-down included); predicted: the same run in waves of `concurrency` "
             "equal requests"]
    for r in rows:
        stats = f"TTFT is the {r['ttft_stat']}, TPOT the {r['tpot_stat']} over requests" \
            if r["ttft_stat"] or r["tpot_stat"] else "no TTFT or TPOT (not streamed)"
        text = (f"{r['file']}: {stats}; {r['requests']} request(s) in {r['waves']} wave(s) of "
                f"{r['concurrency']}")
        if math.isfinite(r["duration_s"]):
            text += (f"; the run took {r['duration_s']:.3g} s, equal-length waves would take "
                     f"{r['predicted_duration_s']:.3g} s")
        longest = r["longest_osl_tokens"]
        if math.isfinite(longest) and longest > LONGEST_OVER_MEAN * r["osl"]:
            text += (f" (at the measured TPOT its longest request ran ≈{longest:,.0f} tokens vs "
                     f"a mean of {r['osl']:,}: lengths vary)")
        lines.append(text)
    return lines


def _check_gpus(rows: list[dict], gpus: int) -> None:
    for r in rows:
        if math.isfinite(r["gpus_measured"]) and r["gpus_measured"] != gpus:
            print(f"archscout: note: {r['file']} ran on {r['gpus_measured']:g} GPUs (TP·PP), the "
                  f"deployment compared takes {gpus}", file=sys.stderr)


def run_compare(args: argparse.Namespace) -> int:
    arch, dep, hardware, engine, label, files = _target(args)
    measured = [row for path in files for row in read_benchmark_output(path)]
    rows = [compare_row(row, arch, dep, hardware, _engine(engine, row)) for row in measured]
    _check_gpus(rows, dep.gpus)
    summary = {k: _median_abs(rows, f"{k}_error_frac")
               for k in ("tpot", "ttft", "tokens_per_s_per_gpu")}
    engines = sorted({_engine(engine, r) or "generic" for r in measured})
    serving = serving_terms_document()
    if args.json:
        print_json({"target": label, "hardware": hardware, "engine": engine,
                    "engines": engines, "gpus": dep.gpus, "rows": rows,
                    "median_abs_error_frac": summary, "serving_terms": serving})
        return 0
    print(f"{label} on {dep.gpus}× {hardware} ({', '.join(engines)} engine terms): "
          f"{len(rows)} measured point(s), measured vs predicted")
    if (line := serving_terms_line(serving)) is not None:
        print(line)
    print(format_table(rows, COLUMNS))
    for line in _notes(rows):
        print(line)
    print("median |error| of the prediction: " + "  ".join(
        f"{k} {v:.1%}" for k, v in summary.items() if math.isfinite(v)))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="measured vs predicted TPOT, TTFT and tokens/s/GPU from "
                       "the engines' benchmark outputs")
    p.add_argument("target", help="study file (TOML, then TRIAL) or a model config")
    p.add_argument("rest", nargs="+", metavar="TRIAL|RESULTS", help="[TRIAL] RESULTS…: vLLM "
                   "bench serve / SGLang bench_serving / TensorRT-LLM benchmark_serving output "
                   "(text, JSON, JSONL), a trtllm-bench report (text or --report_json) or a "
                   "genai-perf/AIPerf profile export")
    p.add_argument("--storage", default=None, help="study: Optuna storage URL")
    p.add_argument("--hardware", default=None, help="model config: catalog name or TOML path")
    for flag in ("--tp", "--ep", "--pp", "--dp"):
        p.add_argument(flag, type=int, default=1, help="model config: degree (default 1)")
    p.add_argument("--precision", default=None, help="model config: linear layers' format "
                   "(default: the checkpoint's, else fp8)")
    p.add_argument("--moe-precision", default=None, help="model config: routed experts' format")
    p.add_argument("--kv-precision", default=None, help="model config: KV cache format")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm"), default=None,
                   help="whose benchmark-TTFT terms apply (default: the study's, else the "
                   "engine the output names, else generic)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_compare)
