"""Hugging Face config import (defaults, refusals), export (exact in transformers), file loading."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from cost_model.architecture import Architecture, periodic_layer_types
from cost_model.batch import ArchArrays
from cost_model.errors import ConfigError
from cost_model.hf import (
    ARCHSCOUT_JSON_KEY, REMOTE_CODE_DEFAULTS, SUPPORTED_MODEL_TYPES, TRANSFORMERS_DEFAULTS,
    TRANSFORMERS_MODEL_TYPES, architecture_from_hf_config, architecture_to_hf_config,
    architecture_to_json_dict, load_architecture,
)
from cost_model.linear_attention import linear_state_bytes_per_sequence
from cost_model.params import count_params

from tests.cost_model.transformers_meta import meta_model, transformers_config
from tests.data_paths import HF_CONFIGS as TEST_CONFIGS
from tests.data_paths import MODEL_CONFIGS

CONFIG_FILES = sorted(MODEL_CONFIGS.glob("*.json")) + sorted(TEST_CONFIGS.glob("*.json"))
# no phi3 export: same model, unfused, windowed; Kimi-K2 is exported as the DeepSeek-V3 it is
EXPORTED_AS = {"Phi-3-mini-4k-instruct": "mistral", "Kimi-K2-Instruct": "deepseek_v3",
               "Kimi-K2.5": "deepseek_v3"}
# Imported only: no exportable model_type has Llama 4's shared expert with chunked attention.
# Nemotron-NAS: transformers has no class for its per-layer blocks; Kimi Linear: no exporter yet.
NOT_EXPORTED = ("serving_Llama-4-Scout-17B-16E-Instruct",
                "serving_Llama-4-Maverick-17B-128E-Instruct", "Llama-3_3-Nemotron-Super-49B-v1",
                "synthetic-kimi-linear-checkpoint-form")


def _config(stem: str) -> dict:
    path = MODEL_CONFIGS / f"{stem}.json"
    path = path if path.exists() else TEST_CONFIGS / f"{stem}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _state_bytes_per_layer(arch: Architecture) -> float:
    """What one linear-attention layer keeps per sequence, as the memory model counts it
    (`linear_attention.linear_state_bytes_per_sequence` over the model, per layer)."""
    total = linear_state_bytes_per_sequence(ArchArrays.from_architectures([arch]))
    return float(np.ravel(total)[0]) / arch.mixer.num_linear_attention_layers


def _transformers_model(config_or_dir: dict | Path) -> tuple[int, int]:
    """(parameters, sliding-window layers) of the model transformers builds, on the meta device."""
    config = transformers_config(config_or_dir)
    model = meta_model(config)
    return sum(parameter.numel() for parameter in model.parameters()), _sliding_layers(config)


def _sliding_layers(config) -> int:
    """Layers whose attention transformers 5.24 restricts to `config.sliding_window` (or, for
    Llama 4, to chunks of `attention_chunk_size`, which archscout models as a window)."""
    config = config.get_text_config()
    types = getattr(config, "layer_types", None) or []
    if getattr(config, "attention_chunk_size", None) is not None:
        return types.count("chunked_attention")
    if getattr(config, "sliding_window", None) is None:
        return 0
    types = getattr(config, "layer_types", None)
    return types.count("sliding_attention") if types else config.num_hidden_layers


def _same_shape(first: Architecture, second: Architecture) -> bool:
    """Equal but for name and family (and an unused dense width: Mixtral/gpt-oss have no key)."""
    unused = {} if second.num_dense_layers else {"intermediate_size": second.ffn.intermediate_size}
    return first.with_fields(name=second.name, family=second.family, **unused) == second


# ---- import ------------------------------------------------------------------------------------


IN_TRANSFORMERS = [t for t in SUPPORTED_MODEL_TYPES if t not in REMOTE_CODE_DEFAULTS]


@pytest.mark.parametrize("model_type", IN_TRANSFORMERS)
def test_defaults_equal_transformers_config_class(model_type):
    transformers = pytest.importorskip("transformers")
    config_class = transformers.CONFIG_MAPPING[TRANSFORMERS_MODEL_TYPES.get(model_type, model_type)]
    declared = {field.name: field.default for field in dataclasses.fields(config_class)}
    for key, value in TRANSFORMERS_DEFAULTS[model_type].items():
        # a key the config class does not declare is read with getattr(config, key, derived): None
        assert declared.get(key) == value, f"{model_type}.{key}"


# 32 heads: divisible by every family's default num_key_value_heads (4, 8, 32)
# vocab: above every family's default token ids (Phi-3 pads with 32000)
MINIMAL = dict(
    vocab_size=40000, hidden_size=128, num_hidden_layers=2, num_attention_heads=32,
    intermediate_size=256,
)
MINIMAL_MOE = {
    "mixtral": {"num_local_experts": 4},  # experts as wide as intermediate_size
    "gpt_oss": {"num_local_experts": 4},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    "deepseek_v3": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "first_k_dense_replace": 1},
    "minimax_m2": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "kimi_linear": {"num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "pad_token_id": 0},  # its default pad id lies beyond this vocabulary
    "nemotron_h": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "moe_shared_expert_intermediate_size": 32},
}
# Gemma 4's config class defaults to per-layer input embeddings, which archscout refuses
MINIMAL_MOE["gemma4_text"] = {"hidden_size_per_layer_input": 0}
MINIMAL_MOE["kimi_k2"] = MINIMAL_MOE["deepseek_v32"] = MINIMAL_MOE["glm_moe_dsa"] = (
    MINIMAL_MOE["deepseek_v3"]
)


@pytest.mark.parametrize("model_type", IN_TRANSFORMERS)
def test_absent_keys_take_transformers_defaults(model_type):
    """head_dim, kv heads, tying, windows… absent: counts and windows still equal transformers'."""
    config = {"model_type": model_type, **MINIMAL, **MINIMAL_MOE.get(model_type, {})}
    arch = architecture_from_hf_config(config)
    params, sliding = _transformers_model(config)
    assert (count_params(arch).total_params, arch.num_sliding_layers) == (params, sliding)


@pytest.mark.parametrize(
    ("model_type", "tied", "head_dim"),
    [("gemma2", True, 256), ("qwen3", False, 128), ("llama", False, 4), ("gpt_oss", False, 64)],
)
def test_documented_family_defaults(model_type, tied, head_dim):
    # transformers 5.24 configuration_*.py: Gemma2 ties embeddings, Qwen3 head_dim 128, Llama
    # derives hidden/heads = 128/32, gpt-oss head_dim 64.
    extra = {"num_local_experts": 4} if model_type == "gpt_oss" else {}
    arch = architecture_from_hf_config({"model_type": model_type, **MINIMAL, **extra})
    assert (arch.tie_word_embeddings, arch.attention.head_dim) == (tied, head_dim)


# what a family's default config needs to be importable at all (Gemma 4: no PLE)
IMPORTABLE_DEFAULTS = {"gemma4_text": {"hidden_size_per_layer_input": 0}}


@pytest.mark.parametrize("model_type", IN_TRANSFORMERS)
def test_full_dump_of_default_config_is_accepted(model_type):
    """`PretrainedConfig.to_dict()` holds every attribute, derived ones included (qk_head_dim…)."""
    transformers = pytest.importorskip("transformers")
    importable = IMPORTABLE_DEFAULTS.get(model_type, {})
    full = transformers.CONFIG_MAPPING[
        TRANSFORMERS_MODEL_TYPES.get(model_type, model_type)
    ](**importable).to_dict()
    full["model_type"] = model_type
    assert architecture_from_hf_config(full) == architecture_from_hf_config(
        {"model_type": model_type, **importable}
    )


def test_unsupported_model_type_is_named_with_the_supported_list():
    with pytest.raises(
        ConfigError, match=r"`model_type` \('falcon'\) is not supported; supported: llama, "
    ):
        architecture_from_hf_config({"model_type": "falcon", **MINIMAL})


REFUSED = [
    ("llama-experts", "Llama-3.1-8B", {"num_local_experts": 8},
     "`num_local_experts` (8) is not supported"),
    ("llama-window", "Llama-3.1-8B", {"sliding_window": 4096},
     "`sliding_window` (4096) is not supported"),
    ("mistral-layer-types", "Mistral-7B-v0.1", {"layer_types": ["full_attention"] * 32},
     "`layer_types`"),
    ("phi3-qk-layernorm", "Phi-3-mini-4k-instruct", {"qk_layernorm": True},
     "`qk_layernorm` (True)"),
    ("mistral-bias", "Mistral-7B-v0.1", {"attention_bias": True},
     "`attention_bias` (True) is not supported for model_type `mistral`: must be False"),
    ("qwen2-no-bias", "Qwen2.5-0.5B", {"attention_bias": False}, "`attention_bias` (False)"),
    ("qwen3-moe-scattered-dense", "Qwen3-30B-A3B", {"mlp_only_layers": [0, 5]},
     "`mlp_only_layers` ([0, 5]) is not supported: only leading layers 0..k-1 can be dense"),
    ("deepseek-moe-freq", "DeepSeek-V3", {"moe_layer_freq": 2},
     "`moe_layer_freq` (2) is not supported"),
    ("gemma2-bidirectional", "gemma-2-9b", {"use_bidirectional_attention": True},
     "`use_bidirectional_attention` (True)"),
    ("gemma2-layer-types-length", "gemma-2-9b", {"layer_types": ["full_attention"] * 3},
     "`layer_types` (['full_attention', 'full_attention', 'full_attention']) must list"),
    ("gpt-oss-alias-conflict", "gpt-oss-20b", {"experts_per_token": 2},
     "`experts_per_token` (2) must equal `num_experts_per_tok` (4)"),
    ("zero-hidden", "Llama-3.1-8B", {"hidden_size": 0},
     "`hidden_size` (0) must be an integer >= 1"),
    ("pruned-heads", "Llama-3.1-8B", {"pruned_heads": {"0": [1]}}, "`pruned_heads` ({'0': [1]})"),
    ("heads-divisible", "Llama-3.1-8B", {"num_attention_heads": 30},
     "`num_attention_heads` (30) must be divisible by `num_kv_heads` (8)"),
    ("top-k", "Mixtral-8x7B-v0.1", {"num_experts_per_tok": 9},
     "`experts_per_token` (9) must be between 1 and `num_experts` (8)"),
    ("llama4-scattered-moe", "serving_Llama-4-Maverick-17B-128E-Instruct",
     {"text_config": {"moe_layers": [0, 5]}},
     "`moe_layers` ([0, 5]) is not supported: only every `interleave_moe_layer_step`-th layer"),
    ("llama4-layer-types", "serving_Llama-4-Scout-17B-16E-Instruct",
     {"text_config": {"layer_types": ["sliding_attention"] * 48}},
     "`layer_types` (['sliding_attention'"),
    ("llama4-text-config", "serving_Llama-4-Scout-17B-16E-Instruct", {"text_config": [1]},
     "`text_config` ([1]) must be the language model's config (a dict) for model_type `llama4`"),
    ("minimax-no-qk-norm", "MiniMax-M2.5", {"use_qk_norm": False},
     "`use_qk_norm` (False) is not supported"),
    ("minimax-shared-expert", "MiniMax-M2.5", {"shared_intermediate_size": 1536},
     "`shared_intermediate_size` (1536) is not supported"),
    ("glm5-shared-indexer", "GLM-5", {"indexer_types": ["full", "shared"] * 39},
     "`indexer_types` (['full', 'shared'"),
    ("glm5-indexer-freq", "GLM-5", {"index_topk_freq": 4},
     "`index_topk_freq` (4) is not supported"),
    ("dsa-scattered-dense", "DeepSeek-V3.2",
     {"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 59},
     "`mlp_layer_types` (['sparse', 'dense'"),
    ("dsa-no-q-lora", "DeepSeek-V3.2", {"q_lora_rank": None},
     "needs `attention_kind` 'mla' with `q_lora_rank` >= 1"),
    ("nas-block-count", "Llama-3_3-Nemotron-Super-49B-v1", {"num_hidden_layers": 79},
     "`block_configs` must list one block per layer (79 layers)"),
]


def _nas_with_block(index: int, part: str, **change) -> dict:
    config = _config("Llama-3_3-Nemotron-Super-49B-v1")
    blocks = [dict(block) for block in config["block_configs"]]
    blocks[index] = {**blocks[index], part: {**blocks[index][part], **change}}
    return {**config, "block_configs": blocks}


@pytest.mark.parametrize(
    ("index", "part", "change", "message"),
    [
        (0, "attention", {"replace_with_linear": True},
         "`block_configs[0].attention.replace_with_linear` (True) is not supported"),
        (1, "attention", {"n_heads_in_group": 4},
         "`block_configs` n_heads_in_group ([4, 8]) is not supported"),
        (2, "attention", {"window_length": 4096},
         "`block_configs[2].attention.window_length` (4096)"),
        (3, "ffn", {"replace_with_linear": True},
         "`block_configs[3].ffn.replace_with_linear` (True)"),
        (4, "ffn", {"ffn_mult": 0}, "`block_configs[4].ffn.ffn_mult` (0) must be a number > 0"),
    ],
    ids=["linear-attention", "mixed-kv-heads", "window", "linear-ffn", "zero-mult"],
)
def test_nemotron_nas_refuses_what_it_cannot_represent(index, part, change, message):
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config(_nas_with_block(index, part, **change))
    assert message in str(info.value)


def test_nemotron_nas_reads_per_layer_blocks():
    """Super-49B: 31 layers without attention (and without its norm), six distinct FFN widths;
    a layer without FFN gets width 0."""
    arch = architecture_from_hf_config(_config("Llama-3_3-Nemotron-Super-49B-v1"))
    assert (arch.num_attention_layers, arch.attention.num_kv_heads,
            arch.ffn.intermediate_size) == (49, 8, 28672)
    assert sorted(set(arch.ffn.layer_ffn_widths)) == [2816, 5632, 7168, 14336, 17920, 28672]
    assert arch.mixer.layer_mixers[:8] == ("attention",) * 6 + ("none",) * 2
    no_ffn = architecture_from_hf_config(_nas_with_block(5, "ffn", no_op=True))
    assert (no_ffn.ffn.layer_ffn_widths[5], no_ffn.num_dense_layers) == (0, 79)
    params = count_params(arch).total_params - count_params(no_ffn).total_params
    assert params == 3 * 8192 * 28672 + 8192  # its SwiGLU and its post-attention norm


def test_llama4_reads_its_language_model():
    """The wrapper's text_config and the bare text config give one architecture: Maverick's MoE
    layers are every second layer with one shared expert, dense layers use
    intermediate_size_mlp, and the 36 chunked-attention layers slide over 8,192 tokens."""
    wrapped = _config("serving_Llama-4-Maverick-17B-128E-Instruct")
    arch = architecture_from_hf_config(wrapped)
    assert architecture_from_hf_config(wrapped["text_config"], arch.name) == arch
    assert (arch.num_moe_layers, arch.num_dense_layers, arch.ffn.num_shared_experts) == (24, 24, 1)
    assert (arch.ffn.intermediate_size, arch.ffn.moe_intermediate_size,
            arch.ffn.num_experts) == (16384, 8192, 128)
    assert (arch.num_sliding_layers, arch.attention.sliding_window) == (36, 8192)


@pytest.mark.parametrize(
    ("stem", "change", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_configs_name_the_field_and_value(stem, change, message):
    config = _config(stem)
    if isinstance(change.get("text_config"), dict):  # a change inside Llama 4's text_config
        change = {"text_config": {**config["text_config"], **change["text_config"]}}
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**config, **change})
    assert message in str(info.value)


def test_harmless_keys_are_ignored():
    config = _config("Llama-3.1-8B")
    noisy = {**config, "rope_scaling": None, "quantization_config": {"quant_method": "fp8"},
             "use_cache": False, "custom_flag": True, "attention_dropout": 0.1,
             "output_hidden_states": True}
    assert architecture_from_hf_config(noisy) == architecture_from_hf_config(config)


@pytest.mark.parametrize(
    ("stem", "alias", "key"),
    [
        ("Mixtral-8x7B-v0.1", "num_experts", "num_local_experts"),
        ("Qwen3-30B-A3B", "num_local_experts", "num_experts"),
        ("DeepSeek-V3", "num_local_experts", "n_routed_experts"),
    ],
    ids=["mixtral", "qwen3_moe", "deepseek_v3"],
)
def test_attribute_map_aliases(stem, alias, key):
    config = _config(stem)
    aliased = {alias if name == key else name: value for name, value in config.items()}
    assert architecture_from_hf_config(aliased) == architecture_from_hf_config(config)


# ---- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[path.stem for path in CONFIG_FILES])
def test_export_round_trips_exactly_through_transformers(path, tmp_path):
    arch = load_architecture(path)
    if path.stem in NOT_EXPORTED:
        with pytest.raises(ConfigError, match="no supported model_type represents it"):
            architecture_to_hf_config(arch)
        return
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == EXPORTED_AS.get(path.stem, arch.family)
    (tmp_path / "config.json").write_text(json.dumps(exported), encoding="utf-8")
    params, sliding = _transformers_model(tmp_path)  # AutoConfig.from_pretrained(folder)
    # source: transformers 5.24 meta-device model of the exported config; tolerance 0
    assert (params, sliding) == (count_params(arch).total_params, arch.num_sliding_layers)
    assert _same_shape(load_architecture(tmp_path), arch)


BASE = dict(
    name="custom", vocab_size=1000, hidden_size=128, num_layers=4, num_attention_heads=4,
    num_kv_heads=2, head_dim=32, intermediate_size=256, max_position_embeddings=4096,
)
MOE = dict(BASE, num_experts=8, experts_per_token=2, moe_intermediate_size=64)
MLA = dict(
    BASE, attention_kind="mla", num_kv_heads=4, head_dim=24, kv_lora_rank=32, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16,
)
EXPORTABLE = [
    ("dense-gqa", BASE, "llama"),
    ("heads-not-dividing-hidden", dict(BASE, hidden_size=130), "mistral"),
    ("all-sliding", dict(BASE, sliding_window=64), "mistral"),
    ("qkv-bias-only", dict(BASE, qkv_bias=True), "qwen2"),
    ("qk-norm-mixed-sliding",
     dict(BASE, qk_norm=True, sliding_window=64, layer_types=periodic_layer_types(4, 3)), "qwen3"),
    ("sandwich-norms",
     dict(BASE, norms_per_layer=4, tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh"),
     "gemma2"),
    ("moe", MOE, "mixtral"),
    ("moe-qk-norm-dense-first-period-2",
     dict(MOE, qk_norm=True, first_dense_layers=1, moe_layer_period=2),
     "qwen3_moe"),
    ("moe-sinks-biases-no-window",
     dict(MOE, router_bias=True, expert_bias=True, attention_sinks=True), "gpt_oss"),
    ("dense-mla", MLA, "deepseek_v3"),
    ("mla-moe-shared-q-lora",
     dict(MLA, num_experts=8, experts_per_token=2, moe_intermediate_size=64, num_shared_experts=2,
          first_dense_layers=1, q_lora_rank=48), "deepseek_v3"),
    ("moe-layer-qk-norm", dict(MOE, intermediate_size=0, qk_norm=True, qk_norm_scope="layer"),
     "minimax_m2"),
    ("mla-dsa-moe",
     dict(MLA, num_experts=8, experts_per_token=2, moe_intermediate_size=64, num_shared_experts=1,
          first_dense_layers=1, q_lora_rank=48, index_heads=4, index_head_dim=16, index_topk=64),
     "deepseek_v32"),
]


@pytest.mark.parametrize(
    ("fields", "model_type"), [c[1:] for c in EXPORTABLE], ids=[c[0] for c in EXPORTABLE]
)
def test_custom_architectures_export_exactly(fields, model_type):
    arch = Architecture.model_validate(fields)
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == model_type
    # source: transformers 5.24 meta-device model; tolerance 0
    assert _transformers_model(exported) == \
        (count_params(arch).total_params, arch.num_sliding_layers)
    assert _same_shape(architecture_from_hf_config(exported), arch)


NOT_EXPORTABLE = [
    ("ungated-mlp", dict(BASE, gated_mlp=False), "`gated_mlp` in (True,) (got False)"),
    ("gqa-shared-experts-o-bias", dict(MOE, num_shared_experts=1, o_bias=True),
     "the closest, `glm4_moe`, needs `o_bias` in (False,) (got True)"),
    ("mixed-sliding-plain", dict(BASE, sliding_window=64, layer_types=periodic_layer_types(4, 2)),
     "the closest, `llama`, needs `sliding_pattern` in ('none',) (got 'mixed')"),
    ("nas-no-attention-layer", dict(BASE, layer_mixers=("attention", "none") * 2),
     "`is_heterogeneous` in (False,) (got True)"),
    ("mla-moe-period",
     dict(MLA, num_experts=4, experts_per_token=1, moe_intermediate_size=16, moe_layer_period=2),
     "the closest, `deepseek_v3`, needs `moe_layer_period` in (1,) (got 2)"),
]


@pytest.mark.parametrize(
    ("fields", "message"), [c[1:] for c in NOT_EXPORTABLE], ids=[c[0] for c in NOT_EXPORTABLE]
)
def test_unrepresentable_architectures_are_refused(fields, message):
    with pytest.raises(ConfigError, match="cannot export `custom`") as info:
        architecture_to_hf_config(Architecture.model_validate(fields))
    assert message in str(info.value)


# ---- files -------------------------------------------------------------------------------------


def test_our_json_round_trips(tmp_path):
    arch = Architecture.model_validate(dict(MOE, sliding_window=64,
                                            layer_types=periodic_layer_types(4, 2)))
    marked, plain = tmp_path / "marked.json", tmp_path / "plain.json"
    marked.write_text(json.dumps(architecture_to_json_dict(arch)), encoding="utf-8")
    plain.write_text(json.dumps(arch.model_dump(mode="json")), encoding="utf-8")
    assert load_architecture(marked) == load_architecture(plain) == arch


def test_hf_folder_is_named_after_it(tmp_path):
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_config("Llama-3.1-8B")), encoding="utf-8")
    assert load_architecture(folder).name == "Llama-3.1-8B"


BAD_FILES = [
    ("not-json", "{", "cannot be read as JSON"),
    ("not-an-object", "[1, 2]", "must hold a JSON object; got list"),
    ("extra-field", json.dumps({**BASE, "hidden_dim": 1}),
     "`hidden_dim` (1): Extra inputs are not permitted"),
    ("missing-field", json.dumps({k: v for k, v in BASE.items() if k != "head_dim"}),
     "`head_dim` (missing)"),
    ("future-version", json.dumps({ARCHSCOUT_JSON_KEY: 2, **BASE}),
     f"`{ARCHSCOUT_JSON_KEY}` (2) must be 1"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_FILES],
                         ids=[c[0] for c in BAD_FILES])
def test_bad_files_raise_config_error(tmp_path, text, message):
    path = tmp_path / "arch.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_architecture(path)
    assert message in str(info.value)


def test_missing_file_raises_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        load_architecture(tmp_path / "absent.json")


# ---- hybrid layer mixers (issue 15) -------------------------------------------------------------

HYBRID = dict(
    BASE, layer_mixers=("gated_deltanet",) * 3 + ("attention",), qk_norm=True,
    attention_output_gate=True, linear_num_key_heads=2, linear_key_head_dim=16,
    linear_num_value_heads=4, linear_value_head_dim=24, linear_conv_kernel=4,
)
HYBRID_MOE = dict(HYBRID, num_experts=8, experts_per_token=2, moe_intermediate_size=32,
                  num_shared_experts=1, shared_expert_intermediate_size=64, shared_expert_gate=True)


@pytest.mark.parametrize(
    ("fields", "model_type"),
    [(HYBRID, "qwen3_5_text"), (dict(HYBRID_MOE, intermediate_size=0), "qwen3_5_moe_text"),
     (dict(HYBRID_MOE, first_dense_layers=1), "qwen3_next"),
     (dict(HYBRID_MOE, moe_layer_period=2), "qwen3_next")],
    ids=["dense-3-linear-1-full", "moe-every-layer", "moe-dense-first", "moe-period-2"],
)
def test_hybrid_designs_export_exactly(fields, model_type):
    """A searched hybrid (3 Gated DeltaNet : 1 gated attention) exports to the Qwen family that
    expresses it, and transformers builds exactly the count we report."""
    arch = Architecture.model_validate(fields)
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == model_type
    # source: transformers 5.24 meta-device model; tolerance 0
    assert _transformers_model(exported)[0] == count_params(arch).total_params
    assert _same_shape(architecture_from_hf_config(exported), arch)


def test_qwen3_5_reads_its_language_model():
    """Qwen3.5-35B-A3B: 30 Gated DeltaNet + 10 gated attention layers (every 4th full), 256
    experts of 512 plus a gated shared expert of 512; its state per sequence and layer is 32 v
    heads x 128 x 128 plus 3 conv inputs of 2·16·128 + 32·128."""
    arch = architecture_from_hf_config(_config("Qwen3.5-35B-A3B"))
    assert (arch.family, arch.mixer.num_linear_attention_layers, arch.num_attention_layers) == (
        "qwen3_5_moe_text", 30, 10)
    assert arch.mixer.layer_mixers[:4] == ("gated_deltanet",) * 3 + ("attention",)
    assert (arch.ffn.num_experts, arch.ffn.shared_expert_intermediate_size,
            arch.ffn.shared_expert_gate) == (256, 512, True)
    # per layer: fp32 states of 32 v heads of 128 x 128, BF16 conv inputs (kernel 4 - 1 = 3 past)
    # over q, k (16 heads of 128 each) and v (32 of 128)
    assert _state_bytes_per_layer(arch) == 4 * 32 * 128 * 128 + 2 * 3 * (2 * 16 * 128 + 32 * 128)


def test_qwen_hybrid_refusals():
    config = _config("Qwen3.5-35B-A3B")
    text = config["text_config"]
    for change, message in (
        ({"attn_output_gate": False}, "`attn_output_gate` (False) is not supported"),
        ({"mlp_only_layers": [0]}, "`mlp_only_layers` ([0]) is not supported"),
        ({"shared_expert_intermediate_size": 0}, "`shared_expert_intermediate_size` (0) must be"),
        ({"layer_types": ["sliding_attention"] * 40}, "`layer_types` (['sliding_attention'"),
    ):
        with pytest.raises(ConfigError) as info:
            architecture_from_hf_config({**config, "text_config": {**text, **change}})
        assert message in str(info.value)


def test_gemma3_five_sliding_layers_per_global():
    """Gemma 3 (no `layer_types`): every 6th layer global, the others slide over the window; head
    QK norms and Gemma 2's four norms per layer; `sliding_window_pattern` sets the period."""
    config = _config("synthetic-gemma3-five-sliding-per-global")
    arch = architecture_from_hf_config(config)
    assert (arch.num_sliding_layers, arch.num_full_attention_layers,
            arch.attention.sliding_window) == (10, 2, 512)
    assert (arch.attention.qk_norm, arch.norms_per_layer, arch.tie_word_embeddings) == \
        (True, 4, True)
    every_third = architecture_from_hf_config({**config, "sliding_window_pattern": 3})
    assert every_third.num_full_attention_layers == 4
    assert _transformers_model({**config, "sliding_window_pattern": 3})[1] == 8


MAMBA = dict(linear_num_key_heads=2, linear_key_head_dim=16, linear_num_value_heads=8,
             linear_value_head_dim=16, linear_conv_kernel=4, linear_conv_bias=True)
# a block per layer, as the real Nemotron-H patterns (some Mamba-2 block without an FFN after it)
NEMOTRON_H_DENSE = dict(
    BASE, num_layers=6, gated_mlp=False, hidden_act="relu2", intermediate_size=256,
    layer_mixers=("mamba2", "none", "attention", "none", "mamba2", "mamba2"),
    layer_ffn_widths=(0, 256, 0, 256, 0, 0), **MAMBA,
)
NEMOTRON_H_MOE = dict(
    NEMOTRON_H_DENSE, num_experts=8, experts_per_token=2, moe_intermediate_size=32,
    num_shared_experts=1, shared_expert_intermediate_size=64,
    layer_moe=(False, True, False, False, False, False), layer_ffn_widths=(0, 0, 0, 256, 0, 0),
)


@pytest.mark.parametrize(
    "fields", [NEMOTRON_H_DENSE, NEMOTRON_H_MOE, dict(NEMOTRON_H_MOE, linear_conv_bias=False)],
    ids=["mamba-attention-mlp", "mamba-attention-moe-shared", "no-conv-bias"],
)
def test_nemotron_h_designs_export_exactly(fields):
    """Mamba-2 / attention / MLP / MoE blocks, one per layer: exported as nemotron_h, built by
    transformers with exactly our count."""
    arch = Architecture.model_validate(fields)
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == "nemotron_h"
    # source: transformers 5.24 meta-device model; tolerance 0
    assert _transformers_model(exported)[0] == count_params(arch).total_params
    assert _same_shape(architecture_from_hf_config(exported), arch)


def test_nemotron_h_split_form_imports_as_one_layer_per_pair():
    """A pattern that is wholly (mixer, FFN) pairs with Mamba-2 (what export writes for a hybrid
    whose every layer has both) is read one layer per pair: 6 blocks M - * - M - are 3 layers,
    each a mixer then its MLP. The same model as the 6 one-block layers (mamba2, none,
    attention, none, mamba2, none): the same count and the same blocks when exported again; the
    file cannot tell the two apart, and the pair reading is the design export wrote."""
    alternating = Architecture.model_validate(dict(
        NEMOTRON_H_DENSE, layer_mixers=("mamba2", "none", "attention", "none", "mamba2", "none"),
        layer_ffn_widths=(0, 256, 0, 256, 0, 256)))
    exported = architecture_to_hf_config(alternating)
    merged = architecture_from_hf_config(exported)
    assert (merged.num_layers, merged.mixer.layer_mixers) == (3, ("mamba2", "attention", "mamba2"))
    assert (merged.num_dense_layers, merged.ffn.layer_ffn_widths) == (3, None)
    assert count_params(merged).total_params == count_params(alternating).total_params
    again = architecture_to_hf_config(merged)
    assert again["layers_block_type"] == exported["layers_block_type"]


def test_nemotron_h_reads_its_block_pattern():
    """Nemotron-H-56B: 118 blocks, 54 Mamba-2 (256 heads of 64, 8 groups, state 256), 10
    attention, 54 ungated relu² MLPs of 32,768; Nemotron-3-Nano: 23 Mamba-2, 6 attention, 23 MoE
    blocks (128 experts, top-6, shared expert of 3,712)."""
    big = architecture_from_hf_config(_config("Nemotron-H-56B-Base-8K"))
    assert (big.num_layers, big.mixer.num_linear_attention_layers,
            big.num_attention_layers) == (118, 54, 10)
    assert (big.num_dense_layers, big.ffn.gated_mlp, big.ffn.hidden_act) == (54, False, "relu2")
    assert _state_bytes_per_layer(big) == 4 * 256 * 64 * 256 + 2 * 3 * (256 * 64 + 2 * 8 * 256)
    nano = architecture_from_hf_config(_config("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
    assert (nano.num_moe_layers, nano.num_dense_layers, nano.ffn.experts_per_token) == (23, 0, 6)
    assert nano.ffn.shared_expert_intermediate_size == 3712


def test_falcon_h1_runs_attention_and_mamba_side_by_side():
    """Falcon-H1: every layer both attends (GQA) and runs Mamba-2 (12 heads of 384 / 12, 2 groups
    of state 32, conv bias, gated norm here); a custom parallel hybrid exports exactly."""
    arch = architecture_from_hf_config(_config("synthetic-falcon-h1-parallel-norm"))
    assert (arch.num_attention_layers, arch.mixer.num_linear_attention_layers,
            arch.num_mixer_layers) == (4, 4, 4)
    assert (arch.mixer.linear_value_head_dim, arch.mixer.linear_norm,
            arch.mixer.linear_mixer_kind) == (32, True, "mamba2")
    custom = Architecture.model_validate(dict(BASE, layer_mixers=("attention+mamba2",) * 4, **MAMBA,
                                 linear_norm=False))
    exported = architecture_to_hf_config(custom)
    assert exported["model_type"] == "falcon_h1"
    assert _transformers_model(exported)[0] == count_params(custom).total_params
    assert _same_shape(architecture_from_hf_config(exported), custom)


def test_kimi_linear_reads_the_checkpoint_form():
    """Kimi Linear stores its KDA shape in `linear_attn_config` (1-based `full_attn_layers` /
    `kda_layers`): layers 4 and 8 are MLA, the other six KDA (4 heads of 32), two leading dense
    layers from `first_k_dense_replace`."""
    arch = architecture_from_hf_config(_config("synthetic-kimi-linear-checkpoint-form"))
    assert arch.mixer.layer_mixers == (("kimi_delta",) * 3 + ("attention",)
                                 + ("kimi_delta",) * 3 + ("attention",))
    assert (arch.attention.attention_kind, arch.mixer.linear_num_value_heads,
            arch.mixer.linear_value_head_dim) == ("mla", 4, 32)
    assert (arch.ffn.first_dense_layers, arch.num_moe_layers, arch.ffn.num_shared_experts) == \
        (2, 6, 1)
    assert _state_bytes_per_layer(arch) == 4 * 4 * 32 * 32 + 2 * 3 * (3 * 4 * 32)


def test_gemma4_31b_full_layers_have_their_own_shape_by_hand():
    """Gemma-4-31B (H 5376, 32 q heads, V 262144, tied): 50 sliding layers of 16 KV heads of
    256 and 10 full layers of 4 KV heads of 512 without v_proj (`attention_k_eq_v`); an MLP of
    21504 on every layer. Sliding attention q + k + v + o = 4·5376·8192 (+ q/k norms 2·256),
    full q + k + o = 2·5376·16384 + 5376·2048 (+ 2·512); MLP 3·5376·21504; 4 norms per layer +
    the final one; the embedding 262144·5376:
    50·176,160,768 + 50·512 + 10·187,170,816 + 10·1024 + 60·346,816,512 + 241·5376
    + 1,409,286,144 = 30,697,345,280 (transformers 5.24 on the meta device builds as many:
    tests/cost_model/test_params.py)."""
    arch = architecture_from_hf_config(_config("Gemma-4-31B-IT-NVFP4"))
    assert (arch.num_sliding_layers, arch.num_global_attention_layers) == (50, 10)
    assert (arch.attention.global_head_dim, arch.attention.num_global_kv_heads,
            arch.attention.attention_k_eq_v) == \
        (512, 4, True)
    assert count_params(arch).total_params == 30_697_345_280


def test_gemma4_moe_block_is_an_moe_whose_shared_expert_is_the_mlp():
    """Gemma-4-26B-A4B: every layer runs its MLP (2112) beside 128 experts of 704 (top 8): an
    MoE on all 30 layers with one ungated shared expert of 2112, router scales and 7 norms per
    layer; read the same through the multimodal wrapper (model_type gemma4)."""
    text = _config("gemma-4-26B-A4B")
    arch = architecture_from_hf_config(text)
    assert (arch.num_moe_layers, arch.num_dense_layers, arch.ffn.num_experts,
            arch.ffn.experts_per_token) == (30, 0, 128, 8)
    assert (arch.ffn.shared_expert_intermediate_size, arch.ffn.shared_expert_gate,
            arch.ffn.router_scales,
            arch.norms_per_layer) == (2112, False, True, 7)
    wrapped = architecture_from_hf_config({"model_type": "gemma4", "text_config": text})
    assert wrapped.model_copy(update={"name": arch.name}) == arch


@pytest.mark.parametrize(("key", "value"), [("hidden_size_per_layer_input", 256),
                                            ("num_kv_shared_layers", 10)])
def test_gemma4_small_models_features_are_refused_naming_the_field(key, value):
    """Gemma 4's small models: per-layer input embeddings and KV sharing are not modelled."""
    config = {**_config("Gemma-4-31B-IT-NVFP4"), key: value}
    rule = r"model_type `gemma4_text`: .* not modelled \(must be 0\)$"
    with pytest.raises(ConfigError, match=rf"^`{key}` \({value}\) is not supported for " + rule):
        architecture_from_hf_config(config)


# ---- glm4_moe, qwen2_moe, bamba: the model_types export writes are read back (issue 12) --------


def test_glm4_5_air_count_by_hand():
    """GLM-4.5-Air (H 4096, 96 q heads / 8 KV heads of 128, q/k/v biases, V 151552 untied): per
    layer q + k + v + o = 2·4096·12288 + 2·4096·1024 = 109,051,904 (+ biases 12288 + 2·1024),
    2 norms; layer 0 a SwiGLU of 10944 (3·4096·10944 = 134,479,872); 45 MoE layers of 128
    experts of 1408 (3·4096·1408 = 17,301,504 each), the shared MLP as wide and the 128 x 4096
    router: 2,232,418,304 each; the embedding and lm_head 2·151552·4096 = 1,241,513,984:
    46·109,066,240 + 93·4096 + 134,479,872 + 45·2,232,418,304 + 1,241,513,984
    = 106,852,245,504; active: less 45·120 idle experts (93,428,121,600) = 13,424,123,904."""
    arch = architecture_from_hf_config(_config("GLM-4.5-Air"))
    assert (arch.ffn.first_dense_layers, arch.num_moe_layers, arch.ffn.num_shared_experts) == \
        (1, 45, 1)
    assert (arch.attention.qkv_bias, arch.attention.o_bias, arch.attention.qk_norm,
            arch.ffn.shared_expert_gate) == (
        True, False, False, False)
    counts = count_params(arch)
    assert (counts.total_params, counts.active_params) == (106_852_245_504, 13_424_123_904)


def test_bamba_9b_count_by_hand():
    """Bamba-9B: 3 attention layers (q + k + v + o = 2·4096² + 2·4096·1024 = 41,943,040) and 29
    Mamba-2 layers (width 2·4096 = 8192 in 128 heads of 64, one group of state 128: in_proj
    4096·(2·8192 + 2·128 + 128) = 68,681,728, conv (8192 + 256)·(4 + 1) = 42,240, dt/A/D 3·128,
    gated norm 8192, out_proj 8192·4096 = 33,554,432: 102,286,976), a SwiGLU of 14336 on every
    layer (176,160,768), 2 norms per layer + the final one, V 128256 untied (2·525,336,576):
    3·41,943,040 + 29·102,286,976 + 32·176,160,768 + 65·4096 + 1,050,673,152 = 9,780,235,392
    (the card's 9.78B)."""
    arch = architecture_from_hf_config(_config("Bamba-9B"))
    attention = tuple(i for i, mixer in enumerate(arch.mixer.layer_mixers) if mixer == "attention")
    assert (attention, arch.mixer.num_linear_attention_layers, arch.mixer.linear_norm) == (
        (9, 18, 27), 29, True)
    assert count_params(arch).total_params == 9_780_235_392


def test_qwen1_5_moe_reads_its_gated_shared_expert():
    """Qwen1.5-MoE-A2.7B: q/k/v biases, every layer MoE (60 experts of 1408, top-4) with one
    sigmoid-gated shared expert of 5632 (= 4 x 1408: its four shared experts as one MLP); with
    `use_sliding_window` the even layers below `max_window_layers` slide, as transformers."""
    config = _config("Qwen1.5-MoE-A2.7B")
    arch = architecture_from_hf_config(config)
    assert (arch.attention.qkv_bias, arch.attention.o_bias, arch.num_moe_layers,
            arch.ffn.num_experts) == (
        True, False, 24, 60)
    assert (arch.ffn.num_shared_experts, arch.ffn.shared_expert_intermediate_size,
            arch.ffn.shared_expert_gate) == (1, 5632, True)
    sliding = {**config, "use_sliding_window": True, "sliding_window": 4096}
    assert architecture_from_hf_config(sliding).num_sliding_layers == 11  # 0, 2, …, 20 < 21
    assert _transformers_model(sliding)[1] == 11


@pytest.mark.parametrize(("stem", "change", "message"), [
    ("Bamba-9B", {"attn_layer_indices": [9, 40]},
     "`attn_layer_indices` ([9, 40]) must name layers 0..31"),
    ("Bamba-9B", {"mamba_d_head": 48}, "`mamba_d_head` (48) x `mamba_n_heads` (128) must equal "
                                      "the Mamba-2 width (8192)"),
    ("Bamba-9B", {"mamba_proj_bias": True}, "`mamba_proj_bias` (True) is not supported"),
    ("Qwen1.5-MoE-A2.7B", {"mlp_only_layers": [3]},
     "`mlp_only_layers` ([3]) is not supported: only leading layers 0..k-1 can be dense"),
    ("GLM-4.5-Air", {"n_shared_experts": -1}, "`n_shared_experts` (-1) must be an integer >= 0"),
], ids=["bamba-layer-out-of-range", "bamba-heads-not-tiling", "bamba-proj-bias",
        "qwen2-moe-scattered-dense", "glm-negative-shared"])
def test_new_family_refusals_name_the_field(stem, change, message):
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**_config(stem), **change})
    assert message in str(info.value)
