"""Hardware catalog: every shipped spec loads, is fully sourced, and matches published figures."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.errors import ConfigError
from cost_model.hardware import (
    SCALAR_FIELDS,
    LAYOUT,
    PEAK_RULE,
    TILE_MAX,
    catalog_names,
    get_hardware,
    spec_from_toml,
)
from cost_model.precision import get_precision

REQUIRED_NAMES = ("h100-sxm", "h200", "b200", "gb200", "b300", "gb300")
HOPPER = ("h100-sxm", "h200")
BLACKWELL = ("b200", "gb200", "b300", "gb300")
NVL72 = ("gb200", "gb300")

# Every scalar key of the catalog schema (see cost_model/hardware.py and h200.toml).
SCALAR_KEYS = (
    "memory.hbm_tb_per_s",
    "memory.hbm_capacity_gib",
    "compute.sm_count",
    "interconnect.scale_up_domain_gpus",
    "interconnect.scale_up_gb_per_s",
    "interconnect.scale_up_latency_us",
    "interconnect.scale_out_gb_per_s",
    "interconnect.scale_out_latency_us",
    "overheads.kernel_launch_us",
)

ALL = pytest.mark.parametrize("name", catalog_names(), ids=str)


def _catalog_doc(name: str) -> dict:
    text = resources.files("cost_model.data.hardware").joinpath(f"{name}.toml").read_text()
    return tomllib.loads(text)


def test_required_names_present():
    missing = set(REQUIRED_NAMES) - set(catalog_names())
    assert not missing, f"catalog lacks {sorted(missing)}"


@ALL
def test_spec_loads(name):
    spec = get_hardware(name)
    assert spec.name == name  # the file's `name` matches its file name
    assert spec.description


@ALL
def test_every_number_has_a_source(name):
    spec = get_hardware(name)
    keys = list(SCALAR_KEYS) + [f"peak_dense_tflop_per_s.{r}" for r in spec.peak_flop_per_s]
    keys += [f"gemm_kernels[{i}]" for i in range(len(spec.gemm_kernels))]
    for key in keys:
        assert spec.sources.get(key, "").strip(), f"{name}: `{key}` has no source"


@ALL
def test_prior_values_say_so(name):
    # Unpublished numbers (latencies, launch overhead) must be marked as priors for calibration.
    spec = get_hardware(name)
    for key in ("interconnect.scale_up_latency_us", "interconnect.scale_out_latency_us",
                "overheads.kernel_launch_us"):
        assert spec.sources[key].startswith("prior:"), f"{name}: `{key}` is not marked prior"


@ALL
def test_peaks_ordered_by_precision(name):
    peaks = get_hardware(name).peak_flop_per_s
    assert peaks.get("tf32", 0.0) < peaks["bf16"] < peaks["fp8"]  # tf32: data-center GPUs only
    if "fp4" in peaks:
        assert peaks["fp8"] < peaks["fp4"]


@ALL
def test_scale_up_domain(name):
    spec = get_hardware(name)
    assert spec.scale_up_domain_gpus == (72 if name in NVL72 else 8)
    assert spec.scale_up_bytes_per_s > spec.scale_out_bytes_per_s


@ALL
def test_first_kernel_is_the_full_rate_one(name):
    kernels = get_hardware(name).gemm_kernels
    assert kernels[0].relative_peak_frac == 1.0
    assert all(k.relative_peak_frac <= 1.0 for k in kernels)


@pytest.mark.parametrize("name", BLACKWELL, ids=str)
def test_blackwell_cluster_mma_geometry(name):
    # NVIDIA, AI Model Co-Design (2026), Figure 5: clusterMMA (2 SMs) + CGA give GEMM-N maxima at
    # multiples of 256 and 512.
    big = get_hardware(name).gemm_kernels[0]
    assert big.sms_per_tile == 2
    assert big.tile_n == 256
    assert big.tile_n * big.cluster_tiles_n == 512


@pytest.mark.parametrize("name", HOPPER, ids=str)
def test_hopper_has_no_fp4(name):
    spec = get_hardware(name)
    nvfp4 = get_precision("nvfp4")
    assert not spec.supports(nvfp4)
    with pytest.raises(ConfigError, match=name):
        spec.peak_for(nvfp4)


@pytest.mark.parametrize("name", BLACKWELL, ids=str)
def test_blackwell_has_fp4(name):
    assert get_hardware(name).supports(get_precision("nvfp4"))


@pytest.mark.parametrize(
    ("name", "rate", "published_tflop_per_s"),
    [
        # NVIDIA datasheets / rack specs, dense; see docs/gpu_specs.csv.
        ("h100-sxm", "bf16", 989.4),
        ("h200", "fp8", 1978.9),
        ("b200", "fp4", 9000.0),   # HGX B200: 72 PF dense FP4 / 8 GPUs
        ("gb200", "fp4", 10000.0),  # GB200 NVL72: 720 PF dense FP4 / 72 GPUs
        ("b300", "fp4", 13125.0),  # HGX B300: 105 PF dense FP4 / 8 GPUs (docs/gpu_specs.csv)
        ("gb300", "fp4", 15000.0),  # GB300 NVL72: 1,080 PF dense FP4 / 72 GPUs
    ],
    ids=lambda v: str(v),
)
def test_published_peaks(name, rate, published_tflop_per_s):
    got = get_hardware(name).peak_flop_per_s[rate]
    assert got == pytest.approx(published_tflop_per_s * 1e12, rel=1e-6)


def test_gb300_fp4_ridge_point():
    ridge = get_hardware("gb300").ridge_flop_per_byte(get_precision("nvfp4"))
    assert ridge == pytest.approx(15e15 / 8e12, rel=1e-9)  # 1,875 FLOP/byte
    # the rounded GB300 NVFP4 ridge, ≈ 1,900 FLOP/byte; 2% covers the rounding.
    assert ridge == pytest.approx(1900, rel=0.02)


def test_name_lookup_is_case_and_space_insensitive():
    assert get_hardware(" GB300 ") is get_hardware("gb300")


def test_unknown_name_lists_known_names():
    with pytest.raises(ConfigError, match="`hardware`") as err:
        get_hardware("h300")
    for name in REQUIRED_NAMES:
        assert name in str(err.value)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "my_gpu.toml"
    path.write_text(text)
    return path


def test_user_toml_path_loads(tmp_path):
    text = resources.files("cost_model.data.hardware").joinpath("h200.toml").read_text()
    path = _write(tmp_path, text.replace('name = "h200"', 'name = "my-h200"'))
    spec = get_hardware(str(path))
    assert spec.name == "my-h200"
    assert spec.hbm_bytes_per_s == get_hardware("h200").hbm_bytes_per_s


def test_user_toml_missing_key_names_it(tmp_path):
    text = resources.files("cost_model.data.hardware").joinpath("h200.toml").read_text()
    kept = [line for line in text.splitlines() if not line.startswith("hbm_tb_per_s")]
    path = _write(tmp_path, "\n".join(kept))
    with pytest.raises(ConfigError, match=r"`memory\.hbm_tb_per_s` is missing"):
        get_hardware(str(path))


def test_user_toml_not_toml_is_config_error(tmp_path):
    path = _write(tmp_path, "this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        get_hardware(str(path))


def _malformed(edit) -> dict:
    doc = _catalog_doc("h200")
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "named_key"),
    [
        pytest.param(lambda d: d["memory"].pop("hbm_tb_per_s"), "`memory.hbm_tb_per_s`",
                     id="missing-key"),
        pytest.param(lambda d: d["memory"]["hbm_capacity_gib"].pop("source"),
                     "`memory.hbm_capacity_gib`", id="missing-source"),
        pytest.param(lambda d: d["compute"]["sm_count"].update(source=""), "`compute.sm_count`",
                     id="empty-source"),
        pytest.param(lambda d: d["interconnect"].update(scale_up_gb_per_s=450.0),
                     "`interconnect.scale_up_gb_per_s`", id="bare-number"),
        pytest.param(lambda d: d["peak_dense_tflop_per_s"]["bf16"].update(value=-1.0),
                     "`peak_dense_tflop_per_s.bf16`", id="negative-peak"),
        pytest.param(lambda d: d["peak_dense_tflop_per_s"]["fp8"].pop("source"),
                     "`peak_dense_tflop_per_s.fp8`", id="peak-missing-source"),
        pytest.param(lambda d: d.pop("peak_dense_tflop_per_s"), "`peak_dense_tflop_per_s`",
                     id="missing-peaks"),
        pytest.param(lambda d: d["gemm_kernels"][0].pop("source"), "`gemm_kernels[0].source`",
                     id="kernel-missing-source"),
        pytest.param(lambda d: d.pop("gemm_kernels"), "`gemm_kernels`", id="missing-kernels"),
        pytest.param(lambda d: d["memory"]["hbm_tb_per_s"].update(value=-4.8),
                     "`memory.hbm_tb_per_s` must be a number > 0 and <= 80 (10x the catalog's "
                     "largest, GB200/GB300's 8 TB/s); got -4.8",
                     id="negative-bandwidth"),
    ],
)
def test_malformed_spec_names_the_key(edit, named_key):
    with pytest.raises(ConfigError) as err:
        spec_from_toml(_malformed(edit))
    assert named_key in str(err.value)


@pytest.mark.parametrize(
    "mutate, message",
    [
        pytest.param(
            lambda d: d["compute"]["sm_count"].update(value=131.5),
            "`compute.sm_count` must be a whole number > 0 and <= 1880 (10x the catalog's "
            "largest, RTX PRO 6000's 188 SMs); got 131.5",
            id="fractional-sms",
        ),
        pytest.param(
            lambda d: d["memory"]["hbm_tb_per_s"].update(value="fast"),
            "`memory.hbm_tb_per_s` must be a number > 0 and <= 80 (10x the catalog's "
            "largest, GB200/GB300's 8 TB/s); got 'fast'",
            id="not-a-number",
        ),
        pytest.param(
            lambda d: d["gemm_kernels"][0].update(tile_m=4),
            "`gemm_kernels[0].tile_m`",
            id="kernel-field",
        ),
    ],
)
def test_bad_values_are_named_in_file_units(mutate, message):
    doc = _catalog_doc("h200")
    mutate(doc)
    with pytest.raises(ConfigError) as err:
        spec_from_toml(doc)
    assert message in str(err.value)


def test_capacity_is_binary_gib():
    """HBM 'GB' on datasheets are GiB: nvidia-smi on H200 reports 151,397,597,184 bytes
    (docs/gpu_specs.csv, aiconfigurator h200_sxm.yaml)."""
    assert get_hardware("h200").hbm_capacity_bytes == 151_397_597_184


# ---- issue 29: one schema for hardware files --------------------------------------------------

RULES = {key: rule for key, (_, _, rule) in SCALAR_FIELDS.items()}
RULES.update({f"peak_dense_tflop_per_s.{rate}": PEAK_RULE for rate in LAYOUT[
    "peak_dense_tflop_per_s"]})


@ALL
def test_every_catalog_number_is_within_its_rule(name):
    """The bounds are generous: every shipped GPU sits well inside them (at most a tenth of
    each upper bound, the latencies a hundredth)."""
    doc = _catalog_doc(name)
    for key, rule in RULES.items():
        section, field = key.split(".")
        if field in doc.get(section, {}):
            value = doc[section][field]["value"]
            assert rule.holds(value) and value <= rule.high / 10, (key, value)


def _with(doc: dict, key: str, value) -> dict:
    doc = dict(doc, **{key.split(".")[0]: dict(doc[key.split(".")[0]])})
    section, field = key.split(".")
    doc[section][field] = {"value": value, "source": "test"}
    return doc


@settings(max_examples=150, deadline=None, derandomize=True)
@given(name=st.sampled_from(catalog_names()), key=st.sampled_from(sorted(RULES)),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.integers(-(10**30), 10**30), st.booleans(), st.text(max_size=5)))
def test_a_number_is_accepted_exactly_when_its_rule_holds(name, key, value):
    """Property over every GPU and every numeric key: outside its rule (non-numbers, bools,
    inf, nan, zero or negatives where a quantity must be positive, past its upper bound,
    fractional counts) a file is refused naming the key and the rule; inside it loads."""
    rule, doc = RULES[key], _with(_catalog_doc(name), key, value)
    if key.startswith("peak_") and key.split(".")[1] not in _catalog_doc(name)[
            "peak_dense_tflop_per_s"]:
        return  # a rate the GPU does not have: another test's subject
    if rule.holds(value):
        spec_from_toml(doc)
        return
    with pytest.raises(ConfigError) as err:
        spec_from_toml(doc)
    message = str(err.value)
    assert message.startswith(f"`{key}` must be {rule.text()}; got ") and "\n" not in message


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(memroy=d["memory"]), "`memroy` is not a known key (did you mean "
                                             "`memory`?)"),
    (lambda d: d["memory"].update(hbm_tb_per_sec=d["memory"]["hbm_tb_per_s"]),
     "`memory.hbm_tb_per_sec` is not a known key (did you mean `hbm_tb_per_s`?)"),
    (lambda d: d["peak_dense_tflop_per_s"].update(fp9={"value": 1.0, "source": "x"}),
     "`peak_dense_tflop_per_s.fp9` is not a known key (did you mean `fp8`?)"),
    (lambda d: d["compute"]["sm_count"].update(sorce="typo"),
     "`compute.sm_count.sorce` is not a known key (did you mean `source`?)"),
    (lambda d: d["gemm_kernels"][1].update(tile_k=64),
     "`gemm_kernels[1].tile_k` is not a known key (did you mean `tile_"),
    (lambda d: d.update(qqq=1), "`qqq` is not a known key (known: compute, description, "),
    (lambda d: d["gemm_kernels"][0].update(tile_m=4096),
     "`gemm_kernels[0].tile_m`: Input should be less than or equal to 1024"),
    (lambda d: d["gemm_kernels"][0].update(tile_m=128.0),
     "`gemm_kernels[0].tile_m`: Input should be a valid integer"),
    (lambda d: d["gemm_kernels"][0].update(cluster_tiles_m=64),
     "`gemm_kernels[0].cluster_tiles_m`: Input should be less than or equal to 16"),
    (lambda d: d["compute"]["sm_count"].update(source=5), "`compute.sm_count` must be a table"),
    (lambda d: d.update(name=["h200"]), "`name` must be text of at most 1000 characters"),
    (lambda d: d.update(gemm_kernels=5), "`gemm_kernels` must be a non-empty array of tables"),
], ids=["section", "key", "rate", "entry", "kernel", "none-close", "tile-huge", "tile-float",
        "cluster-huge", "source-number", "name-list", "kernels-number"])
def test_a_hardware_file_s_keys_and_types_are_checked(edit, message):
    doc = _catalog_doc("h200")
    edit(doc)
    with pytest.raises(ConfigError) as err:
        spec_from_toml(doc)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert TILE_MAX == 1024


@pytest.mark.parametrize("data, message", [
    (b"name = \"h\x00\"\n", "not valid TOML: "),
    (b"name = \"\xff\"\n", "not valid TOML: "),
    (b"a = " + b"[" * 50_000 + b"]" * 50_000, "not valid TOML: nested too deeply"),
], ids=["nul", "binary", "deep"])
def test_unreadable_hardware_files_are_one_line(tmp_path, data, message):
    path = _write(tmp_path, "")
    path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        get_hardware(str(path))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", [("x" * 300) + ".toml", 5, None], ids=["too-long", "int", "none"])
def test_a_hardware_name_the_system_or_the_schema_refuses_is_one_line(name):
    with pytest.raises(ConfigError, match="`hardware`") as err:
        get_hardware(name)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400
