"""Architecture: bounds, cross-field rules (messages name field, rule and value), derived values."""

import itertools

import numpy as np
import pytest
from pydantic import ValidationError

from cost_model.architecture import (
    FULL_ATTENTION, SLIDING_ATTENTION, Architecture, make_architecture, periodic_layer_types,
)
from cost_model.attention import kv_elems_per_token_layer
from cost_model.batch import ArchArrays
from cost_model.errors import ConfigError, CostModelError
from cost_model.hf import load_architecture
from cost_model.sharded_gemms import rows_of

from tests.data_paths import MODEL_CONFIGS

DENSE = dict(
    name="dense", vocab_size=1000, hidden_size=256, num_layers=4, num_attention_heads=8,
    num_kv_heads=2, head_dim=32, intermediate_size=512, max_position_embeddings=4096,
)
MOE = dict(DENSE, name="moe", num_experts=8, experts_per_token=2, moe_intermediate_size=64)
MLA = dict(
    DENSE, name="mla", attention_kind="mla", num_kv_heads=8, head_dim=24, q_lora_rank=64,
    kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
)


def _arch(base: dict, **changes) -> Architecture:
    return Architecture.model_validate({**base, **changes})


def _kv_elems_and_o_proj_k(arch: Architecture) -> tuple[float, int]:
    """What production reads: KV-cache elements per token and layer (`attention`, the whole
    model) and o_proj's K (the table of weight GEMMs)."""
    elems = kv_elems_per_token_layer(ArchArrays.from_architectures([arch]))
    o_proj = next(row for row in rows_of(arch) if row.name == "attention/o_proj")
    return float(np.ravel(elems)[0]), o_proj.k.value(arch)


def test_gqa_derived_dims():
    """8 query heads of 32, 2 KV heads: KV = K + V = 2 · 2 · 32 per token and layer; o_proj
    reads the 8 · 32 concatenated heads."""
    arch = Architecture.model_validate(DENSE)
    assert arch.attention.q_dim == 8 * 32
    assert _kv_elems_and_o_proj_k(arch) == (2 * 2 * 32, 8 * 32)
    assert (arch.ffn.is_moe, arch.num_moe_layers, arch.num_dense_layers) == (False, 0, 4)


def test_mla_derived_dims_deepseek_v3():
    # DeepSeek-V3 (arXiv:2412.19437 §2.1 / its config.json): 128 heads of nope 128 + rope 64,
    # latent 512 + rope 64 cached per token and layer, v_head_dim 128, 3 dense + 58 MoE layers.
    arch = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
    assert arch.attention.q_dim == 128 * (128 + 64)
    assert _kv_elems_and_o_proj_k(arch) == (512 + 64, 128 * 128)
    assert (arch.num_dense_layers, arch.num_moe_layers) == (3, 58)


@pytest.mark.parametrize(
    ("stem", "sliding", "full"),
    [
        ("gemma-2-9b", 21, 21), ("Mistral-7B-v0.1", 32, 0), ("Phi-3-mini-4k-instruct", 32, 0),
        ("Llama-3.1-8B", 0, 32),
    ],
    ids=["gemma2-alternating", "mistral-all-sliding", "phi3-all-sliding", "llama-no-window"],
)
def test_sliding_layer_counts(stem, sliding, full):
    # transformers 5.24: Gemma2 layer i slides iff i is even; Mistral/Phi-3 slide on every layer.
    arch = load_architecture(MODEL_CONFIGS / f"{stem}.json")
    assert (arch.num_sliding_layers, arch.num_full_attention_layers) == (sliding, full)


def test_moe_layer_placement_first_dense_and_period():
    arch = _arch(MOE, num_layers=8, first_dense_layers=3, moe_layer_period=2)
    assert arch.layer_is_moe == (False, False, False, True, False, True, False, True)
    assert (arch.num_moe_layers, arch.num_dense_layers) == (3, 5)


def test_moe_layer_count_equals_per_layer_placement():
    for layers, first, period in itertools.product(range(1, 9), range(9), range(1, 9)):
        placement = [i >= first and (i + 1) % period == 0 for i in range(layers)]
        if any(placement) and period <= layers:
            arch = _arch(MOE, num_layers=layers, first_dense_layers=first, moe_layer_period=period)
            assert (arch.num_moe_layers, list(arch.layer_is_moe)) == (sum(placement), placement)


def test_shared_expert_width_defaults_to_count_times_expert_width():
    arch = _arch(MOE, num_shared_experts=2)
    assert arch.ffn.shared_expert_intermediate_size == 2 * 64
    explicit = _arch(MOE, num_shared_experts=1, shared_expert_intermediate_size=96)
    assert explicit.ffn.shared_expert_intermediate_size == 96


def test_periodic_layer_types():
    assert periodic_layer_types(4, 2) == (SLIDING_ATTENTION, FULL_ATTENTION) * 2
    assert periodic_layer_types(6, 6).count(FULL_ATTENTION) == 1  # Gemma-3 style 5:1
    with pytest.raises(ConfigError, match=r"`full_attention_period` \(0\)"):
        periodic_layer_types(4, 0)


def test_frozen_and_no_extra_fields():
    arch = Architecture.model_validate(DENSE)
    with pytest.raises(ValidationError):
        arch.hidden_size = 512
    with pytest.raises(ConfigError, match=r"`hidden_dim` \(1\): Extra inputs are not permitted"):
        make_architecture(**DENSE, hidden_dim=1)


def test_json_round_trip():
    arch = _arch(MOE, sliding_window=128, layer_types=periodic_layer_types(4, 2), qk_norm=True)
    assert Architecture.model_validate(arch.model_dump(mode="json")) == arch


BAD = [
    ("heads-divisible", DENSE, dict(num_attention_heads=30, num_kv_heads=8),
     "`num_attention_heads` (30) must be divisible by `num_kv_heads` (8)"),
    ("hidden-positive", DENSE, dict(hidden_size=0),
     "`hidden_size` (0): Input should be greater than or equal to 1"),
    ("layers-int", DENSE, dict(num_layers=2.5), "`num_layers` (2.5)"),
    ("bool-not-int", DENSE, dict(vocab_size=True), "`vocab_size` (True)"),
    ("window-positive", DENSE, dict(sliding_window=0), "`sliding_window` (0)"),
    ("norms-bound", DENSE, dict(norms_per_layer=8), "`norms_per_layer` (8)"),
    ("mla-field-on-gqa", DENSE, dict(kv_lora_rank=512),
     "`kv_lora_rank` (512) must be 0 when `attention_kind` is 'gqa'"),
    ("mla-head-dim", MLA, dict(head_dim=32),
     "`head_dim` (32) must equal `qk_nope_head_dim` + `qk_rope_head_dim` (24) for MLA"),
    ("mla-latent", MLA, dict(kv_lora_rank=0), "`kv_lora_rank` (0) must be >= 1 for MLA"),
    ("mla-kv-heads", MLA, dict(num_kv_heads=2),
     "`num_kv_heads` (2) must equal `num_attention_heads` (8) for MLA"),
    ("mla-qk-norm", MLA, dict(qk_norm=True),
     "`qk_norm` (True) is not supported with `attention_kind` 'mla'"),
    ("top-k-above-experts", MOE, dict(experts_per_token=9),
     "`experts_per_token` (9) must be between 1 and `num_experts` (8)"),
    ("top-k-zero", MOE, dict(experts_per_token=0), "`experts_per_token` (0) must be between 1"),
    ("moe-width", MOE, dict(moe_intermediate_size=0),
     "`moe_intermediate_size` (0) must be >= 1 for MoE"),
    ("moe-field-on-dense", DENSE, dict(experts_per_token=2),
     "`experts_per_token` (2) must be 0 for a dense model (`num_experts` = 0)"),
    ("router-bias-on-dense", DENSE, dict(router_bias=True),
     "`router_bias` (True) must be False for a dense model"),
    ("shared-width-without-shared", MOE, dict(shared_expert_intermediate_size=64),
     "`shared_expert_intermediate_size` (64) must be > 0 iff `num_shared_experts` (0) > 0"),
    ("first-dense-too-many", MOE, dict(first_dense_layers=5),
     "`first_dense_layers` (5) must be <= `num_layers` (4)"),
    ("period-too-long", MOE, dict(moe_layer_period=5),
     "`moe_layer_period` (5) must be <= `num_layers` (4)"),
    ("no-moe-layer", MOE, dict(first_dense_layers=4), "`num_experts` (8) > 0 but no layer is MoE"),
    ("dense-width", MOE, dict(first_dense_layers=1, intermediate_size=0),
     "`intermediate_size` (0) must be >= 1: 1 layers are dense"),
    ("layer-types-without-window", DENSE, dict(layer_types=periodic_layer_types(4, 2)),
     "`layer_types` must be None when `sliding_window` is None"),
    ("layer-types-length", DENSE, dict(sliding_window=64, layer_types=periodic_layer_types(3, 2)),
     "`layer_types` (3 entries) must have one entry per layer (`num_layers` = 4)"),
    ("qk-norm-scope-without-norm", DENSE, dict(qk_norm_scope="layer"),
     "`qk_norm_scope` ('layer') must be 'head' when `qk_norm` is False"),
    ("dsa-partial", MLA, dict(index_heads=4),
     "sparse attention needs every one of `index_heads` = 4, `index_head_dim` = 0"),
    ("dsa-on-gqa", DENSE, dict(index_heads=4, index_head_dim=16, index_topk=64),
     "needs `attention_kind` 'mla' with `q_lora_rank` >= 1 (got 'gqa', 0)"),
    ("mixers-length", DENSE, dict(layer_mixers=("attention", "none")),
     "`layer_mixers` (2 entries) must have one entry per layer"),
    ("mixer-kind", DENSE, dict(layer_mixers=("attention", "mamba", "none", "none")),
     "`layer_mixers.1`"),
    ("mixers-with-window", DENSE, dict(layer_mixers=("attention", "none") * 2, sliding_window=64),
     "`sliding_window` must be None with `layer_mixers`"),
    ("pattern-norms", DENSE, dict(layer_ffn_widths=(512, 256) * 2, norms_per_layer=4),
     "`norms_per_layer` (4) must be 2 with a per-layer pattern"),
    ("ffn-widths-max", DENSE, dict(layer_ffn_widths=(256, 0, 128, 256)),
     "`intermediate_size` (512) must equal the widest of `layer_ffn_widths` (256)"),
    ("widths-all-equal", DENSE, dict(layer_ffn_widths=(512,) * 4),
     "`layer_ffn_widths` must be None when every layer has `intermediate_size`"),
    ("mixers-all-attention", DENSE, dict(layer_mixers=("attention",) * 4),
     "`layer_mixers` must be None when every layer is attention"),
    ("linear-fields-missing", DENSE, dict(layer_mixers=("gated_deltanet", "attention") * 2),
     "`linear_num_key_heads` (0) must be >= 1: 2 layers are linear attention"),
    ("linear-fields-unused", DENSE, dict(linear_conv_kernel=4),
     "`linear_conv_kernel` (4) must be 0 when no layer is linear attention"),
    ("linear-heads-divide", DENSE, dict(layer_mixers=("gated_deltanet", "attention") * 2,
     linear_num_key_heads=3, linear_key_head_dim=8, linear_num_value_heads=4,
     linear_value_head_dim=8, linear_conv_kernel=4),
     "`linear_num_value_heads` (4) must be divisible by `linear_num_key_heads` (3)"),
    ("two-linear-kinds", DENSE, dict(layer_mixers=("gated_deltanet", "mamba2", "attention", "none"),
     linear_num_key_heads=1, linear_key_head_dim=8, linear_num_value_heads=2,
     linear_value_head_dim=8, linear_conv_kernel=4),
     "`layer_mixers` mixes ['gated_deltanet', 'mamba2']: one linear-attention kind per model"),
    ("conv-bias-gdn", DENSE, dict(linear_conv_bias=True),
     "`linear_conv_bias` (True) is for Mamba-2"),
    ("layer-moe-dense", DENSE, dict(layer_moe=(True, False) * 2),
     "`layer_moe` needs `num_experts` >= 1"),
    ("moe-widths-without-layer-moe", MOE, dict(layer_ffn_widths=(0, 512, 0, 512)),
     "`layer_ffn_widths` with MoE needs `layer_moe`"),
    ("width-on-moe-layer", MOE,
     dict(layer_moe=(True, False) * 2, layer_ffn_widths=(512, 512, 0, 512)),
     "`layer_ffn_widths` must be 0 on MoE layers (layer 0)"),
    ("output-gate-mla", MLA, dict(attention_output_gate=True),
     "`attention_output_gate` (True) is supported"),
    ("shared-gate-without-shared", MOE, dict(shared_expert_gate=True),
     "`shared_expert_gate` (True) needs `num_shared_experts` >= 1"),
]


def test_per_layer_pattern_derived_values():
    """Puzzle-style blocks: attention on layers 0 and 2, FFN widths 512/0/256/512."""
    arch = _arch(DENSE, layer_mixers=("attention", "none") * 2, layer_ffn_widths=(512, 0, 256, 512))
    assert (arch.num_attention_layers, arch.num_full_attention_layers,
            arch.num_dense_layers) == (2, 2, 3)
    assert arch.dense_ffn_widths == (512, 0, 256, 512)
    assert arch.mean_dense_ffn_width == 1280 / 3
    assert arch.is_heterogeneous and not Architecture.model_validate(DENSE).is_heterogeneous


@pytest.mark.parametrize(("base", "changes", "message"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_invalid_fields_name_field_rule_and_value(base, changes, message):
    with pytest.raises(ConfigError) as info:
        make_architecture(**{**base, **changes})
    assert message in str(info.value)
    assert isinstance(info.value, CostModelError) and isinstance(info.value, ValueError)


def test_direct_construction_raises_pydantic_validation_error():
    with pytest.raises(ValidationError, match="must be divisible by"):
        _arch(DENSE, num_attention_heads=30, num_kv_heads=8)
