"""`archscout hardware` and `archscout gemm`: the catalog and single GEMMs."""

from __future__ import annotations

import argparse
import csv
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from cost_model import (
    DEFAULT_OUT_PRECISION, ENGINES, GIB_BYTES, GIGA, TERA, US_PER_S, HardwareSpec, catalog_names,
    gemm_cost, get_efficiency, get_hardware, get_precision,
)
from search.calibration.measured_lookup import measured_time_s
from search.cli.errors import CommandError
from search.records.tables import format_table, print_json

GEMM_KEYS = ("m", "n", "k", "dtype", "out_dtype", "math_us", "read_us", "write_us", "time_us",
             "quantize_us", "op_us", "bound", "roofline_bound", "intensity_flop_per_byte",
             "tile_efficiency", "wave_efficiency", "tflops", "kernels")


def hardware_summary(hw: HardwareSpec) -> dict:
    peaks = {f"{rate}_tflop_per_s": hw.peak_flop_per_s.get(rate, float("nan")) / TERA
             for rate in ("bf16", "fp8", "fp4")}
    return {"name": hw.name, **peaks, "hbm_tb_per_s": hw.hbm_bytes_per_s / TERA,
            "hbm_gib": hw.hbm_capacity_bytes / GIB_BYTES, "sms": hw.sm_count,
            "scale_up_gpus": hw.scale_up_domain_gpus,
            "scale_up_gb_per_s": hw.scale_up_bytes_per_s / GIGA, "host_cpu": hw.host_cpu}


def run_hardware(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else catalog_names()
    specs = [get_hardware(n) for n in names]
    if args.json:
        docs = [dict(hardware_summary(s), description=s.description, sources=s.sources)
                for s in specs]
        print_json(docs[0] if args.name else docs)
        return 0
    print(format_table([hardware_summary(s) for s in specs]))
    if args.name:
        print(f"\n{specs[0].description}\nsources:")
        for key, source in specs[0].sources.items():
            print(f"  {key}: {source}")
    return 0


def gemm_rows(m, n, k, hw: HardwareSpec, dtype: str, out_dtype: str,
              engine: str | None = None) -> list[dict]:
    """One row per GEMM with the CLI's keys (µs, TFLOP/s); m, n, k are equal-length arrays.
    `time_us` is the kernel; `quantize_us` the kernel quantizing BF16 activations to `dtype`
    (0 for BF16); `op_us` both, what measured quantized GEMM ops include; `bound` what sets
    the kernel's time: its fixed overhead, memory or compute; `kernels` the engine whose
    measured kernels priced it (`engine`'s, or under the generic kernels the fastest one's)."""
    cost = gemm_cost(m, n, k, hw, dtype, out_precision=out_dtype, engine=engine)
    eff = get_efficiency(hw.name, engine)
    kernels = eff.kernels_of(f"gemm.{eff.dense_format(get_precision(dtype))}")
    columns = {
        "math_us": cost.math_s * US_PER_S, "read_us": cost.read_s * US_PER_S,
        "write_us": cost.write_s * US_PER_S, "time_us": cost.time_s * US_PER_S,
        "quantize_us": cost.quantize_s * US_PER_S, "op_us": cost.op_s * US_PER_S,
        "intensity_flop_per_byte": cost.intensity_flop_per_byte,
        "tile_efficiency": cost.tile_efficiency, "wave_efficiency": cost.wave_efficiency,
        "tflops": cost.achieved_flop_per_s / TERA,
    }
    bound = cost.bound
    roofline = np.where(cost.roofline_compute_bound, "compute", "memory")
    return [
        {"m": int(m[i]), "n": int(n[i]), "k": int(k[i]), "dtype": dtype, "out_dtype": out_dtype,
         **{key: float(np.ravel(v)[i]) for key, v in columns.items()}, "bound": str(bound[i]),
         "roofline_bound": str(roofline[i]), "kernels": kernels,
         "measured_us": _measured_us(hw, kernels, dtype, out_dtype, int(m[i]), int(n[i]),
                                     int(k[i]))}
        for i in range(len(m))
    ]


def _measured_us(hw: HardwareSpec, kernels: str, dtype: str, out_dtype: str, m: int, n: int,
                 k: int):
    """The calibration tables' measured time of this shape on those kernels (BF16 output, BF16
    activations quantized inside the timed op), or None."""
    if out_dtype != DEFAULT_OUT_PRECISION or kernels not in ENGINES:
        return None
    time_s = measured_time_s(kernels, hw.name, dtype, m, n, k)
    return None if time_s is None else time_s * US_PER_S


def kernels_document(hw: HardwareSpec, engine: str | None, dtypes: list[str],
                     experts: str | None = None, ep1: bool = False) -> dict:
    """Which kernels price these formats (dense GEMMs in `dtypes`, a fused MoE's `experts`, at
    EP = 1 with `ep1`) on this GPU: the engine (or "generic"), where the coefficients come from,
    and what runs on another format's or GPU's kernels (`uncalibrated`)."""
    eff = get_efficiency(hw.name, engine)
    substitutes = [line for d in dtypes for line in eff.substitutes(get_precision(d))]
    if experts is not None:
        substitutes += eff.substitutes(get_precision(dtypes[0]), get_precision(experts), ep1)
    return {"kernels": eff.kernels, "origin": eff.origin, "version": eff.version,
            "uncalibrated": list(dict.fromkeys(substitutes))}


def kernels_line(doc: dict, engine: str | None) -> str:
    given = "" if engine else " (no --engine: per part the fastest measured engine's)"
    origin = "" if doc["origin"] == "package" else f" from {doc['origin']}"
    return f"kernels: {doc['kernels']}{given}{origin}"


MAX_DIM = 1 << 31  # a GEMM dimension beyond this is no kernel's (int32 index limits)
MAX_FIELD_CHARS = 64


def _positive_int(text: str, field: str) -> int:
    text = str(text)
    if len(text) > MAX_FIELD_CHARS:
        raise CommandError(f"`{field}` must be a positive integer of at most {MAX_FIELD_CHARS} "
                           f"characters; got {text[:20]!r}...")
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise CommandError(f"`{field}` must be a positive integer; got {text!r}") from None
    if not 1 <= value <= MAX_DIM:
        raise CommandError(f"`{field}` must be a positive integer up to {MAX_DIM}; got {text!r}")
    return value


def _shapes_text(path: Path) -> str:
    """The text of a `--shapes` file: no NUL bytes, UTF-8."""
    if not path.is_file():
        raise CommandError(f"`--shapes` file {str(path)!r} does not exist")
    raw = path.read_bytes()
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise CommandError(f"`--shapes` line `{line}` holds a NUL byte; a CSV is text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CommandError(f"`--shapes` {path} is not UTF-8 text (byte {exc.start})") from None


def _csv_rows(reader: csv.DictReader, path: Path) -> Iterator[dict]:
    """The reader's rows; a row csv refuses (a field past its 131,072-character limit) is one
    line naming the file and the line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise CommandError(f"`--shapes` {path} line {reader.line_num + 1}: {exc}") from None


def read_shapes(path: Path, default_dtype: str) -> list[tuple[int, int, int, str]]:
    """Rows (m, n, k, dtype) of a CSV with columns m,n,k[,dtype]."""
    reader = csv.DictReader(io.StringIO(_shapes_text(path), newline=""))
    missing = [c for c in ("m", "n", "k") if c not in (reader.fieldnames or [])]
    if missing:
        raise CommandError(f"`--shapes` needs columns m,n,k[,dtype]; missing {missing} in {path}")
    rows = []
    for line, row in enumerate(_csv_rows(reader, path), start=2):
        dims = [_positive_int(row[c] or "", f"{c}` on line `{line}") for c in ("m", "n", "k")]
        dtype = (row.get("dtype") or "").strip() or default_dtype
        if len(dtype) > MAX_FIELD_CHARS:
            raise CommandError(f"`dtype` on line `{line}` must be at most {MAX_FIELD_CHARS} "
                               f"characters; got {dtype[:20]!r}...")
        rows.append((*dims, get_precision(dtype, f"dtype` on line `{line}").name))
    if not rows:
        raise CommandError(f"`--shapes` file {path} has no rows")
    return rows


def run_gemm(args: argparse.Namespace) -> int:
    hw = get_hardware(args.hardware)
    out_dtype = get_precision(args.out_dtype, "out-dtype").name
    if args.shapes:
        shapes = read_shapes(Path(args.shapes), args.dtype)
    else:
        if args.m is None or args.n is None or args.k is None:
            raise CommandError("`gemm` needs M N K, or `--shapes FILE.csv`")
        dims = [_positive_int(str(v), f) for v, f in ((args.m, "M"), (args.n, "N"), (args.k, "K"))]
        shapes = [(*dims, get_precision(args.dtype, "dtype").name)]
    rows = []
    dtypes = list(dict.fromkeys(s[3] for s in shapes))
    for dtype in dtypes:
        group = np.array([s[:3] for s in shapes if s[3] == dtype], dtype=np.int64)
        rows += gemm_rows(group[:, 0], group[:, 1], group[:, 2], hw, dtype, out_dtype,
                          args.engine)
    order = {s: i for i, s in enumerate(shapes)}
    rows.sort(key=lambda r: order[(r["m"], r["n"], r["k"], r["dtype"])])
    kernels = kernels_document(hw, args.engine, dtypes)
    if args.json:
        for row in rows:
            row["uncalibrated"] = [line for line in kernels["uncalibrated"]
                                   if line.startswith(f"{row['dtype']} ") or "GPU" in line]
        print_json(rows if args.shapes else rows[0])
        return 0
    print(format_table(rows, GEMM_KEYS))
    print(kernels_line(kernels, args.engine))
    if kernels["uncalibrated"]:
        print("uncalibrated: " + "; ".join(kernels["uncalibrated"]))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    hw = sub.add_parser("hardware", help="the hardware catalog, or one entry with its sources")
    hw.add_argument("name", nargs="?", help="catalog name (h200, gb300, …) or a TOML path")
    hw.add_argument("--json", action="store_true", help="one JSON document on stdout")
    hw.set_defaults(func=run_hardware)

    gemm = sub.add_parser("gemm", help="predicted time of one GEMM, or of every row of a CSV")
    gemm.add_argument("m", nargs="?", help="tokens (GEMM-M)")
    gemm.add_argument("n", nargs="?", help="output features (GEMM-N)")
    gemm.add_argument("k", nargs="?", help="reduction dimension (GEMM-K)")
    gemm.add_argument("--shapes", help="CSV with columns m,n,k[,dtype]")
    gemm.add_argument("--hardware", required=True, help="catalog name or TOML path")
    gemm.add_argument("--dtype", default="bf16", help="input precision of A and B (default bf16)")
    gemm.add_argument("--out-dtype", default=DEFAULT_OUT_PRECISION,
                      help=f"output precision of C (default {DEFAULT_OUT_PRECISION})")
    gemm.add_argument("--engine", default=None, choices=ENGINES,
                      help="serving engine whose measured kernels price it (default: the "
                           "generic kernels, per format the fastest engine's)")
    gemm.add_argument("--json", action="store_true", help="one JSON document on stdout")
    gemm.set_defaults(func=run_gemm)
