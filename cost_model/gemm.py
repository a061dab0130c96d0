"""GEMM time: roofline with explicit tile and wave quantization, plus the efficiency layer.

For C[M,N] = A[M,K] · B[K,N] (A = activations, B = weights), the seeds' formulas:
    FLOPs = 2MNK,  read = MK·b_A + NK·b_B,  write = MN·b_C,  I = FLOPs / (read + write).
The prediction picks, like a GEMM library, the fastest of the hardware's kernel geometries and
split-K factors. For each it applies, on the dims as given (callers pass dims *after* sharding):
    η_tile = MN / (B_M⌈M/B_M⌉ · B_N⌈N/B_N⌉)                       (seeds, reading notes §3)
    η_wave = work units / (slots · ⌈units / slots⌉), in clusters    (seeds, reading notes §3)
    t = max(t_math / (ceil_c · rel · η_tile · η_wave · s_N · s_K), t_mem / ceil_bw) + t_fixed
with the small-dimension saturation s_N = N/(N + n_half), s_K = K_split/(K_split + k_half).
Everything broadcasts over numpy arrays of M, N and K.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_model.efficiency import GemmEfficiency, get_efficiency
from cost_model.hardware import GemmKernel, HardwareSpec
from cost_model.precision import Precision, get_precision
from cost_model.units import gemm_flop

SPLIT_K_FACTORS = (1, 2, 4, 8, 16)  # split-K / stream-K partitions a library may use for small grids
MIN_K_PER_SPLIT = 256  # a split must keep several K-steps of 64-128 to pipeline (CUTLASS split-K)
PARTIAL_SUM_BYTES = 4.0  # split-K partial sums are FP32
DEFAULT_OUT_PRECISION = "bf16"  # serving epilogues write BF16 activations unless fused quantization


def tile_efficiency(m, n, tile_m, tile_n):
    """η_tile = MN / (B_M⌈M/B_M⌉ · B_N⌈N/B_N⌉): useful share of the launched tiles."""
    padded = tile_m * np.ceil(np.divide(m, tile_m)) * tile_n * np.ceil(np.divide(n, tile_n))
    return np.multiply(m, n, dtype=np.float64) / padded


def wave_efficiency(work_units, slots):
    """η_wave = T / (P⌈T/P⌉) for T work units (tiles or clusters) on P concurrent slots."""
    work_units = np.asarray(work_units, dtype=np.float64)
    return work_units / (slots * np.ceil(work_units / slots))


def intensity_cap_flop_per_byte(n, k, bytes_per_value):
    """I∞ = (2/b)·NK/(N+K): the intensity limit of a GEMM as M → ∞ (weights amortized)."""
    n = np.asarray(n, dtype=np.float64)
    return 2.0 / bytes_per_value * n * k / (n + k)


@dataclass(frozen=True)
class GemmCost:
    """Cost of GEMMs (arrays broadcast from the inputs). `*_s` at peak are the seeds' roofline
    terms; `time_s` is the prediction with quantization and the efficiency layer."""

    flop: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    math_s: np.ndarray
    read_s: np.ndarray
    write_s: np.ndarray
    time_s: np.ndarray
    tile_efficiency: np.ndarray
    wave_efficiency: np.ndarray
    compute_bound: np.ndarray  # bool: the predicted time is set by math, not memory

    @property
    def intensity_flop_per_byte(self) -> np.ndarray:
        return self.flop / (self.read_bytes + self.write_bytes)

    @property
    def achieved_flop_per_s(self) -> np.ndarray:
        return self.flop / self.time_s


def _kernel_terms(kernel: GemmKernel, m, n, k, split, groups, sm_count: int):
    """(η_tile · η_wave, η_tile, η_wave) of one kernel geometry and split-K factor."""
    tiles_m = np.ceil(np.divide(m, kernel.tile_m))
    tiles_n = np.ceil(np.divide(n, kernel.tile_n))
    clusters = (np.ceil(tiles_m / kernel.cluster_tiles_m) * np.ceil(tiles_n / kernel.cluster_tiles_n)
                * split * groups)
    tiles_per_cluster = kernel.cluster_tiles_m * kernel.cluster_tiles_n
    slots = max(sm_count // (kernel.sms_per_tile * tiles_per_cluster), 1)
    eta_tile = tile_efficiency(m, n, kernel.tile_m, kernel.tile_n)
    work = tiles_m * tiles_n * split * groups
    eta_wave = work / (np.ceil(clusters / slots) * slots * tiles_per_cluster)
    return eta_tile * eta_wave, eta_tile, eta_wave


def _saturation(dim, half_dim: float):
    """dim / (dim + half_dim): the small-dimension saturation of the efficiency layer."""
    return dim / (dim + half_dim)


def _candidates(m, n, k, groups, flop, stream_bytes, hw: HardwareSpec, peak: float,
                eff: GemmEfficiency):
    """Predicted time, η_tile and η_wave of every (kernel, split) candidate, stacked on axis 0."""
    bandwidth = hw.hbm_bytes_per_s * eff.bandwidth_ceiling_frac
    times, tiles, waves = [], [], []
    saturation_n = _saturation(n, eff.n_half_dim)
    for kernel in hw.gemm_kernels:
        rate = peak * eff.compute_ceiling_frac * kernel.relative_peak_frac
        for split in SPLIT_K_FACTORS:
            quant, eta_tile, eta_wave = _kernel_terms(kernel, m, n, k, split, groups, hw.sm_count)
            quant = quant * saturation_n * _saturation(k / split, eff.k_half_dim)
            partial_bytes = (split > 1) * 2.0 * split * groups * m * n * PARTIAL_SUM_BYTES
            t = np.maximum(flop / (rate * quant), (stream_bytes + partial_bytes) / bandwidth)
            invalid = (split > 1) & (np.divide(k, split) < MIN_K_PER_SPLIT)
            times.append(np.where(invalid, np.inf, t + (split > 1) * hw.kernel_launch_s))
            tiles.append(eta_tile)
            waves.append(eta_wave)
    shape = np.broadcast(m, n, k, groups).shape
    return [np.stack([np.broadcast_to(x, shape) for x in xs]) for xs in (times, tiles, waves)]


def gemm_cost(m, n, k, hw: HardwareSpec, precision: Precision | str,
              out_precision: Precision | str | None = None,
              weight_precision: Precision | str | None = None, groups=1) -> GemmCost:
    """Cost of C[M,N] = A[M,K]·B[K,N] with A in `precision`, B in `weight_precision` (default: the
    same) and C in `out_precision` (default BF16). Dims broadcast; pass them after sharding.
    `groups` identical GEMMs in one launch (a grouped MoE GEMM) share one fixed overhead."""
    a_prec = get_precision(precision, "dtype") if isinstance(precision, str) else precision
    b_prec = _as_precision(weight_precision, a_prec, "weight_dtype")
    c_prec = _as_precision(out_precision, get_precision(DEFAULT_OUT_PRECISION), "out_dtype")
    m, n, k, groups = (np.asarray(x, dtype=np.float64) for x in (m, n, k, groups))
    peak = hw.peak_for(a_prec)
    flop = gemm_flop(m, n, k) * groups
    read = groups * (m * k * a_prec.activation_bytes_per_value + n * k * b_prec.weight_bytes_per_value)
    write = groups * m * n * c_prec.activation_bytes_per_value
    eff = get_efficiency(hw.name).for_rate(a_prec.tensor_core_rate)
    times, tiles, waves = _candidates(m, n, k, groups, flop, read + write, hw, peak, eff)
    best = np.argmin(times, axis=0)[None]
    time_s = np.take_along_axis(times, best, 0)[0] + eff.fixed_overhead_s
    math_time = flop / (peak * eff.compute_ceiling_frac)
    return GemmCost(
        flop=flop, read_bytes=read, write_bytes=write, math_s=flop / peak,
        read_s=read / hw.hbm_bytes_per_s, write_s=write / hw.hbm_bytes_per_s, time_s=time_s,
        tile_efficiency=np.take_along_axis(tiles, best, 0)[0],
        wave_efficiency=np.take_along_axis(waves, best, 0)[0],
        compute_bound=math_time >= (read + write) / (hw.hbm_bytes_per_s * eff.bandwidth_ceiling_frac),
    )


def _as_precision(value: Precision | str | None, default: Precision, field: str) -> Precision:
    if value is None:
        return default
    return get_precision(value, field) if isinstance(value, str) else value
