"""Linear-attention heads under TP: Gated DeltaNet's key and value heads, Mamba-2's heads and
groups (one group is replicated) must divide evenly, each broken rule one clear message."""

import pytest

from constraints.sharding import check_divisibility, linear_attention_violations
from cost_model import Deployment, load_architecture

from tests.data_paths import HF_CONFIGS

QWEN35 = load_architecture(HF_CONFIGS / "Qwen3.5-35B-A3B.json")  # 32 v heads, 16 k heads
NANO = load_architecture(HF_CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")  # 64, 8 groups


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_divisors_of_both_head_counts_pass(tp):
    assert linear_attention_violations(QWEN35, Deployment(tp=tp)) == []


def test_gated_deltanet_key_heads_must_split_over_tp():
    """TP 32 divides the 32 value heads but not the 16 key heads."""
    broken = linear_attention_violations(QWEN35, Deployment(tp=32))
    assert broken == ["`tp` (32) must divide `linear_num_key_heads` (16): the key heads of the "
                      "gated_deltanet layers are sharded over TP"]


def test_tp3_breaks_value_and_key_heads_beside_attention_heads():
    violation = check_divisibility(QWEN35, Deployment(tp=3))
    assert "`tp` (3) must divide `linear_num_value_heads` (32): the value heads of the 30 " \
        "gated_deltanet layers are sharded over TP" in violation.message
    assert "`linear_num_key_heads` (16)" in violation.message
    # attention heads (16), KV heads (2) and the expert width (512) break too: 5 rules in all
    assert violation.value == 5.0


def test_mamba2_groups_split_or_are_one():
    """Nemotron-3-Nano: 64 Mamba-2 heads, 8 groups: TP 16 divides the heads, not the groups; a
    single group would be held whole by every rank (vLLM's MambaMixer2)."""
    broken = linear_attention_violations(NANO, Deployment(tp=16))
    assert broken == ["`tp` (16) must divide `linear_num_key_heads` (8) (or be 1, replicated on "
                      "every rank): the B/C groups of the mamba2 layers are sharded over TP"]
    one_group = NANO.with_fields(**{"linear_num_key_heads": 1})
    assert linear_attention_violations(one_group, Deployment(tp=16)) == []
    assert "Mamba-2 heads" in linear_attention_violations(NANO, Deployment(tp=128))[0]


def test_models_without_linear_layers_are_untouched():
    plain = QWEN35.with_fields(**{"layer_mixers": None, **dict.fromkeys(
        ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads",
         "linear_value_head_dim", "linear_conv_kernel"), 0)})
    assert linear_attention_violations(plain, Deployment(tp=32)) == []


def test_one_gated_deltanet_key_head_is_not_replicated():
    """Only Mamba-2 holds a single B/C group whole on every rank: vLLM's Gated DeltaNet splits its
    key heads (`num_k_heads // tp_size`), so one key head under TP 2 is a broken rule (the 32
    value heads still divide)."""
    one_key_head = QWEN35.with_fields(**{"linear_num_key_heads": 1})
    assert linear_attention_violations(one_key_head, Deployment(tp=2)) == [
        "`tp` (2) must divide `linear_num_key_heads` (1): the key heads of the gated_deltanet "
        "layers are sharded over TP"]
