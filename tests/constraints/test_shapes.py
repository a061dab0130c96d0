"""GEMM dimensions after sharding: which dims, their sizes and how they are named."""

import re

import pytest

from constraints.shapes import GemmDim, format_size, gemm_dims, sharded
from cost_model import Architecture, Deployment

DENSE = dict(name="dense", vocab_size=32000, hidden_size=4096, num_layers=32,
             num_attention_heads=32, num_kv_heads=8, head_dim=128, max_position_embeddings=8192,
             intermediate_size=14336)
MOE = dict(DENSE, name="moe", num_experts=8, experts_per_token=2, moe_intermediate_size=14336)
MLA = dict(DENSE, name="mla", attention_kind="mla", num_kv_heads=32, head_dim=192,
           qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, kv_lora_rank=512)


def _sizes(arch_fields, **deployment):
    dims = gemm_dims(Architecture.model_validate(arch_fields), Deployment(**deployment))
    return {dim.label: dim.size for dim in dims}


def test_dense_gqa_dims_at_tp8():
    assert _sizes(DENSE, tp=8) == {
        "`hidden_size`": 4096, "`num_attention_heads`·`head_dim`/TP": 512,
        "⌈`num_kv_heads`/TP⌉·`head_dim`": 128, "`intermediate_size`/TP": 1792,
    }


def test_tp1_labels_have_no_shard():
    assert _sizes(DENSE, tp=1)["`num_kv_heads`·`head_dim`"] == 8 * 128


def test_kv_width_is_floored_by_one_head_beyond_n_kv():
    # NVIDIA, AI Model Co-Design (2026), "Hybrid parallel strategies": TP beyond n_kv replicates KV
    # heads, each GPU still holds one
    assert _sizes(DENSE, tp=16)["⌈`num_kv_heads`/TP⌉·`head_dim`"] == 128


def test_moe_expert_dim_is_split_over_moe_tp():
    sizes = _sizes(MOE, tp=8, ep=2)  # moe_tp = 8/2 = 4
    assert sizes["`moe_intermediate_size`/(TP·DP/EP)"] == 14336 / 4
    assert "`intermediate_size`/TP" not in sizes  # every layer is MoE


def test_shared_expert_and_dense_layers_are_tp_sharded():
    fields = dict(MOE, num_shared_experts=1, first_dense_layers=1, moe_intermediate_size=2048)
    sizes = _sizes(fields, tp=8, ep=8)
    assert sizes["`shared_expert_intermediate_size`/TP"] == 256
    assert sizes["`intermediate_size`/TP"] == 1792
    assert sizes["`moe_intermediate_size`"] == 2048  # moe_tp = 1


def test_mla_dims():
    sizes = _sizes(MLA, tp=8)
    assert sizes["`kv_lora_rank`"] == 512
    assert sizes["`num_attention_heads`·(`qk_nope_head_dim`+`qk_rope_head_dim`)/TP"] == 32 * 192 / 8
    assert sizes["`num_attention_heads`·`v_head_dim`/TP"] == 32 * 128 / 8
    assert "`q_lora_rank`" not in sizes  # 0 = uncompressed q_proj
    assert _sizes(dict(MLA, q_lora_rank=1536), tp=8)["`q_lora_rank`"] == 1536


def test_describe_shows_the_expression_and_one_decimal():
    assert sharded("`intermediate_size`", 14336, 3, "TP", True).describe() == \
        "`intermediate_size`/TP = 14336/3 = 4778.7"
    assert sharded("`heads`·`d`", 8192, 6, "TP", True, "64·128").describe() == \
        "`heads`·`d`/TP = 64·128/6 = 8192/6 = 1365.3"
    assert GemmDim("`hidden_size`", "4096", 4096.0, True).describe() == "`hidden_size` = 4096"


@pytest.mark.parametrize("size, shown", [(1792.0, "1792"), (8192 / 6, "1365.3")])
def test_format_size(size, shown):
    assert format_size(size) == shown


@pytest.mark.parametrize("arch_fields", [DENSE, MOE, MLA, dict(MLA, q_lora_rank=1536)],
                         ids=["dense", "moe", "mla", "mla-q-lora"])
@pytest.mark.parametrize("tp", [1, 8])
def test_fields_are_the_fields_the_label_names(arch_fields, tp):
    """Each dim carries its source fields (what lint names a fix by), in label order."""
    for dim in gemm_dims(Architecture.model_validate(arch_fields), Deployment(tp=tp)):
        assert dim.fields == tuple(re.findall(r"`(\w+)`", dim.label)), dim.label
