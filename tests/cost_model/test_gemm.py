"""GEMM model against the worked numbers of NVIDIA, AI Model Co-Design (2026)
(https://developer.nvidia.com/blog/ai-model-co-design-hardware-friendly-llm-design/), numbers
derived from its formulas, and the behaviour of its Figures 4 and 5."""

import numpy as np
import pytest

from cost_model.gemm import (
    gemm_cost,
    intensity_cap_flop_per_byte,
    tile_efficiency,
    wave_efficiency,
)
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import get_precision
from cost_model.units import US_PER_S

GB300 = get_hardware("gb300")

# NVIDIA, AI Model Co-Design (2026), Table 2: FFN-2 (N = 8192, K = 512) on GB300, 15 PFLOP/s FP4,
# 8 TB/s; FP4 inputs, FP8 output. Columns: M, math µs, FP4 read µs, FP8 write µs. The table rounds
# to 2-3 digits.
TABLE_2 = [(256, 0.14, 0.30, 0.26), (2048, 1.15, 0.37, 2.10), (16384, 9.16, 0.89, 16.8)]


@pytest.mark.parametrize("m, math_us, read_us, write_us", TABLE_2, ids=lambda v: str(v))
def test_table_2_roofline_terms(m, math_us, read_us, write_us):
    cost = gemm_cost(m, 8192, 512, GB300, "nvfp4", out_precision="fp8")
    assert GB300.peak_flop_per_s["fp4"] == 15e15 and GB300.hbm_bytes_per_s == 8e12
    # tolerance: the table's rounding (last printed digit)
    assert cost.math_s * US_PER_S == pytest.approx(math_us, abs=0.006)
    assert cost.read_s * US_PER_S == pytest.approx(read_us, abs=0.006)
    assert cost.write_s * US_PER_S == pytest.approx(write_us, rel=0.01)


@pytest.mark.parametrize("m", [2048, 16384])
def test_table_2_memory_time_exceeds_math(m):
    """The co-design post, Table 2 caption: memory time exceeds math time at every token count."""
    cost = gemm_cost(m, 8192, 512, GB300, "nvfp4", out_precision="fp8")
    assert cost.read_s + cost.write_s > cost.math_s


def test_nvfp4_is_4_5_bits_and_mxfp4_4_25():
    """NVFP4: one E4M3 scale per 16 values (the co-design post, "Quantization as a performance
    lever"): 4 + 8/16 = 4.5 bits/value; MXFP4 (OCP MX v1.0, E8M0 per 32) 4.25 bits/value."""
    assert get_precision("nvfp4").bits_per_value == 4.5
    assert get_precision("mxfp4").bits_per_value == 4.25


@pytest.mark.parametrize("h_ffn, expected", [(512, 1930), (2048, 6500)])
def test_intensity_cap(h_ffn, expected):
    """From the co-design post's FLOP and byte counts: I∞ = (2/b)·NK/(N+K) ≈ 1,930 FLOP/byte for
    H′ = 512, H = 8192 at b = 0.5 (NVFP4), and roughly 6,500 for H′ = 2048 (rounded; tolerance
    1%)."""
    assert intensity_cap_flop_per_byte(8192, h_ffn, 0.5) == pytest.approx(expected, rel=0.01)


def test_ridge_point_gb300_fp4():
    """Table 2 caption's GB300 (15 PFLOP/s FP4, 8 TB/s): I* = 15e15 / 8e12 ≈ 1,900 FLOP/byte
    (exactly 1,875)."""
    assert GB300.ridge_flop_per_byte(get_precision("nvfp4")) == pytest.approx(1875)


def test_tile_efficiency_641():
    """Tile quantization (NVIDIA's Matrix Multiplication Background User's Guide): N = 640 with
    B_N = 128 gives η = 1; N = 641 gives 641/768 ≈ 0.83."""
    assert tile_efficiency(128, 640, 128, 128) == 1.0
    assert tile_efficiency(128, 641, 128, 128) == pytest.approx(641 / 768)


def test_wave_efficiency_150_tiles_on_148_sms():
    """Wave quantization (NVIDIA's Matrix Multiplication Background User's Guide): P = 148, T = 150:
    two waves for the work of one plus two tiles, η ≈ 0.51."""
    assert wave_efficiency(150, 148) == pytest.approx(150 / 296)
    assert round(float(wave_efficiency(150, 148)), 2) == 0.51


def test_gemm_flops_convention():
    cost = gemm_cost(3, 5, 7, GB300, "bf16")
    assert cost.flop == 2 * 3 * 5 * 7


def _tflops(m, n, k, hw=GB300, dtype="nvfp4"):
    return gemm_cost(m, n, k, hw, dtype).achieved_flop_per_s / 1e12


def test_figure_4_k_saturation():
    """The co-design post, Figure 4 (left), GB300 NVFP4, M = 8192, N = 9728: throughput falls
    sharply at small K, saturates near K ≈ 6144; 80% of sustained needs K > 3072."""
    k = np.array([256, 512, 1024, 3072, 6144, 16384])
    t = _tflops(8192, 9728, k)
    assert np.all(np.diff(t) > 0)
    assert t[0] < 0.5 * t[-1]
    assert t[3] >= 0.8 * t[-1]
    assert t[4] >= 0.9 * t[-1]


def test_figure_4_n_saturation():
    """The co-design post, Figure 4 (right), M = 8192, K = 8448: saturates near N ≈ 6144; 80% needs
    N > 2560."""
    n = np.array([256, 512, 2560, 6144, 16384])
    t = _tflops(8192, n, 8448)
    assert t[0] < 0.5 * t[-1]
    assert t[2] >= 0.75 * t[-1]
    assert t[3] >= 0.9 * t[-1]


def test_figure_5_sawtooth_peaks_at_256_and_512_multiples():
    """The co-design post, Figure 5: sweeping N in fine steps, throughput has its local maxima at
    multiples of 256 (clusterMMA) or 512 (CGA) and dips in between (tile quantization). Wave
    quantization may hide a 256 peak, never a 512 one."""
    n = np.arange(4096, 6145, 16)
    t = _tflops(16384, n, 8192)
    interior = np.arange(1, len(n) - 1)
    peaks = n[interior][(t[interior] > t[interior - 1]) & (t[interior] > t[interior + 1])]
    assert len(peaks) >= 4
    assert np.all(peaks % 256 == 0)
    assert set(range(4608, 6144, 512)) <= set(peaks.tolist())
    assert t[n == 4096 + 16][0] < 0.97 * t[n == 4096][0]


@pytest.mark.parametrize("name", catalog_names())
def test_decode_gemm_is_memory_bound_and_near_bandwidth(name):
    """At M = 1 a GEMM streams its weights: time ≈ weight bytes / achieved bandwidth + overhead."""
    hw = get_hardware(name)
    cost = gemm_cost(1, 8192, 8192, hw, "fp8")
    assert not cost.compute_bound
    stream_s = 8192 * 8192 / hw.hbm_bytes_per_s
    assert stream_s < cost.time_s < 1.5 * stream_s + 5e-6


@pytest.mark.parametrize("name", catalog_names())
def test_large_gemm_reaches_its_compute_ceiling(name):
    hw = get_hardware(name)
    cost = gemm_cost(16384, 16384, 16384, hw, "bf16")
    assert cost.compute_bound
    frac = cost.achieved_flop_per_s / hw.peak_flop_per_s["bf16"]
    assert 0.5 < frac <= 1.0


def test_broadcasts_over_arrays():
    m = np.array([[1], [64], [4096]])
    n = np.array([[1024, 4096]])
    cost = gemm_cost(m, n, 4096, GB300, "fp8")
    assert cost.time_s.shape == (3, 2)
    assert np.all(np.diff(cost.time_s, axis=0) >= 0)


def test_groups_share_one_overhead():
    one = gemm_cost(64, 2048, 7168, GB300, "nvfp4")
    eight = gemm_cost(64, 2048, 7168, GB300, "nvfp4", groups=8)
    assert eight.flop == 8 * one.flop
    assert eight.time_s < 8 * one.time_s


def test_fp4_on_hopper_is_a_clear_error():
    from cost_model.errors import ConfigError

    with pytest.raises(ConfigError, match="h200"):
        gemm_cost(128, 128, 128, get_hardware("h200"), "nvfp4")


def test_hot_path_time_equals_full_cost():
    from cost_model.gemm import GemmRates, gemm_time_s

    m = np.array([[1.0], [300.0], [8192.0]])
    n = np.array([[576.0, 4096.0, 28672.0]])
    for name in ("h200", "gb300"):
        hw = get_hardware(name)
        fast = gemm_time_s(m, n, 7168.0, 4.0, hw, GemmRates.of(hw, get_precision("fp8")))
        assert np.allclose(fast, gemm_cost(m, n, 7168, hw, "fp8", groups=4).time_s)


def test_float32_step_path_matches_float64():
    """Step times compute GEMMs in float32 (HOT_DTYPE); they agree with float64 to 1e-5 over
    decode to prefill sizes, aligned and ragged dimensions, grouped or not."""
    from cost_model.gemm import HOT_DTYPE, GemmRates, gemm_time_s

    m = np.array([1.0, 7.0, 64.0, 333.0, 4096.0, 65536.0]).reshape(-1, 1, 1)
    n = np.array([576.0, 4000.0, 28672.0, 151936.0]).reshape(1, -1, 1)
    k = np.array([128.0, 2880.0, 7168.0]).reshape(1, 1, -1)
    for name, fmt in (("h200", "bf16"), ("b200", "nvfp4")):
        hw = get_hardware(name)
        rates = GemmRates.of(hw, get_precision(fmt))
        for groups in (1.0, 8.0):
            exact = gemm_time_s(m, n, k, groups, hw, rates)
            fast = gemm_time_s(m, n, k, groups, hw, rates, HOT_DTYPE)
            assert fast.dtype == HOT_DTYPE
            assert np.allclose(fast, exact, rtol=1e-5, atol=0)


# ---- golden numbers of the model's form (issue 10), on a toy GPU derived by hand ----------------
# 8 SMs, one 128×128 1-SM kernel geometry, 1 PFLOP/s BF16, 10 TB/s HBM, B_SM = 100 GB/s; BF16 A,
# B and C (2 bytes). Coefficients at their neutral values unless a test sets them.

def _toy_gpu(relative_peak_frac: float = 1.0):
    from cost_model.hardware import GemmKernel

    kernel = GemmKernel(tile_m=128, tile_n=128, relative_peak_frac=relative_peak_frac)
    return get_hardware("h200").model_copy(update={
        "name": "toy", "sm_count": 8, "hbm_bytes_per_s": 1e13, "peak_flop_per_s": {"bf16": 1e15},
        "gemm_kernels": (kernel,)})


def _toy_efficiency(**changes):
    from cost_model.efficiency import GemmEfficiency

    values = {"compute_ceiling_frac": 1.0, "bandwidth_ceiling_frac": 1.0, "fixed_overhead_s": 0.0,
              "n_half_dim": 0.0, "k_half_dim": 0.0, "overlap_frac": 1.0,
              "split_k_overhead_s": 1.0, "sm_bandwidth_bytes_per_s": 1e11}
    return GemmEfficiency(**{**values, **changes})


def _toy_us(m, n, k, hw=None, **changes):
    cost = gemm_cost(m, n, k, hw or _toy_gpu(), "bf16", efficiency=_toy_efficiency(**changes))
    return cost.time_s * US_PER_S, cost


def test_golden_one_tile_streams_its_k_loop_at_b_sm():
    """M = 1, N = 128, K = 4096, no split (1 s overhead): the one tile streams its K loop at B_SM,
    K·max(m_t·b_A, n_t·b_B) / B_SM = 4096·max(1·2, 128·2) / 1e11 = 10.48576 µs, longer than the
    grid's stream ((4096·(2 + 256) + 256) B / min(HBM 1e13, 8 SMs · B_SM) = 1.32 µs) and math
    (8 slot tiles · 128² · 2 · 4096 / 1e15 = 1.074 µs). M = 65 and M = 129 (two tiles) take the
    same: each tile streams its own 128 weight columns (65 A rows are 130 < 256 bytes per K); the
    old per-grid cap (unique bytes over busy tiles · B_SM) made two tiles twice as fast."""
    for m in (1, 65, 129):
        time_us, cost = _toy_us(m, 128, 4096)
        assert time_us == pytest.approx(10.48576, rel=1e-9), m
        assert cost.bound == "memory"


def test_golden_split_k_pads_short_k():
    """Split overhead 0, M = 1, N = 128; the grid streams at min(1e13, 8 · 1e11) = 8e11 B/s.
    K = 1000 runs as 4 splits of 256 (K padded to 1024): one tile streams 256·256 B /
    1e11 = 0.65536 µs (the grid (1024·258 + 256 + 4·8·128) B / 8e11 = 0.336 µs), as K = 1024.
    K = 4096: 8 splits of 512, HBM-bound: (4096·258 + 256 + 8·8·128) B / 8e11 = 1.33152 µs (16
    splits: 1.342 µs; 4: the tile's 2.62 µs). K = 8192: 8 splits, (8192·258 + 256 + 8192) /
    8e11 = 2.65248 µs. (A split chosen from K gave K = 1000 2 splits of 500, 1.28 µs, and K = 1024
    4: one more K was twice as fast.)"""
    for k, expected_us in ((1000, 0.65536), (1024, 0.65536), (4096, 1.33152), (8192, 2.65248)):
        time_us, _ = _toy_us(1, 128, k, split_k_overhead_s=0.0)
        assert time_us == pytest.approx(expected_us, rel=1e-9), k


def test_golden_math_waves_k_half_n_half_overlap():
    """M = N = K = 1024: 64 tiles on 8 slots = 8 waves; a tile's K loop runs K + k_half = 1088 at
    peak · rel · B_N/(B_N + n_half) = 1e15 · 0.8 · 128/256: math = 8 · 8 · 128² · 2 · 1088 /
    4e14 = 5.70425344 µs. Memory: HBM 1024²·6 B / 1e13 = 0.6291456 µs (B_SM = 2e12: one tile's
    stream 1024·256 / 2e12 = 0.131 µs is shorter); overlap 0.5 hides half of it: 6.01883 µs.
    M = 1025: 72 tiles = 9 waves, math 9/8 × 5.70425344 = 6.41728512 µs, plus half of
    (1025·1024·4 + 1024²·2) B / 1e13 = 0.6295552 µs: 6.73206 µs; η_tile = 1025/1152."""
    changes = {"n_half_dim": 128.0, "k_half_dim": 64.0, "overlap_frac": 0.5,
               "sm_bandwidth_bytes_per_s": 2e12}
    hw = _toy_gpu(relative_peak_frac=0.8)
    time_us, cost = _toy_us(1024, 1024, 1024, hw, **changes)
    assert time_us == pytest.approx(5.70425344 + 0.5 * 0.6291456, rel=1e-9)
    assert cost.bound == "compute" and cost.tile_efficiency == 1 and cost.wave_efficiency == 1
    time_us, cost = _toy_us(1025, 1024, 1024, hw, **changes)
    assert time_us == pytest.approx(6.41728512 + 0.5 * 0.6295552, rel=1e-9)
    assert cost.tile_efficiency == pytest.approx(1025 / 1152) and cost.wave_efficiency == 1


def test_golden_overhead_bound():
    """Fixed overhead 5 µs, M = 13, N = 128, K = 64: one tile streams 64·256 B / 1e11 = 0.164 µs,
    so the 5 µs overhead sets the time (5.164 µs) and `bound` says "overhead"; M = 4096,
    N = K = 1024 (256 tiles, 32 waves: math 2·4096·1024² / 1e15 = 8.59 µs; memory 18.9 MB at
    8 SMs · 1e12 = 2.36 µs) is "compute"."""
    time_us, cost = _toy_us(13, 128, 64, fixed_overhead_s=5e-6)
    assert time_us == pytest.approx(5.16384, rel=1e-9)
    assert cost.bound == "overhead" and not cost.compute_bound
    _, cost = _toy_us(4096, 1024, 1024, fixed_overhead_s=5e-6, sm_bandwidth_bytes_per_s=1e12)
    assert cost.bound == "compute"


def test_op_time_adds_quantization_and_is_pure_kernel_for_bf16():
    hw = get_hardware("b200")
    fp8 = gemm_cost(1, 8192, 8192, hw, "fp8")
    assert fp8.op_s == pytest.approx(fp8.time_s + fp8.quantize_s) and fp8.quantize_s > 0
    bf16 = gemm_cost(1, 8192, 8192, hw, "bf16")
    assert bf16.op_s == bf16.time_s


@pytest.mark.parametrize("name", catalog_names())
def test_efficiencies_are_fractions(name):
    m = np.array([1.0, 13.0, 65.0, 777.0, 8192.0])[:, None]
    cost = gemm_cost(m, np.array([128.0, 4000.0, 28672.0]), 7168, get_hardware(name), "bf16")
    for eta in (cost.tile_efficiency, cost.wave_efficiency):
        assert np.all((eta > 0) & (eta <= 1))


def test_golden_quantization_rows_and_dispatch_steps():
    """FP8 on the toy GPU (HBM 1e13 B/s), quantize fixed 2 µs at half of HBM, 10 ns a row, steps
    20 µs above 16 rows, 5 µs + 10% of the kernel at M not a multiple of 4, 100 µs at N not a
    multiple of 64 (cost_model.gemm's docstring). M = 16, N = 128, K = 4096: 2 + 16·0.01 +
    16·4096·(2 + 1) B / 5e12 = 2 + 0.16 + 0.0393216 = 2.1993216 µs. M = 17: the kernel is one
    tile streaming K·max(17·1, 128·1) B at B_SM = 1e11: 5.24288 µs; quantization 2 + 0.17 +
    0.0417792 + 20 + 5 + 0.524288 = 27.7360672 µs. N = 96 at M = 16: 2.1993216 + 100 µs."""
    hw = _toy_gpu().model_copy(update={"peak_flop_per_s": {"bf16": 1e15, "fp8": 2e15}})
    eff = _toy_efficiency(quantize_fixed_s=2e-6, quantize_bandwidth_frac=0.5,
                          quantize_per_row_s=1e-8, quantize_large_m_s=20e-6,
                          quantize_unaligned_m_s=5e-6, quantize_unaligned_m_frac=0.1,
                          quantize_unaligned_nk_s=100e-6)

    def us(m, n):
        cost = gemm_cost(m, n, 4096, hw, "fp8", efficiency=eff)
        return float(cost.time_s) * US_PER_S, float(cost.quantize_s) * US_PER_S

    assert us(16, 128)[1] == pytest.approx(2.1993216, rel=1e-9)
    assert us(17, 128) == pytest.approx((5.24288, 27.7360672), rel=1e-9)
    assert us(16, 96)[1] == pytest.approx(102.1993216, rel=1e-9)
    assert gemm_cost(17, 96, 4000, hw, "bf16", efficiency=eff).quantize_s == 0.0
