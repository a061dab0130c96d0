"""Kernel physics that hold for every GPU × engine × format × shape (issues 10, 23): predicted
GEMM time never falls when M, N or K grows (a kernel may always pad a smaller problem), in the
reports' float64 path and the search's float32 hot path, and neither does a fused MoE layer's
with its tokens nor an attention call's with its sequences and context; and per engine and GPU
the formats rank — dense GEMMs, fused MoE layers and attention's KV formats, on decode-like and
prefill-like shapes — the way the measured tables rank them."""

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.deployment import ENGINES
from cost_model.efficiency import get_efficiency
from cost_model.gemm import HOT_DTYPE, GemmRates, gemm_cost, gemm_time_s
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import PRECISIONS, get_precision
from search.calibration import attention as attention_fit
from search.calibration import moe as moe_fit
from tests.data_paths import TEST_DATA

KERNELS = (None, *ENGINES)  # None: the generic kernels
# every catalog GPU × engine with every format its tensor cores run (fp32 → tf32, fp4 only on
# Blackwell)
CASES = [(name, engine, fmt) for name in catalog_names() for engine in KERNELS
         for fmt, prec in PRECISIONS.items() if get_hardware(name).supports(prec)]
CASE_IDS = [f"{n}-{e or 'generic'}-{f}" for n, e, f in CASES]
MOE_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16")
MOE_CASES = [(name, engine, fmt) for name in catalog_names() for engine in KERNELS
             for fmt in MOE_FORMATS if get_hardware(name).supports(PRECISIONS[fmt])]
# Rounding allowed: none. Every operation of the model (ceil, max, min, sums and products of
# non-negative terms, division by positive ones) is monotone under rounding, float32 included.
ROUNDING_REL = 0.0
MAX_DIM = 1 << 17  # 131,072: beyond every sharded model dimension and token count of a step
ORDER_FILE = TEST_DATA / "gemm_format_order.csv"  # written by tests/benchmarks/gemm_format_order.py
# Formats measured within TIE_FRAC of each other are a tie (no order asserted): 5% on
# TensorRT-LLM's GEMM tables (its fits' median |error| 3-15%), 10% on the others (vLLM's and
# SGLang's GEMM fits 6-20%, fused MoE and attention 4-31%: `archscout calibrate`'s fit records).
TIE_FRAC = {("gemm", "trtllm"): 0.05}
DEFAULT_TIE_FRAC = 0.10
# A regime's predicted geometric mean within GEOMEAN_REL of the measured one: 20% on GEMM tables
# whose fits' median |error| is under 10%, 35% on the others (vLLM's GEMM fits 6-20%, p90 up to
# 55%; fused MoE and attention fits 4-31%)
GEOMEAN_REL = {"gemm": 0.20, "moe": 0.35, "attention": 0.35}
GEOMEAN_REL_ENGINE = {("gemm", "vllm"): 0.35}


def _times_s(name: str, engine, fmt: str, m, n, k, groups=1) -> list[np.ndarray]:
    """Kernel time by both paths: `gemm_cost` (float64) and `gemm_time_s` in HOT_DTYPE."""
    hw = get_hardware(name)
    rates = GemmRates.of(hw, PRECISIONS[fmt], efficiency=get_efficiency(name, engine))
    return [gemm_cost(m, n, k, hw, fmt, groups=groups, engine=engine).time_s,
            gemm_time_s(m, n, k, groups, hw, rates, HOT_DTYPE).astype(np.float64)]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(case=st.sampled_from(CASES), dims=st.tuples(*[st.integers(1, MAX_DIM)] * 3),
       groups=st.integers(1, 64), axis=st.integers(0, 3), grow=st.integers(1, 4096))
def test_gemm_time_never_falls_when_a_dimension_grows(case, dims, groups, axis, grow):
    """M, N, K (axis 0-2) or the groups of a grouped GEMM (axis 3) grow by `grow`."""
    before_dims, after_dims = [*dims, groups], [*dims, groups]
    after_dims[axis] += grow
    for before, after in zip(_times_s(*case, *before_dims), _times_s(*case, *after_dims)):
        assert after >= before * (1 - ROUNDING_REL), (case, before_dims, axis, grow)


@pytest.mark.parametrize("name, engine, fmt", CASES, ids=CASE_IDS)
def test_gemm_time_non_decreasing_on_dense_sweeps(name, engine, fmt):
    """Every integer M and K up to 4,608 and N up to 2,304 (every tile, cluster, wave and split
    boundary of those ranges), at decode and prefill sizes of the other two dims."""
    sweep = np.arange(1.0, 4609.0)
    for m, n, k, axis in ((sweep[:, None], np.array([576.0, 4096.0, 14336.0]), 4096.0, 0),
                          (np.array([1.0, 64.0, 8192.0]), sweep[:2304, None], 7168.0, 1),
                          (np.array([1.0, 65.0, 4096.0]), 2048.0, sweep[:, None], 2)):
        for times in _times_s(name, engine, fmt, m, n, k):
            steps = np.diff(np.broadcast_to(times, np.broadcast_shapes(
                np.shape(m), np.shape(n), np.shape(k))), axis=0)
            assert np.all(steps >= -ROUNDING_REL * times.max()), (name, fmt, axis)


@pytest.mark.parametrize("name, engine, fmt", CASES, ids=CASE_IDS)
def test_op_time_non_decreasing(name, engine, fmt):
    """Kernel plus activation quantization (what measured ops time) grows with M and K too, on
    the aligned grid (M a multiple of 4, K of 128); off it the op's dispatch steps only add
    (cost_model.gemm: an engine's op at M = 4,097 may take longer than at 4,100)."""
    m = np.arange(4.0, 3000.0, 116.0)[:, None]
    k = np.arange(128.0, 20000.0, 384.0)[None, :]
    hw = get_hardware(name)

    def op_s(m, k):
        return gemm_cost(m, 4096.0, k, hw, fmt, engine=engine).op_s

    aligned = op_s(m, k)
    assert np.all(np.diff(aligned, axis=0) >= 0) and np.all(np.diff(aligned, axis=1) >= 0)
    assert np.all(op_s(m + 1, k) >= aligned) and np.all(op_s(m, k + 64) >= aligned)


@pytest.mark.parametrize("name, fmt, shape, grown", [
    ("b200", "nvfp4", (64, 4096, 14336), (65, 4096, 14336)),  # issue 10: 29.97 -> 20.44 µs
    ("rtx-pro-6000", "bf16", (1, 4096, 511), (1, 4096, 512)),  # issue 10: -36% at K = 512
    ("rtx-pro-6000", "bf16", (1, 16384, 511), (1, 16384, 512)),
], ids=["b200-nvfp4-m64-65", "rtx-bf16-k511-512", "rtx-bf16-k511-512-wide"])
def test_issue_reproductions_no_longer_fall(name, fmt, shape, grown):
    hw = get_hardware(name)
    for engine in KERNELS:
        assert gemm_cost(*grown, hw, fmt, engine=engine).time_s >= \
            gemm_cost(*shape, hw, fmt, engine=engine).time_s


def _moe_layer_s(name, engine, fmt, rows: np.ndarray) -> np.ndarray:
    """The fused MoE layer of each row (tokens, hidden, H', top-k, experts, moe_tp, moe_ep)."""
    data = moe_fit.MeasuredMoe(fmt, *rows.T.astype(np.float64), time_s=np.ones(len(rows)))
    return moe_fit.predicted_s(data, get_hardware(name), get_efficiency(name, engine))


MOE_LAYER = st.sampled_from([(7168, 2048, 256, 8), (2048, 768, 128, 8), (2880, 2880, 128, 4),
                             (4096, 14336, 8, 2), (5120, 8192, 16, 1)])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=st.sampled_from(MOE_CASES), layer=MOE_LAYER, tokens=st.integers(1, 1 << 15),
       grow=st.integers(1, 1 << 14), split=st.sampled_from([(1, 1), (8, 1), (1, 8), (2, 4)]))
def test_fused_moe_layer_never_falls_with_more_tokens(case, layer, tokens, grow, split):
    """Every GPU × engine × experts' format: a fused MoE layer of a real model's shape on its
    GPUs (moe-TP × EP) never takes less time for more tokens (balanced routing)."""
    hidden, inter, experts, top_k = layer
    if experts % split[1]:
        return
    rows = np.array([[t, hidden, inter, top_k, experts, *split] for t in (tokens, tokens + grow)])
    before, after = _moe_layer_s(*case, rows)
    assert after >= before * (1 - 1e-6), (case, layer, tokens, grow, split)


ATTENTION_CASES = [(name, engine, kv) for name in catalog_names() for engine in KERNELS
                   for kv in ("bf16", "fp8")]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=st.sampled_from(ATTENTION_CASES), phase=st.sampled_from(["decode", "prefill"]),
       batch=st.integers(1, 512), tokens=st.integers(1, 1 << 17), axis=st.integers(0, 1),
       grow=st.integers(1, 1 << 12), heads=st.sampled_from([(32, 8, 128), (64, 8, 128),
                                                            (16, 16, 64), (8, 1, 256)]))
def test_attention_never_falls_with_more_sequences_or_context(case, phase, batch, tokens, axis,
                                                              grow, heads):
    """Every GPU × engine × KV format, decode and prefill: more sequences (axis 0) or more
    context/prompt tokens (axis 1) never take less time."""
    name, engine, kv = case
    grid = np.array([[batch, tokens], [batch, tokens]], dtype=np.float64)
    grid[1, axis] += grow
    ones = np.ones(2)
    data = attention_fit.MeasuredAttention(
        phase, grid[:, 0], grid[:, 1], heads[0] * ones, heads[1] * ones, heads[2] * ones,
        0 * ones, get_precision(kv).activation_bytes_per_value * ones, ones)
    before, after = attention_fit.predicted_s(data, get_hardware(name),
                                              get_efficiency(name, engine))
    assert after >= before * (1 - 1e-9), (case, phase, batch, tokens, axis, grow, heads)


# ---- format ordering as measured -------------------------------------------------------------

def _measured_order() -> dict[tuple[str, str, str, str], dict]:
    """(kind, engine, hardware, regime) -> {"shapes": rows, "measured_us": {dtype: geomean},
    "kernel_us": {dtype: geomean}, "source"} from tests/data/gemm_format_order.csv."""
    out: dict[tuple[str, str, str, str], dict] = {}
    with ORDER_FILE.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["kind"], row["engine"], row["hardware"], row["regime"])
            entry = out.setdefault(key, {"measured_us": {}, "kernel_us": {}, "shapes": {}})
            entry["shapes"][row["dtype"]] = np.array(
                [s.split(",") for s in row["shape_list"].split()], dtype=np.float64)
            entry["measured_us"][row["dtype"]] = float(row["measured_geomean_op_us"])
            if row["measured_geomean_kernel_us"]:
                entry["kernel_us"][row["dtype"]] = float(row["measured_geomean_kernel_us"])
            entry["source"] = row["source"]
    return out


MEASURED_ORDER = _measured_order()


def _geomean_us(times_s) -> float:
    return float(np.exp(np.mean(np.log(times_s)))) * 1e6


ATTENTION_HEADS = (32, 8, 128)  # query heads, KV heads, width: as the generator measures


def _predicted_us(key, fmt, shapes, kernel=False) -> float:
    """The model's geometric mean over the measured shapes, on the row's engine's kernels."""
    kind, engine, name, regime = key
    hw, eff = get_hardware(name), get_efficiency(name, engine)
    if kind == "gemm":
        cost = gemm_cost(*shapes.T, hw, fmt, engine=engine)
        return _geomean_us(cost.time_s if kernel else cost.op_s)
    if kind == "moe":  # shape_list: hidden, H', experts, top-k, moe_tp, moe_ep, tokens
        h, i, e, k, tp, ep, t = shapes.T
        return _geomean_us(_moe_layer_s(name, engine, fmt, np.stack([t, h, i, k, e, tp, ep], 1)))
    ones = np.ones(len(shapes))  # attention: batch, tokens (context or prompt)
    heads, kv_heads, width = ATTENTION_HEADS
    data = attention_fit.MeasuredAttention(
        "prefill" if regime == "prefill" else "decode", shapes[:, 0], shapes[:, 1],
        heads * ones, kv_heads * ones, width * ones, 0 * ones,
        get_precision(fmt).activation_bytes_per_value * ones, ones)
    return _geomean_us(attention_fit.predicted_s(data, hw, eff))


def _assert_ranked_as_measured(measured: dict[str, float], predicted: dict[str, float], rel,
                               tie):
    for fmt, measured_us in measured.items():
        assert predicted[fmt] == pytest.approx(measured_us, rel=rel), (fmt, predicted)
    for fast, fast_us in measured.items():
        for slow, slow_us in measured.items():
            if fast_us * (1 + tie) < slow_us:
                assert predicted[fast] < predicted[slow], (fast, slow, predicted)


def _tie(key) -> float:
    return TIE_FRAC.get(key[:2], DEFAULT_TIE_FRAC)


def _rel(key) -> float:
    return GEOMEAN_REL_ENGINE.get(key[:2], GEOMEAN_REL[key[0]])


# RTX PRO 6000's decode tables stream weights faster than its DRAM can (BF16 M = 1, N = 4096,
# K = 8192: 67 MB in 21.4 µs = 3.1 TB/s on 1.79 TB/s GDDR7): weights up to ~128 MB stay in its
# L2 between timed runs, more so the fewer bytes a format has per weight. Serving streams every
# layer's weights once per step, far beyond any L2, so the model does not represent it.
L2 = "weights L2-resident in the measured decode table (see the comment above)"
# The regimes where the fitted model ranks two formats the other way, each with why (the fits'
# figures: `archscout calibrate` records, tests/benchmarks/bench_{gemm,moe,attention}_fit.py).
# xfail(strict): a refit that ranks them as measured fails here until its entry is removed.
MISRANKED_OP = {
    ("gemm", "trtllm", "rtx-pro-6000", "decode"): L2,
    ("gemm", "vllm", "rtx-pro-6000", "decode"): L2,
    ("gemm", "vllm", "gb200", "prefill"): "vLLM's BF16 GEMMs at M 4k-16k on GB200 run 21% "
    "slower than the fit has them (its median |error| 7%); FP8's 10% faster measured",
    ("attention", "vllm", "rtx-pro-6000", "prefill"): "vLLM's FP8-KV prefill on RTX PRO 6000 "
    "runs 27% slower than BF16-KV's on these shapes; one fitted ratio for the whole table "
    "(prefill median |error| 18%)",
    **{("moe", "sglang", gpu, "prefill"): "SGLang's fastest BF16 fused MoE at 1k-4k tokens "
       "runs 17-21% faster than the fit has it (the worst MoE fit: median |error| 27-29%)"
       for gpu in ("b300", "gb200", "gb300")},
    ("moe", "sglang", "b200", "prefill"): "SGLang's BF16 fused MoE at 1k-4k tokens runs 16% "
    "faster than the fit has it (model 219 µs, measured 189) and block FP8's `ep1` entry prices "
    "its moe-TP 8 rows 8% under (213 µs, measured 232); the joint fit alone had the two 0.3% "
    "apart (223 vs 224 µs), a tie the EP = 1 entries tip",
    **{("moe", "trtllm", gpu, "prefill"): "TensorRT-LLM's NVFP4 MoE at 1k-4k tokens (its "
       "CUTLASS flow) runs 12-20% slower than the fit, which the min-latency kernel's faster "
       "small-token rows pull down (median |error| 19-21%)" for gpu in ("b200", "gb200")},
    ("moe", "trtllm", "rtx-pro-6000", "decode"): "TensorRT-LLM's Triton block-FP8 MoE on RTX "
    "PRO 6000 (median |error| 30%, its worst MoE fit)",
}
# vLLM's FP8 op grows ~5 ns per activation row beyond its bytes (N = K = 128 on GB300: 198 µs at
# M = 32,768, BF16 4 µs), ~4x what its quantize tables time; the fit puts that per-row cost beside
# the kernel (quantize_per_row_ns), the "measured kernel" (op minus the quantize tables) keeps it
VLLM_ROWS = ("vLLM FP8 kernel at M 4k-16k on Blackwell: 157 µs against 247 µs of op minus "
             "quantize tables, the per-row op cost counted on the op side (comment above)")
MISRANKED_KERNEL = {("gemm", "trtllm", "rtx-pro-6000", "decode"): L2,
                    **{("gemm", "vllm", gpu, "prefill"): VLLM_ROWS for gpu in ("b200", "gb200")}}


def _order_case(key: tuple[str, str, str, str], known: dict):
    marks = [pytest.mark.xfail(strict=True, reason=known[key])] if key in known else []
    return pytest.param(key, id="-".join(key), marks=marks)


@pytest.mark.parametrize("key", [_order_case(key, MISRANKED_OP)
                                 for key in sorted(MEASURED_ORDER)])
def test_formats_rank_as_measured(key):
    """Geometric mean over the regime's shapes (GEMMs: decode M 1-64, prefill M 4096-16384,
    N, K 2048-16384, op = kernel + activation quantization as the tables time it; fused MoE
    layers of four models at EP 8 or moe-TP 8; attention calls by KV format), per format on the
    row's engine's kernels: every pair the tables separate by more than TIE_FRAC is ranked the
    same way, and each format's mean is within GEOMEAN_REL of the measured one. Source: the
    CSV's `source` (aiconfigurator-core measured tables; tests/benchmarks/gemm_format_order.py)."""
    entry = MEASURED_ORDER[key]
    measured = entry["measured_us"]
    predicted = {f: _predicted_us(key, f, entry["shapes"][f]) for f in measured}
    _assert_ranked_as_measured(measured, predicted, _rel(key), _tie(key))


GEMM_KERNEL_KEYS = [key for key in sorted(MEASURED_ORDER)
                    if key[0] == "gemm" and len(MEASURED_ORDER[key]["kernel_us"]) == 2]


@pytest.mark.parametrize("key", [_order_case(key, MISRANKED_KERNEL) for key in GEMM_KERNEL_KEYS])
def test_kernels_rank_as_measured(key):
    """What serving compares (activations quantized before the GEMM, FP8 with static scales):
    the kernel alone. The tables measure it for BF16 (its op) and FP8 (its op minus the scale
    and quantization kernels, which aiconfigurator-core measures apart per engine:
    quantize/computescale_perf and scale_matrix_perf); the model's kernel time ranks them alike,
    within GEOMEAN_REL."""
    entry = MEASURED_ORDER[key]
    measured = entry["kernel_us"]
    predicted = {f: _predicted_us(key, f, entry["shapes"][f], kernel=True) for f in measured}
    _assert_ranked_as_measured(measured, predicted, _rel(key), _tie(key))


def test_ordering_data_covers_every_engine_gpu_kind_and_format():
    blackwell = {"b200", "gb200", "b300", "gb300", "rtx-pro-6000"}
    for engine in ENGINES:
        for name in catalog_names():
            for kind in ("gemm", "moe", "attention"):
                assert (kind, engine, name, "decode") in MEASURED_ORDER, (kind, engine, name)
            gemm = MEASURED_ORDER[("gemm", engine, name, "prefill")]["measured_us"]
            assert {"bf16", "fp8"} <= gemm.keys()
            assert ("nvfp4" in gemm) == (name in blackwell)
    for entry in MEASURED_ORDER.values():
        assert "silicon_sample" not in entry["source"]  # the held-out test set is never read


@pytest.mark.parametrize("name, engine, fmt", CASES, ids=CASE_IDS)
def test_grouped_launch_streams_at_least_at_its_formats_ceiling(name, engine, fmt):
    """A dense grouped launch's HBM ceiling (MLA's absorbed per-head GEMMs) is its format's
    own or BF16's, whichever is higher, and below twice the format's own: so doubling the
    groups (twice the bytes) is never faster. The fused MoE's grouped GEMMs have one ceiling
    whatever the group count."""
    hw, eff = get_hardware(name), get_efficiency(name, engine)
    rates = GemmRates.of(hw, PRECISIONS[fmt], efficiency=eff)
    assert rates.bandwidth_ceiling_frac <= rates.grouped_bandwidth_ceiling_frac
    assert rates.grouped_bandwidth_ceiling_frac < 2.0 * rates.bandwidth_ceiling_frac
    experts = GemmRates.for_experts(hw, PRECISIONS[fmt], eff)
    assert experts.grouped_bandwidth_ceiling_frac == experts.bandwidth_ceiling_frac
