"""The efficiency layer: the calibrated coefficients shipped as package data load, carry their
source and fit, are looked up per format, and predict measured GEMMs within the fit's goal."""

import math
import tomllib
from importlib import resources

import numpy as np
import pytest

from cost_model.efficiency import (
    DEFAULT_FILE,
    efficiency_from_toml,
    efficiency_names,
    get_efficiency,
)
from cost_model.errors import ConfigError
from cost_model.gemm import gemm_cost, overlapped
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import get_precision

HOPPER = ("h100-sxm", "h200")
FORMATS = {"h100-sxm": {"bf16", "fp8", "fp8_block"}, "h200": {"bf16", "fp8", "fp8_block"}}
FORMATS.update({name: {"bf16", "fp8", "fp8_block", "nvfp4"} for name in catalog_names()
                if name not in HOPPER})
GOAL_MEDIAN_FRAC = 0.15  # issue: no GPU/format above 15% median |error| over its measured shapes
GEMM_KEYS = ("compute_ceiling_frac", "bandwidth_ceiling_frac", "fixed_overhead_us", "n_half_dim",
             "k_half_dim", "overlap_frac", "split_k_overhead_us", "sm_bandwidth_gb_per_s")

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


@pytest.mark.parametrize("name", efficiency_names())
def test_every_file_loads_with_a_source_on_every_coefficient(name):
    eff = get_efficiency(name)
    assert "bf16" in eff.gemm
    for fmt in eff.gemm:
        for key in GEMM_KEYS:
            assert eff.sources[f"gemm.{fmt}.{key}"], f"gemm.{fmt}.{key} has no source"


@pytest.mark.parametrize("name", catalog_names())
def test_shipped_gpus_are_calibrated_per_format(name):
    """Issue: fitted coefficients for every GPU in bf16, fp8, fp8 block-scaled and (Blackwell)
    nvfp4, each with its source, version and fit error."""
    eff = get_efficiency(name)
    assert eff.version.startswith("calibrated: aiconfigurator-core")
    assert set(eff.gemm) == FORMATS[name] == set(eff.gemm_fits)
    for fmt, fit in eff.gemm_fits.items():
        assert fit.points > 10_000, fmt
        assert fit.median_abs_error_frac <= GOAL_MEDIAN_FRAC, fmt
        assert fit.median_abs_error_frac < fit.roofline_median_abs_error_frac / 3, fmt


def test_default_file_is_the_median_of_the_calibrated_gpus():
    eff = get_efficiency(DEFAULT_FILE)
    assert set(eff.gemm) == {"bf16", "fp8", "fp8_block", "nvfp4"}
    ceilings = [get_efficiency(n).gemm["bf16"].compute_ceiling_frac for n in catalog_names()]
    assert eff.gemm["bf16"].compute_ceiling_frac == pytest.approx(np.median(ceilings), rel=1e-3)


def test_format_lookup_falls_back_to_the_rate_class():
    gb300 = get_efficiency("gb300")
    assert gb300.for_precision(get_precision("mxfp4")) is gb300.gemm["nvfp4"]
    assert gb300.for_precision(get_precision("fp16")) is gb300.gemm["bf16"]
    assert gb300.for_precision(get_precision("fp8_block")) is gb300.gemm["fp8_block"]
    assert gb300.for_precision(get_precision("fp8_block")) != gb300.gemm["fp8"]
    assert gb300.for_rate("fp4") is gb300.gemm["nvfp4"]
    assert get_efficiency("h200").for_rate("fp4") is get_efficiency("h200").gemm["bf16"]


@pytest.mark.parametrize("name, fmt, m, n, k, measured_us", MEASURED,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}x{r[3]}x{r[4]}" for r in MEASURED])
def test_predicts_measured_gemms(name, fmt, m, n, k, measured_us):
    """Kernel plus activation quantization against the measured op; tolerance: the issue's
    per-format goal (15%), which these shapes meet with room (all within 10% when pinned)."""
    cost = gemm_cost(m, n, k, get_hardware(name), fmt)
    predicted_us = float(cost.time_s + cost.quantize_s) * 1e6
    assert predicted_us == pytest.approx(measured_us, rel=GOAL_MEDIAN_FRAC)


def test_quantization_is_apart_and_only_for_quantized_activations():
    hw = get_hardware("gb300")
    assert gemm_cost(4096, 4096, 4096, hw, "bf16").quantize_s == 0.0
    fp8 = gemm_cost(4096, 4096, 4096, hw, "fp8")
    coefficients = get_efficiency("gb300").gemm["fp8"]
    stream_s = 4096 * 4096 * (2 + 1) / (hw.hbm_bytes_per_s * coefficients.quantize_bandwidth_frac)
    assert fp8.quantize_s == pytest.approx(coefficients.quantize_fixed_s + stream_s)


def test_overlap_spans_the_roofline_max_and_the_sum():
    math_s, memory_s = np.array([3.0, 1.0]), np.array([1.0, 2.0])
    assert np.allclose(overlapped(math_s, memory_s, 1.0), [3.0, 2.0])
    assert np.allclose(overlapped(math_s, memory_s, 0.0), [4.0, 3.0])


def _doc(**gemm_changes) -> dict:
    """The shipped h200 file with `gemm.bf16` entries replaced (None: removed)."""
    doc = tomllib.loads(resources.files("cost_model.data.efficiency").joinpath(
        "h200.toml").read_text())
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


def test_shipped_bandwidth_caps_are_physical():
    """One SM streams at least a quarter of its fair share of HBM (the calibration's floor: a
    kernel with few loads in flight, like NVFP4 at small M) and at most all of it."""
    for name in catalog_names():
        hw = get_hardware(name)
        for fmt, eff in get_efficiency(name).gemm.items():
            fair = hw.hbm_bytes_per_s / hw.sm_count
            assert fair / 4 * (1 - 1e-3) <= eff.sm_bandwidth_bytes_per_s, (name, fmt)
            assert eff.sm_bandwidth_bytes_per_s <= hw.hbm_bytes_per_s * (1 + 1e-3), (name, fmt)
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


def test_moe_engine_names_whose_kernels_the_terms_describe():
    """`[moe] engine` defaults to TensorRT-LLM (the tables calibrate fits by default); an engine
    the model does not know is one line naming the field and the value."""
    doc = _doc()
    doc.setdefault("moe", {}).pop("engine", None)
    assert efficiency_from_toml(doc).moe_engine == "trtllm"
    doc["moe"]["engine"] = "sglang"
    assert efficiency_from_toml(doc).moe_engine == "sglang"
    doc["moe"]["engine"] = "tgi"
    with pytest.raises(ConfigError, match=r"`moe\.engine` must be one of vllm, sglang, trtllm; "
                                          r"got 'tgi'"):
        efficiency_from_toml(doc)
