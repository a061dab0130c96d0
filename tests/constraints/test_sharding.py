"""Alignment after sharding, block scaling, divisibility and KV replication: each fires on a
candidate built to break it and stays silent on one built to satisfy it."""

from functools import cache

import pytest

from constraints.sharding import (
    check_alignment, check_divisibility, check_kv_replication, check_nvfp4_block,
    padding_waste_frac,
)
from cost_model import Architecture, Deployment, load_architecture

from tests.data_paths import MODEL_CONFIGS

DENSE = dict(name="dense", vocab_size=32000, hidden_size=4096, num_layers=32,
             num_attention_heads=32, num_kv_heads=8, head_dim=128, max_position_embeddings=8192,
             intermediate_size=14336)
MOE = dict(DENSE, name="moe", num_experts=8, experts_per_token=2, moe_intermediate_size=14336)


@cache
def _model(stem: str) -> Architecture:
    return load_architecture(MODEL_CONFIGS / f"{stem}.json")


def _arch(**fields) -> Architecture:
    return Architecture.model_validate({**DENSE, **fields})


# ---- alignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size, multiple, waste", [
    (256, 128, 0.0), (64, 128, 0.5), (1792, 512, 256 / 2048), (8192 / 6, 128, 1.0),
])
def test_padding_waste_frac(size, multiple, waste):
    assert padding_waste_frac(size, multiple) == pytest.approx(waste)


def test_seeds_example_8192_over_tp6_is_not_an_integer():
    # NVIDIA, AI Model Co-Design (2026), Guideline 2, applied after sharding: 8192 over TP=6 is
    # 1365.3, not an integer, let alone a multiple of 128
    arch = _arch(hidden_size=8192, num_attention_heads=64, head_dim=128, intermediate_size=24576)
    violation = check_alignment(arch, Deployment(tp=6))
    assert violation.value >= 1.0  # a fractional dim counts as fully wasted
    assert "8192/6 = 1365.3 is not an integer, let alone a multiple of 128" in violation.message
    assert check_alignment(arch, Deployment(tp=8)).value == 0.0


def test_llama_3_1_8b_at_tp8_is_aligned_to_128():
    violation = check_alignment(_model("Llama-3.1-8B"), Deployment(tp=8), 128)
    assert violation.value == 0.0 and violation.message.startswith("ok:")


def test_mixtral_at_tp8_is_not_aligned_to_512():
    violation = check_alignment(_model("Mixtral-8x7B-v0.1"), Deployment(tp=8), 512)
    assert violation.value > 0
    assert "`moe_intermediate_size`/(TP·DP/EP) = 14336/8 = 1792" in violation.message


def test_alignment_grows_along_the_ladder():
    arch, dep = _model("Mixtral-8x7B-v0.1"), Deployment(tp=8)
    values = [check_alignment(arch, dep, multiple).value for multiple in (128, 256, 512)]
    assert values == sorted(values) and values[0] == 0.0 < values[-1]


def test_alignment_value_is_the_summed_waste_and_names_the_worst_dim():
    arch = _arch(num_attention_heads=48, num_kv_heads=48, intermediate_size=14336)
    violation = check_alignment(arch, Deployment(tp=3))  # q: 2048, kv: 2048, H′: 14336/3
    assert violation.value == 1.0  # only H′/TP, fractional
    assert violation.message.startswith("`intermediate_size`/TP = 14336/3 = 4778.7 is not")
    padded = _arch(intermediate_size=14336 + 64)  # 14400/8 = 1800 pads to 1920
    assert check_alignment(padded, Deployment(tp=8)).value == pytest.approx(120 / 1920)
    assert "1800 is not a multiple of 128 (pads to 1920" in check_alignment(
        padded, Deployment(tp=8)).message


def test_deepseek_v3_mla_dims_are_aligned_and_a_bad_latent_rank_is_named():
    arch = _model("DeepSeek-V3")
    assert check_alignment(arch, Deployment(tp=8, ep=8)).value == 0.0
    bad = arch.with_fields(**{"kv_lora_rank": 500})
    assert "`kv_lora_rank` = 500 is not a multiple of 128" in check_alignment(
        bad, Deployment(tp=8, ep=8)).message


# ---- block scaling ------------------------------------------------------------------------------


def test_block_check_is_silent_for_unscaled_formats():
    violation = check_nvfp4_block(_arch(intermediate_size=14336 + 8), Deployment(precision="fp8"))
    assert violation.value == 0.0 and "not block-scaled" in violation.message


@pytest.mark.parametrize("precision, fires", [
    ("nvfp4", False), ("mxfp4", True), ("fp8_block", True),
])
def test_block_size_of_each_format(precision, fires):
    arch = _arch(intermediate_size=1040 * 8)  # H′/TP = 1040 = 16·65: nvfp4 ok, 32 and 128 not
    violation = check_nvfp4_block(arch, Deployment(tp=8, precision=precision))
    assert (violation.value == 1.0) is fires
    if fires:
        assert "`intermediate_size`/TP = 8320/8 = 1040" in violation.message


def test_nvfp4_counts_every_offending_k_dim():
    # NVIDIA, AI Model Co-Design (2026), "Quantization as a performance lever": NVFP4 scales
    # 16-value micro-blocks along the reduction dimension, so every K must be a multiple of 16
    arch = _arch(hidden_size=4104, num_attention_heads=36, head_dim=114, num_kv_heads=4,
                 intermediate_size=14336)  # H = 4104 = 8·513; o_proj K = 36·114/4 = 1026
    violation = check_nvfp4_block(arch, Deployment(tp=4, precision="nvfp4"))
    assert violation.value == 2.0
    assert "`hidden_size` = 4104" in violation.message and "1026" in violation.message
    assert "multiples of 16" in violation.message


def test_deepseek_v3_nvfp4_k_dims_are_whole_blocks():
    violation = check_nvfp4_block(_model("DeepSeek-V3"), Deployment(tp=8, ep=8, precision="nvfp4"))
    assert violation.value == 0.0 and violation.message.startswith("ok:")


# ---- divisibility -------------------------------------------------------------------------------


def test_llama_divides_evenly_at_tp8():
    assert check_divisibility(_model("Llama-3.1-8B"), Deployment(tp=8)).value == 0.0


def test_tp6_breaks_heads_kv_heads_and_intermediate():
    violation = check_divisibility(_model("Llama-3.1-8B"), Deployment(tp=6))
    assert violation.value == 3.0
    assert "`tp` (6) must divide `num_attention_heads` (32)" in violation.message
    assert "`num_kv_heads` (8)" in violation.message and "`intermediate_size` (14336)" in \
        violation.message


def test_unbalanced_pipeline_split():
    violation = check_divisibility(_arch(), Deployment(pp=3))
    assert violation.value == 1.0 and "`pp` (3) must divide `num_layers` (32)" in violation.message
    too_deep = check_divisibility(_arch(num_layers=2), Deployment(pp=4))
    assert too_deep.value == 1.0 and "must not exceed `num_layers` (2)" in too_deep.message


def test_moe_layers_spread_over_stages():
    # 47 MoE layers
    arch = Architecture.model_validate({**MOE, "num_layers": 48, "first_dense_layers": 1})
    violation = check_divisibility(arch, Deployment(pp=2))
    assert violation.value == 1.0 and "47 MoE layers" in violation.message
    assert check_divisibility(_model("Qwen3-30B-A3B"), Deployment(tp=4, ep=4, pp=2)).value == 0


def test_experts_by_ep_and_dense_ep():
    violation = check_divisibility(_model("Mixtral-8x7B-v0.1"), Deployment(tp=2, dp=3, ep=3))
    assert violation.value == 1.0 and "`ep` (3) must divide `num_experts` (8)" in violation.message
    assert check_divisibility(_arch(), Deployment(tp=2, ep=2)).value == 1.0


# ---- KV replication -----------------------------------------------------------------------------


@pytest.mark.parametrize("tp, value", [(1, 0.0), (8, 0.0), (16, 1.0), (3, 9 / 8 - 1)])
def test_gqa_kv_replication(tp, value):
    # NVIDIA, AI Model Co-Design (2026), "Hybrid parallel strategies": TP beyond the KV heads
    # replicates the KV cache; with GQA at n_kv = 8, TP=16 stores every KV byte twice
    violation = check_kv_replication(_model("Llama-3.1-8B"), Deployment(tp=tp))
    assert violation.value == pytest.approx(value)
    assert violation.message.startswith("ok:") is (value == 0.0)


def test_tp16_message_says_stored_twice():
    message = check_kv_replication(_model("Llama-3.1-8B"), Deployment(tp=16)).message
    assert "TP=16 exceeds `num_kv_heads` (8)" in message and "stored 2× over" in message


def test_mla_latent_is_replicated_on_every_tp_rank():
    arch = _model("DeepSeek-V3")
    violation = check_kv_replication(arch, Deployment(tp=8, ep=8))
    assert violation.value == 7.0
    assert "MLA" in violation.message and "latent" in violation.message
    assert "replicated on every one of the TP=8 ranks" in violation.message
    assert check_kv_replication(arch, Deployment(tp=1, dp=8, ep=8)).value == 0.0


def test_divisibility_counts_a_pp_split_into_unlike_stages():
    """Qwen3-Next-80B-A3B: 48 layers, full attention every 4th. PP 4 gives stages of 12 layers,
    3 attention + 9 Gated DeltaNet each; PP 16 gives stages of 3, some with no attention layer:
    the divisibility constraint (what the runner, the report and the sweep all check) counts it,
    the message naming the stages."""
    from tests.data_paths import HF_CONFIGS

    arch = load_architecture(HF_CONFIGS / "Qwen3-Next-80B-A3B-Instruct.json")
    alike = check_divisibility(arch, Deployment(tp=1, ep=1, pp=4))
    unlike = check_divisibility(arch, Deployment(tp=1, ep=1, pp=16))
    assert alike.value == 0
    assert unlike.value == 1 and "splits the layer pattern into stages of different mixers" in \
        unlike.message and "3 layers per stage" in unlike.message
