"""Values kept per `Architecture` object (`cost_model.architecture.kept`): its hash, design key
and the fields the GEMM table reads are computed once per object and never leak into a copy
with other fields, and an object's entry goes with it."""

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model import count_params, make_architecture
from cost_model.architecture import _KEPT, Architecture, field_value

BASE = dict(name="t", vocab_size=1000, hidden_size=1024, num_layers=4, num_attention_heads=8,
            num_kv_heads=2, head_dim=128, intermediate_size=2816, max_position_embeddings=4096)


def _uncached_hash(arch: Architecture) -> int:
    """pydantic's own hash of a frozen model: its fields' values, in order."""
    return hash(tuple(getattr(arch, name) for name in type(arch).model_fields))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([512, 1024, 2048]), st.integers(1, 6), st.sampled_from([1, 2, 4, 8]))
def test_equal_architectures_hash_alike_and_differ_as_their_fields(hidden, layers, kv):
    """Two objects of one design (made apart) are equal and hash alike; the hash is the fields'
    hash; a design that differs in a field is unequal with its own design key."""
    one = make_architecture(**{**BASE, "hidden_size": hidden, "num_layers": layers,
                               "num_kv_heads": kv})
    two = make_architecture(**{**BASE, "hidden_size": hidden, "num_layers": layers,
                               "num_kv_heads": kv})
    assert one is not two and one == two and hash(one) == hash(two) == _uncached_hash(one)
    other = one.with_fields(num_layers=layers + 1)
    assert other != one and other.design_key != one.design_key
    assert len({one, two, other}) == 2


def test_a_copy_with_changed_fields_reads_its_own_values():
    """`model_copy(update=...)` (what `layer_sources` makes per dense width) after the original's
    fields, design key and hash were kept: the copy reads its own values, never the kept ones."""
    arch = make_architecture(**BASE)
    assert field_value(arch, "intermediate_size") == 2816 and arch.design_key and hash(arch)
    wider = arch.model_copy(update={"ffn": arch.ffn.model_copy(update={"intermediate_size":
                                                                       4096})})
    assert field_value(wider, "intermediate_size") == 4096
    assert dict(wider.design_key)["intermediate_size"] == 4096
    assert hash(wider) == _uncached_hash(wider) != hash(arch)
    assert count_params(wider).total_params > count_params(arch).total_params


def test_kept_values_go_with_their_object():
    """An architecture's kept values are dropped when it is freed (no entry per design ever
    scored stays behind in a long search)."""
    gc.collect()
    before = len(_KEPT)
    archs = [make_architecture(**{**BASE, "num_layers": n}) for n in range(1, 9)]
    for arch in archs:
        assert arch.design_key and hash(arch) and field_value(arch, "num_moe_layers") == 0
    assert len(_KEPT) == before + len(archs)
    del archs, arch
    gc.collect()
    assert len(_KEPT) == before


def test_a_kept_design_key_is_the_computed_one():
    """The key kept is the one computed from the object's dump (a second object of the same
    design, asked first for its key, agrees; the dense width of an all-MoE model is 0)."""
    moe = make_architecture(**{**BASE, "num_experts": 8, "experts_per_token": 2,
                               "moe_intermediate_size": 512})
    assert dict(moe.design_key)["intermediate_size"] == 0
    twin = make_architecture(**{**BASE, "num_experts": 8, "experts_per_token": 2,
                                "moe_intermediate_size": 512, "intermediate_size": 1234})
    assert twin.design_key == moe.design_key and twin.design_key is twin.design_key
