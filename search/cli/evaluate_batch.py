"""`archscout evaluate --batch ROWS.csv [--json]`: many operating points in one process.

The way to check the cost model against your own measurements: one row per (model, hardware,
deployment, workload, concurrency), evaluated together. Columns of ROWS.csv (a header row names
them; only `model` is required, and `hardware` unless `--hardware` is given; a blank or absent
column takes the value of the command's flag of the same name):

    model          Hugging Face config.json (or its folder) or archscout JSON; a relative path
                   is read from the working directory, else from the CSV's folder
    hardware       catalog name (h200, b200, …) or a hardware TOML path
    tp, ep, pp, dp tensor / expert / pipeline / attention-data parallel degrees
    precision      attention, dense and shared-expert layers (bf16, fp8, nvfp4, w4a16, …)
    moe_precision  routed experts (default: precision)
    kv_precision   KV cache (default: fp8 when precision computes in 8 bits or less, else bf16)
    isl, osl       input / output tokens per request
    concurrency    requests in flight; blank: the most that fit (memory and the engine's cap)
    engine         serving engine (vllm, sglang, trtllm) whose measured kernels and
                   benchmark-TTFT terms apply; blank: the generic ones

Other columns (e.g. your measured values) are ignored. Output on stdout: a CSV with one row per
evaluated input row, in input order, `line` its line in ROWS.csv (the header is line 1), then
OUTPUT_COLUMNS; with `--json` one JSON object per line with the same keys. A row that cannot be
evaluated (bad value, unknown model or GPU, a sharding or format rule broken) is reported on
stderr with its line and skipped; the command exits 0 when any row was evaluated, 2 when none.
A deployment that does not fit memory is evaluated and says so (`fits_memory` false).

Configs are loaded once per path; rows sharing a GPU and workload are evaluated in one
vectorized `evaluate_points` call, each at its own concurrency.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cost_model.architecture import Architecture
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, make_deployment, make_workload
from cost_model.errors import CostModelError
from cost_model.evaluate import evaluate_points, validate_deployment
from cost_model.hardware import HardwareSpec, get_hardware
from cost_model.hf_config import load_architecture
from cost_model.memory import max_concurrency, weight_bytes_per_gpu
from cost_model.params import count_params
from cost_model.units import GIB_BYTES, MS_PER_S
from search.cli.errors import CommandError
from search.errors import SearchError
from search.records.documents import BATCH_COLUMNS as INPUT_COLUMNS
from search.records.documents import breakdown_ms

INT_COLUMNS = ("tp", "ep", "pp", "dp", "isl", "osl")
OUTPUT_COLUMNS = (
    "line", "model", "hardware", "gpus", "tp", "ep", "pp", "dp", "precision", "moe_precision",
    "kv_precision", "isl", "osl", "engine", "concurrency", "params_total", "params_active",
    "weights_gib_per_gpu", "max_concurrency", "fits_memory", "tpot_ms", "ttft_ms",
    "benchmark_ttft_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "gemm_ms",
    "attention_ms", "linear_attention_ms", "communication_ms", "other_ms",
)
TIMES = ("tpot", "ttft", "benchmark_ttft")  # the breakdown's parts are documents.BREAKDOWN_PARTS


@dataclass(frozen=True)
class BatchRow:
    """One valid input row, ready to evaluate."""

    line: int
    arch: Architecture
    hw: HardwareSpec
    dep: Deployment
    workload: Workload
    concurrency: int | None  # None: the most that fit


class RowReader:
    """Turns CSV rows into `BatchRow`s, loading each model and GPU once."""

    def __init__(self, folder: Path, defaults: dict[str, str], dep_fields: dict):
        self.folder, self.defaults, self.dep_fields = folder, defaults, dep_fields
        self.models: dict[str, Architecture | CostModelError | SearchError] = {}
        self.checked_formats: set[tuple] = set()

    def value(self, row: dict, column: str) -> str:
        text = (row.get(column) or "").strip()
        return text or self.defaults.get(column, "")

    def model(self, text: str) -> Architecture:
        if text not in self.models:
            path = Path(text)
            if not path.is_absolute() and not path.exists() and (self.folder / path).exists():
                path = self.folder / path
            try:
                self.models[text] = load_architecture(path)
            except (CostModelError, SearchError) as exc:
                self.models[text] = exc
        found = self.models[text]
        if isinstance(found, (CostModelError, SearchError)):
            raise found
        return found

    def read(self, line: int, row: dict) -> BatchRow:
        if not self.value(row, "model"):
            raise CommandError("`model` is empty")
        if not self.value(row, "hardware"):
            raise CommandError("`hardware` is empty (give the column or --hardware)")
        arch, hw = self.model(self.value(row, "model")), get_hardware(self.value(row, "hardware"))
        ints = {c: _whole(self.value(row, c), c) for c in INT_COLUMNS}
        formats = {c: self.value(row, c) or None for c in ("precision", "kv_precision",
                                                           "moe_precision")}
        dep = make_deployment(**{k: ints[k] for k in ("tp", "ep", "pp", "dp")},
                              **{k: v for k, v in formats.items() if v}, **self.dep_fields)
        validate_deployment(arch, dep)
        self.check_formats(hw, dep)
        concurrency = self.value(row, "concurrency")
        return BatchRow(line, arch, hw, dep,
                        make_workload(isl_tokens=ints["isl"], osl_tokens=ints["osl"],
                                      engine=self.value(row, "engine") or None),
                        _whole(concurrency, "concurrency") if concurrency else None)

    def check_formats(self, hw: HardwareSpec, dep: Deployment) -> None:
        """Each component's format against the GPU, once per combination."""
        key = (hw.name, dep.precision, dep.expert_precision, dep.kv_cache_precision)
        if key not in self.checked_formats:
            Env.for_deployments(hw, [dep])
            self.checked_formats.add(key)


def _whole(text: str, column: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise CommandError(f"`{column}` must be a whole number >= 1; got {text!r}") from None
    if value < 1:
        raise CommandError(f"`{column}` must be a whole number >= 1; got {text!r}")
    return value


def read_rows(path: Path, reader: RowReader, report: Callable[[str], None]) -> list[BatchRow]:
    """The valid rows of the file; each bad one is reported (with its line) and skipped."""
    if not path.is_file():
        raise CommandError(f"`--batch` file {str(path)!r} does not exist")
    with path.open(newline="", encoding="utf-8") as handle:
        table = csv.DictReader(handle)
        columns = set(table.fieldnames or [])
        if "model" not in columns:
            raise CommandError(f"`--batch` file {path} needs a `model` column (columns: "
                              f"{', '.join(INPUT_COLUMNS)})")
        rows, seen = [], 0
        for line, row in enumerate(table, start=2):
            seen += 1
            try:
                rows.append(reader.read(line, row))
            except (CostModelError, SearchError) as exc:
                report(f"archscout: line {line}: {exc}; skipped")
    if not seen:
        raise CommandError(f"`--batch` file {path} has no rows")
    return rows


def _groups(rows: list[BatchRow]) -> dict[tuple, list[BatchRow]]:
    """Rows sharing a GPU and a workload: one vectorized evaluation each."""
    groups: dict[tuple, list[BatchRow]] = {}
    for row in rows:
        groups.setdefault((row.hw.name, row.workload), []).append(row)
    return groups


def _memory(rows: list[BatchRow]) -> tuple[np.ndarray, np.ndarray]:
    """(weights GiB per GPU, most requests that fit) of each row, shape (n,)."""
    deps, workload = [r.dep for r in rows], rows[0].workload
    a = ArchArrays.from_architectures([r.arch for r in rows])
    d, env = DeployArrays.from_deployments(deps), Env.for_deployments(rows[0].hw, deps)
    limit = np.minimum(max_concurrency(a, d, env, float(workload.max_context_tokens),
                                       float(workload.prefill_chunk_tokens),
                                       float(workload.cached_prefix_tokens)),
                       workload.max_batch_sequences * d.dp)
    return weight_bytes_per_gpu(a, d, env)[:, 0] / GIB_BYTES, limit[:, 0]


def evaluate_group(rows: list[BatchRow]) -> list[dict]:
    """Output records of rows sharing a GPU and workload, in one `evaluate_points` call."""
    weights_gib, limit = _memory(rows)
    concurrency = np.array([[r.concurrency or max(lim, 1.0)] for r, lim in zip(rows, limit)])
    points = evaluate_points([r.arch for r in rows], [r.dep for r in rows], rows[0].hw,
                             rows[0].workload, concurrency)
    return [{
        **_inputs(row, int(concurrency[i, 0])), "weights_gib_per_gpu": float(weights_gib[i]),
        "max_concurrency": int(limit[i]), "fits_memory": bool(points.fits_memory[i, 0]),
        **{f"{part}_ms": float(getattr(points, f"{part}_s")[i, 0]) * MS_PER_S
           for part in TIMES},
        **{f"{part}_ms": ms for part, ms in breakdown_ms(points, 0, i).items()},
        "tokens_per_s_per_user": float(points.tokens_per_s_per_user[i, 0]),
        "tokens_per_s_per_gpu": float(points.tokens_per_s_per_gpu[i, 0]),
    } for i, row in enumerate(rows)]


def _inputs(row: BatchRow, concurrency: int) -> dict:
    counts, d = count_params(row.arch), row.dep
    return {"line": row.line, "model": row.arch.name, "hardware": row.hw.name, "gpus": d.gpus,
            "tp": d.tp, "ep": d.ep, "pp": d.pp, "dp": d.dp, "precision": d.precision,
            "moe_precision": d.expert_precision, "kv_precision": d.kv_cache_precision,
            "isl": row.workload.isl_tokens, "osl": row.workload.osl_tokens,
            "engine": row.workload.engine or "", "concurrency": concurrency,
            "params_total": counts.total_params, "params_active": counts.active_params}


def evaluate_rows(rows: list[BatchRow]) -> list[dict]:
    """Every row's record, in input order."""
    records = [rec for group in _groups(rows).values() for rec in evaluate_group(group)]
    return sorted(records, key=lambda rec: rec["line"])


def _defaults(args: argparse.Namespace) -> dict[str, str]:
    """The flags' values for blank or absent columns."""
    values = {"hardware": args.hardware, "tp": args.tp, "ep": args.ep, "pp": args.pp,
              "dp": args.dp, "precision": args.precision, "kv_precision": args.kv_precision,
              "moe_precision": args.moe_precision, "isl": args.isl, "osl": args.osl,
              "engine": args.engine,
              "concurrency": args.concurrency[0] if args.concurrency else None}
    return {k: str(v) for k, v in values.items() if v is not None}


def check_batch_args(args: argparse.Namespace) -> None:
    """--batch evaluates aggregated serving at one concurrency per row; flags it cannot honour
    are refused rather than ignored."""
    if args.model is not None:
        raise CommandError(f"give MODEL or `--batch`, not both (got {args.model!r} and "
                          f"--batch {args.batch!r}); the CSV's `model` column names the models")
    if args.serving != "aggregated":
        raise CommandError(f"`--serving` must be aggregated with `--batch`; got {args.serving!r}")
    if args.plot is not None or args.kvp != 1:
        raise CommandError("`--plot` and `--kvp` are not available with `--batch`")
    if args.concurrency and len(args.concurrency) > 1:
        raise CommandError(f"`--concurrency` takes one value with `--batch` (the default of the "
                          f"column); got {args.concurrency}")


def run_batch(args: argparse.Namespace) -> int:
    check_batch_args(args)
    path = Path(args.batch)
    dep_fields = dict(spec_tokens=args.mtp, spec_acceptance_frac=args.acceptance,
                      spec_method=args.spec_method)
    reader = RowReader(path.parent, _defaults(args), dep_fields)
    rows = read_rows(path, reader, lambda message: print(message, file=sys.stderr))
    if not rows:
        raise CommandError(f"`--batch` file {path}: no row could be evaluated (see the lines "
                          "above)")
    records = evaluate_rows(rows)
    if args.json:
        sys.stdout.writelines(json.dumps(rec) + "\n" for rec in records)
    else:
        writer = csv.DictWriter(sys.stdout, OUTPUT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(_rounded(rec) for rec in records)
    return 0


def _rounded(record: dict) -> dict:
    """Floats to 6 significant digits for the CSV (JSON keeps them whole)."""
    return {k: f"{v:.6g}" if isinstance(v, float) else v for k, v in record.items()}
