"""GEMM time: roofline with explicit tile and wave quantization, plus the efficiency layer.

For C[M,N] = A[M,K] · B[K,N] (A = activations, B = weights), the formulas of NVIDIA, AI Model
Co-Design (2026), "Role of arithmetic intensity"
(https://developer.nvidia.com/blog/ai-model-co-design-hardware-friendly-llm-design/):
    FLOPs = 2MNK,  read = MK·b_A + NK·b_B,  write = MN·b_C,  I = FLOPs / (read + write).
The prediction picks, like a GEMM library, the fastest kernel candidate: each of the hardware's
kernel geometries run whole or split along K into s ∈ SPLIT_K_FACTORS partitions (a fixed set).
A split needs ≥ 256 of K per partition; on a shorter K it runs as if K were padded to s·256, so
every candidate is a non-decreasing function of M, N and K and so is their minimum ("a kernel
may always pad a smaller problem, so a larger one is never predicted faster"), exactly: every
operation below is monotone under rounding too (no differences), in float64 and float32.
For a candidate, on the dims as given (callers pass dims *after* sharding), with K_s = K/s:
    η_tile = MN / (B_M⌈M/B_M⌉ · B_N⌈N/B_N⌉)        (tile quantization: the post's Figure 5)
    waves  = ⌈s · clusters / slots⌉;  η_wave = s · tiles / (waves · slot tiles)
    t_math = waves · slot tiles · B_M·B_N · 2(K_s + k_half) / (peak · ceil_c · rel · s_N)
    t_mem  = max(bytes / min(HBM · ceil_bw, SMs · B_SM),     (grouped: ceil_bw ≥ BF16's)
                 K_s · max(m_t·b_A, n_t·b_B) / (SMs per tile · B_SM))
    t = max(t_math, t_mem) + (1 − overlap)·min(t_math, t_mem) + [s > 1] t_split + t_fixed
t_math is the time of the waves of full tiles (padded work), with the K loop lengthened by k_half
(pipeline fill and drain of each tile: the K/(K + k_half) saturation of the post's Figure 4) and a
tile's rate scaled by s_N = B_N/(B_N + n_half) (a thin tile feeds its tensor cores less well). t_mem
is the longer of streaming the unique bytes (split partial sums included) from HBM and one tile
streaming its K loop at what its SMs can pull (B_SM, by Little's law their loads in flight over
memory latency): m_t = min(M, B_M), n_t = min(N, B_N) are the rows and columns a tile loads, and its
larger operand sets the pace (the other rides in the same stages). That caps grids too few to busy
every SM — every tile streams its own operands whatever the number of tiles, so more tiles never
make a GEMM faster. (Measured: TensorRT-LLM's NVFP4 GEMM on B200 at M ≤ 128 takes ~1.9 ns per K
element whatever N up to 4,096 and M up to 128, e.g. 37.5 µs at K = 16,384 for M = 16 … 128:
aiconfigurator-core 0.12.0 b200_sxm gemm/trtllm/1.3.0rc20.) `overlap` is the share of the shorter
phase hidden under the longer (1 is the roofline max, 0 no overlap at all). The coefficients are per
GPU and format, fitted to measured kernels (`cost_model.efficiency`).

Quantized activations (FP8, NVFP4) are written by some kernel; when they arrive in BF16 a
quantization kernel reads them and writes the quantized copy (and its scales):
    t_quant = t_q,fixed + M·t_row + M·K·(b_BF16 + b_A) / (HBM · quant_bw)
              + [M > SMALL_M_ROWS]·t_large_m + [M mod M_ALIGN ≠ 0]·(t_unaligned_m + f_m·t)
              + [N mod N_ALIGN ≠ 0 or K mod K_ALIGN ≠ 0]·t_unaligned_nk
t_row is what each activation row (token) adds beyond its bytes: the per-token quantization kernels
run one thread block per row, so a row costs a block's fixed work over the blocks in flight
(vLLM 0.24.0's FP8 op at N = K = 128 on H200: 4.6 µs at M = 1, 240 µs at M = 32,768, ~7.3 ns a
row, its bytes 0.1 ns). The steps are the shape dispatch of an engine's op, seen in its tables'
kernel_source column (aiconfigurator-core 0.12.0 h200_sxm, b200_sxm gemm/vllm/0.24.0): vLLM's
block FP8 runs FlashInfer's kernel up to 16 rows and DeepGEMM above on Hopper (floor 59 -> 84 µs
on H200); it copies the per-token scales into a TMA-aligned (16-byte, 4 FP32) layout when M is not
a multiple of 4 (+8 µs on H200, +60 µs on B200); it falls back to a CUTLASS kernel when N is not a
multiple of 64 or K of 128, its scale block (floor 177 µs on H200). The CUTLASS FP8 kernel of vLLM
and SGLang on Hopper runs a share f_m slower at an unaligned M: t(M = 4,097)/t(4,096) has median
1.23 over the large shapes on H200 (TensorRT-LLM's 1.00). Each is 0 where a table does not show
it. The kernel model above stays the aligned (padded) kernel, monotone in M: serving steps pay
the kernel alone and price it so (decode batches run at CUDA-graph sizes, multiples of 8).
It is reported apart (`quantize_s`) because serving engines fuse it into the kernel before the GEMM;
measured GEMM tables that quantize inside the timed op compare to `op_s = time_s + quantize_s`.
Everything broadcasts over numpy arrays of M, N and K.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cache

import numpy as np

from cost_model.efficiency import Efficiency, GemmEfficiency, get_efficiency
from cost_model.hardware import GemmKernel, HardwareSpec
from cost_model.precision import Precision, get_precision
from cost_model.units import gemm_flop

# split-K / stream-K partitions a library uses to fill the GPU on small grids (CUTLASS split-K
# and cuBLAS pick powers of two); fixed, so that which split is best never depends on K
SPLIT_K_FACTORS = (1, 2, 4, 8, 16)
MIN_K_PER_SPLIT = 256  # a split must keep several K-steps of 64-128 to pipeline (CUTLASS split-K)
PARTIAL_SUM_BYTES = 4.0  # split-K partial sums are FP32, written and read back once each
PARTIAL_SUM_PASSES = 2.0
# Step times (every GEMM of every candidate of a search) compute in float32: their array
# operations on (kernel candidates × GEMMs × cases × candidates × concurrencies) run ~1.6× faster
# than in float64, and 24 mantissa bits hold every dimension below 16.7M exactly and times to
# 1e-7 relative, far below the model's error. `gemm_cost` (reports) and calibration stay float64.
HOT_DTYPE = np.float32
DEFAULT_OUT_PRECISION = "bf16"  # serving epilogues write BF16 activations unless fused quantization
QUANTIZE_FROM_PRECISION = "bf16"  # activations reach a quantization kernel in BF16
WEIGHT_ONLY_ACTIVATIONS = "bf16"  # what w4a16 / w8a16 compute in (their "a16")
BOUNDS = ("compute", "memory", "overhead")  # what sets a kernel's time (`GemmCost.bound`)
SMALL_M_ROWS = 16  # quantized ops' dispatch steps (module docstring: t_large_m, t_unaligned_*)
M_ALIGN_ROWS = 4  # 16-byte TMA alignment of per-token FP32 scales
N_ALIGN_DIM, K_ALIGN_DIM = 64, 128  # block-scaled kernels' tile width and scale block


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
    """Cost of GEMMs (arrays broadcast from the inputs). `*_s` at peak are the post's roofline
    terms; `time_s` is the predicted kernel time with tile/wave quantization and the efficiency
    layer; `quantize_s` the activation-quantization kernel before it, when there is one."""

    flop: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    math_s: np.ndarray
    read_s: np.ndarray
    write_s: np.ndarray
    time_s: np.ndarray
    tile_efficiency: np.ndarray
    wave_efficiency: np.ndarray
    compute_bound: np.ndarray  # bool: the kernel's math outlasts its memory traffic
    overhead_bound: np.ndarray  # bool: its fixed (and split-K) overhead outlasts both
    quantize_s: np.ndarray  # quantizing BF16 activations for this GEMM (0 if A is not quantized)

    @property
    def op_s(self) -> np.ndarray:
        """Kernel plus activation quantization: what a measured quantized GEMM op includes."""
        return self.time_s + self.quantize_s

    @property
    def bound(self) -> np.ndarray:
        """"overhead" where the fixed overhead sets the kernel's time, else "compute" or
        "memory" by which of its math and memory time is longer."""
        return np.where(self.overhead_bound, "overhead",
                        np.where(self.compute_bound, "compute", "memory"))

    @property
    def roofline_compute_bound(self) -> np.ndarray:
        """The post's classification at peak: math time ≥ read + write time."""
        return self.math_s >= self.read_s + self.write_s

    @property
    def intensity_flop_per_byte(self) -> np.ndarray:
        return self.flop / (self.read_bytes + self.write_bytes)

    @property
    def achieved_flop_per_s(self) -> np.ndarray:
        return self.flop / self.time_s


@cache
def _kernel_table(kernels: tuple[GemmKernel, ...], sm_count: int,
                  dtype: type = np.float64) -> dict[str, np.ndarray]:
    """The kernel candidates as arrays on two axes, geometry × split (axis 0: one entry per
    geometry: tile, SMs per tile, cluster shape, relative ceiling, concurrent cluster slots and
    the tiles they hold; axis 1: one entry per split of SPLIT_K_FACTORS and the K it needs)."""
    rows = [(kn.tile_m, kn.tile_n, kn.sms_per_tile, kn.cluster_tiles_m, kn.cluster_tiles_n,
             kn.relative_peak_frac) for kn in kernels]
    names = ("tile_m", "tile_n", "sms_per_tile", "cluster_m", "cluster_n", "relative")
    table = {name: np.array(col, dtype=np.float64)[:, None] for name, col in zip(names, zip(*rows))}
    tiles_per_cluster = table["cluster_m"] * table["cluster_n"]
    table["slots"] = np.maximum(np.floor(sm_count / (table["sms_per_tile"] * tiles_per_cluster)),
                                1.0)
    table["slot_tiles"] = table["slots"] * tiles_per_cluster
    table["tile_area"] = table["tile_m"] * table["tile_n"]
    split = np.array(SPLIT_K_FACTORS, dtype=np.float64)[None, :]
    table["split"] = split
    table["min_k"] = np.where(split > 1, split * MIN_K_PER_SPLIT, 0.0)  # K a split pads to
    table["splits"] = (split > 1).astype(np.float64)  # 1: pays the split-K overhead
    table["partial_bytes"] = table["splits"] * split * (PARTIAL_SUM_PASSES * PARTIAL_SUM_BYTES)
    table["waves_per_cluster"] = split / table["slots"]
    return {name: col.astype(dtype) for name, col in table.items()}


def _saturation(dim, half_dim):
    """dim / (dim + half_dim): the small-dimension saturation of the efficiency layer."""
    return dim / (dim + half_dim)


def overlapped(math_s, memory_s, overlap_frac):
    """Math and memory time of one kernel when `overlap_frac` of the shorter runs hidden under
    the longer: 1 is the post's roofline max(math, memory), 0 their sum."""
    return np.maximum(math_s, memory_s) + (1.0 - overlap_frac) * np.minimum(math_s, memory_s)


@dataclass(frozen=True)
class GemmRates:
    """Everything a GEMM's time needs besides its shape: peak, efficiency coefficients and bytes
    per element of A, B and C. Fields are floats, or arrays that broadcast over many GEMMs
    (e.g. quantized and BF16 GEMMs of one forward evaluated together)."""

    peak_flop_per_s: float | np.ndarray
    compute_ceiling_frac: float | np.ndarray
    bandwidth_ceiling_frac: float | np.ndarray
    grouped_bandwidth_ceiling_frac: float | np.ndarray  # HBM ceiling of grouped GEMMs
    n_half_dim: float | np.ndarray
    k_half_dim: float | np.ndarray
    fixed_overhead_s: float | np.ndarray
    overlap_frac: float | np.ndarray
    split_k_overhead_s: float | np.ndarray
    sm_bandwidth_bytes_per_s: float | np.ndarray
    quantize_fixed_s: float | np.ndarray
    quantize_bandwidth_frac: float | np.ndarray
    quantize_per_row_s: float | np.ndarray
    quantize_large_m_s: float | np.ndarray
    quantize_unaligned_m_s: float | np.ndarray
    quantize_unaligned_m_frac: float | np.ndarray
    quantize_unaligned_nk_s: float | np.ndarray
    quantize_bytes_per_value: float | np.ndarray  # BF16 read + quantized write; 0: not quantized
    a_bytes_per_value: float | np.ndarray
    b_bytes_per_value: float | np.ndarray
    c_bytes_per_value: float | np.ndarray

    @classmethod
    def of(cls, hw: HardwareSpec, a_prec: Precision, b_prec: Precision | None = None,
           c_prec: Precision | None = None, eff: GemmEfficiency | None = None,
           efficiency: Efficiency | None = None) -> GemmRates:
        """The rates of `hw` for A in `a_prec`, with the coefficients of that format in
        `efficiency` (default: the GPU's generic kernels) unless `eff` is given (calibration
        passes trial coefficients)."""
        efficiency = efficiency or get_efficiency(hw.name)
        eff = eff or efficiency.for_precision(a_prec)
        source = get_precision(QUANTIZE_FROM_PRECISION).activation_bytes_per_value
        quantized = a_prec.activation_bytes_per_value < source
        return cls(
            peak_flop_per_s=hw.peak_for(a_prec), compute_ceiling_frac=eff.compute_ceiling_frac,
            bandwidth_ceiling_frac=eff.bandwidth_ceiling_frac,
            grouped_bandwidth_ceiling_frac=max(efficiency.grouped_bandwidth_ceiling_frac,
                                               eff.bandwidth_ceiling_frac),
            n_half_dim=eff.n_half_dim,
            k_half_dim=eff.k_half_dim, fixed_overhead_s=eff.fixed_overhead_s,
            overlap_frac=eff.overlap_frac, split_k_overhead_s=eff.split_k_overhead_s,
            sm_bandwidth_bytes_per_s=eff.sm_bandwidth_bytes_per_s,
            quantize_fixed_s=eff.quantize_fixed_s,
            quantize_bandwidth_frac=eff.quantize_bandwidth_frac,
            quantize_per_row_s=eff.quantize_per_row_s, quantize_large_m_s=eff.quantize_large_m_s,
            quantize_unaligned_m_s=eff.quantize_unaligned_m_s,
            quantize_unaligned_m_frac=eff.quantize_unaligned_m_frac,
            quantize_unaligned_nk_s=eff.quantize_unaligned_nk_s,
            quantize_bytes_per_value=(source + a_prec.activation_bytes_per_value) * quantized,
            a_bytes_per_value=a_prec.activation_bytes_per_value,
            b_bytes_per_value=(b_prec or a_prec).weight_bytes_per_value,
            c_bytes_per_value=(c_prec or get_precision(DEFAULT_OUT_PRECISION))
            .activation_bytes_per_value,
        )

    @classmethod
    def for_experts(cls, hw: HardwareSpec, experts: Precision, efficiency: Efficiency,
                    eff: GemmEfficiency | None = None) -> GemmRates:
        """The grouped expert GEMMs of a fused MoE in `experts`' format: its dense kernel model
        with the fused kernel's ceilings (`Efficiency.expert_gemm`, or `eff`), weight-only
        formats on BF16 activations; one HBM ceiling whatever the group count (the fused
        kernel's, fitted on grouped launches)."""
        eff = eff or efficiency.expert_gemm(experts)
        a_prec = get_precision(WEIGHT_ONLY_ACTIVATIONS) if experts.weight_only else experts
        rates = cls.of(hw, a_prec, experts, None, eff, efficiency)
        return replace(rates, grouped_bandwidth_ceiling_frac=eff.bandwidth_ceiling_frac)

    def astype(self, dtype: type) -> GemmRates:
        """The same rates with array fields in `dtype` (floats stay Python floats, which numpy
        treats as weakly typed, so they never widen a float32 computation)."""
        if all(isinstance(v, float) for v in self.__dict__.values()):
            return self
        return GemmRates(**{name: v.astype(dtype, copy=False) if isinstance(v, np.ndarray) else v
                            for name, v in self.__dict__.items()})

    @classmethod
    def select(cls, mask, if_true: GemmRates, if_false: GemmRates) -> GemmRates:
        """Field-wise np.where(mask, if_true, if_false)."""
        return cls(**{f.name: np.where(mask, getattr(if_true, f.name), getattr(if_false, f.name))
                      for f in fields(cls)})


def _traffic(m, n, k, groups, r: GemmRates):
    """(FLOPs, read bytes, write bytes): the post's formulas, times the group count."""
    return (gemm_flop(m, n, k) * groups, *_bytes(m, n, k, groups, r))


def _bytes(m, n, k, groups, r: GemmRates):
    """(read bytes, write bytes) of A, B and C, times the group count."""
    read = groups * (m * k * r.a_bytes_per_value + n * k * r.b_bytes_per_value)
    return read, groups * m * n * r.c_bytes_per_value


def _candidates(m, n, k, groups, hw: HardwareSpec, r: GemmRates, detail: bool = False):
    """Predicted kernel time (without the fixed overhead) of every kernel candidate (axes 0 and
    1: geometry × split); with `detail`, also its math, memory and split-overhead times, η_tile
    and η_wave. Each is non-decreasing in M, N and K (module docstring). Terms that depend on
    the geometry alone or the split alone are computed on that axis only: this is the hot path.
    Computes in the dtype of `m`."""
    m = np.asarray(m)
    table = _kernel_table(hw.gemm_kernels, hw.sm_count, m.dtype.type)
    extra = (1,) * max(np.ndim(r.peak_flop_per_s), np.ndim(m), np.ndim(n), np.ndim(k),
                       np.ndim(groups))
    t = {name: col.reshape(col.shape + extra) for name, col in table.items()}
    tiles_m, tiles_n = np.ceil(m / t["tile_m"]), np.ceil(n / t["tile_n"])  # geometry axis
    clusters = np.ceil(tiles_m / t["cluster_m"]) * np.ceil(tiles_n / t["cluster_n"]) * groups
    waves = clusters * t["waves_per_cluster"]
    np.ceil(waves, out=waves)
    k_padded = np.maximum(k, t["min_k"])  # split axis: a split's K, padded to ≥ 256 per split
    k_split = k_padded / t["split"]
    math = _into(np.multiply, _wave_s_per_k(t, r) * (k_split + r.k_half_dim), waves)
    unique = groups * (k_padded * (m * r.a_bytes_per_value + n * r.b_bytes_per_value)
                       + m * n * (r.c_bytes_per_value + t["partial_bytes"]))
    stream = _tile_stream_s_per_k(m, n, t, r)
    reuse = not detail and waves.shape == np.broadcast_shapes(np.shape(k_split), stream.shape)
    stream = np.multiply(k_split, stream, out=waves if reuse else None)  # hot path: no allocation
    memory = _into(np.maximum, stream, unique / _hbm_bytes_per_s(hw, r, groups))
    split_s = t["splits"] * r.split_k_overhead_s
    if not detail:  # the same as below, in place: the hot path's largest arrays
        shorter = _into(np.multiply, np.minimum(math, memory), 1.0 - r.overlap_frac)
        return _into(np.add, _into(np.add, _into(np.maximum, math, memory), shorter), split_s)
    time = overlapped(math, memory, r.overlap_frac) + split_s
    eta_tile = np.multiply(m, n, dtype=np.float64) / (tiles_m * tiles_n * t["tile_area"])
    eta_wave = tiles_m * tiles_n * groups * t["split"] / (waves * t["slot_tiles"])
    return time, math, memory, split_s, eta_tile, eta_wave


def _into(ufunc, a: np.ndarray, b):
    """ufunc(a, b), written into a's buffer when a already has the result's shape (a is a
    temporary: the hot path saves allocating its largest arrays)."""
    if a.shape == np.broadcast_shapes(a.shape, np.shape(b)):
        return ufunc(a, b, out=a)
    return ufunc(a, b)


def _wave_s_per_k(t: dict, r: GemmRates):
    """Time of one wave of full tiles per unit of K loop: slot tiles · B_M·B_N · 2 FLOP at the
    tile's rate, peak · ceil_c · rel · s_N with s_N = B_N / (B_N + n_half)."""
    rate = r.peak_flop_per_s * r.compute_ceiling_frac * t["relative"] \
        * _saturation(t["tile_n"], r.n_half_dim)
    return 2.0 * t["slot_tiles"] * t["tile_area"] / rate


def _hbm_bytes_per_s(hw: HardwareSpec, r: GemmRates, groups=1.0):
    """What a full grid streams: HBM at its ceiling, or every SM at B_SM if that is less. A
    grouped launch (groups > 1: MoE experts) streams at least at the GPU's BF16 ceiling
    (`Efficiency.grouped_bandwidth_ceiling_frac`): its many groups keep every SM busy."""
    ceiling = np.where(np.asarray(groups) > 1.0, r.grouped_bandwidth_ceiling_frac,
                       r.bandwidth_ceiling_frac)
    return np.minimum(hw.hbm_bytes_per_s * ceiling, hw.sm_count * r.sm_bandwidth_bytes_per_s)


def _tile_stream_s_per_k(m, n, t: dict, r: GemmRates):
    """Time per unit of K loop of one tile streaming its operands at what its SMs pull:
    max(m_t·b_A, n_t·b_B) / (SMs per tile · B_SM), m_t = min(M, B_M), n_t = min(N, B_N)."""
    a_row = np.minimum(m, t["tile_m"]) * r.a_bytes_per_value
    b_col = np.minimum(n, t["tile_n"]) * r.b_bytes_per_value
    return np.maximum(a_row, b_col) / (t["sms_per_tile"] * r.sm_bandwidth_bytes_per_s)


def gemm_time_s(m, n, k, groups, hw: HardwareSpec, rates: GemmRates, dtype: type = np.float64):
    """Predicted GEMM kernel time only (the hot path of step times): `gemm_cost(...).time_s` for
    float arrays and precomputed `GemmRates`, computed in `dtype` (step times pass HOT_DTYPE;
    calibration keeps float64, whose finite-difference Jacobians need the digits)."""
    m, n, k, groups = (np.asarray(x, dtype=dtype) for x in (m, n, k, groups))
    rates = rates.astype(dtype)
    return _candidates(m, n, k, groups, hw, rates).min(axis=(0, 1)) + rates.fixed_overhead_s


def quantize_time_s(m, n, k, groups, hw: HardwareSpec, rates: GemmRates, kernel_s=0.0):
    """Time the op spends beside the GEMM kernel quantizing BF16 activations A[M,K] (0 when A is
    not quantized): fixed and per-row costs, reading BF16 and writing the quantized values and
    scales, and the engine's shape-dispatch steps (module docstring), `kernel_s` the GEMM
    kernel's time (its unaligned-M share)."""
    m, n, k = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    bytes_moved = groups * m * k * rates.quantize_bytes_per_value
    stream_s = bytes_moved / (hw.hbm_bytes_per_s * rates.quantize_bandwidth_frac)
    steps_s = (rates.quantize_large_m_s * (m > SMALL_M_ROWS)
               + (rates.quantize_unaligned_m_s + rates.quantize_unaligned_m_frac * kernel_s)
               * (m % M_ALIGN_ROWS != 0)
               + rates.quantize_unaligned_nk_s * ((n % N_ALIGN_DIM != 0) | (k % K_ALIGN_DIM != 0)))
    op_s = rates.quantize_fixed_s + groups * m * rates.quantize_per_row_s + stream_s + steps_s
    return np.where(rates.quantize_bytes_per_value > 0, op_s, 0.0)


def gemm_cost(m, n, k, hw: HardwareSpec, precision: Precision | str,
              out_precision: Precision | str | None = None,
              weight_precision: Precision | str | None = None, groups=1,
              efficiency: GemmEfficiency | None = None, engine: str | None = None) -> GemmCost:
    """Cost of C[M,N] = A[M,K]·B[K,N] with A in `precision`, B in `weight_precision` (default: the
    same) and C in `out_precision` (default BF16). Dims broadcast; pass them after sharding.
    `groups` identical GEMMs in one launch (a grouped MoE GEMM) share one fixed overhead.
    `engine`: whose measured kernels (None: the generic ones, `cost_model.efficiency`);
    `efficiency`: coefficients to use instead of the shipped ones of this GPU and format."""
    a_prec = get_precision(precision, "dtype") if isinstance(precision, str) else precision
    rates = GemmRates.of(hw, a_prec, _as_precision(weight_precision, a_prec, "weight_dtype"),
                         _as_precision(out_precision, get_precision(DEFAULT_OUT_PRECISION),
                                       "out_dtype"), efficiency, get_efficiency(hw.name, engine))
    m, n, k, groups = (np.asarray(x, dtype=np.float64) for x in (m, n, k, groups))
    flop, read, write = _traffic(m, n, k, groups, rates)
    found = np.broadcast_arrays(*_candidates(m, n, k, groups, hw, rates, detail=True))
    time, math, memory, split_s, eta_tile, eta_wave = (
        x.reshape((-1,) + x.shape[2:]) for x in found)
    best = np.argmin(time, axis=0)[None]

    def pick(x):
        return np.take_along_axis(x, best, 0)[0]

    math, memory = pick(math), pick(memory)
    overhead = pick(split_s) + rates.fixed_overhead_s
    peak, time_s = rates.peak_flop_per_s, pick(time) + rates.fixed_overhead_s
    return GemmCost(
        flop=flop, read_bytes=read, write_bytes=write, math_s=flop / peak,
        read_s=read / hw.hbm_bytes_per_s, write_s=write / hw.hbm_bytes_per_s,
        time_s=time_s, tile_efficiency=pick(eta_tile),
        wave_efficiency=pick(eta_wave), compute_bound=math >= memory,
        overhead_bound=overhead >= np.maximum(math, memory),
        quantize_s=np.broadcast_to(quantize_time_s(m, n, k, groups, hw, rates, time_s),
                                   flop.shape),
    )


def _as_precision(value: Precision | str | None, default: Precision, field: str) -> Precision:
    if value is None:
        return default
    return get_precision(value, field) if isinstance(value, str) else value
