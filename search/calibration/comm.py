"""Calibration of the scale-up all-reduce on measured collectives.

A measured table has one row per all-reduce: `num_gpus`, `message_size` (elements per GPU),
`allreduce_dtype` and `latency` (ms) — the columns of aiconfigurator-core's
`comm/<framework>/<version>/custom_allreduce_perf.parquet`. `cost_model.communication.all_reduce_s`
(α + 2(n−1)/n · bytes / (bw · frac)) is fitted by robust least squares on log time:
`scale_up_bandwidth_frac` and the all-reduce latency α (`all_reduce_latency_us`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from cost_model.communication import all_reduce_s
from cost_model.efficiency import Efficiency
from cost_model.hardware import HardwareSpec
from cost_model.precision import get_precision
from cost_model.units import MS_PER_S, US_PER_S
from search.calibration.errors import CalibrationError
from search.calibration.fitting import (
    abs_error_quantiles,
    check_fit_rows,
    fastest_per_key,
    fit_log_time,
)
from search.calibration.tables import (
    DEFAULT_ENGINE,
    aiconfigurator_table,
    numeric_column,
    string_column,
)

TABLE = "custom_allreduce_perf.parquet"
FORMATS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
COLUMNS = ("num_gpus", "message_size", "allreduce_dtype", "latency")
# name: (lower bound, upper bound, start) in TOML units
COEFFICIENTS = {"scale_up_bandwidth_frac": (0.05, 1.0, 0.8),
                "all_reduce_latency_us": (0.0, 100.0, 5.0)}


@dataclass(frozen=True)
class MeasuredAllReduce:
    gpus: np.ndarray
    message_bytes: np.ndarray  # per GPU
    time_s: np.ndarray

    def __len__(self) -> int:
        return len(self.time_s)


@dataclass(frozen=True)
class CommFitResult:
    hardware: str
    coefficients: dict[str, float]  # TOML units
    points: int
    errors: tuple[float, float]  # (median, p90) after the fit
    prior_errors: tuple[float, float]
    source: str


def comm_table(hardware: str, engine: str = DEFAULT_ENGINE,
               version: str | None = None) -> tuple[Path, str]:
    """(all-reduce table, version) of an engine on one of our GPUs (`tables.aiconfigurator_table`:
    the engine's version where the op has it)."""
    return aiconfigurator_table(hardware, "comm", engine, TABLE, version)


def measured_all_reduce(table: pa.Table) -> MeasuredAllReduce:
    """One row per (GPUs, message, format): the fastest of the engine's kernels timed on it
    (vLLM and SGLang time their custom all-reduce under a CUDA graph and eagerly)."""
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise CalibrationError(f"all-reduce table needs columns {', '.join(missing)}")
    column = lambda name: numeric_column(table, name)  # noqa: E731
    dtypes = string_column(table, "allreduce_dtype")
    gpus, latency_ms = column("num_gpus"), column("latency")
    keep = np.flatnonzero(np.isin(dtypes, list(FORMATS)) & (latency_ms > 0) & (gpus > 1))
    value_bytes = np.array([get_precision(FORMATS[n]).activation_bytes_per_value
                            for n in dtypes[keep]], dtype=np.float64)
    message_bytes = column("message_size")[keep] * value_bytes
    fastest = fastest_per_key([gpus[keep], message_bytes], latency_ms[keep])
    return MeasuredAllReduce(gpus[keep][fastest], message_bytes[fastest],
                             latency_ms[keep][fastest] / MS_PER_S)


def with_coefficients(eff: Efficiency, coefficients: dict[str, float]) -> Efficiency:
    return eff.model_copy(update={
        "scale_up_bandwidth_frac": coefficients["scale_up_bandwidth_frac"],
        "all_reduce_latency_s": coefficients["all_reduce_latency_us"] / US_PER_S})


def predicted_s(data: MeasuredAllReduce, hw: HardwareSpec, eff: Efficiency) -> np.ndarray:
    return all_reduce_s(data.message_bytes, data.gpus, hw, eff)


def prior_coefficients(eff: Efficiency, hw: HardwareSpec) -> dict[str, float]:
    alpha = eff.all_reduce_latency_s
    return {"scale_up_bandwidth_frac": eff.scale_up_bandwidth_frac,
            "all_reduce_latency_us": (hw.scale_up_latency_s if alpha is None else alpha) * US_PER_S}


def fit_all_reduce(data: MeasuredAllReduce, hw: HardwareSpec, eff: Efficiency, hardware: str,
                   source: str) -> CommFitResult:
    if np.any(data.gpus > hw.scale_up_domain_gpus):
        raise CalibrationError(f"all-reduce rows beyond {hardware}'s scale-up domain are not "
                               f"modeled")
    check_fit_rows(f"{source}: all-reduce", data.time_s, [data.gpus, data.message_bytes],
                   len(COEFFICIENTS))
    coefficients = fit_log_time(
        {"all-reduce": data}, lambda d, c: predicted_s(d, hw, with_coefficients(eff, c)),
        COEFFICIENTS)
    errors = lambda c: abs_error_quantiles(  # noqa: E731
        predicted_s(data, hw, with_coefficients(eff, c)), data.time_s)
    return CommFitResult(hardware, coefficients, len(data), errors(coefficients),
                         errors(prior_coefficients(eff, hw)), source)


def fit_source(r: CommFitResult) -> str:
    return (f"fitted by archscout calibrate to {r.source} ({r.points} rows |error| median "
            f"{r.errors[0]:.1%}, p90 {r.errors[1]:.1%})")
