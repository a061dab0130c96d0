"""Measured GEMM times for `archscout gemm`'s `measured_us`, without the calibration code.

The package ships a measured M × N × K grid per engine, GPU and format (`cost_model/data/
efficiency/<engine>/gemm_points.toml`, written by `archscout calibrate`); it is read here with the
standard library and numpy. Only a shape off that grid needs the full aiconfigurator-core table,
which `search.calibration.gemm` reads with pyarrow: it is imported then, never on the common path,
so that `archscout gemm` starts about as fast as bare Python (tests/benchmarks/bench_startup.py).
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from importlib import resources

import numpy as np

from cost_model.efficiency import POINTS_FILE
from cost_model.units import US_PER_S
from search.calibration.errors import CalibrationError

GRID_AXES = ("m", "n", "k")


@cache
def shipped_points(engine: str) -> dict:
    """An engine's shipped measured grid (empty when the package has none)."""
    path = resources.files("cost_model.data.efficiency").joinpath(engine, f"{POINTS_FILE}.toml")
    return tomllib.loads(path.read_text()) if path.is_file() else {}


@cache
def _grid_us(engine: str, hardware: str, dtype: str) -> np.ndarray | None:
    """Measured µs of one GPU and format on the shipped grid, shaped (M, N, K)."""
    doc = shipped_points(engine)
    entry = doc.get(hardware, {}).get(dtype)
    if not isinstance(entry, dict):
        return None
    shape = tuple(len(doc[axis]) for axis in GRID_AXES)
    return np.array(entry["time_us"].split(), dtype=np.float64).reshape(shape)


def shipped_time_s(engine: str, hardware: str, dtype: str, m: int, n: int,
                   k: int) -> float | None:
    """The shipped grid's measured time of this shape, or None when it is off the grid."""
    grid = _grid_us(engine, hardware, dtype)
    if grid is None:
        return None
    axes = [shipped_points(engine)[axis] for axis in GRID_AXES]
    if any(v not in axis for v, axis in zip((m, n, k), axes)):
        return None
    time_us = grid[axes[0].index(m), axes[1].index(n), axes[2].index(k)]
    return None if math.isnan(time_us) else float(time_us) / US_PER_S


def measured_time_s(engine: str, hardware: str, dtype: str, m: int, n: int,
                    k: int) -> float | None:
    """Measured time of this GEMM on `engine`'s kernels (BF16 activations quantized inside the
    timed op, BF16 out): the shipped grid's, else the installed aiconfigurator-core table's;
    None if neither has the shape."""
    shipped = shipped_time_s(engine, hardware, dtype, m, n, k)
    if shipped is not None:
        return shipped
    return installed_time_s(engine, hardware, dtype, m, n, k)


@cache
def _installed_times_s(engine: str, hardware: str,
                       dtype: str) -> dict[tuple[int, int, int], float]:
    """Every measured time of the installed aiconfigurator-core table the shipped coefficients
    were fitted to (empty without the package)."""
    from search.calibration.gemm import gemm_table, measured_gemms, read_table  # pyarrow

    doc = shipped_points(engine).get(hardware, {})
    try:
        path, _ = gemm_table(hardware, engine, doc.get("framework_version"))
        tables, _ = measured_gemms(read_table(path), hardware, str(path))
    except CalibrationError:  # no aiconfigurator-core installed, or no table for it
        return {}
    data = next((d for d in tables if d.dtype == dtype), None)
    if data is None:
        return {}
    return {(int(a), int(b), int(c)): float(t) for a, b, c, t in
            zip(data.m, data.n, data.k, data.time_s)}


def installed_time_s(engine: str, hardware: str, dtype: str, m: int, n: int,
                     k: int) -> float | None:
    """Measured time of this GEMM in the installed aiconfigurator-core table the shipped
    coefficients were fitted to; None without the package, a table or the shape."""
    return _installed_times_s(engine, hardware, dtype).get((m, n, k))
