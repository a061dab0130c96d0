"""`archscout lint CONFIG --hardware NAME [--tp --ep --pp --dp --precision --isl --osl --engine
--adp-balance-timeout STEPS --max-param-change FRAC] [--json]`: the seven guidelines of NVIDIA,
AI Model Co-Design (2026) on a real model, one finding per line (`search/lint/guidelines.py`),
timed on the engine's kernels; a fix is offered only within the parameter budget and, unless it
fixes an error, when it raises the frontier area.

Exit code: 1 when any finding is an error (so it can gate a model repository's CI), else 0;
bad input is a `ConfigError`, one line and exit code 2 through `search.cli.main.main`.
"""

from __future__ import annotations

import argparse
import math
import sys

from cost_model import (
    MS_PER_S, deployment_formats, get_hardware, load_model, make_deployment, make_workload,
    validate_deployment,
)
from search.cli.arguments import add_engine_arguments
from search.cli.cost import kernels_document, kernels_line
from search.cli.errors import CommandError
from search.lint.guidelines import Finding, LintContext, default_precision, lint
from search.lint.support import MAX_PARAM_CHANGE_FRAC
from search.records.tables import print_json

EXIT_CLEAN, EXIT_ERRORS = 0, 1
SEVERITY_ORDER = ("error", "warning", "info")


def lint_context(args: argparse.Namespace) -> LintContext:
    """The model, deployment, GPU and workload the flags name (`ConfigError` if any is bad)."""
    if not 0.0 <= args.max_param_change <= 1.0:
        raise CommandError(f"`max_param_change` ({args.max_param_change:g}) must be a share of "
                           "the parameters between 0 and 1")
    model, hw = load_model(args.config), get_hardware(args.hardware)
    arch = model.arch
    formats = deployment_formats(model.checkpoint, arch, hw, args.precision,
                                 default=default_precision(hw))
    dep = make_deployment(tp=args.tp, ep=args.ep, pp=args.pp, dp=args.dp, **formats.fields)
    for note in filter(None, (formats.note, model.assumed_note)):
        print(f"archscout: note: {note}", file=sys.stderr)
    validate_deployment(arch, dep)
    workload = make_workload(isl_tokens=args.isl, osl_tokens=args.osl, engine=args.engine,
                             adp_balance_timeout_steps=args.adp_balance_timeout)
    return LintContext(arch, dep, hw, workload, max_param_change_frac=args.max_param_change)


def _counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in SEVERITY_ORDER}


def lint_document(ctx: LintContext, findings: list[Finding]) -> dict:
    base, dep = ctx.baseline, ctx.dep
    counts = _counts(findings)
    return {
        "model": ctx.arch.name, "hardware": ctx.hw.name,
        "deployment": {**dep.model_dump(exclude={"kv_precision"}),
                       "kv_precision": dep.kv_cache_precision, "gpus": dep.gpus},
        "workload": {"isl": ctx.workload.isl_tokens, "osl": ctx.workload.osl_tokens,
                     "engine": ctx.workload.engine,
                     "adp_balance_timeout_steps": ctx.workload.adp_balance_timeout_steps},
        "kernels": kernels_document(ctx.hw, ctx.workload.engine, [dep.precision],
                                    dep.expert_precision if ctx.arch.ffn.is_moe else None,
                                    dep.ep == 1),
        "max_param_change_frac": ctx.max_param_change_frac,
        "baseline": {"tpot_ms": base.tpot_s * MS_PER_S,
                     "tokens_per_s_per_gpu": base.tokens_per_s_per_gpu,
                     "frontier_area": base.frontier_area, "max_concurrency": base.max_concurrency},
        "findings": [f.to_dict() for f in findings],
        "errors": counts["error"], "warnings": counts["warning"], "infos": counts["info"],
    }


def _header(doc: dict) -> str:
    d, b = doc["deployment"], doc["baseline"]
    fits = (f"{b['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU at up to {b['max_concurrency']:,.0f} "
            f"sequences, frontier area {b['frontier_area']:.4g}"
            if b["max_concurrency"] >= 1 and math.isfinite(b["tokens_per_s_per_gpu"])
            else "the weights do not fit: costs at concurrency 1 only")
    return (f"{doc['model']} on {d['gpus']}× {doc['hardware']} (tp {d['tp']} ep {d['ep']} pp "
            f"{d['pp']} dp {d['dp']}, {d['precision']}; ISL {doc['workload']['isl']} OSL "
            f"{doc['workload']['osl']}): TPOT {b['tpot_ms']:.3g} ms at concurrency 1, {fits}")


def _line(finding: dict) -> str:
    head = f"G{finding['guideline']} {finding['severity']:<7} {finding['code']}"
    return f"{head}: {finding['message']}"


def run_lint(args: argparse.Namespace) -> int:
    ctx = lint_context(args)
    doc = lint_document(ctx, lint(ctx))
    if args.json:
        print_json(doc)
    else:
        print(_header(doc))
        print(kernels_line(doc["kernels"], doc["workload"]["engine"]))
        for finding in doc["findings"]:
            print(_line(finding))
        print(f"{doc['errors']} error(s), {doc['warnings']} warning(s), {doc['infos']} info")
    return EXIT_ERRORS if doc["errors"] else EXIT_CLEAN


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="the seven hardware guidelines on a model: what each broken "
                       "one costs and the nearest compliant alternative")
    p.add_argument("config", help="Hugging Face config.json (or its folder) or archscout JSON")
    p.add_argument("--hardware", required=True, help="catalog name or TOML path")
    for flag, text in (("--tp", "tensor parallel"), ("--ep", "expert parallel"),
                       ("--pp", "pipeline stages"), ("--dp", "attention data parallel")):
        p.add_argument(flag, type=int, default=1, help=f"{text} degree (default 1)")
    p.add_argument("--precision", default=None, help="weights/activations (default: nvfp4 where "
                   "the GPU has FP4 tensor cores, else fp8)")
    p.add_argument("--isl", type=int, default=1024, help="input tokens per request (default 1024)")
    p.add_argument("--osl", type=int, default=1024, help="output tokens per request (default 1024)")
    add_engine_arguments(p)
    p.add_argument("--max-param-change", type=float, default=MAX_PARAM_CHANGE_FRAC,
                   metavar="FRAC", help="the parameter budget of a fix: the largest change of the "
                   "total or active parameters, as a share (default 0.05); a fix over it, or one "
                   "that does not raise the frontier area (unless it fixes an error), is reported "
                   "but not offered")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_lint)
