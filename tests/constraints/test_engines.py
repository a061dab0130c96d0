"""Engine rules (constraints/engines.py): each rule fires on a deployment built to break it, with
its own message, and stays silent on one built to satisfy it; every engine runs a plain
deployment of a dense and an MoE model."""

import itertools
import json

import pytest

from constraints.engines import ENGINE_FORMATS, ENGINE_NAMES, engine_violations, format_refusal
from cost_model import PRECISIONS, Architecture, Deployment, make_architecture
from tests.data_paths import TEST_DATA

DENSE = make_architecture(name="dense", vocab_size=32000, hidden_size=4096, num_layers=32,
                          num_attention_heads=32, num_kv_heads=8, head_dim=128,
                          max_position_embeddings=8192, intermediate_size=14336)
MOE = DENSE.with_fields(name="moe", intermediate_size=0, num_experts=64, experts_per_token=4,
                        moe_intermediate_size=1024)


def _broken(engine: str, arch: Architecture, **fields) -> list[str]:
    return engine_violations(engine, arch, Deployment(**fields))


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("arch", [DENSE, MOE], ids=["dense", "moe"])
def test_every_engine_runs_plain_deployments(engine, arch):
    for fields in ({"tp": 8}, {"tp": 1, "dp": 8, "ep": 8}, {"tp": 4, "pp": 2},
                   {"tp": 8, "precision": "bf16", "kv_precision": "bf16"}):
        assert _broken(engine, arch, **fields) == [], fields


def test_no_engine_named_constrains_nothing():
    assert engine_violations(None, MOE, Deployment(tp=2, dp=4, ep=2, kvp=2,
                                                   precision="mxfp4")) == []


# ---- vLLM: expert parallelism spans TP·DP ----------------------------------------------------


@pytest.mark.parametrize("tp, dp, kvp, ep, runs", [
    (1, 8, 1, 8, True), (2, 4, 1, 8, True), (2, 2, 1, 1, True),  # EP off: experts TP over all 4
    (1, 8, 1, 4, False), (2, 2, 1, 2, False), (2, 2, 2, 8, True), (2, 2, 2, 4, False),
])
def test_vllm_expert_parallel_is_off_or_spans_tp_dp(tp, dp, kvp, ep, runs):
    """EP ∈ {1, tp·dp·kvp}: e.g. tp 2 dp 2 ep 2 (expert-TP 2) is TensorRT-LLM's, not vLLM's."""
    broken = _broken("vllm", MOE, tp=tp, dp=dp, kvp=kvp, ep=ep)
    assert (broken == []) == runs
    if not runs:
        assert broken == [f"vLLM's expert parallelism spans TP·DP = {tp * dp * kvp} GPUs: `ep` "
                          f"must be 1 or {tp * dp * kvp}, got {ep} (experts also sharded "
                          f"{tp * dp * kvp // ep}-way, a TensorRT-LLM mapping)"]
    if kvp == 1:  # SGLang runs TP4EP2-style hybrids (docs/advanced_features/…explainer.md)
        assert _broken("sglang", MOE, tp=tp, dp=dp, ep=ep) == []


# ---- TensorRT-LLM: attention DP is one GPU per group ------------------------------------------


def test_trtllm_attention_dp_needs_tp_1_for_moe():
    (message,) = _broken("trtllm", MOE, tp=2, dp=4, ep=8)
    assert "`dp` 4 with `tp` 2" in message and "TensorRT-LLM" in message
    assert _broken("trtllm", MOE, tp=1, dp=8, ep=4) == []  # expert-TP 2 is a TRT-LLM mapping
    assert _broken("trtllm", DENSE, tp=2, dp=4) == []  # dense DP groups: separate instances


# ---- SGLang: no decode context parallelism ------------------------------------------------------


def test_sglang_refuses_helix():
    (message,) = _broken("sglang", DENSE, tp=2, kvp=2)
    assert message.startswith("`kvp` 2: SGLang has no Helix")
    assert _broken("vllm", DENSE, tp=2, kvp=2) == []  # vLLM: decode context parallelism
    assert _broken("trtllm", DENSE, tp=2, kvp=2) == []  # TensorRT-LLM: Helix (CpType.HELIX)


# ---- formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine, field, fields, runs", [
    ("vllm", "kv_precision", {"kv_precision": "nvfp4"}, True),  # vLLM 0.33 CacheDType nvfp4
    ("sglang", "kv_precision", {"kv_precision": "nvfp4"}, True),  # SGLang 0.5.23 nvfp4
    ("trtllm", "kv_precision", {"kv_precision": "nvfp4"}, True),  # KV_CACHE_QUANT_ALGO NVFP4
    ("vllm", "precision", {"precision": "mxfp4", "kv_precision": "bf16"}, False),
    ("trtllm", "precision", {"precision": "mxfp4", "kv_precision": "bf16"}, False),
    ("vllm", "precision", {"precision": "nvfp4"}, True),
])
def test_formats(engine, field, fields, runs):
    broken = _broken(engine, DENSE, tp=8, **fields)
    assert (broken == []) == runs
    if not runs:
        assert broken[0].startswith(f"`{field}` ") and "does not run on" in broken[0]


@pytest.mark.parametrize("engine, runs", [("vllm", False), ("sglang", False), ("trtllm", True)])
def test_mxfp4_experts_come_with_bf16_linear_layers_on_vllm_and_sglang(engine, runs):
    """gpt-oss's layout (MXFP4 experts, BF16 attention) runs everywhere; MXFP4 experts beside
    FP8 linear layers only on TensorRT-LLM (its MIXED_PRECISION checkpoints)."""
    assert _broken(engine, MOE, tp=8, ep=8, precision="bf16", moe_precision="mxfp4",
                   kv_precision="fp8") == []
    broken = _broken(engine, MOE, tp=8, ep=8, precision="fp8", moe_precision="mxfp4")
    assert (broken == []) == runs
    if not runs:
        assert broken == [f"`moe_precision` mxfp4 on {'vLLM' if engine == 'vllm' else 'SGLang'} "
                          "quantizes the experts only: the linear layers run unquantized, not "
                          "`precision` fp8 (use bf16)"]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_load_time_refusals_agree_with_the_rules(engine):
    """A format option is refused at load exactly when no deployment can use it: the format
    table is the one the deployment rule reads."""
    table = ENGINE_FORMATS[engine]
    for name in PRECISIONS:
        assert (format_refusal(engine, "kv_precision", name) is None) == (name in table.kv_cache)
        assert (format_refusal(engine, "precision", name) is None) == (name in table.linear)
        assert (format_refusal(engine, "moe_precision", name) is None) == (name in table.experts)


def test_every_format_name_is_a_catalog_precision():
    for engine, table in ENGINE_FORMATS.items():
        for formats in (table.linear, table.experts, table.kv_cache, table.experts_only):
            assert formats <= PRECISIONS.keys(), engine


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_rule_never_depends_on_fields_it_does_not_name(engine):
    """pp and the serving mode are runnable on every engine (vLLM, SGLang and TensorRT-LLM all
    pipeline and disaggregate): changing them never changes the verdict."""
    for tp, dp, ep in itertools.product((1, 2, 8), (1, 4), (1, 2, 8)):
        if (tp * dp) % ep:
            continue
        base = _broken(engine, MOE, tp=tp, dp=dp, ep=ep)
        for extra in ({"pp": 4}, {"serving": "disaggregated"}, {"spec_tokens": 2}):
            assert _broken(engine, MOE, tp=tp, dp=dp, ep=ep, **extra) == base


# ---- the format tables against the engines' own argument tables ---------------------------------

# each KV format's `--kv-cache-dtype` values and each linear format's `--quantization` methods
# (a BF16/FP16 model's `auto`; block FP8 is read by the "fp8" method from the checkpoint;
# weight-only formats by GPTQ/AWQ-Marlin)
KV_DTYPES = {"bf16": {"auto", "bfloat16", "bf16"}, "fp16": {"auto", "float16"},
             "fp8": {"fp8", "fp8_e4m3"}, "nvfp4": {"nvfp4"}, "mxfp4": {"mxfp4"},
             "fp8_block": set(), "w4a16": set(), "w8a16": set(), "fp32": set()}
LINEAR_METHODS = {"bf16": None, "fp16": None, "fp8": {"fp8"}, "fp8_block": {"fp8"},
                  "nvfp4": {"modelopt_fp4"}, "mxfp4": {"mxfp4"},
                  "w4a16": {"gptq_marlin", "awq_marlin"}, "w8a16": {"gptq_marlin"}}


def _choices(engine: str, flag: str) -> set:
    table = json.loads((TEST_DATA / "engine_args" / f"{engine}.json").read_text())
    return set(table["flags"][flag]["choices"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_kv_formats_are_exactly_those_the_engine_names(engine):
    """vLLM 0.33.0 and SGLang 0.5.23 (their parsers' `--kv-cache-dtype` choices): a KV format is
    allowed exactly when the engine has a value for it (vLLM 0.33 added nvfp4)."""
    choices = _choices(engine, "--kv-cache-dtype")
    for name in PRECISIONS:
        named = bool(KV_DTYPES.get(name, set()) & choices)
        assert (name in ENGINE_FORMATS[engine].kv_cache) == named, (engine, name)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_quantized_linear_format_has_a_method_of_the_engine(engine):
    choices = _choices(engine, "--quantization")
    for name in ENGINE_FORMATS[engine].linear | ENGINE_FORMATS[engine].experts:
        methods = LINEAR_METHODS[name]
        assert methods is None or methods & choices, (engine, name)
