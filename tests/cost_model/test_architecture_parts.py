"""Architecture's parts (issue 27 item 3): each part's rules checked at the part, one flat dict of
field names in and out (files and records read back unchanged), errors naming the field as the
user wrote it, and `ArchArrays` in the same parts."""

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from cost_model.architecture import (
    Architecture, field_path, field_value, make_architecture,
)
from cost_model.architecture_parts import AttentionConfig, FfnConfig, MixerConfig
from cost_model.batch import ArchArrays
from cost_model.errors import ConfigError
from cost_model.hf import architecture_from_json_dict, architecture_to_json_dict, load_model

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = sorted([*MODEL_CONFIGS.glob("*.json"), *HF_CONFIGS.glob("*.json"),
                      *(ROOT / "studies" / "models").glob("*.json")])
# The flat field names of `Architecture` before it had parts (commit d5c249c): what every study
# TOML, `--batch` column, model JSON and stored record spells. Pinned by hand, in that order.
FLAT_FIELDS = (
    "name", "family", "vocab_size", "hidden_size", "num_layers", "num_attention_heads",
    "num_kv_heads", "head_dim", "max_position_embeddings", "attention_kind", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_norm",
    "qk_norm_scope", "attention_sinks", "attention_output_gate", "sliding_window", "layer_types",
    "global_head_dim", "num_global_kv_heads", "attention_k_eq_v", "index_heads",
    "index_head_dim", "index_topk", "layer_mixers", "layer_ffn_widths", "linear_num_key_heads",
    "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim",
    "linear_conv_kernel", "linear_conv_bias", "linear_norm", "layer_moe", "intermediate_size",
    "gated_mlp", "hidden_act", "num_experts", "experts_per_token", "moe_intermediate_size",
    "num_shared_experts", "shared_expert_intermediate_size", "shared_expert_gate",
    "router_scales", "first_dense_layers", "moe_layer_period", "qkv_bias", "o_bias", "mlp_bias",
    "router_bias", "expert_bias", "norms_per_layer", "tie_word_embeddings",
)
PARTS = {"attention": AttentionConfig, "ffn": FfnConfig, "mixer": MixerConfig}
DENSE = dict(
    name="dense", vocab_size=1000, hidden_size=256, num_layers=4, num_attention_heads=8,
    num_kv_heads=2, head_dim=32, intermediate_size=512, max_position_embeddings=4096,
)
GQA = dict(num_attention_heads=8, num_kv_heads=2, head_dim=32)


# ---- one flat dict in and out ----------------------------------------------------------------


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_every_model_file_round_trips_through_the_flat_dict(path):
    """Model file -> Architecture -> the flat dict of the pre-part field names -> Architecture
    (-> our JSON, through json text, and back): the same model, the same flat dict."""
    arch = load_model(path).arch
    flat = arch.model_dump()
    assert tuple(sorted(flat)) == tuple(sorted(FLAT_FIELDS))
    again = Architecture.model_validate(flat)
    assert again == arch and again.model_dump() == flat
    assert make_architecture(**flat) == arch
    text = json.dumps(architecture_to_json_dict(arch))
    assert architecture_from_json_dict(json.loads(text)) == arch
    assert {k: v for k, v in json.loads(text).items() if k in flat} == \
        json.loads(json.dumps(flat))


def test_the_parts_hold_every_flat_field_once():
    """Core fields plus the parts' fields are exactly the flat names, none in two places; every
    flat name reads back with `field_value` at its `field_path`."""
    core = [name for name in Architecture.model_fields if name not in PARTS]
    in_parts = [name for part in PARTS.values() for name in part.model_fields]
    assert sorted(core + in_parts) == sorted(FLAT_FIELDS)
    assert core == ["name", "family", "vocab_size", "hidden_size", "num_layers",
                    "max_position_embeddings", "norms_per_layer", "tie_word_embeddings"]
    arch = load_model(MODEL_CONFIGS / "DeepSeek-V3.json").arch
    flat = arch.model_dump()
    for name in FLAT_FIELDS:
        assert field_value(arch, name) == flat[name], name
    assert field_path("num_experts") == "ffn.num_experts"
    assert field_path("layer_mixers") == "mixer.layer_mixers"
    assert field_path("is_sparse_attention") == "attention.is_sparse_attention"
    assert field_path("hidden_size") == "hidden_size"


def test_nested_input_and_a_part_instance_are_accepted():
    """The parts may also be given whole (a dict or the part): the same model as the flat dict."""
    flat = make_architecture(**DENSE, num_experts=8, experts_per_token=2, moe_intermediate_size=64)
    nested = Architecture.model_validate({
        "name": "dense", "vocab_size": 1000, "hidden_size": 256, "num_layers": 4,
        "max_position_embeddings": 4096, "attention": AttentionConfig(**GQA),
        "ffn": {"intermediate_size": 512, "num_experts": 8, "experts_per_token": 2,
                "moe_intermediate_size": 64},
    })
    assert nested == flat


def test_with_fields_routes_and_validates_and_model_copy_refuses_a_parts_field():
    arch = make_architecture(**DENSE)
    wider = arch.with_fields(num_kv_heads=4, intermediate_size=1024)
    assert (wider.attention.num_kv_heads, wider.ffn.intermediate_size) == (4, 1024)
    with pytest.raises(ValidationError, match="must be divisible by `num_kv_heads` \\(3\\)"):
        arch.with_fields(num_kv_heads=3)
    with pytest.raises(TypeError, match="num_kv_heads.*with_fields"):
        arch.model_copy(update={"num_kv_heads": 4})
    assert arch.model_copy(update={"name": "b"}).name == "b"


# ---- errors name the field as the user wrote it ---------------------------------------------


@pytest.mark.parametrize("field, value, message", [
    ("num_kv_heads", 0, "`num_kv_heads` (0): Input should be greater than or equal to 1"),
    ("num_experts", -1, "`num_experts` (-1): Input should be greater than or equal to 0"),
    ("layer_mixers", ("attention", "lstm", "attention", "attention"), "`layer_mixers.1` ('lstm')"),
    ("linear_conv_bias", "yes", "`linear_conv_bias` ('yes'): Input should be a valid boolean"),
    ("vocab_size", 0, "`vocab_size` (0): Input should be greater than or equal to 1"),
    ("num_expert", 8, "`num_expert` (8): Extra inputs are not permitted"),
])
def test_an_error_names_the_flat_field(field, value, message):
    with pytest.raises(ConfigError) as err:
        make_architecture(**{**DENSE, field: value})
    assert message in str(err.value)
    assert "attention." not in str(err.value) and "ffn." not in str(err.value)


def test_a_missing_field_of_a_part_is_named_flat():
    fields_ = {k: v for k, v in DENSE.items() if k not in ("head_dim", "intermediate_size")}
    with pytest.raises(ConfigError) as err:
        make_architecture(**fields_)
    assert "`head_dim` (missing)" in str(err.value)
    assert "`intermediate_size` (missing)" in str(err.value)


def test_a_bad_field_in_a_model_file_is_named_flat(tmp_path):
    """Our JSON (what `archscout evaluate` reads back) with a bad part field."""
    doc = architecture_to_json_dict(make_architecture(**DENSE))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**doc, "moe_layer_period": 0}))
    with pytest.raises(ConfigError, match="`moe_layer_period` \\(0\\): Input should be greater"):
        load_model(path)


# ---- each part's rules at the part -------------------------------------------------------------


@pytest.mark.parametrize("part, values, message", [
    (AttentionConfig, dict(num_attention_heads=8, num_kv_heads=3, head_dim=32),
     "`num_attention_heads` (8) must be divisible by `num_kv_heads` (3)"),
    (AttentionConfig, dict(GQA, kv_lora_rank=16), "`kv_lora_rank` (16) must be 0 when "
                                                   "`attention_kind` is 'gqa'"),
    (AttentionConfig, dict(GQA, attention_kind="mla", kv_lora_rank=16, qk_rope_head_dim=8,
                           v_head_dim=16, qk_nope_head_dim=16),
     "`head_dim` (32) must equal `qk_nope_head_dim` + `qk_rope_head_dim` (24) for MLA"),
    (AttentionConfig, dict(GQA, global_head_dim=64),
     "`global_head_dim` (64) and `num_global_kv_heads` (0) must both be >= 1 or both 0"),
    (AttentionConfig, dict(GQA, qk_norm_scope="layer"),
     "`qk_norm_scope` ('layer') must be 'head' when `qk_norm` is False"),
    (AttentionConfig, dict(GQA, index_heads=4),
     "sparse attention needs every one of `index_heads` = 4, `index_head_dim` = 0"),
    (AttentionConfig, dict(GQA, layer_types=("full_attention",)),
     "`layer_types` must be None when `sliding_window` is None"),
    (AttentionConfig, dict(GQA, attention_k_eq_v=True), "`attention_k_eq_v` (True) needs"),
    (FfnConfig, dict(intermediate_size=512, experts_per_token=2),
     "`experts_per_token` (2) must be 0 for a dense model (`num_experts` = 0)"),
    (FfnConfig, dict(intermediate_size=512, router_bias=True),
     "`router_bias` (True) must be False for a dense model"),
    (FfnConfig, dict(intermediate_size=0, num_experts=8, experts_per_token=9,
                     moe_intermediate_size=64),
     "`experts_per_token` (9) must be between 1 and `num_experts` (8)"),
    (FfnConfig, dict(intermediate_size=0, num_experts=8, experts_per_token=2,
                     moe_intermediate_size=64, shared_expert_gate=True),
     "`shared_expert_gate` (True) needs `num_shared_experts` >= 1"),
    (FfnConfig, dict(intermediate_size=512, layer_moe=(True, False)),
     "`layer_moe` needs `num_experts` >= 1"),
    (FfnConfig, dict(intermediate_size=512, num_experts=8, experts_per_token=2,
                     moe_intermediate_size=64, layer_ffn_widths=(512, 0)),
     "`layer_ffn_widths` with MoE needs `layer_moe` (which layers are MoE)"),
    (FfnConfig, dict(intermediate_size=512, num_experts=8, experts_per_token=2,
                     moe_intermediate_size=64, layer_moe=(True, False),
                     layer_ffn_widths=(512, 0)),
     "`layer_ffn_widths` must be 0 on MoE layers (layer 0)"),
    (FfnConfig, dict(intermediate_size=512, layer_ffn_widths=(512, 512)),
     "`layer_ffn_widths` must be None when every layer has `intermediate_size`"),
    (FfnConfig, dict(intermediate_size=512, layer_ffn_widths=(1024, 0)),
     "`intermediate_size` (512) must equal the widest of `layer_ffn_widths` (1024)"),
    (MixerConfig, dict(layer_mixers=("attention", "attention")),
     "`layer_mixers` must be None when every layer is attention"),
    (MixerConfig, dict(linear_num_key_heads=4),
     "`linear_num_key_heads` (4) must be 0 when no layer is linear attention"),
    (MixerConfig, dict(layer_mixers=("gated_deltanet", "attention"), linear_num_key_heads=4,
                       linear_key_head_dim=64, linear_num_value_heads=6,
                       linear_value_head_dim=64, linear_conv_kernel=4),
     "`linear_num_value_heads` (6) must be divisible by `linear_num_key_heads` (4)"),
    (MixerConfig, dict(layer_mixers=("gated_deltanet", "attention"), linear_num_key_heads=4,
                       linear_key_head_dim=64, linear_num_value_heads=8,
                       linear_value_head_dim=64, linear_conv_kernel=4, linear_conv_bias=True),
     "`linear_conv_bias` (True) is for Mamba-2 layers only"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_each_part_checks_its_own_fields(part, values, message):
    with pytest.raises(ValidationError) as err:
        part(**values)
    assert message in str(err.value)


@pytest.mark.parametrize("part, values", [
    (AttentionConfig, GQA),
    (AttentionConfig, dict(GQA, sliding_window=4096, layer_types=("sliding_attention",) * 3)),
    (FfnConfig, dict(intermediate_size=512, layer_ffn_widths=(512, 0, 256))),
    (FfnConfig, dict(intermediate_size=0, num_experts=8, experts_per_token=2,
                     moe_intermediate_size=64, num_shared_experts=1)),
    (MixerConfig, {}),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_a_part_alone_is_valid_without_the_layer_count(part, values):
    """A part checks only its own fields: the per-layer lists' length is `Architecture`'s."""
    assert isinstance(part(**values), BaseModel)


def test_the_shared_expert_width_defaults_in_the_ffn_part():
    ffn = FfnConfig(intermediate_size=0, num_experts=8, experts_per_token=2,
                    moe_intermediate_size=64, num_shared_experts=2)
    assert ffn.shared_expert_intermediate_size == 2 * 64


@pytest.mark.parametrize("changes, message", [
    (dict(num_layers=3, layer_mixers=("none", "attention")),
     "`layer_mixers` (2 entries) must have one entry per layer (`num_layers` = 3)"),
    (dict(sliding_window=512, layer_types=("sliding_attention",) * 3),
     "`layer_types` (3 entries) must have one entry per layer (`num_layers` = 4)"),
    (dict(num_experts=8, experts_per_token=2, moe_intermediate_size=64, moe_layer_period=5),
     "`moe_layer_period` (5) must be <= `num_layers` (4)"),
    (dict(norms_per_layer=4, layer_ffn_widths=(512, 0, 512, 256)),
     "`norms_per_layer` (4) must be 2 with a per-layer pattern"),
    (dict(sliding_window=512, layer_mixers=("none", "attention", "attention", "attention")),
     "`sliding_window` must be None with `layer_mixers`"),
    (dict(intermediate_size=0), "`intermediate_size` (0) must be >= 1: 4 layers are dense"),
])
def test_the_rules_across_parts_are_architectures(changes, message):
    with pytest.raises(ConfigError) as err:
        make_architecture(**{**DENSE, **changes})
    assert message in str(err.value)


# ---- ArchArrays in the same parts -------------------------------------------------------------


def test_arch_arrays_have_the_architectures_parts():
    a = ArchArrays.from_architectures([load_model(MODEL_CONFIGS / "DeepSeek-V3.json").arch,
                                       load_model(MODEL_CONFIGS / "Llama-3.1-8B.json").arch])
    parts = {f.name for f in fields(ArchArrays) if not isinstance(getattr(a, f.name), np.ndarray)}
    assert parts == set(PARTS)
    assert a.ffn.experts.ravel().tolist() == [256.0, 0.0]
    assert a.attention.mla.ravel().tolist() == [1.0, 0.0]
    assert a.mixer.linear_layers.ravel().tolist() == [0.0, 0.0]
    second = a.take(slice(1, 2))
    assert second.attention.heads_kv.ravel().tolist() == [8.0] and second.hidden.shape == (1, 1)
    wider = a.with_columns(experts=np.array([[64.0], [0.0]]), hidden=a.hidden * 2)
    assert wider.ffn.experts.ravel().tolist() == [64.0, 0.0]
    assert wider.hidden.ravel().tolist() == [14336.0, 8192.0]
    assert wider.ffn.top_k is a.ffn.top_k


def test_arch_arrays_from_columns_fill_the_rest_and_refuse_unknown_names():
    zeros = np.zeros((2, 1))
    a = ArchArrays.from_columns(zeros, layers=zeros + 1.0, experts=zeros + 8.0)
    assert a.ffn.experts.ravel().tolist() == [8.0, 8.0] and a.attention.mla is zeros
    with pytest.raises(TypeError, match="ffn"):
        ArchArrays.from_columns(zeros, ffn=zeros)
