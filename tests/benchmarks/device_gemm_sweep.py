"""Fine GEMM sweeps on a real GPU, and the cost model next to them (issue "Fidelity": "measure a
fine N sweep (e.g. N = 3840…4352 step 16, and K likewise) with torch matmul in bf16/fp8, commit
the data with how it was measured, and report model vs measurement").

The measured tables the calibration uses have N and K that are nearly all multiples of 256, so
the tile-quantization sawtooth (NVIDIA, AI Model Co-Design (2026), Figure 5) is a prediction of the
model's tile geometry; this sweep checks it on silicon.

  measure  (on the GPU machine): for M in --m (default 128 and 8192), sweeps N = 3840…4352 step 16
           at K = 4096, then K over the same range at N = 4096, in bf16 (torch.matmul) and fp8
           (torch._scaled_mm, per-tensor scales, BF16 out). Each shape: 10 warm-up calls, then
           --reps timed calls, each after a 256 MiB write that evicts L2, timed with CUDA events;
           the median is kept. Writes gemm_sweep.csv and gemm_sweep.json (GPU, driver, torch,
           CUDA, clocks, method) under --out (default $OUT).
  compare  (anywhere): reads that CSV, predicts every shape with `gemm_cost` on --hardware, and
           prints median / p90 |predicted / measured − 1| per dtype and sweep, and whether the
           model and the GPU agree on where the sawtooth's peaks are (N, K multiples of 128/256).

Run on the device:  python tests/benchmarks/device_gemm_sweep.py measure --out "$OUT"
Then here:          python tests/benchmarks/device_gemm_sweep.py compare PATH/gemm_sweep.csv
Smoke test on CPU:  python tests/benchmarks/device_gemm_sweep.py measure --device cpu --quick
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
from pathlib import Path

import numpy as np

SWEEP_START, SWEEP_STOP, SWEEP_STEP = 3840, 4352, 16  # the range, inclusive
FIXED_DIM = 4096  # the other dimension of each sweep
DEFAULT_M = (128, 8192)  # memory-bound-ish and compute-bound
QUICK_VALUES, QUICK_FIXED_DIM = (112, 128, 144), 64  # --quick: tiny shapes, seconds on a CPU
WARMUP_CALLS = 10
L2_FLUSH_BYTES = 256 << 20  # > the 60 MiB L2 of B200/H200 (50 MiB on H100)
FIELDS = ("sweep", "dtype", "m", "n", "k", "time_us", "reps", "tflops")


def sweep_shapes(ms: list[int], quick: bool) -> list[tuple[str, int, int, int]]:
    """(sweep, m, n, k) for the N sweep and the K sweep at every M."""
    values = QUICK_VALUES if quick else range(SWEEP_START, SWEEP_STOP + 1, SWEEP_STEP)
    fixed = QUICK_FIXED_DIM if quick else FIXED_DIM
    shapes = []
    for m in ms:
        shapes += [("n", m, v, fixed) for v in values]
        shapes += [("k", m, fixed, v) for v in values]
    return shapes


def _timed_us(torch, fn, reps: int, device: str) -> float:
    """Median time of `fn` over `reps` calls, L2 evicted before each (CUDA events), or wall
    time on CPU (smoke test only)."""
    import time

    for _ in range(WARMUP_CALLS):
        fn()
    if device == "cpu":
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e6)
        return statistics.median(samples)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    samples = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)  # ms -> µs
    return statistics.median(samples)


def _gemm_fn(torch, dtype: str, m: int, n: int, k: int, device: str):
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
    if dtype == "bf16":
        return lambda: torch.matmul(a, b)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.ones((), device=device, dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def _environment(torch, device: str) -> dict:
    info = {"host": platform.node(), "torch": torch.__version__, "device": device,
            "method": f"median of --reps calls after {WARMUP_CALLS} warm-up calls; "
                      f"{L2_FLUSH_BYTES >> 20} MiB written before each call to evict L2; "
                      "CUDA events around the one call; bf16 torch.matmul, fp8 torch._scaled_mm "
                      "(e4m3, per-tensor scales 1.0, BF16 output)"}
    if device != "cpu":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm_count=props.multi_processor_count,
                    memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    return info


def measure(args: argparse.Namespace) -> int:
    import torch

    out = Path(args.out or os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    dtypes = ["bf16"] if args.device == "cpu" else ["bf16", "fp8"]
    rows = []
    for sweep, m, n, k in sweep_shapes(args.m, args.quick):
        for dtype in dtypes:
            time_us = _timed_us(torch, _gemm_fn(torch, dtype, m, n, k, args.device), args.reps,
                                args.device)
            rows.append(dict(sweep=sweep, dtype=dtype, m=m, n=n, k=k, time_us=round(time_us, 3),
                             reps=args.reps, tflops=round(2 * m * n * k / time_us / 1e6, 2)))
            print(f"{sweep} {dtype} M={m} N={n} K={k}: {time_us:.2f} µs", flush=True)
    with open(out / "gemm_sweep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (out / "gemm_sweep.json").write_text(json.dumps(_environment(torch, args.device), indent=1))
    print(f"wrote {len(rows)} rows to {out / 'gemm_sweep.csv'}")
    return 0


def _peaks_agree(dims: np.ndarray, predicted: np.ndarray, measured: np.ndarray) -> str:
    """Throughput at dims that are multiples of 128 vs the others, model and GPU."""
    aligned = dims % 128 == 0
    if aligned.all() or not aligned.any():
        return "n/a"
    ratio = lambda t: float(np.median(1 / t[aligned]) / np.median(1 / t[~aligned]))  # noqa: E731
    return f"aligned/unaligned throughput: model {ratio(predicted):.2f}, GPU {ratio(measured):.2f}"


def compare(args: argparse.Namespace) -> int:
    from cost_model import gemm_cost
    from cost_model import get_hardware

    hw = get_hardware(args.hardware)
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["sweep"], int(r["m"])), []).append(r)
    print(f"{'dtype':<6} {'sweep':<6} {'M':>6} {'shapes':>6} {'median|err|':>11} {'p90|err|':>9}  "
          "sawtooth")
    for (dtype, sweep, m), group in sorted(groups.items()):
        n = np.array([float(r["n"]) for r in group])
        k = np.array([float(r["k"]) for r in group])
        measured = np.array([float(r["time_us"]) for r in group]) * 1e-6
        predicted = np.asarray(gemm_cost(float(m), n, k, hw, dtype).time_s)
        err = np.abs(predicted / measured - 1.0)
        dims = n if sweep == "n" else k
        print(f"{dtype:<6} {sweep:<6} {m:>6} {len(group):>6} {np.median(err):>11.1%} "
              f"{np.quantile(err, 0.9):>9.1%}  {_peaks_agree(dims, predicted, measured)}")
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time the sweeps with torch (GPU machine)")
    m.add_argument("--out", default=None, help="folder for gemm_sweep.csv/json (default $OUT)")
    m.add_argument("--m", type=int, nargs="+", default=list(DEFAULT_M))
    m.add_argument("--reps", type=int, default=30)
    m.add_argument("--device", default="cuda")
    m.add_argument("--quick", action="store_true", help="3 tiny shapes per sweep (smoke test)")
    c = sub.add_parser("compare", help="model vs a measured gemm_sweep.csv")
    c.add_argument("csv", type=Path)
    c.add_argument("--hardware", default="h200")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    return measure(args) if args.command == "measure" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
