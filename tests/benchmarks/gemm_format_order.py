"""Writes tests/data/gemm_format_order.csv: per GPU, the measured time of BF16, FP8, FP8
block-scaled and NVFP4 GEMM ops (BF16 activations quantized inside the timed op, as the tables
measure them) on a decode-like and a prefill-like grid of shapes, as the geometric mean over the
grid. `tests/cost_model/test_gemm_properties.py` checks that the model ranks the formats the
same way per GPU and regime.

Source: aiconfigurator-core's gemm_perf.parquet tables (systems/data/<gpu>/gemm/<framework>/
<version>/), the version the shipped coefficients were fitted to (gemm_points.toml).
Run: pip install aiconfigurator-core; python tests/benchmarks/gemm_format_order.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from search.calibration import (
    AIC_SYSTEMS,
    DEFAULT_FRAMEWORK,
    aiconfigurator_table,
    aiconfigurator_version,
    measured_gemms,
    read_table,
    shipped_points,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import TEST_DATA

OUTPUT = TEST_DATA / "gemm_format_order.csv"
NK_VALUES = (2048, 4096, 8192, 16384)  # N and K: model widths, both in every table
REGIMES = {"decode": (1, 2, 4, 8, 16, 32, 64), "prefill": (4096, 8192, 16384)}  # M values
COLUMNS = ("hardware", "regime", "dtype", "m_values", "nk_values", "shapes",
           "measured_geomean_op_us", "source")


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
            rows.append({
                "hardware": hardware, "regime": regime, "dtype": data.dtype,
                "m_values": " ".join(map(str, m_values)),
                "nk_values": " ".join(map(str, NK_VALUES)), "shapes": len(times),
                "measured_geomean_op_us": f"{np.exp(np.mean(np.log(times))) * 1e6:.4g}",
                "source": source})
    return rows


def main() -> None:
    rows = [row for hardware in AIC_SYSTEMS for row in rows_of(hardware)]
    with OUTPUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUTPUT}")


if __name__ == "__main__":
    main()
