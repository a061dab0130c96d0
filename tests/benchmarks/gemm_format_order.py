"""Writes tests/data/gemm_format_order.csv: per GPU, the measured time of BF16, FP8, FP8
block-scaled and NVFP4 GEMM ops (BF16 activations quantized inside the timed op, as the tables
measure them) on a decode-like and a prefill-like grid of shapes, as the geometric mean over the
grid. `tests/cost_model/test_gemm_properties.py` checks that the model ranks the formats the
same way per GPU and regime.

Source: aiconfigurator-core's gemm_perf.parquet tables (systems/data/<gpu>/gemm/<framework>/
<version>/), the version the shipped coefficients were fitted to (gemm_points.toml).
With --kernels it writes nothing and prints, per GPU and regime, what serving compares instead
(engines quantize activations in the kernel before the GEMM, FP8 with static scales): FP8 without
the dynamic scale computation and without quantization, from aiconfigurator's own quantize tables
(computescale_perf: the amax/scale kernels; scale_matrix_perf: the quantization), NVFP4 and FP8
block-scaled without the model's quantization time (no table measures theirs), next to the
model's kernel times. The CSV carries the FP8 one too (`measured_geomean_kernel_us`; BF16's is
its op), which the tests compare with the model's kernel times.
Run: pip install aiconfigurator-core; python tests/benchmarks/gemm_format_order.py [--kernels]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from search.calibration.measured_lookup import shipped_points
from search.calibration.gemm import (
    AIC_SYSTEMS,
    DEFAULT_FRAMEWORK,
    aiconfigurator_data_dir,
    aiconfigurator_table,
    aiconfigurator_version,
    measured_gemms,
    read_table,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import TEST_DATA

OUTPUT = TEST_DATA / "gemm_format_order.csv"
NK_VALUES = (2048, 4096, 8192, 16384)  # N and K: model widths, both in every table
REGIMES = {"decode": (1, 2, 4, 8, 16, 32, 64), "prefill": (4096, 8192, 16384)}  # M values
COLUMNS = ("hardware", "regime", "dtype", "m_values", "nk_values", "shapes",
           "measured_geomean_op_us", "measured_geomean_kernel_us", "source")


def grid(regime: str) -> list[tuple[int, int, int]]:
    """The (M, N, K) shapes of a regime: its M values × NK_VALUES × NK_VALUES."""
    return [(m, n, k) for m in REGIMES[regime] for n in NK_VALUES for k in NK_VALUES]


def rows_of(hardware: str) -> list[dict]:
    recorded = shipped_points().get(hardware, {})
    path, version = aiconfigurator_table(hardware, DEFAULT_FRAMEWORK,
                                         recorded.get("framework_version"))
    source = (f"aiconfigurator-core {aiconfigurator_version()} {AIC_SYSTEMS[hardware]} "
              f"gemm/{DEFAULT_FRAMEWORK}/{version}/gemm_perf.parquet")
    rows = []
    for data in measured_gemms(read_table(path), hardware, source)[0]:
        lookup = {(int(m), int(n), int(k)): t for m, n, k, t in
                  zip(data.m, data.n, data.k, data.time_s)}
        for regime, m_values in REGIMES.items():
            times = [lookup[shape] for shape in grid(regime)]  # KeyError: a shape not measured
            kernel = _measured_kernel_us(hardware, version, data.dtype, regime, np.array(times))
            rows.append({
                "hardware": hardware, "regime": regime, "dtype": data.dtype,
                "m_values": " ".join(map(str, m_values)),
                "nk_values": " ".join(map(str, NK_VALUES)), "shapes": len(times),
                "measured_geomean_op_us": f"{np.exp(np.mean(np.log(times))) * 1e6:.4g}",
                "measured_geomean_kernel_us": "" if kernel is None else f"{kernel:.4g}",
                "source": source + (QUANTIZE_SOURCE if data.dtype == "fp8" else "")})
    return rows


QUANTIZE_SOURCE = "; FP8 kernel: minus quantize/trtllm computescale_perf + scale_matrix_perf"


def _measured_kernel_us(hardware: str, version: str, dtype: str, regime: str,
                        op_s: np.ndarray) -> float | None:
    """Geometric mean of the kernel alone where the tables measure everything else: BF16 (no
    quantization) and FP8 (its scale and quantization kernels are tables of their own)."""
    if dtype == "bf16":
        return _geomean_us(op_s)
    if dtype != "fp8":
        return None
    scale = _quantize_table_s(hardware, version, "computescale_perf")
    quant = _quantize_table_s(hardware, version, "scale_matrix_perf")
    if not scale or not quant:
        return None
    others = np.array([scale[(m, k)] + quant[(m, k)] for m, _, k in grid(regime)])
    return _geomean_us(op_s - others)


def _geomean_us(times_s) -> float:
    return float(np.exp(np.mean(np.log(times_s)))) * 1e6


def _quantize_table_s(hardware: str, version: str, table: str) -> dict[tuple[int, int], float]:
    import pyarrow.parquet as pq

    path = (aiconfigurator_data_dir() / AIC_SYSTEMS[hardware] / "quantize" / DEFAULT_FRAMEWORK
            / version / f"{table}.parquet")
    if not path.is_file():
        return {}
    t = pq.read_table(path, columns=["m", "k", "latency"]).to_pydict()
    return {(m, k): ms / 1e3 for m, k, ms in zip(t["m"], t["k"], t["latency"])}


def print_kernels() -> None:
    """Implied kernel-only geometric means per GPU and regime (module docstring)."""
    from cost_model import gemm_cost
    from cost_model import get_hardware

    for hardware in AIC_SYSTEMS:
        version = shipped_points().get(hardware, {}).get("framework_version")
        path, version = aiconfigurator_table(hardware, DEFAULT_FRAMEWORK, version)
        scale = _quantize_table_s(hardware, version, "computescale_perf")
        quant = _quantize_table_s(hardware, version, "scale_matrix_perf")
        for regime in REGIMES:
            m, n, k = (np.array(axis, dtype=np.float64) for axis in zip(*grid(regime)))
            parts = []
            for data in measured_gemms(read_table(path), hardware, str(path))[0]:
                lookup = {(int(a), int(b), int(c)): t for a, b, c, t in
                          zip(data.m, data.n, data.k, data.time_s)}
                op = np.array([lookup[s] for s in grid(regime)])
                cost = gemm_cost(m, n, k, get_hardware(hardware), data.dtype)
                if data.dtype == "fp8" and scale and quant:
                    keys = list(zip(m.astype(int), k.astype(int)))
                    kernel = op - np.array([scale[key] + quant[key] for key in keys])
                elif data.dtype == "fp8":
                    continue
                else:
                    kernel = op - cost.quantize_s
                parts.append(
                    f"{data.dtype} op {_geomean_us(op):.1f} kernel~{_geomean_us(kernel):.1f}"
                    f" model {_geomean_us(cost.time_s):.1f}"
                )
            print(f"{hardware} {regime}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", action="store_true",
                        help="print the implied kernel-only ranking instead of writing the CSV")
    if parser.parse_args().kernels:
        print_kernels()
        return
    rows = [row for hardware in AIC_SYSTEMS for row in rows_of(hardware)]
    with OUTPUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUTPUT}")


if __name__ == "__main__":
    main()
