"""`archscout compare STUDY.toml TRIAL RESULTS…` (or `compare MODEL --hardware NAME [--tp …]
RESULTS…`): the engines' benchmark outputs (`search.records.benchmarks.read_benchmark_output`)
next to the cost model's prediction at each measured point: TPOT, benchmark TTFT and output
tokens/s/GPU, measured and predicted, with the prediction's error."""

from __future__ import annotations

import argparse
import math

from cost_model import load_architecture, make_deployment, validate_deployment
from search.cli.errors import CommandError
from search.records.benchmarks import compare_row, read_benchmark_output
from search.records.tables import format_table, print_json

COLUMNS = ("file", "concurrency", "isl", "osl", "tpot_ms", "predicted_tpot_ms", "ttft_ms",
           "predicted_ttft_ms", "tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu")


def _target(args: argparse.Namespace):
    """(architecture, deployment, hardware, engine, label, result files)."""
    if str(args.target).endswith(".toml"):
        from search.cli.inspect import read_one_trial

        if len(args.rest) < 2:
            raise CommandError("`compare STUDY.toml TRIAL RESULTS…`: give the trial number and "
                               "at least one results file")
        try:
            args.trial = int(args.rest[0])
        except ValueError:
            raise CommandError(f"`TRIAL` ({args.rest[0]!r}) must be a trial number") from None
        args.study = args.target
        spec, trial, cand = read_one_trial(args)
        return (cand.arch, cand.deployment, spec.hardware.gpu, args.engine or spec.engine,
                f"trial {trial.number} of `{spec.name}`", args.rest[1:])
    if args.hardware is None:
        raise CommandError("`--hardware` is required when comparing a model config")
    arch = load_architecture(args.target)
    dep = make_deployment(tp=args.tp, ep=args.ep, pp=args.pp, dp=args.dp,
                          precision=args.precision, kv_precision=args.kv_precision,
                          moe_precision=args.moe_precision)
    validate_deployment(arch, dep)
    return arch, dep, args.hardware, args.engine, arch.name, args.rest


def _median_abs(rows: list[dict], key: str) -> float:
    values = sorted(abs(r[key]) for r in rows if math.isfinite(r[key]))
    return values[len(values) // 2] if values else math.nan


def run_compare(args: argparse.Namespace) -> int:
    arch, dep, hardware, engine, label, files = _target(args)
    measured = [row for path in files for row in read_benchmark_output(path)]
    rows = [compare_row(row, arch, dep, hardware, engine) for row in measured]
    summary = {k: _median_abs(rows, f"{k}_error_frac")
               for k in ("tpot", "ttft", "tokens_per_s_per_gpu")}
    if args.json:
        print_json({"target": label, "hardware": hardware, "engine": engine,
                    "gpus": dep.gpus, "rows": rows, "median_abs_error_frac": summary})
        return 0
    print(f"{label} on {dep.gpus}× {hardware} ({engine or 'generic'} engine terms): "
          f"{len(rows)} measured point(s), measured vs predicted")
    print(format_table(rows, COLUMNS))
    print("median |error| of the prediction: " + "  ".join(
        f"{k} {v:.1%}" for k, v in summary.items() if math.isfinite(v)))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="measured vs predicted TPOT, TTFT and tokens/s/GPU from "
                       "the engines' benchmark outputs")
    p.add_argument("target", help="study file (TOML, then TRIAL) or a model config")
    p.add_argument("rest", nargs="+", metavar="TRIAL|RESULTS", help="[TRIAL] RESULTS…: vLLM "
                   "bench serve / SGLang bench_serving / TensorRT-LLM benchmark_serving output "
                   "(text, JSON, JSONL) or a genai-perf/AIPerf profile export")
    p.add_argument("--storage", default=None, help="study: Optuna storage URL")
    p.add_argument("--hardware", default=None, help="model config: catalog name or TOML path")
    for flag in ("--tp", "--ep", "--pp", "--dp"):
        p.add_argument(flag, type=int, default=1, help="model config: degree (default 1)")
    p.add_argument("--precision", default="fp8", help="model config: linear layers' format")
    p.add_argument("--moe-precision", default=None, help="model config: routed experts' format")
    p.add_argument("--kv-precision", default=None, help="model config: KV cache format")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm"), default=None,
                   help="whose benchmark-TTFT terms apply (default: the study's, else generic)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_compare)
