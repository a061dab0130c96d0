"""Calibration of the GEMM efficiency layer on measured kernel tables.

A measured table has one row per GEMM: `gemm_dtype` (or `dtype`), `m`, `n`, `k` and `latency`
in milliseconds — the columns of aiconfigurator-core's `gemm_perf.parquet` (CUDA-graph timed,
weights rotated out of L2, BF16 activations quantized inside the timed op), one per engine
(`search.calibration.tables`). Where an engine's table times several kernels on one shape (its
`kernel_source`), the fastest is the engine's (it dispatches per shape). For each GPU, engine and
format the coefficients of `cost_model.efficiency.GemmEfficiency` are fitted by robust least
squares on log time (scipy.optimize.least_squares, soft-L1 loss): the model stays physical — a
handful of interpretable coefficients, not a lookup table.

The fixed overhead of a quantized format's GEMM kernel is pinned to the BF16 kernel's on the
same GPU (launch and pipeline fill do not depend on the format); the rest of its measured floor
is the activation-quantization side of the op (`quantize_fixed_us`: the quantization kernel and
whatever else the engine's op runs beside the GEMM kernel; vLLM 0.24.0's block-FP8 op measures a
floor of ~60-230 µs flat in N and K). Without BF16 rows the whole floor goes to the GEMM kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cost_model.efficiency import GemmEfficiency
from cost_model.gemm import (
    K_ALIGN_DIM,
    M_ALIGN_ROWS,
    N_ALIGN_DIM,
    SMALL_M_ROWS,
    GemmRates,
    gemm_cost,
    gemm_time_s,
    quantize_time_s,
)
from cost_model.hardware import HardwareSpec
from cost_model.precision import Precision, get_precision
from cost_model.units import GIGA, MS_PER_S, NS_PER_S, US_PER_S
from search.calibration.errors import CalibrationError
from search.calibration.fitting import (
    FIT_SAMPLE_POINTS,
    LOSS_SCALE,
    abs_error_quantiles,
    check_fit_rows,
    fastest_per_key,
)
from search.calibration.tables import (
    AIC_PACKAGE,
    AIC_SYSTEMS,
    DEFAULT_ENGINE,
    GEMM_TABLE,
    aic_source,
    aiconfigurator_table,
    numeric_column,
    read_gemm_csv,
    read_parquet,
)

__all__ = ["AIC_PACKAGE", "AIC_SYSTEMS", "DEFAULT_ENGINE", "FIT_SAMPLE_POINTS"]

AIC_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
               "nvfp4": "nvfp4"}  # table gemm_dtype -> our format; others are skipped
# our names, accepted as is
MODELED_FORMATS = ("bf16", "fp16", "fp8", "fp8_block", "nvfp4", "mxfp4")
REQUIRED_COLUMNS = ("m", "n", "k", "latency")
DTYPE_COLUMNS = ("gemm_dtype", "dtype")

# name: (TOML unit per SI unit, lower bound, upper bound, start) in TOML units; None: per GPU
COEFFICIENTS = {
    "compute_ceiling_frac": (1.0, 0.05, 1.0, 0.7),
    "bandwidth_ceiling_frac": (1.0, 0.2, 1.0, 0.8),
    "n_half_dim": (1.0, 0.0, 4096.0, 64.0),
    "k_half_dim": (1.0, 0.0, 8192.0, 256.0),
    "overlap_frac": (1.0, 0.0, 1.0, 0.5),
    "split_k_overhead_us": (US_PER_S, 0.0, 100.0, 2.0),
    "sm_bandwidth_gb_per_s": (1 / GIGA, None, None, None),
    "fixed_overhead_us": (US_PER_S, 0.0, 50.0, 2.0),
    # up to 500 µs: vLLM 0.24.0's block-FP8 ops measure 60-230 µs beside the kernel
    "quantize_fixed_us": (US_PER_S, 0.0, 500.0, 2.0),
    "quantize_bandwidth_frac": (1.0, 0.05, 1.0, 0.5),
    # start at 0: a term the table does not show stays 0 (cost_model.gemm's docstring cites them)
    "quantize_per_row_ns": (NS_PER_S, 0.0, 100.0, 0.0),
    "quantize_large_m_us": (US_PER_S, 0.0, 500.0, 0.0),
    "quantize_unaligned_m_us": (US_PER_S, 0.0, 500.0, 0.0),
    "quantize_unaligned_m_frac": (1.0, 0.0, 2.0, 0.0),
    "quantize_unaligned_nk_us": (US_PER_S, 0.0, 500.0, 0.0),
}
KERNEL_COEFFICIENTS = tuple(list(COEFFICIENTS)[:8])
SM_BANDWIDTH_FLOOR_SHARES = 4.0  # B_SM may fall to 1/4 of an SM's fair share of HBM (`_bounds`)

# NVIDIA, AI Model Co-Design (2026), Figure 4 (GB300 NVFP4 GEMM, M = 8192): throughput reaches 80%
# of its K = 16384 value at K = 3072 and 90% at 6144 (N = 9728); 75% of its N = 16384 value at
# N = 2560 and 90% at 6144, but less than half at N = 256 (K = 8448). Fits of the figure's format
# must keep this shape (kernel throughput ratio within [low, high]) whatever the measured table's
# kernel does.
FIGURE_4_FORMAT = "nvfp4"
FIGURE_4 = (  # (M, N, K) against (M, N, K) of reference, low, high
    ((8192, 9728, 3072), (8192, 9728, 16384), 0.8, np.inf),
    ((8192, 9728, 6144), (8192, 9728, 16384), 0.9, np.inf),
    ((8192, 2560, 8448), (8192, 16384, 8448), 0.75, np.inf),
    ((8192, 6144, 8448), (8192, 16384, 8448), 0.9, np.inf),
    ((8192, 256, 8448), (8192, 16384, 8448), 1e-9, 0.5),
)
FIGURE_4_MARGIN = 0.01  # fits aim 1% inside the bounds, so rounding keeps them inside
FIGURE_4_WEIGHT = 0.1  # per sampled row: a 1% violation outweighs ~FIT_SAMPLE_POINTS/30 rows
QUANTIZE_COEFFICIENTS = ("quantize_fixed_us", "quantize_bandwidth_frac", "quantize_per_row_ns",
                         "quantize_large_m_us", "quantize_unaligned_m_us",
                         "quantize_unaligned_m_frac", "quantize_unaligned_nk_us")
STEP_COEFFICIENTS = QUANTIZE_COEFFICIENTS[3:]  # fitted only where the table has both sides


@dataclass(frozen=True)
class MeasuredGemms:
    """Measured GEMM times of one GPU and format (1-D arrays of equal length)."""

    hardware: str
    dtype: str
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    time_s: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.time_s)

    def subset(self, index: np.ndarray) -> MeasuredGemms:
        pick = {name: getattr(self, name)[index] for name in ("m", "n", "k", "time_s")}
        return MeasuredGemms(self.hardware, self.dtype, source=self.source, **pick)


@dataclass(frozen=True)
class GemmFitResult:
    """Fitted coefficients (TOML units) of one GPU and format, with the fit's errors."""

    hardware: str
    dtype: str
    coefficients: dict[str, float]
    pinned: tuple[str, ...]  # coefficients set, not fitted (see the module docstring)
    points: int
    median_abs_error_frac: float
    p90_abs_error_frac: float
    roofline_median_abs_error_frac: float
    roofline_p90_abs_error_frac: float
    source: str


# ---- reading tables -------------------------------------------------------------------------

def gemm_table(hardware: str, engine: str = DEFAULT_ENGINE,
               version: str | None = None) -> tuple[Path, str]:
    """(path of an engine's GEMM table, its version) for one of our GPUs."""
    return aiconfigurator_table(hardware, GEMM_TABLE[0], engine, GEMM_TABLE[1], version)


def gemm_source(hardware: str, engine: str, version: str) -> str:
    return aic_source(hardware, GEMM_TABLE[0], engine, version)


def read_table(path: Path) -> pa.Table:
    """A measured table from Parquet or CSV (every CSV field checked), its columns checked."""
    if not path.is_file():
        raise CalibrationError(f"`--source` file {str(path)!r} does not exist")
    table = read_parquet(path) if path.suffix == ".parquet" else read_gemm_csv(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing or not any(c in table.column_names for c in DTYPE_COLUMNS):
        need = ", ".join(REQUIRED_COLUMNS) + " and gemm_dtype (or dtype)"
        raise CalibrationError(f"`--source` {path} needs columns {need}; has "
                               f"{', '.join(table.column_names)}")
    return table


def measured_gemms(table: pa.Table, hardware: str, source: str) -> tuple[list[MeasuredGemms],
                                                                         list[str]]:
    """The table's rows by format we model (bf16 first), and the table formats skipped."""
    dtype_column = next(c for c in DTYPE_COLUMNS if c in table.column_names)
    names = table.column(dtype_column).cast(pa.string())
    found, skipped = [], []
    for name in pc.unique(names).drop_null().to_pylist():
        fmt = AIC_FORMATS.get(name) or (name if name in MODELED_FORMATS else None)
        if fmt is None:
            skipped.append(name)
            continue
        rows = table.filter(pc.equal(names, name))
        cols = [numeric_column(rows, c) for c in REQUIRED_COLUMNS]
        for column, values in zip(REQUIRED_COLUMNS, cols):
            bad = values[~((values > 0) & np.isfinite(values))]  # also NaN (a missing value)
            if bad.size:
                raise CalibrationError(f"`{column}` must be a finite number > 0 in every {name} "
                                       f"row of {source}; got {bad[0]!r}")
        keep = fastest_per_key(cols[:3], cols[3])
        found.append(MeasuredGemms(hardware, fmt, *(c[keep] for c in cols[:3]),
                                   cols[3][keep] / MS_PER_S, source))
    found.sort(key=lambda d: d.dtype != "bf16")
    return found, skipped


# ---- the model at trial coefficients --------------------------------------------------------

def efficiency_of(coefficients: dict[str, float]) -> GemmEfficiency:
    """TOML-unit coefficients -> the cost model's `GemmEfficiency` (SI)."""
    si = {name: coefficients[name] / COEFFICIENTS[name][0] for name in coefficients}
    return GemmEfficiency(
        compute_ceiling_frac=si["compute_ceiling_frac"],
        bandwidth_ceiling_frac=si["bandwidth_ceiling_frac"],
        fixed_overhead_s=si["fixed_overhead_us"], n_half_dim=si["n_half_dim"],
        k_half_dim=si["k_half_dim"], overlap_frac=si["overlap_frac"],
        split_k_overhead_s=si["split_k_overhead_us"],
        sm_bandwidth_bytes_per_s=si["sm_bandwidth_gb_per_s"],
        quantize_fixed_s=si.get("quantize_fixed_us", 0.0),
        quantize_bandwidth_frac=si.get("quantize_bandwidth_frac", 1.0),
        quantize_per_row_s=si.get("quantize_per_row_ns", 0.0),
        quantize_large_m_s=si.get("quantize_large_m_us", 0.0),
        quantize_unaligned_m_s=si.get("quantize_unaligned_m_us", 0.0),
        quantize_unaligned_m_frac=si.get("quantize_unaligned_m_frac", 0.0),
        quantize_unaligned_nk_s=si.get("quantize_unaligned_nk_us", 0.0),
    )


def predicted_s(data: MeasuredGemms, hw: HardwareSpec, eff: GemmEfficiency) -> np.ndarray:
    """Predicted time of the measured op: the GEMM kernel plus, for quantized formats, the
    quantization of its BF16 activations (both are inside the timed op)."""
    rates = GemmRates.of(hw, get_precision(data.dtype), eff=eff)
    kernel_s = gemm_time_s(data.m, data.n, data.k, 1.0, hw, rates)
    return kernel_s + quantize_time_s(data.m, data.n, data.k, 1.0, hw, rates, kernel_s)


def roofline_s(data: MeasuredGemms, hw: HardwareSpec) -> np.ndarray:
    """The co-design post's roofline at peak: max(math, read + write)."""
    cost = gemm_cost(data.m, data.n, data.k, hw, data.dtype)
    return np.maximum(cost.math_s, cost.read_s + cost.write_s)


# ---- fitting --------------------------------------------------------------------------------

def _bounds(name: str, hw: HardwareSpec) -> tuple[float, float, float]:
    """(low, high, start) of a coefficient; one SM streams between a quarter of its fair share
    of HBM (a kernel with few loads in flight: NVFP4 at small M on Blackwell streams its K loop
    at ~40 GB/s per SM) and all of it (Little's law caps it far below, the fit finds where)."""
    _, low, high, start = COEFFICIENTS[name]
    if name == "sm_bandwidth_gb_per_s":
        fair = hw.hbm_bytes_per_s / hw.sm_count / GIGA
        return fair / SM_BANDWIDTH_FLOOR_SHARES, hw.hbm_bytes_per_s / GIGA, 4.0 * fair
    return low, high, start


def _free_coefficients(prec: Precision, pinned: dict[str, float]) -> list[str]:
    names = list(KERNEL_COEFFICIENTS)
    if _quantized(prec):
        names += QUANTIZE_COEFFICIENTS
    return [name for name in names if name not in pinned]


def step_sides(data: MeasuredGemms) -> dict[str, np.ndarray]:
    """Per dispatch step (`cost_model.gemm`), which rows of a table are on its far side."""
    return {"quantize_large_m_us": data.m > SMALL_M_ROWS,
            "quantize_unaligned_m_us": data.m % M_ALIGN_ROWS != 0,
            "quantize_unaligned_m_frac": data.m % M_ALIGN_ROWS != 0,
            "quantize_unaligned_nk_us": (data.n % N_ALIGN_DIM != 0) | (data.k % K_ALIGN_DIM != 0)}


def unseen_steps(data: MeasuredGemms) -> dict[str, float]:
    """Steps a table cannot measure (all its rows on one side): pinned to 0."""
    return {name: 0.0 for name, far in step_sides(data).items() if far.all() or not far.any()}


def _quantized(prec: Precision) -> bool:
    return prec.activation_bytes_per_value < get_precision("bf16").activation_bytes_per_value


def fit_gemm(data: MeasuredGemms, hw: HardwareSpec, pinned: dict[str, float] | None = None,
             sample_points: int = FIT_SAMPLE_POINTS, seed: int = 0) -> GemmFitResult:
    """Fit one GPU and format; `pinned` coefficients (TOML units) are held, not fitted."""
    from scipy.optimize import least_squares  # only calibration needs scipy (0.5 s to import)

    prec = get_precision(data.dtype)
    pinned = dict(pinned or {})
    if _quantized(prec):
        pinned = {**unseen_steps(data), **pinned}
    free = _free_coefficients(prec, pinned)
    check_fit_rows(f"{data.source}: {data.dtype} GEMMs", data.time_s, [data.m, data.n, data.k],
                   len(free))
    bounds = np.array([_bounds(name, hw) for name in free])
    rng = np.random.default_rng(seed)
    sample = data.subset(rng.permutation(len(data))[:sample_points])
    log_measured = np.log(sample.time_s)

    def coefficients(x: np.ndarray) -> dict[str, float]:
        return {**pinned, **dict(zip(free, x.tolist()))}

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = efficiency_of(coefficients(x))
        misfit = np.log(predicted_s(sample, hw, eff)) - log_measured
        if data.dtype != FIGURE_4_FORMAT:
            return misfit
        return np.concatenate([misfit, FIGURE_4_WEIGHT * len(sample) * figure_4_violation(hw, eff)])

    result = least_squares(residuals, bounds[:, 2], bounds=(bounds[:, 0], bounds[:, 1]),
                           loss="soft_l1", f_scale=LOSS_SCALE, x_scale="jac")
    return _result(data, hw, coefficients(result.x), tuple(pinned))


def figure_4_violation(hw: HardwareSpec, eff: GemmEfficiency,
                       margin: float = FIGURE_4_MARGIN) -> np.ndarray:
    """How far (log) the model's throughput ratios fall outside the co-design post's Figure 4 bounds
    narrowed by `margin`."""
    rates = GemmRates.of(hw, get_precision(FIGURE_4_FORMAT), eff=eff)
    shapes = np.array([[*shape, *ref] for shape, ref, _, _ in FIGURE_4], dtype=np.float64)
    bounds = np.array([[low * (1 + margin), high * (1 - margin)]
                       for _, _, low, high in FIGURE_4])
    m, n, k, m_ref, n_ref, k_ref = shapes.T
    ratio = (m * n * k / gemm_time_s(m, n, k, 1.0, hw, rates)) \
        / (m_ref * n_ref * k_ref / gemm_time_s(m_ref, n_ref, k_ref, 1.0, hw, rates))
    below, above = np.log(bounds[:, 0]) - np.log(ratio), np.log(ratio) - np.log(bounds[:, 1])
    return np.maximum(below, 0.0) + np.maximum(above, 0.0)


def _result(data: MeasuredGemms, hw: HardwareSpec, coefficients: dict[str, float],
            pinned: tuple[str, ...]) -> GemmFitResult:
    after = abs_error_quantiles(predicted_s(data, hw, efficiency_of(coefficients)), data.time_s)
    before = abs_error_quantiles(roofline_s(data, hw), data.time_s)
    return GemmFitResult(
        hardware=data.hardware, dtype=data.dtype, coefficients=coefficients, pinned=pinned,
        points=len(data), median_abs_error_frac=after[0], p90_abs_error_frac=after[1],
        roofline_median_abs_error_frac=before[0], roofline_p90_abs_error_frac=before[1],
        source=data.source,
    )


def fit_hardware(tables: list[MeasuredGemms], hw: HardwareSpec,
                 sample_points: int = FIT_SAMPLE_POINTS) -> list[GemmFitResult]:
    """Fit every format of one GPU, BF16 first: its fixed overhead is pinned for the others."""
    results: list[GemmFitResult] = []
    for data in tables:
        bf16 = next((r for r in results if r.dtype == "bf16"), None)
        pinned = {}
        if bf16 is not None and _quantized(get_precision(data.dtype)):
            pinned["fixed_overhead_us"] = bf16.coefficients["fixed_overhead_us"]
        elif _quantized(get_precision(data.dtype)):
            pinned["quantize_fixed_us"] = 0.0
        results.append(fit_gemm(data, hw, pinned, sample_points))
    return results
