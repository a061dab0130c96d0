"""A checkpoint's `quantization_config` per component (`checkpoint_formats`), on a GPU and under
flags (`deployment_formats`), and back (`quantization_config_for`): real checkpoints' configs
(tests/data/SOURCES.md), every catalog GPU, every format pair."""

import itertools
import json

import pytest

from cost_model.errors import ConfigError
from cost_model.hardware import catalog_names, get_hardware
from cost_model.hf import (
    checkpoint_formats, deployment_formats, load_model, quantization_config_for,
)
from cost_model.hf.modules import components_of, excluded_components
from cost_model.params import count_params
from cost_model.precision import get_precision

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CHECKPOINTS = HF_CONFIGS / "checkpoints"
GPT_OSS = HF_CONFIGS / "gpt-oss-120b.json"
DEEPSEEK = MODEL_CONFIGS / "DeepSeek-V3.json"
LLAMA = MODEL_CONFIGS / "Llama-3.1-8B.json"

# (attention, dense + shared experts, routed experts, KV) as each file states them, read by hand:
READ_BY_HAND = {
    # quant_method mxfp4; modules_to_not_convert: model.layers.*.self_attn, the router,
    # embed_tokens, lm_head -> attention BF16 (the torch_dtype), the rest MXFP4; no KV scheme
    GPT_OSS: ("bf16", "mxfp4", "mxfp4", "bf16", "quantization_config"),
    # quant_method fp8, weight_block_size [128, 128], nothing excluded, no KV scheme
    DEEPSEEK: ("fp8_block", "fp8_block", "fp8_block", "bf16", "quantization_config"),
    # compressed-tensors: one group, 4-bit int weights in groups of 32, input_activations null
    # (W4A16), targets Linear; ignore self_attn, shared_experts and the dense mlp projections
    HF_CONFIGS / "Kimi-K2.5.json": ("bf16", "bf16", "w4a16", "bf16", "quantization_config"),
    # hf_quant_config.json: NVFP4, KV FP8; exclude_modules names q_a/q_b/kv_a/kv_b of all 61
    # layers (attention kept BF16), not the MLPs
    CHECKPOINTS / "DeepSeek-V3.1-NVFP4": ("bf16", "nvfp4", "nvfp4", "fp8", "hf_quant_config.json"),
    # hf_quant_config.json: FP8, KV FP8, only lm_head excluded
    CHECKPOINTS / "Llama-3.1-70B-Instruct-FP8": ("fp8", "fp8", "fp8", "fp8",
                                                 "hf_quant_config.json"),
    # hf_quant_config.json: NVFP4, KV FP8; only the 94 routers (mlp.gate) excluded
    CHECKPOINTS / "Qwen3-235B-A22B-NVFP4": ("nvfp4", "nvfp4", "nvfp4", "fp8",
                                            "hf_quant_config.json"),
    # config.json quant_method modelopt, NVFP4; ignore: self_attn* and shared_experts* on 75 of
    # 78 layers (+ the first layers whole); kv_cache_scheme 8-bit float
    CHECKPOINTS / "GLM-5.1-NVFP4": ("bf16", "bf16", "nvfp4", "fp8", "quantization_config"),
    # top-level quantization_config of the kimi_k25 wrapper: NVFP4, self_attn* ignored on all
    # 61 layers, shared experts quantized; KV 8-bit float
    CHECKPOINTS / "Kimi-K2.5-NVFP4": ("bf16", "nvfp4", "nvfp4", "fp8", "quantization_config"),
    # quant_method fp8 with 128x128 blocks; modules_to_not_convert: norms and mlp.gate routers
    CHECKPOINTS / "Qwen3-30B-A3B-FP8": ("fp8_block", "fp8_block", "fp8_block", "bf16",
                                        "quantization_config"),
    # MIXED_PRECISION quantized_layers: linear_attn / self_attn projections FP8, mlp.experts
    # and shared_expert projections W4A16_NVFP4; kv_cache_scheme null in config.json
    CHECKPOINTS / "Qwen3.6-35B-A3B-NVFP4": ("fp8", "w4a16", "w4a16", "bf16",
                                            "quantization_config"),
}


@pytest.mark.parametrize("path", list(READ_BY_HAND), ids=lambda p: p.stem if p.suffix else p.name)
def test_real_checkpoints_read_per_component(path):
    checkpoint = load_model(path).checkpoint
    got = (checkpoint.attention, checkpoint.dense, checkpoint.experts, checkpoint.kv,
           checkpoint.origin)
    assert got == READ_BY_HAND[path]
    assert checkpoint.unmodelled is None


def test_a_config_without_quantization_config_has_no_checkpoint_formats():
    assert load_model(LLAMA).checkpoint is None


@pytest.mark.parametrize("gpu", catalog_names())
def test_gpt_oss_experts_are_mxfp4_where_the_gpu_has_fp4_else_weight_only(gpu):
    """Every catalog GPU: MXFP4 experts natively where FP4 tensor cores exist, w4a16 (MXFP4
    weights, BF16 math) where not; attention and the KV cache in the checkpoint's BF16."""
    model, hw = load_model(GPT_OSS), get_hardware(gpu)
    formats = deployment_formats(model.checkpoint, model.arch, hw)
    native = hw.supports(get_precision("mxfp4"))
    assert formats.fields == {"precision": "bf16", "moe_precision": "mxfp4" if native else "w4a16",
                              "kv_precision": "bf16"}
    assert formats.note.startswith("precision from the checkpoint's quantization_config "
                                   "(quant_method mxfp4): ")
    assert ("no fp4 tensor cores" in formats.note) is (not native)


@pytest.mark.parametrize("gpu", catalog_names())
def test_deepseek_v3_defaults_to_block_fp8_on_every_gpu(gpu):
    model = load_model(DEEPSEEK)
    formats = deployment_formats(model.checkpoint, model.arch, get_hardware(gpu))
    assert formats.fields == {"precision": "fp8_block", "moe_precision": "fp8_block",
                              "kv_precision": "bf16"}
    assert "KV cache bf16 (not quantized by the checkpoint)" in formats.note


@pytest.mark.parametrize(("flags", "fields", "taken"), [
    ({"precision": "fp8"}, {"precision": "fp8", "moe_precision": "fp8"}, {}),
    ({"moe_precision": "nvfp4"},
     {"precision": "fp8_block", "moe_precision": "nvfp4", "kv_precision": "bf16"},
     {"precision": "fp8_block", "kv_precision": "bf16"}),
    ({"kv_precision": "fp8"},
     {"precision": "fp8_block", "moe_precision": "fp8_block", "kv_precision": "fp8"},
     {"precision": "fp8_block", "moe_precision": "fp8_block"}),
], ids=["precision-sets-all", "experts-only", "kv-only"])
def test_flags_override_their_component_and_what_follows_them(flags, fields, taken):
    """--precision also sets the experts and leaves the KV to the Deployment's rule (as its help
    says); --moe-precision / --kv-precision replace their component only."""
    model = load_model(DEEPSEEK)
    formats = deployment_formats(model.checkpoint, model.arch, get_hardware("b200"), **flags)
    assert formats.fields == fields and formats.checkpoint == taken
    assert (formats.note is None) is (not taken)


def test_attention_and_dense_apart_the_part_with_more_weights_sets_precision():
    """nvidia/DeepSeek-V3.1-NVFP4 keeps attention BF16 and quantizes the shared experts and the 3
    dense MLPs. By hand (DeepSeek-V3 shapes): attention per layer q_a 7168·1536 + q_b 1536·24576
    + kv_a 7168·576 + kv_b 512·32768 + o 16384·7168 = 187,105,280, x61 = 11,413,422,080;
    dense 3·(3·7168·18432) + shared 58·(3·7168·2048) = 1,189,085,184 + 2,554,331,136 =
    3,743,416,320. Attention is larger: precision bf16, and the note says why."""
    model = load_model(CHECKPOINTS / "DeepSeek-V3.1-NVFP4")
    parts = count_params(model.arch).parts
    assert sum(parts[p] for p in ("attention/q", "attention/kv", "attention/o")) == 11_413_422_080
    assert sum(parts[p] for p in ("mlp/gate", "mlp/up", "mlp/down", "moe/shared")) == \
        3_743_416_320
    formats = deployment_formats(model.checkpoint, model.arch, get_hardware("b200"))
    assert formats.fields == {"precision": "bf16", "moe_precision": "nvfp4",
                              "kv_precision": "fp8"}
    assert "dense layers and shared experts are nvfp4, priced as bf16" in formats.note
    assert "hf_quant_config.json (ModelOpt NVFP4)" in formats.note


def test_nvfp4_checkpoint_on_hopper_runs_weight_only():
    model = load_model(CHECKPOINTS / "Qwen3-235B-A22B-NVFP4")
    formats = deployment_formats(model.checkpoint, model.arch, get_hardware("h200"))
    assert formats.fields == {"precision": "w4a16", "moe_precision": "w4a16",
                              "kv_precision": "fp8"}
    assert "nvfp4 weights run as w4a16 on h200" in formats.note


# ---- schemes the cost model has no format for, and malformed configs ----------------------------


def _with_qc(qc: dict, **extra) -> dict:
    return {"num_hidden_layers": 4, "torch_dtype": "bfloat16", "quantization_config": qc, **extra}


INT8_W8A8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token"}}}}


def test_an_unmodelled_scheme_falls_back_to_the_default_and_says_so():
    model = load_model(LLAMA)
    checkpoint = checkpoint_formats(_with_qc(INT8_W8A8))
    assert (checkpoint.attention, checkpoint.experts) == (None, None)
    assert checkpoint.unmodelled == "int 8-bit weights with int 8-bit activations"
    formats = deployment_formats(checkpoint, model.arch, get_hardware("h200"))
    assert formats.fields == {"precision": "fp8", "kv_precision": "bf16"}
    assert "has no format for int 8-bit weights with int 8-bit activations" in formats.note


@pytest.mark.parametrize(("qc", "fragment"), [
    ([1, 2], "`quantization_config` ([1, 2]) must be a JSON object"),
    ({"quant_method": "compressed-tensors", "config_groups": {}}, "`config_groups` ({})"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": 4}}},
     "`config_groups.g.weights` must be an object"),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "INT4"},
     "`kv_cache_quant_algo` ('INT4') must be one of FP8, NVFP4"),
    ({"quant_method": "fp8", "modules_to_not_convert": "lm_head"},
     "`quantization_config.modules_to_not_convert` ('lm_head') must be a list"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, "`quantized_layers` (None)"),
], ids=["not-an-object", "no-groups", "group-weights", "kv-algo", "exclusions-not-list",
        "mixed-without-layers"])
def test_malformed_quantization_config_is_one_error_naming_the_field(qc, fragment):
    with pytest.raises(ConfigError) as info:
        checkpoint_formats(_with_qc(qc))
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("qc", "expected"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "w4a16"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "w8a16"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "w4a16"),
    ({"quant_method": "gptq", "bits": 8}, "w8a16"),
    ({"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["lm_head"]}, "fp8"),
    ({"quant_method": "gptq", "bits": 3}, None),
    ({"quant_method": "hqq"}, None),
], ids=["bnb-4bit", "bnb-8bit", "awq-4", "gptq-8", "fbgemm-fp8", "gptq-3-unmodelled",
        "hqq-unmodelled"])
def test_weight_only_and_other_methods(qc, expected):
    checkpoint = checkpoint_formats(_with_qc(qc))
    assert (checkpoint.attention, checkpoint.dense, checkpoint.experts) == (expected,) * 3
    assert (checkpoint.unmodelled is None) is (expected is not None)


# ---- module names -> components ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "components"), [
    ("model.layers.*.self_attn", ("attention",)),
    ("model.layers.3.self_attn.kv_a_proj_with_mqa", ("attention",)),
    ("backbone.layers.4.mixer.in_proj", ("attention",)),
    ("model.language_model.layers.0.linear_attn*", ("attention",)),
    ("re:.*mlp\\.(gate|up|gate_up|down)_proj.*", ("dense",)),
    ("model.layers.3.mlp.gate_proj", ("dense",)),
    ("*.mlp.shared_expert.*", ("dense",)),
    ("model.layers.3.mlp.experts", ("experts",)),
    ("model.layers.0.block_sparse_moe.experts.0.w1", ("experts",)),
    ("model.layers.3.mlp.gate", ()),
    ("model.layers.*.mlp.router", ()),
    ("model.layers.0.mlp.shared_expert_gate", ()),
    ("model.layers.0.self_attn.indexer*", ()),
    ("lm_head", ()),
    ("mtp.layers.0*", ()),
    ("model.layers.0*", ("attention", "dense", "experts")),
], ids=lambda v: v if isinstance(v, str) else None)
def test_module_names_map_to_components(name, components):
    assert components_of(name) == components


def test_a_component_is_excluded_on_at_least_half_the_layers():
    """4 layers: attention excluded on 2 of 4 (half) counts, dense on 1 of 4 does not."""
    names = ["model.layers.0.self_attn.q_proj", "model.layers.1.self_attn",
             "model.layers.2.mlp.down_proj"]
    assert excluded_components(names, 4) == {"attention"}
    assert excluded_components(names[:1], 4) == frozenset()


# ---- the formats back as a quantization_config ---------------------------------------------------

LINEAR = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16", "w8a16")
KV = (None, "fp8", "nvfp4")


@pytest.mark.parametrize(("precision", "moe", "kv"), list(itertools.product(LINEAR, LINEAR, KV)),
                         ids=lambda v: str(v))
def test_quantization_config_round_trips(precision, moe, kv):
    """quantization_config_for, read back by checkpoint_formats, gives every component again
    (through JSON, as a config.json stores it)."""
    qc = quantization_config_for(precision, moe, kv)
    if qc is None:
        assert (precision, moe, kv) == ("bf16", "bf16", None)
        return
    back = checkpoint_formats(json.loads(json.dumps(_with_qc(qc))))
    assert (back.attention, back.dense, back.experts, back.kv) == (precision, precision, moe,
                                                                   kv or "bf16")


@pytest.mark.parametrize(("precision", "moe", "kv", "method"), [
    ("fp8_block", None, None, "fp8"), ("bf16", "mxfp4", None, "mxfp4"),
    ("nvfp4", None, "fp8", "modelopt"), ("fp8", "nvfp4", "fp8", "compressed-tensors"),
], ids=["deepseek-block-fp8", "gpt-oss-mxfp4", "modelopt-nvfp4", "mixed"])
def test_quantization_config_uses_the_scheme_engines_ship(precision, moe, kv, method):
    assert quantization_config_for(precision, moe, kv)["quant_method"] == method


def test_a_format_without_a_checkpoint_form_is_refused():
    with pytest.raises(ConfigError, match=r"`kv_precision` \('mxfp4'\) has no checkpoint format"):
        quantization_config_for("fp8", None, "mxfp4")
