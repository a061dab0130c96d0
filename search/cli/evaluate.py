"""`archscout evaluate`: the cost model on one architecture and deployment."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from cost_model import (
    ARRIVALS, DEFAULT_MAX_BATCH_SEQUENCES, DEFAULT_SPEC_ACCEPTANCE_FRAC, MS_PER_S, SPEC_METHODS,
    Deployment, DisaggregatedPoints, OperatingPoints, PoolLimits, deployment_formats,
    evaluate_disaggregated, evaluate_points, formats_document, get_hardware, load_model,
    make_deployment, make_workload, pareto_mask, validate_deployment,
)
from search.cli.arguments import add_engine_arguments, positive_number, whole_number
from search.cli.cost import kernels_document, kernels_line
from search.cli.errors import CommandError, NoFitError
from search.records.documents import (
    BATCH_COLUMNS,
    DEFAULT_WINDOW,
    breakdown_shares,
    deployment_document,
    memory_document,
    no_fit_message,
    params_document,
    point_document,
    serving_terms_document,
    serving_terms_line,
    uncalibrated_document,
    uncalibrated_line,
)  # fmt: skip
from search.records.tables import format_table, print_json

# Requests in flight: the engine's cap per attention-DP group (TensorRT-LLM's 4,096) times the
# largest DP degree a deployment may have: no deployment holds more (`--batch` rows share it).
MAX_DP = next(m.le for m in Deployment.model_fields["dp"].metadata if hasattr(m, "le"))
MAX_CONCURRENCY = DEFAULT_MAX_BATCH_SEQUENCES * MAX_DP

def _deployment(args: argparse.Namespace, formats: dict[str, str], prefix: str = "") -> Deployment:
    """The deployment the flags name, in `formats` (`deployment_formats`: the flags, else the
    checkpoint's); `prefix` "prefill_" reads the prefill pool's flags, each defaulting to the
    decode pool's."""
    pick = lambda name: getattr(args, f"{prefix}{name}", None) or getattr(args, name)  # noqa
    return make_deployment(tp=pick("tp"), ep=pick("ep"), pp=pick("pp"), dp=pick("dp"),
                           kvp=pick("kvp"), **formats, spec_tokens=args.mtp,
                           spec_acceptance_frac=args.acceptance, spec_method=args.spec_method)


def _disaggregated_points(arch, args, dep: Deployment, hw, workload,
                          formats: dict[str, str]) -> DisaggregatedPoints:
    prefill = _deployment(args, formats, "prefill_")
    validate_deployment(arch, prefill)
    limits = PoolLimits(ttft_s=np.inf if args.ttft_limit is None else args.ttft_limit / MS_PER_S,
                        ratio=tuple(args.ratio) if args.ratio else None)
    concurrency = None if args.concurrency is None else np.asarray(args.concurrency, float)
    return evaluate_disaggregated([arch], [prefill], [dep], hw, workload, concurrency, limits)


def evaluate_document(args: argparse.Namespace) -> dict:
    """The document `evaluate` prints. A deployment that cannot hold the model has the same
    keys, `fits_memory` false and no points (its frontier area 0)."""
    model = load_model(args.model)
    arch, hw = model.arch, get_hardware(args.hardware)
    formats = deployment_formats(model.checkpoint, arch, hw, args.precision, args.moe_precision,
                                 args.kv_precision)
    dep = _deployment(args, formats.fields)
    validate_deployment(arch, dep)
    workload = make_workload(isl_tokens=args.isl, osl_tokens=args.osl,
                             prefix_cached_frac=args.prefix_cache, engine=args.engine,
                             adp_balance_timeout_steps=args.adp_balance_timeout,
                             arrivals=args.arrivals)
    memory = memory_document(arch, dep, hw, workload)
    disaggregated = args.serving == "disaggregated"
    points = (_disaggregated_points(arch, args, dep, hw, workload, formats.fields) if disaggregated
              else evaluate_points([arch], [dep], hw, workload, args.concurrency))
    limit = int(points.max_concurrency[0, 0])
    fits = limit >= 1
    doc = {
        "model": arch.name, "hardware": hw.name, "serving_mode": args.serving,
        "deployment": deployment_document(dep),
        "workload": {"isl": workload.isl_tokens, "osl": workload.osl_tokens,
                     "prefix_cached_frac": workload.prefix_cached_frac,
                     "engine": workload.engine,
                     "adp_balance_timeout_steps": workload.adp_balance_timeout_steps,
                     "arrivals": workload.arrivals},
        "params": params_document(arch),
        "checkpoint_formats": formats_document(formats),
        "assumed_defaults": dict(model.assumed),
        "notes": [n for n in (formats.note, model.assumed_note) if n],
        "uncalibrated": uncalibrated_document(arch),
        "kernels": kernels_document(hw, workload.engine, [dep.precision],
                                    dep.expert_precision if arch.ffn.is_moe else None,
                                    dep.ep == 1),
        "serving_terms": serving_terms_document(),
        "memory": {**memory, "max_concurrency": limit},
        "fits_memory": fits,
        "points": [point_document(points, j) for j in range(points.concurrency.shape[1])
                   if fits and np.isfinite(points.concurrency[0, j])],
    }
    if disaggregated:
        prefill = _deployment(args, formats.fields, "prefill_")
        doc["prefill_deployment"] = {**deployment_document(prefill)}
    if args.concurrency is None:
        doc.update(_sweep_summary(points, doc["points"], args))
    return doc


def _sweep_summary(points: OperatingPoints, rows: list[dict], args) -> dict:
    x_lo, x_hi = args.window
    y = np.where(points.fits_memory, points.tokens_per_s_per_gpu, np.nan)
    mask = pareto_mask(points.tokens_per_s_per_user, y)[0]
    on_front = [int(c) for c, m in zip(points.concurrency[0], mask) if m and rows]
    fitting = [r for r in rows if r["fits_memory"] and "breakdown_ms" in r]
    area = float(points.frontier_area(x_lo, x_hi, not args.linear_x)[0]) if rows else 0.0
    summary = {
        "frontier_area": area,
        "frontier_window": {"x_lo": x_lo, "x_hi": x_hi, "x_scale": "linear" if args.linear_x
                            else "log10"},
        "frontier_concurrencies": on_front,
    }
    if fitting:
        summary["breakdown"] = {"latency_first": breakdown_shares(fitting[0]),
                                "throughput_first": breakdown_shares(fitting[-1])}
    elif not rows:  # nothing fits memory: the same keys, empty
        summary["breakdown"] = {}
    return summary


def _write_plot(args: argparse.Namespace, doc: dict | None = None) -> None:
    """`--plot FILE`: without `doc`, only check the file's format (before any work); with it,
    draw the model's operating points and frontier. Imported here: matplotlib is slow to load
    and only this option needs it."""
    from search.plots.frontier import image_format, write_model_frontier_plot

    if doc is None:
        image_format(Path(args.plot), "--plot")
    else:
        write_model_frontier_plot(doc, Path(args.plot), tuple(args.window), not args.linear_x)


def check_concurrency(values: list[int] | None) -> None:
    for concurrency in values or []:
        if concurrency < 1:
            raise CommandError(f"`--concurrency` must be whole requests >= 1; got {concurrency}")
        if concurrency > MAX_CONCURRENCY:
            raise CommandError(f"`--concurrency` must be at most {MAX_CONCURRENCY:,} requests "
                               f"(4,096 per DP group × DP 1,024); got {concurrency}")


def check_window(window: tuple[float, float]) -> None:
    """The frontier area's interactivity window: finite, 0 < LO < HI (tokens/s/user)."""
    lo, hi = window
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise CommandError(f"`--window` must be finite numbers; got {lo:g} {hi:g}")
    if lo <= 0:
        raise CommandError(f"`--window` LO ({lo:g}) must be > 0 (tokens/s/user)")
    if lo >= hi:
        raise CommandError(f"`--window` LO ({lo:g}) must be < HI ({hi:g})")


def check_single(args: argparse.Namespace) -> None:
    """One model needs MODEL and --hardware (a --batch file names them per row)."""
    if args.model is None:
        raise CommandError("`evaluate` needs MODEL (a config.json), or `--batch ROWS.csv`")
    if args.hardware is None:
        raise CommandError("`--hardware` is required (a catalog name such as h200, or a TOML "
                          "path)")


def run_evaluate(args: argparse.Namespace) -> int:
    check_concurrency(args.concurrency)
    if args.batch is not None:
        from search.cli.evaluate_batch import run_batch  # only --batch needs it

        return run_batch(args)
    check_single(args)
    check_window(args.window)
    if args.plot is not None:
        _write_plot(args)
    doc = evaluate_document(args)
    if not doc["fits_memory"]:
        if args.json:  # the same keys: parameter counts and the memory it needs
            print_json(doc)
        else:
            print("\n".join(doc["notes"]), end="\n" if doc["notes"] else "")
        raise NoFitError(no_fit_message(doc))
    if args.plot is not None:
        _write_plot(args, doc)
    if args.json:  # stdout holds the document alone
        print_json(doc)
        return 0
    p = doc["params"]
    print(f"{doc['model']} on {doc['deployment']['gpus']}× {doc['hardware']}  "
          f"params {p['total']:,} total, {p['active']:,} active  "
          f"weights {doc['memory']['weights_gib_per_gpu']:.1f} GiB/GPU  "
          f"max concurrency {doc['memory']['max_concurrency']}")
    for note in doc["notes"]:
        print(note)
    if doc["serving_mode"] == "disaggregated":
        pre = doc["prefill_deployment"]
        print(f"disaggregated: prefill instances of {pre['gpus']} GPU(s) (tp{pre['tp']} "
              f"ep{pre['ep']} dp{pre['dp']}); each point names its prefill:decode instance ratio")
    if (line := uncalibrated_line(doc["uncalibrated"])) is not None:
        print(line)
    print(kernels_line(doc["kernels"], doc["workload"]["engine"]))
    if doc["kernels"]["uncalibrated"]:
        print("uncalibrated: " + "; ".join(doc["kernels"]["uncalibrated"]))
    if (line := serving_terms_line(doc["serving_terms"])) is not None:
        print(line)
    rows = [{k: v for k, v in r.items() if k != "breakdown_ms"} for r in doc["points"]]
    print(format_table(rows))
    if "frontier_area" in doc:
        print(f"frontier area {doc['frontier_area']:.4g} (tokens/s/GPU × decades of tokens/s/user"
              f" in [{doc['frontier_window']['x_lo']:g}, {doc['frontier_window']['x_hi']:g}])")
        for regime, shares in doc.get("breakdown", {}).items():
            parts = "  ".join(f"{k} {v:.0%}" for k, v in shares.items())
            print(f"{regime}: {parts}")
    if args.plot is not None:
        print(f"wrote {args.plot}: operating points and frontier of {doc['model']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="cost model on one architecture: points, frontier, area "
                       "(or every row of a CSV with --batch)")
    p.add_argument("model", nargs="?", help="Hugging Face config.json (or its folder) or "
                   "archscout JSON")
    p.add_argument("--hardware", help="catalog name or TOML path (required without --batch)")
    p.add_argument("--batch", default=None, metavar="ROWS.csv", help="evaluate every row of a "
                   "CSV with columns " + ", ".join(BATCH_COLUMNS) + " (only model is required; "
                   "blank or absent columns take these flags' values; blank concurrency: the "
                   "most that fit) in one process: a CSV on stdout (JSON lines with --json), a "
                   "bad row reported on stderr with its line and skipped")
    for flag, text in (("--tp", "tensor parallel"), ("--ep", "expert parallel"),
                       ("--pp", "pipeline stages"), ("--dp", "attention data parallel")):
        p.add_argument(flag, type=int, default=1, help=f"{text} degree (default 1)")
    p.add_argument("--kvp", type=int, default=1, help="Helix KV-parallel degree: attention over "
                   "tp × kvp GPUs with the KV split along the sequence (default 1: none)")
    p.add_argument("--mtp", type=int, default=0, metavar="K", help="speculative tokens verified "
                   "per step (MTP or EAGLE drafts; default 0: none)")
    p.add_argument("--acceptance", type=float, default=DEFAULT_SPEC_ACCEPTANCE_FRAC,
                   metavar="A", help="per-token acceptance of speculative tokens (default "
                   f"{DEFAULT_SPEC_ACCEPTANCE_FRAC}, DeepSeek-V3's MTP)")
    p.add_argument("--spec-method", default="mtp", choices=SPEC_METHODS,
                   help="draft model kind (default mtp)")
    p.add_argument("--serving", default="aggregated", choices=("aggregated", "disaggregated"),
                   help="aggregated in-flight batching (default) or separate prefill and "
                   "decode pools (the flags above are the decode pool's)")
    for flag, text in (("--prefill-tp", "tensor parallel"), ("--prefill-ep", "expert parallel"),
                       ("--prefill-pp", "pipeline stages"), ("--prefill-dp", "attention DP"),
                       ("--prefill-kvp", "Helix KV parallel")):
        p.add_argument(flag, type=int, default=None,
                       help=f"prefill pool's {text} degree (default: the decode pool's)")
    p.add_argument("--ratio", type=whole_number(1), nargs=2, default=None, metavar=("X", "Y"),
                   help="disaggregated: exactly X prefill and Y decode instances (default: "
                   "the best ratio per point)")
    p.add_argument("--ttft-limit", type=positive_number(), default=None, metavar="MS",
                   help="disaggregated: size the pools for TTFT at most MS milliseconds")
    p.add_argument("--precision", default=None, help="weights/activations of attention, dense "
                   "and shared-expert layers: bf16, fp8, fp8_block, nvfp4, mxfp4, or weight-only "
                   "w4a16 / w8a16 (BF16 math); default: the checkpoint's quantization_config "
                   "(said on the output), else fp8")
    p.add_argument("--moe-precision", default=None, help="routed experts' format (default: "
                   "--precision if given, else the checkpoint's), e.g. nvfp4 experts with "
                   "--precision fp8, or w4a16 on Hopper")
    p.add_argument("--kv-precision", default=None, help="KV cache (default: the checkpoint's "
                   "when --precision is not given, else fp8 if precision ≤ 8 bits, else bf16)")
    p.add_argument("--isl", type=int, default=1024, help="input tokens per request (default 1024)")
    p.add_argument("--osl", type=int, default=1024, help="output tokens per request (default 1024)")
    p.add_argument("--prefix-cache", type=float, default=0.0, metavar="FRAC",
                   help="share of each prompt served from the prefix cache (a shared system "
                   "prompt): not prefilled, stored once (default 0)")
    p.add_argument("--concurrency", type=int, nargs="+", default=None,
                   help="operating points at these concurrencies (default: sweep to memory limit)")
    add_engine_arguments(p)
    p.add_argument("--arrivals", default="closed_loop", choices=ARRIVALS,
                   help="how the benchmark client sends requests, for its TTFT (aggregated "
                   "serving): closed_loop (a new request as one finishes, the default), poisson "
                   "(each point the steady state of Poisson arrivals at the rate it completes, "
                   "with a p99 TTFT) or offline (every request queued at once)")
    p.add_argument("--window", type=float, nargs=2, default=DEFAULT_WINDOW, metavar=("LO", "HI"),
                   help="interactivity window of the frontier area, tokens/s/user "
                        "(default 10 1000)")
    p.add_argument("--linear-x", action="store_true", help="frontier area on a linear x axis")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the operating "
                   "points and frontier (throughput vs interactivity) to this image file")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_evaluate)
