"""Design identity of hybrid stacks: `design_name` shows the layer pattern and the linear-mixer
shape; `design_key` counts mixer fields only where some layer uses them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.architecture import Architecture, design_name, mixer_pattern_name
from cost_model.hf import load_architecture

from tests.data_paths import HF_CONFIGS

BASE = dict(
    name="hybrid", vocab_size=1000, hidden_size=256, num_layers=8, num_attention_heads=8,
    num_kv_heads=2, head_dim=32, intermediate_size=512, max_position_embeddings=4096,
)
GDN = dict(linear_num_key_heads=2, linear_key_head_dim=32, linear_num_value_heads=4,
           linear_value_head_dim=32, linear_conv_kernel=4)
MAMBA = dict(GDN, linear_conv_bias=True)


def _hybrid(mixers: tuple[str, ...], **changes) -> Architecture:
    return Architecture.model_validate({**BASE, "layer_mixers": mixers, **GDN, **changes})


def test_qwen3_5_name_shows_three_linear_per_full_layer():
    """Qwen3.5-35B-A3B's config: 40 layers repeating (3 Gated DeltaNet, 1 attention), 32 v heads
    of 128, 16 k heads of 128, a 4-tap conv: `G3A1` then `S32x128g16x128c4`."""
    arch = load_architecture(HF_CONFIGS / "Qwen3.5-35B-A3B.json")
    assert design_name(arch) == "H2048-L40-A16x256kv2-G3A1-S32x128g16x128c4-E256k8x512s1"


def test_nemotron_h_name_counts_blocks_and_digests_their_placement():
    """Nemotron-H-56B's 118 blocks do not repeat one short unit: 54 Mamba-2, 10 attention, 54
    without a mixer (MLP blocks), then a digest of the exact lists; its Mamba-2 shape is 256
    heads of 64, 8 groups of state 256, a 4-tap conv with bias."""
    name = design_name(load_architecture(HF_CONFIGS / "Nemotron-H-56B-Base-8K.json"))
    assert name.startswith("H8192-L118-A64x128kv8-M54A10N54#")
    assert name.endswith("-S256x64g8x256c4b-F32768")


@pytest.mark.parametrize(
    ("mixers", "pattern"),
    [(("gated_deltanet",) * 3 + ("attention",), "-G3A1"),
     (("attention",) + ("gated_deltanet",) * 3, "-A1G3"),
     (("gated_deltanet", "attention") * 2, "-G1A1")],
    ids=["full-last", "full-first", "alternating"],
)
def test_placement_inside_the_unit_is_named(mixers, pattern):
    assert mixer_pattern_name(_hybrid(mixers * 2)).startswith(pattern + "-S")


MIXER_LISTS = st.lists(st.sampled_from(["gated_deltanet", "attention"]), min_size=8, max_size=8)


@settings(max_examples=60, deadline=None)
@given(MIXER_LISTS.filter(lambda m: "gated_deltanet" in m), MIXER_LISTS.filter(
    lambda m: "gated_deltanet" in m))
def test_distinct_patterns_get_distinct_names(first, second):
    """Over 8-layer GDN/attention patterns: equal names iff equal patterns."""
    a, b = _hybrid(tuple(first)), _hybrid(tuple(second))
    assert (design_name(a) == design_name(b)) == (first == second)


def test_linear_shape_is_part_of_the_name():
    mixers = ("gated_deltanet",) * 3 + ("attention",)
    wide = _hybrid(mixers * 2, linear_num_value_heads=8)
    assert design_name(wide) != design_name(_hybrid(mixers * 2))
    assert "-S8x32g2x32c4-" in design_name(wide)


def test_a_stack_without_attention_does_not_vary_by_attention_heads():
    """A pure Mamba-2/MLP stack never runs attention: its head counts are not part of the
    design (same key, same name, no `A` segment)."""
    mixers = ("mamba2", "none") * 4
    widths = (0, 512) * 4
    a = Architecture.model_validate({**BASE, "layer_mixers": mixers, "layer_ffn_widths": widths,
                                     **MAMBA})
    b = a.with_fields(**{"num_attention_heads": 16, "num_kv_heads": 4, "head_dim": 64})
    assert a.design_key == b.design_key and design_name(a) == design_name(b)
    assert "-A" not in design_name(a)


def test_a_model_without_linear_layers_has_no_linear_fields_in_its_key():
    """The key names the linear-mixer fields only when some layer is linear, so designs that
    differ only in unused linear fields (a sampler's leftovers) are one design."""
    plain = Architecture.model_validate(BASE)
    key = dict(plain.design_key)
    assert all(key[f] is None for f in ("linear_num_value_heads", "linear_conv_bias"))
    assert dict(_hybrid(("gated_deltanet", "attention") * 4).design_key)[
        "linear_num_value_heads"] == 4
    assert design_name(plain) == "H256-L8-A8x32kv2-F512"
