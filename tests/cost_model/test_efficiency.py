"""The efficiency layer: the calibrated coefficients shipped as package data load for every engine
(and the generic kernels), carry their source and fit, are looked up per format with a stated
fallback, a user's calibration folder is read before the package, and measured GEMMs are
predicted within the fit's goal."""

import math
import shutil
import tomllib
from importlib import resources

import numpy as np
import pytest

from cost_model.deployment import ENGINES
from cost_model.efficiency import (
    CALIBRATION_DIR_ENV,
    DEFAULT_FILE,
    GENERIC,
    KERNELS,
    efficiency_from_toml,
    efficiency_names,
    get_efficiency,
)
from cost_model.errors import ConfigError
from cost_model.gemm import gemm_cost, overlapped
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import get_precision

HOPPER = ("h100-sxm", "h200")
GOAL_MEDIAN_FRAC = 0.15  # issue 23: no engine/GPU/format above 15% median |op error|
# The tables the model meets only above the goal (aiconfigurator-core 0.12.0 gemm/vllm/0.24.0,
# in-sample medians of the shipped fits; tests/benchmarks/bench_gemm_fit.py --noise):
# - block FP8 on GB200 / GB300 (18.3% / 20.1%): the op has a 160-530 µs floor flat in N and K
#   that varies run to run: two measurements one M apart (M <= 16, same N, K, where the time
#   cannot change) differ by a median 16.3% / 20.5%;
# - block FP8 on H100 / H200 (18.0% / 17.5%): vLLM dispatches by shape to three kernels with
#   their own floors (FlashInfer ~59 µs at M <= 16, DeepGEMM ~86 µs, CUTLASS ~176 µs where
#   N or K < 128: the table's kernel_source), one floor in the model;
# - FP8 on H200 (15.5%): CUTLASS's M buckets (steps of 20-30% at M = 17, 65 and 129).
ABOVE_GOAL = {("vllm", "gb300", "fp8_block"): 0.21, ("vllm", "gb200", "fp8_block"): 0.19,
              ("vllm", "h100-sxm", "fp8_block"): 0.19, ("vllm", "h200", "fp8_block"): 0.18,
              ("vllm", "h200", "fp8"): 0.16}
GEMM_KEYS = ("compute_ceiling_frac", "bandwidth_ceiling_frac", "fixed_overhead_us", "n_half_dim",
             "k_half_dim", "overlap_frac", "split_k_overhead_us", "sm_bandwidth_gb_per_s")
MOE_KEYS = ("compute_ceiling_frac", "bandwidth_ceiling_frac", "sm_bandwidth_gb_per_s",
            "fixed_overhead_us", "per_local_copy_us", "per_scanned_copy_us")
# The formats each engine's aiconfigurator-core 0.12.0 GEMM tables measure, per GPU
BLACKWELL = {"bf16", "fp8", "fp8_block", "nvfp4"}
DENSE_FORMATS = {(engine, gpu): ({"bf16", "fp8", "fp8_block"} if gpu in HOPPER else BLACKWELL)
                 for engine in ENGINES for gpu in catalog_names()}
DENSE_FORMATS[("sglang", "rtx-pro-6000")] = {"bf16", "fp8", "nvfp4"}  # no block-FP8 table

# Measured in aiconfigurator-core 0.12.0, systems/data/<gpu>/gemm/trtllm/1.3.0rc20/gemm_perf.parquet
# (CUDA-graph timed; BF16 activations quantized inside the timed op; BF16 output), in µs:
# (gpu, format, M, N, K, measured µs). Shapes span decode, prefill and every shipped format.
MEASURED = [
    ("h100-sxm", "bf16", 4096, 4096, 4096, 174.3),
    ("h100-sxm", "fp8", 1, 8192, 8192, 37.4),
    ("h200", "bf16", 16, 7168, 2048, 10.81),
    ("h200", "fp8_block", 1024, 4096, 7168, 61.97),
    ("b200", "nvfp4", 8192, 8192, 8192, 284.6),
    ("b200", "fp8", 256, 16384, 4096, 31.87),
    ("gb200", "bf16", 16384, 16384, 16384, 4610.0),
    ("gb200", "fp8_block", 64, 2048, 7168, 11.91),
    ("b300", "nvfp4", 1024, 7168, 4096, 29.03),
    ("b300", "bf16", 1, 16384, 16384, 86.59),
    ("gb300", "nvfp4", 1, 8192, 8192, 20.32),
    ("gb300", "fp8", 4096, 4096, 16384, 247.3),
]
FILES = [(k, name) for k in KERNELS for name in efficiency_names(k)]


@pytest.fixture(autouse=True)
def _no_user_calibration(monkeypatch):
    monkeypatch.delenv(CALIBRATION_DIR_ENV, raising=False)


@pytest.mark.parametrize("kernels, name", FILES, ids=[f"{k}-{n}" for k, n in FILES])
def test_every_file_loads_with_a_source_on_every_coefficient(kernels, name):
    eff = get_efficiency(name, None if kernels == GENERIC else kernels)
    assert eff.kernels == kernels and eff.origin == "package"
    assert "bf16" in eff.gemm and "bf16" in eff.moe
    for section, keys, formats in (("gemm", GEMM_KEYS, eff.gemm), ("moe", MOE_KEYS, eff.moe),
                                   ("moe", MOE_KEYS, {f"{f}.ep1": 0 for f in eff.moe_ep1})):
        for fmt in formats:
            for key in keys:
                assert eff.sources[f"{section}.{fmt}.{key}"], f"{section}.{fmt}.{key}"
    assert set(eff.moe_ep1) <= set(eff.moe)


CALIBRATED = [(e, n) for e in ENGINES for n in catalog_names()]


@pytest.mark.parametrize("engine, name", CALIBRATED, ids=[f"{e}-{n}" for e, n in CALIBRATED])
def test_every_engine_is_calibrated_on_its_own_tables(engine, name):
    """Issue 23: each engine's coefficients come from that engine's measured tables, in every
    format they measure, within the goal (the tables of ABOVE_GOAL near it)."""
    eff = get_efficiency(name, engine)
    assert eff.version.startswith("calibrated: aiconfigurator-core") and engine in eff.version
    assert set(eff.gemm) == DENSE_FORMATS[(engine, name)] == set(eff.gemm_fits)
    for fmt, fit in eff.gemm_fits.items():
        assert f"gemm/{engine}/" in fit.source, fmt
        goal = ABOVE_GOAL.get((engine, name, fmt), GOAL_MEDIAN_FRAC)
        assert fit.median_abs_error_frac <= goal, fmt
        assert fit.median_abs_error_frac < fit.roofline_median_abs_error_frac / 2, fmt
    for fmt, fit in eff.moe_fits.items():
        assert f"moe/{engine}/" in fit.source, fmt
    for key in ("attention.decode_bandwidth_frac", "communication.scale_up_bandwidth_frac"):
        assert f"/{engine}/" in eff.sources[key], key


@pytest.mark.parametrize("name", catalog_names())
def test_generic_kernels_are_each_parts_fastest_engines_entry(name):
    """A step without an engine runs, per part, an engine's fitted entry unchanged, and says
    which (search/calibration/generic.py chose it)."""
    generic = get_efficiency(name)
    assert generic.kernels == GENERIC
    for fmt, entry in generic.gemm.items():
        engine = generic.kernels_of(f"gemm.{fmt}")
        assert entry == get_efficiency(name, engine).gemm[fmt], fmt
    for fmt, entry in generic.moe.items():
        engine = generic.kernels_of(f"moe.{fmt}")
        assert entry == get_efficiency(name, engine).moe[fmt], fmt
        assert generic.moe_ep1.get(fmt) == get_efficiency(name, engine).moe_ep1.get(fmt), fmt
    engine = generic.kernels_of("attention")
    assert generic.prefill_attention_compute_frac == \
        get_efficiency(name, engine).prefill_attention_compute_frac
    assert generic.kernels_of("communication") in ENGINES


@pytest.mark.parametrize("kernels", KERNELS)
def test_default_file_is_the_median_of_the_calibrated_gpus(kernels):
    engine = None if kernels == GENERIC else kernels
    eff = get_efficiency(DEFAULT_FILE, engine)
    ceilings = [get_efficiency(n, engine).gemm["bf16"].compute_ceiling_frac
                for n in catalog_names()]
    assert eff.gemm["bf16"].compute_ceiling_frac == pytest.approx(np.median(ceilings), rel=1e-3)
    assert get_efficiency("my-gpu", engine) == eff  # a GPU without a file of its own
    assert eff.substitutes(get_precision("bf16"))[0].startswith(f"no measured {kernels}")


def test_format_lookup_falls_back_to_the_rate_class_and_says_so():
    gb300 = get_efficiency("gb300", "trtllm")
    assert gb300.for_precision(get_precision("mxfp4")) is gb300.gemm["nvfp4"]
    assert gb300.for_precision(get_precision("fp16")) is gb300.gemm["bf16"]
    assert gb300.for_precision(get_precision("fp8_block")) is gb300.gemm["fp8_block"]
    assert gb300.for_rate("fp4") is gb300.gemm["nvfp4"]
    h200 = get_efficiency("h200", "trtllm")
    assert h200.for_rate("fp4") is h200.gemm["bf16"]
    assert gb300.substitutes(get_precision("mxfp4")) == [
        "mxfp4 GEMMs: no trtllm table, nvfp4's kernels"]
    assert gb300.substitutes(get_precision("nvfp4")) == []
    assert h200.substitutes(get_precision("w4a16")) == []  # weight-only runs BF16 kernels
    rtx = get_efficiency("rtx-pro-6000", "sglang")
    assert rtx.substitutes(get_precision("fp8_block")) == [
        "fp8_block GEMMs: no sglang table, fp8's kernels"]


def test_experts_run_their_formats_fused_moe_kernels():
    """`expert_gemm` is the format's dense kernel model with the fused MoE's ceilings and
    per-SM stream rate; a format without a MoE table takes its rate class's (and says so)."""
    eff = get_efficiency("b200", "trtllm")
    nvfp4 = get_precision("nvfp4")
    experts, dense, moe = eff.expert_gemm(nvfp4), eff.for_precision(nvfp4), eff.moe["nvfp4"]
    assert (experts.compute_ceiling_frac, experts.bandwidth_ceiling_frac,
            experts.sm_bandwidth_bytes_per_s) == (moe.compute_ceiling_frac,
                                                  moe.bandwidth_ceiling_frac,
                                                  moe.sm_bandwidth_bytes_per_s)
    assert (experts.k_half_dim, experts.fixed_overhead_s) == (dense.k_half_dim,
                                                            dense.fixed_overhead_s)
    h100 = get_efficiency("h100-sxm", "trtllm")
    assert h100.moe_format(get_precision("fp8_block")) == "fp8_block"
    without = h100.model_copy(update={"moe": {"bf16": h100.moe["bf16"]}})
    assert without.moe_format(get_precision("fp8")) == "bf16"
    assert without.substitutes(get_precision("fp8"), get_precision("fp8")) == [
        "fp8 fused MoE: no trtllm table, bf16's kernels"]


def test_an_ep1_deployment_runs_the_ep1_entry_where_the_file_has_one():
    """B200's TensorRT-LLM NVFP4 experts have `[moe.nvfp4.ep1]`: EP = 1 runs it (its ceilings
    on the grouped GEMMs), EP > 1 the joint entry; without it EP = 1 runs the joint entry and
    `uncalibrated` says so."""
    eff, nvfp4 = get_efficiency("b200", "trtllm"), get_precision("nvfp4")
    ep1, joint = eff.moe_ep1["nvfp4"], eff.moe["nvfp4"]
    assert ep1 != joint
    assert eff.moe_efficiency(nvfp4, ep1=True) is ep1 and eff.moe_efficiency(nvfp4) is joint
    experts = eff.expert_gemm(nvfp4, ep1=True)
    assert (experts.compute_ceiling_frac, experts.bandwidth_ceiling_frac,
            experts.sm_bandwidth_bytes_per_s) == (ep1.compute_ceiling_frac,
                                                  ep1.bandwidth_ceiling_frac,
                                                  ep1.sm_bandwidth_bytes_per_s)
    assert eff.substitutes(nvfp4, nvfp4, ep1=True) == []
    without = eff.model_copy(update={"moe_ep1": {}})
    assert without.moe_efficiency(nvfp4, ep1=True) is without.moe["nvfp4"]
    assert without.substitutes(nvfp4, nvfp4, ep1=True) == [
        "nvfp4 fused MoE at EP = 1: no trtllm EP = 1 rows, the joint nvfp4 fit over every EP"]
    assert without.substitutes(nvfp4, nvfp4) == []  # EP > 1 runs the joint entry anyway


@pytest.mark.parametrize("name, fmt, m, n, k, measured_us", MEASURED,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}x{r[3]}x{r[4]}" for r in MEASURED])
def test_predicts_measured_gemms(name, fmt, m, n, k, measured_us):
    """TensorRT-LLM's kernel plus activation quantization against its measured op; tolerance:
    the issue's per-format goal (15%)."""
    cost = gemm_cost(m, n, k, get_hardware(name), fmt, engine="trtllm")
    predicted_us = float(cost.time_s + cost.quantize_s) * 1e6
    assert predicted_us == pytest.approx(measured_us, rel=GOAL_MEDIAN_FRAC)


def test_quantization_is_apart_and_only_for_quantized_activations():
    """M = N = K = 4096 in FP8: the fixed cost, 4096 rows at the per-row cost, the BF16 read and
    FP8 write of M·K values (2 + 1 bytes) at the quantize bandwidth, and the large-M step
    (4096 > 16 rows); no unaligned step (4096 is a multiple of 4, 64 and 128)."""
    hw = get_hardware("gb300")
    assert gemm_cost(4096, 4096, 4096, hw, "bf16").quantize_s == 0.0
    fp8 = gemm_cost(4096, 4096, 4096, hw, "fp8")
    c = get_efficiency("gb300").gemm["fp8"]
    stream_s = 4096 * 4096 * (2 + 1) / (hw.hbm_bytes_per_s * c.quantize_bandwidth_frac)
    assert fp8.quantize_s == pytest.approx(c.quantize_fixed_s + 4096 * c.quantize_per_row_s
                                           + stream_s + c.quantize_large_m_s)


def test_overlap_spans_the_roofline_max_and_the_sum():
    math_s, memory_s = np.array([3.0, 1.0]), np.array([1.0, 2.0])
    assert np.allclose(overlapped(math_s, memory_s, 1.0), [3.0, 2.0])
    assert np.allclose(overlapped(math_s, memory_s, 0.0), [4.0, 3.0])


def _doc(**gemm_changes) -> dict:
    """The shipped trtllm h200 file with `gemm.bf16` entries replaced (None: removed)."""
    doc = tomllib.loads(resources.files("cost_model.data.efficiency").joinpath(
        "trtllm", "h200.toml").read_text())
    for key, value in gemm_changes.items():
        if value is None:
            del doc["gemm"]["bf16"][key]
        else:
            doc["gemm"]["bf16"][key] = value
    return doc


def test_out_of_range_coefficient_names_the_field():
    with pytest.raises(ConfigError, match=r"`gemm\.bf16\.compute_ceiling_frac`.*1\.5"):
        efficiency_from_toml(_doc(compute_ceiling_frac={"value": 1.5, "source": "typo"}))


def test_missing_coefficient_names_the_field():
    with pytest.raises(ConfigError, match=r"`gemm\.bf16\.overlap_frac` is missing"):
        efficiency_from_toml(_doc(overlap_frac=None))


def test_a_moe_section_without_formats_names_the_field():
    """`[moe]` holds one table per format: an older file's flat terms are one clear line."""
    doc = _doc()
    doc["moe"] = {"fixed_overhead_us": {"value": 20.0, "source": "old"}}
    with pytest.raises(ConfigError, match=r"`moe\.fixed_overhead_us` must be a table"):
        efficiency_from_toml(doc)
    doc = _doc()
    doc["moe"]["bf16"]["per_local_copy_us"] = {"value": -1.0, "source": "typo"}
    with pytest.raises(ConfigError, match=r"`moe\.bf16\.per_local_copy_us`.*-1\.0"):
        efficiency_from_toml(doc)


def test_unknown_engine_names_the_field():
    doc = _doc()
    doc["kernels"] = "tgi"
    with pytest.raises(ConfigError, match=r"`kernels` must be one of vllm, sglang, trtllm, "
                                          r"generic; got 'tgi'"):
        efficiency_from_toml(doc)
    with pytest.raises(ConfigError, match=r"`engine` must be one of"):
        get_efficiency("h200", "tgi")


def test_shipped_bandwidth_caps_are_physical():
    """One SM streams at least a quarter of its fair share of HBM (the calibration's floor: a
    kernel with few loads in flight, like NVFP4 at small M) and at most all of it."""
    for engine in ENGINES:
        for name in catalog_names():
            hw = get_hardware(name)
            for fmt, eff in get_efficiency(name, engine).gemm.items():
                fair = hw.hbm_bytes_per_s / hw.sm_count
                assert fair / 4 * (1 - 1e-3) <= eff.sm_bandwidth_bytes_per_s, (name, fmt)
                assert eff.sm_bandwidth_bytes_per_s <= hw.hbm_bytes_per_s * (1 + 1e-3)
                assert math.isfinite(eff.overlap_frac)


def test_attention_terms_a_file_omits_take_their_defaults():
    """A file with only the two required attention entries (a user's prior file) times attention
    as before the calibration terms: kernel-launch floor, no per-sequence/tile/token or
    dequantization cost."""
    doc = _doc()
    doc["attention"] = {k: doc["attention"][k] for k in ("decode_bandwidth_frac",
                                                        "prefill_compute_frac")}
    eff = efficiency_from_toml(doc)
    assert eff.attention_fixed_overhead_s is None
    assert eff.prefill_attention_fixed_overhead_s is None
    assert eff.decode_attention_per_sequence_s == eff.prefill_attention_per_tile_s == 0.0
    assert eff.prefill_attention_per_token_s == 0.0
    assert math.isinf(eff.decode_kv_dequant_elements_per_s)


def test_negative_attention_term_names_the_field():
    doc = _doc()
    doc["attention"]["decode_per_sequence_us"] = {"value": -1.0, "source": "typo"}
    with pytest.raises(ConfigError, match=r"`attention\.decode_per_sequence_us` must be >= 0"):
        efficiency_from_toml(doc)


def test_a_user_calibration_folder_is_read_before_the_package(tmp_path, monkeypatch):
    """ARCHSCOUT_CALIBRATION_DIR (what `archscout calibrate` writes): its file of a GPU and
    engine is read, named as the origin; a GPU or engine it lacks comes from the package."""
    folder = tmp_path / "calibration"
    (folder / "vllm").mkdir(parents=True)
    doc = (resources.files("cost_model.data.efficiency") / "vllm" / "h200.toml").read_text()
    (folder / "vllm" / "h200.toml").write_text(doc.replace(
        "compute_ceiling_frac = { value = ", "compute_ceiling_frac = { value = 0.123, x = ", 1))
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(folder))
    mine = get_efficiency("h200", "vllm")
    assert mine.origin == str(folder.resolve())
    assert mine.gemm["bf16"].compute_ceiling_frac == 0.123
    assert get_efficiency("b200", "vllm").origin == "package"
    assert get_efficiency("h200", "trtllm").origin == "package"
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=rf"`{CALIBRATION_DIR_ENV}` must name a folder"):
        get_efficiency("h200", "vllm")


def test_a_broken_user_file_is_one_line_naming_it(tmp_path, monkeypatch):
    (tmp_path / "trtllm").mkdir()
    shutil.copy(resources.files("cost_model.data.efficiency") / "trtllm" / "h200.toml",
                tmp_path / "trtllm" / "h200.toml")
    (tmp_path / "trtllm" / "h200.toml").write_text("[gemm.bf16\n")
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=r"h200\.toml is not valid TOML"):
        get_efficiency("h200", "trtllm")
