"""The Architecture's bounds (cost_model/architecture.py): every shape field refuses one past
its cited bound, naming the field, the rule and the value, and takes the bound itself."""

import pytest
from pydantic import ValidationError

from cost_model.architecture import (
    MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_TOKENS, MAX_VOCAB, MAX_WIDTH, Architecture,
    config_error_from,
)

BASE = dict(name="b", vocab_size=1000, hidden_size=64, num_layers=2, num_attention_heads=4,
            num_kv_heads=2, head_dim=16, max_position_embeddings=4096, intermediate_size=128)
BOUNDED = {
    "num_layers": MAX_LAYERS, "vocab_size": MAX_VOCAB, "hidden_size": MAX_WIDTH,
    "head_dim": MAX_WIDTH, "intermediate_size": MAX_WIDTH, "moe_intermediate_size": MAX_WIDTH,
    "kv_lora_rank": MAX_WIDTH, "linear_value_head_dim": MAX_WIDTH, "num_attention_heads": MAX_HEADS,
    "num_kv_heads": MAX_HEADS, "index_heads": MAX_HEADS, "num_experts": MAX_EXPERTS,
    "experts_per_token": MAX_EXPERTS, "num_shared_experts": MAX_EXPERTS,
    "max_position_embeddings": MAX_TOKENS, "sliding_window": MAX_TOKENS,
    "index_topk": MAX_TOKENS, "first_dense_layers": MAX_LAYERS, "moe_layer_period": MAX_LAYERS,
}


def test_the_bounds_are_the_cited_figures():
    """4x DeepNet's 1,000 layers (rounded to 2^12), 12.8x MT-NLG's 81,920 FFN = 2^20, 128x 128
    heads = 2^14, 16x Gemma 3's 262,144 vocabulary = 2^22, 4x PEER's 2^20 experts = 2^22,
    ~100x Llama 4 Scout's 10,485,760 positions (2^30 = 102.4x)."""
    assert (MAX_LAYERS, MAX_WIDTH, MAX_HEADS) == (4096, 1_048_576, 16_384)
    assert (MAX_VOCAB, MAX_EXPERTS, MAX_TOKENS) == (4_194_304, 4_194_304, 1_073_741_824)


@pytest.mark.parametrize("field", sorted(BOUNDED))
def test_one_past_the_bound_is_refused_naming_field_and_value(field):
    top = BOUNDED[field]
    with pytest.raises(ValidationError) as info:
        Architecture.model_validate({**BASE, field: top + 1})
    message = str(config_error_from(info.value, "b"))
    assert message == f"b: `{field}` ({top + 1}): Input should be less than or equal to {top}"


def test_integers_past_int64_are_refused_not_overflowed():
    with pytest.raises(ValidationError) as info:
        Architecture.model_validate({**BASE, "hidden_size": 2**64})
    assert "`hidden_size` (18446744073709551616)" in str(config_error_from(info.value, "b"))


def test_per_layer_widths_are_bounded_too():
    with pytest.raises(ValidationError) as info:
        Architecture.model_validate({**BASE, "layer_ffn_widths": (128, MAX_WIDTH + 1)})
    assert "`layer_ffn_widths.1` (1048577)" in str(config_error_from(info.value, "b"))


def test_at_the_bound_every_field_validates():
    Architecture.model_validate({**BASE, "num_layers": MAX_LAYERS, "hidden_size": MAX_WIDTH,
                    "vocab_size": MAX_VOCAB, "max_position_embeddings": MAX_TOKENS})
