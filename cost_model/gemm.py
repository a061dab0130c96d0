"""GEMM time: roofline with explicit tile and wave quantization, plus the efficiency layer.

For C[M,N] = A[M,K] · B[K,N] (A = activations, B = weights), the seeds' formulas:
    FLOPs = 2MNK,  read = MK·b_A + NK·b_B,  write = MN·b_C,  I = FLOPs / (read + write).
The prediction picks, like a GEMM library, the fastest of the hardware's kernel geometries; a grid
smaller than one wave is split along K (a power of two, up to 16, keeping ≥ 256 per split) to
fill the GPU. For each it applies, on the dims as given (callers pass dims *after* sharding):
    η_tile = MN / (B_M⌈M/B_M⌉ · B_N⌈N/B_N⌉)                       (seeds, reading notes §3)
    η_wave = work units / (slots · ⌈units / slots⌉), in clusters    (seeds, reading notes §3)
    t = max(t_math / (ceil_c · rel · η_tile · η_wave · s_N · s_K), t_mem / ceil_bw) + t_fixed
with the small-dimension saturation s_N = N/(N + n_half), s_K = K_split/(K_split + k_half).
Everything broadcasts over numpy arrays of M, N and K.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache

import numpy as np

from cost_model.efficiency import GemmEfficiency, get_efficiency
from cost_model.hardware import GemmKernel, HardwareSpec
from cost_model.precision import Precision, get_precision
from cost_model.units import gemm_flop

MAX_SPLIT_K = 16  # split-K / stream-K partitions a library uses to fill the GPU on small grids
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
    def roofline_compute_bound(self) -> np.ndarray:
        """The seeds' classification at peak: math time ≥ read + write time."""
        return self.math_s >= self.read_s + self.write_s

    @property
    def intensity_flop_per_byte(self) -> np.ndarray:
        return self.flop / (self.read_bytes + self.write_bytes)

    @property
    def achieved_flop_per_s(self) -> np.ndarray:
        return self.flop / self.time_s


@cache
def _kernel_table(kernels: tuple[GemmKernel, ...], sm_count: int) -> dict[str, np.ndarray]:
    """Every kernel geometry as 1-D arrays, one entry each, with its concurrent cluster slots."""
    rows = [(kn.tile_m, kn.tile_n, kn.sms_per_tile, kn.cluster_tiles_m, kn.cluster_tiles_n,
             kn.relative_peak_frac) for kn in kernels]
    names = ("tile_m", "tile_n", "sms_per_tile", "cluster_m", "cluster_n", "relative")
    table = {name: np.array(col, dtype=np.float64) for name, col in zip(names, zip(*rows))}
    tiles_per_cluster = table["cluster_m"] * table["cluster_n"]
    table["slots"] = np.maximum(np.floor(sm_count / (table["sms_per_tile"] * tiles_per_cluster)),
                                1.0)
    return table


def _split_k(clusters, slots, k):
    """Largest power-of-two split ≤ 16 that neither overfills one wave nor cuts K below 256."""
    fill = np.maximum(slots / clusters, 1.0)
    depth = np.maximum(k / MIN_K_PER_SPLIT, 1.0)
    return np.minimum(2.0 ** np.floor(np.log2(np.minimum(fill, depth))), MAX_SPLIT_K)


def _quantization(t: dict[str, np.ndarray], m, n, k, groups):
    """(η_tile, η_wave, split) of every kernel (axis 0) for every GEMM (remaining axes)."""
    tiles_m, tiles_n = np.ceil(m / t["tile_m"]), np.ceil(n / t["tile_n"])
    clusters = np.ceil(tiles_m / t["cluster_m"]) * np.ceil(tiles_n / t["cluster_n"]) * groups
    split = _split_k(clusters, t["slots"], k)
    eta_tile = m * n / (t["tile_m"] * tiles_m * t["tile_n"] * tiles_n)
    work = tiles_m * tiles_n * split * groups
    waves = np.ceil(clusters * split / t["slots"])
    eta_wave = work / (waves * t["slots"] * t["cluster_m"] * t["cluster_n"])
    return eta_tile, eta_wave, split


def _saturation(dim, half_dim):
    """dim / (dim + half_dim): the small-dimension saturation of the efficiency layer."""
    return dim / (dim + half_dim)


@dataclass(frozen=True)
class GemmRates:
    """Everything a GEMM's time needs besides its shape: peak, efficiency coefficients and bytes
    per element of A, B and C. Fields are floats, or arrays that broadcast over many GEMMs
    (e.g. quantized and BF16 GEMMs of one forward evaluated together)."""

    peak_flop_per_s: float | np.ndarray
    compute_ceiling_frac: float | np.ndarray
    bandwidth_ceiling_frac: float | np.ndarray
    n_half_dim: float | np.ndarray
    k_half_dim: float | np.ndarray
    fixed_overhead_s: float | np.ndarray
    a_bytes_per_value: float | np.ndarray
    b_bytes_per_value: float | np.ndarray
    c_bytes_per_value: float | np.ndarray

    @classmethod
    def of(cls, hw: HardwareSpec, a_prec: Precision, b_prec: Precision | None = None,
           c_prec: Precision | None = None) -> GemmRates:
        eff: GemmEfficiency = get_efficiency(hw.name).for_rate(a_prec.tensor_core_rate)
        return cls(
            peak_flop_per_s=hw.peak_for(a_prec), compute_ceiling_frac=eff.compute_ceiling_frac,
            bandwidth_ceiling_frac=eff.bandwidth_ceiling_frac, n_half_dim=eff.n_half_dim,
            k_half_dim=eff.k_half_dim, fixed_overhead_s=eff.fixed_overhead_s,
            a_bytes_per_value=a_prec.activation_bytes_per_value,
            b_bytes_per_value=(b_prec or a_prec).weight_bytes_per_value,
            c_bytes_per_value=(c_prec or get_precision(DEFAULT_OUT_PRECISION))
            .activation_bytes_per_value,
        )

    @classmethod
    def select(cls, mask, if_true: GemmRates, if_false: GemmRates) -> GemmRates:
        """Field-wise np.where(mask, if_true, if_false)."""
        return cls(**{f.name: np.where(mask, getattr(if_true, f.name), getattr(if_false, f.name))
                      for f in fields(cls)})


def _traffic(m, n, k, groups, r: GemmRates):
    """(FLOPs, read bytes, write bytes): the seeds' formulas, times the group count."""
    flop = gemm_flop(m, n, k) * groups
    read = groups * (m * k * r.a_bytes_per_value + n * k * r.b_bytes_per_value)
    return flop, read, groups * m * n * r.c_bytes_per_value


def _candidates(m, n, k, groups, flop, stream_bytes, hw: HardwareSpec, r: GemmRates):
    """Predicted time, η_tile, η_wave and whether math sets the time, for every kernel candidate
    (stacked on axis 0)."""
    table = _kernel_table(hw.gemm_kernels, hw.sm_count)
    extra = (1,) * np.ndim(flop)
    t = {name: col.reshape(col.shape + extra) for name, col in table.items()}
    eta_tile, eta_wave, split = _quantization(t, m, n, k, groups)
    rate = r.peak_flop_per_s * r.compute_ceiling_frac * t["relative"] \
        * _saturation(n, r.n_half_dim) * _saturation(k / split, r.k_half_dim)
    split_extra = split > 1
    partial_bytes = split_extra * 2.0 * split * groups * m * n * PARTIAL_SUM_BYTES
    math = flop / (rate * eta_tile * eta_wave)
    memory = (stream_bytes + partial_bytes) / (hw.hbm_bytes_per_s * r.bandwidth_ceiling_frac)
    time = np.maximum(math, memory) + split_extra * hw.kernel_launch_s
    shape = time.shape
    return time, np.broadcast_to(eta_tile, shape), np.broadcast_to(eta_wave, shape), math >= memory


def gemm_time_s(m, n, k, groups, hw: HardwareSpec, rates: GemmRates):
    """Predicted time only (the hot path of step times): `gemm_cost(...).time_s` for float
    arrays and precomputed `GemmRates`."""
    flop, read, write = _traffic(m, n, k, groups, rates)
    times = _candidates(m, n, k, groups, flop, read + write, hw, rates)[0]
    return times.min(axis=0) + rates.fixed_overhead_s


def gemm_cost(m, n, k, hw: HardwareSpec, precision: Precision | str,
              out_precision: Precision | str | None = None,
              weight_precision: Precision | str | None = None, groups=1) -> GemmCost:
    """Cost of C[M,N] = A[M,K]·B[K,N] with A in `precision`, B in `weight_precision` (default: the
    same) and C in `out_precision` (default BF16). Dims broadcast; pass them after sharding.
    `groups` identical GEMMs in one launch (a grouped MoE GEMM) share one fixed overhead."""
    a_prec = get_precision(precision, "dtype") if isinstance(precision, str) else precision
    rates = GemmRates.of(hw, a_prec, _as_precision(weight_precision, a_prec, "weight_dtype"),
                         _as_precision(out_precision, get_precision(DEFAULT_OUT_PRECISION),
                                       "out_dtype"))
    m, n, k, groups = (np.asarray(x, dtype=np.float64) for x in (m, n, k, groups))
    flop, read, write = _traffic(m, n, k, groups, rates)
    times, tiles, waves, math_bound = _candidates(m, n, k, groups, flop, read + write, hw, rates)
    best = np.argmin(times, axis=0)[None]
    pick = lambda x: np.take_along_axis(np.broadcast_to(x, times.shape), best, 0)[0]  # noqa: E731
    peak = rates.peak_flop_per_s
    return GemmCost(
        flop=flop, read_bytes=read, write_bytes=write, math_s=flop / peak,
        read_s=read / hw.hbm_bytes_per_s, write_s=write / hw.hbm_bytes_per_s,
        time_s=pick(times) + rates.fixed_overhead_s, tile_efficiency=pick(tiles),
        wave_efficiency=pick(waves), compute_bound=pick(math_bound),
    )


def _as_precision(value: Precision | str | None, default: Precision, field: str) -> Precision:
    if value is None:
        return default
    return get_precision(value, field) if isinstance(value, str) else value
