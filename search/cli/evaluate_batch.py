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
    adp_balance_timeout_steps
                   attention-DP balancer's timeout in forward steps (0: off), as
                   `--adp-balance-timeout`

Other columns (e.g. your measured values) are ignored, except one whose name is a near miss of
an input column's (`precison`): that is refused, naming the column it resembles. Each row is
checked against one schema (`BatchFields`: types, a model path of at most 4,096 characters,
whole numbers, `concurrency` at most 4,194,304), the file must be UTF-8 text without NUL bytes.
Blank format columns (and no flag) take the checkpoint's `quantization_config` per component,
said once per model on stderr (as the defaults a config leaves to its config class). Output on
stdout: a CSV with one row per
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
import difflib
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from cost_model.architecture import Architecture
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import (
    DEFAULT_MAX_BATCH_SEQUENCES, Deployment, Workload, make_deployment, make_workload,
)  # fmt: skip
from cost_model.errors import CostModelError
from cost_model.evaluate import concurrency_limits, evaluate_points, validate_deployment
from cost_model.hardware import HardwareSpec, get_hardware
from cost_model.hf import LoadedModel, deployment_formats, load_model
from cost_model.hf.schema import shown
from cost_model.memory import weight_bytes_per_gpu
from cost_model.params import count_params
from cost_model.units import GIB_BYTES, MS_PER_S
from search.cli.errors import CommandError
from search.errors import SearchError
from search.records.documents import BATCH_COLUMNS as INPUT_COLUMNS
from search.records.documents import breakdown_ms

FORMAT_COLUMNS = ("precision", "moe_precision", "kv_precision")
MAX_PATH_CHARS = 4096  # Linux PATH_MAX: no longer model path or hardware file can be opened
MAX_NAME_CHARS = 64  # a format or engine name (the longest known is 9 characters)
# Requests in flight: the engine's cap per attention-DP group (TensorRT-LLM's 4,096) times the
# largest DP degree a deployment may have (1,024): no deployment holds more (as `evaluate`'s
# `--concurrency`, search/cli/evaluate.py, which this module may not import: a cycle).
MAX_DP = next(m.le for m in Deployment.model_fields["dp"].metadata if hasattr(m, "le"))
MAX_CONCURRENCY = DEFAULT_MAX_BATCH_SEQUENCES * MAX_DP
MAX_BATCH_BYTES = 1 << 30  # 1 GiB of rows (~10M rows); a larger file is surely not a batch
Path_ = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Whole = Annotated[int, Field(ge=1)]


class BatchFields(BaseModel):
    """One row of ROWS.csv after the flags filled its blanks: the schema every row must meet
    (degrees, formats and lengths are then checked by `Deployment` and `Workload`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Path_
    hardware: Path_
    tp: Whole = 1
    ep: Whole = 1
    pp: Whole = 1
    dp: Whole = 1
    precision: Name | None = None
    moe_precision: Name | None = None
    kv_precision: Name | None = None
    isl: Whole = 1024
    osl: Whole = 1024
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] | None = None
    engine: Name | None = None
    adp_balance_timeout_steps: Annotated[int, Field(ge=0)] = 0


OUTPUT_COLUMNS = (
    "line", "model", "hardware", "gpus", "tp", "ep", "pp", "dp", "precision", "moe_precision",
    "kv_precision", "isl", "osl", "engine", "concurrency", "params_total", "params_active",
    "adp_balance_timeout_steps", "weights_gib_per_gpu", "max_concurrency", "fits_memory",
    "tpot_ms", "ttft_ms", "benchmark_ttft_ms", "benchmark_ttft_median_ms",
    "tokens_per_s_per_user", "tokens_per_s_per_gpu", "gemm_ms", "attention_ms",
    "linear_attention_ms", "communication_ms", "other_ms",
)
# the breakdown's parts are documents.BREAKDOWN_PARTS; benchmark_ttft is the mean
TIMES = ("tpot", "ttft", "benchmark_ttft", "benchmark_ttft_median")


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
    """Turns CSV rows into `BatchRow`s, loading each model and GPU once; `say` prints each
    model's notes (checkpoint formats, assumed defaults) once."""

    def __init__(self, folder: Path, defaults: dict[str, str], dep_fields: dict,
                 say: Callable[[str], None] = lambda _: None):
        self.folder, self.defaults, self.dep_fields, self.say = folder, defaults, dep_fields, say
        self.models: dict[str, LoadedModel | CostModelError | SearchError] = {}
        self.checked_formats: set[tuple] = set()
        self.said: set[str] = set()

    def value(self, row: dict, column: str) -> str:
        text = (row.get(column) or "").strip()
        return text or self.defaults.get(column, "")

    def model(self, text: str) -> LoadedModel:
        if text not in self.models:
            path = Path(text)
            if not path.is_absolute() and not path.exists() and (self.folder / path).exists():
                path = self.folder / path
            try:
                self.models[text] = load_model(path)
            except (CostModelError, SearchError) as exc:
                self.models[text] = exc
        found = self.models[text]
        if isinstance(found, (CostModelError, SearchError)):
            raise found
        return found

    def fields(self, row: dict) -> BatchFields:
        if not self.value(row, "model"):
            raise CommandError("`model` is empty")
        if not self.value(row, "hardware"):
            raise CommandError("`hardware` is empty (give the column or --hardware)")
        given = {c: self.value(row, c) for c in INPUT_COLUMNS if self.value(row, c)}
        try:
            return BatchFields(**given)
        except ValidationError as exc:
            raise CommandError("; ".join(f"`{'.'.join(map(str, e['loc']))}` "
                                         f"({shown(e.get('input'))}): {e['msg']}"
                                         for e in exc.errors())) from None

    def read(self, line: int, row: dict) -> BatchRow:
        f = self.fields(row)
        model, hw = self.model(f.model), get_hardware(f.hardware)
        formats = deployment_formats(model.checkpoint, model.arch, hw, f.precision,
                                     f.moe_precision, f.kv_precision)
        dep = make_deployment(tp=f.tp, ep=f.ep, pp=f.pp, dp=f.dp, **formats.fields,
                              **self.dep_fields)
        validate_deployment(model.arch, dep)
        self.check_formats(hw, dep)
        for note in filter(None, (formats.note, model.assumed_note)):
            self.say_once(f"{f.model}: {note}")
        return BatchRow(line, model.arch, hw, dep,
                        make_workload(isl_tokens=f.isl, osl_tokens=f.osl, engine=f.engine,
                                      adp_balance_timeout_steps=f.adp_balance_timeout_steps),
                        f.concurrency)

    def say_once(self, note: str) -> None:
        if note not in self.said:
            self.said.add(note)
            self.say(f"archscout: note: {note}")

    def check_formats(self, hw: HardwareSpec, dep: Deployment) -> None:
        """Each component's format against the GPU, once per combination."""
        key = (hw.name, dep.precision, dep.expert_precision, dep.kv_cache_precision)
        if key not in self.checked_formats:
            Env.for_deployments(hw, [dep])
            self.checked_formats.add(key)


def read_text(path: Path) -> str:
    """The file as text: at most MAX_BATCH_BYTES of UTF-8 without NUL bytes, else one line
    naming the line of the first bad byte."""
    try:
        if not path.is_file():
            raise CommandError(f"`--batch` file {str(path)!r} does not exist")
        if (size := path.stat().st_size) > MAX_BATCH_BYTES:
            raise CommandError(f"`--batch` file {path} is {size:,} bytes: at most "
                               f"{MAX_BATCH_BYTES:,}")
        raw = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise CommandError(f"`--batch` file {str(path)!r} cannot be read: {exc}") from None
    if (nul := raw.find(b"\x00")) >= 0:
        raise CommandError(f"`--batch` file {path} line {_line_at(raw, nul)} holds a NUL byte: "
                           "not a CSV text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = _line_at(raw, exc.start)
        raise CommandError(f"`--batch` file {path} line {line} is not UTF-8 text (byte "
                           f"0x{raw[exc.start]:02x})") from None


def _line_at(raw: bytes, offset: int) -> int:
    return raw.count(b"\n", 0, offset) + 1


def check_columns(path: Path, columns: list[str]) -> None:
    """A `model` column, and no column that is a near miss of an input column's name."""
    if "model" not in columns:
        raise CommandError(f"`--batch` file {path} needs a `model` column (columns: "
                          f"{', '.join(INPUT_COLUMNS)})")
    for column in columns:
        near = difflib.get_close_matches(column, INPUT_COLUMNS, n=1, cutoff=0.8)
        if near and column not in INPUT_COLUMNS:
            raise CommandError(f"`--batch` file {path}: column `{column[:MAX_NAME_CHARS]}` is not "
                               f"an input column (did you mean `{near[0]}`?)")


def read_rows(path: Path, reader: RowReader, report: Callable[[str], None]) -> list[BatchRow]:
    """The valid rows of the file; each bad one is reported (with its line) and skipped."""
    table = csv.DictReader(io.StringIO(read_text(path), newline=""))
    rows, seen, line = [], 0, 1
    try:
        check_columns(path, list(table.fieldnames or []))
        for line, row in enumerate(table, start=2):
            seen += 1
            try:
                rows.append(reader.read(line, row))
            except (CostModelError, SearchError) as exc:
                report(f"archscout: line {line}: {exc}; skipped")
    except csv.Error as exc:
        raise CommandError(f"`--batch` file {path} line {line + 1} is not CSV: {exc}") from None
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
    _, limit = concurrency_limits(a, d, env, workload)
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
            "adp_balance_timeout_steps": row.workload.adp_balance_timeout_steps,
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
              "engine": args.engine, "adp_balance_timeout_steps": args.adp_balance_timeout,
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
    say = lambda message: print(message, file=sys.stderr)  # noqa: E731
    reader = RowReader(path.parent, _defaults(args), dep_fields, say)
    rows = read_rows(path, reader, say)
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
