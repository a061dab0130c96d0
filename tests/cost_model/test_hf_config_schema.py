"""The guards on a Hugging Face config (cost_model/hf/schema.py): file reading (size, NUL bytes,
encoding, nesting), every bounded integer key, RoPE scaling's shape, the nearest known key, and
the defaults a config leaves to its config class."""

import json

import pytest

from cost_model.errors import ConfigError
from cost_model.hf import architecture_from_hf_config, load_model
from cost_model.hf.schema import (
    BOUNDS, MAX_CONFIG_BYTES, MAX_NESTING, check_bounds, parse_json_document, read_json_document,
)  # fmt: skip

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA = json.loads((MODEL_CONFIGS / "Llama-3.1-8B.json").read_text())
QWEN_MOE = json.loads((MODEL_CONFIGS / "Qwen3-30B-A3B.json").read_text())


def _one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message
    return message


# ---- the file ------------------------------------------------------------------------------------


def test_nul_byte_is_refused_with_its_offset():
    with pytest.raises(ConfigError) as info:
        parse_json_document(b'{"a": 1,\x00 "b": 2}', "c.json")
    assert _one_line(info) == "`c.json` holds a NUL byte at offset 8: not a JSON text file"


def test_non_utf8_is_refused_with_the_byte():
    with pytest.raises(ConfigError) as info:
        parse_json_document(b'{"a": "\xff"}', "c.json")
    assert _one_line(info) == "`c.json` is not UTF-8 text: byte 0xff at offset 7"


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 100_000], ids=["just-past", "recursion"])
def test_nesting_past_the_bound_is_refused(depth):
    """Just past the bound (checked by walking the document) and far past it (where Python's
    JSON parser itself gives up with a RecursionError): the same line."""
    raw = ('{"a":' * depth + "1" + "}" * depth).encode()
    with pytest.raises(ConfigError) as info:
        parse_json_document(raw, "c.json")
    assert _one_line(info) == (f"`c.json` nests deeper than {MAX_NESTING} levels (rule: a config "
                               "nests at most that deep)")


def test_nesting_at_the_bound_is_read():
    raw = ('{"a":' * (MAX_NESTING - 1) + "[1]" + "}" * (MAX_NESTING - 1)).encode()
    assert isinstance(parse_json_document(raw, "c.json"), dict)


def test_a_file_past_the_size_bound_is_refused_unread(tmp_path):
    big = tmp_path / "config.json"
    with big.open("wb") as handle:  # sparse: no 64 MiB written
        handle.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(ConfigError) as info:
        read_json_document(big)
    assert f"is {MAX_CONFIG_BYTES + 1:,} bytes: a config is at most" in _one_line(info)


def test_a_json_array_is_not_a_config():
    with pytest.raises(ConfigError, match=r"must hold a JSON object; got list"):
        parse_json_document(b"[1, 2]", "c.json")


# ---- bounds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_every_bounded_key_refuses_one_past_its_bound_and_takes_the_bound(key):
    top, why = BOUNDS[key]
    check_bounds({key: top}, [key])
    with pytest.raises(ConfigError) as info:
        check_bounds({key: top + 1}, [key])
    assert _one_line(info) == f"`{key}` ({top + 1}) must be at most {top:,} ({why})"


def test_a_key_the_family_does_not_read_is_not_bounded_here():
    check_bounds({"hidden_size": 10**30}, ["num_hidden_layers"])


@pytest.mark.parametrize(("change", "message"), [
    ({"num_hidden_layers": 10**9}, "`num_hidden_layers` (1000000000) must be at most 4,096"),
    ({"num_hidden_layers": 10**12}, "`num_hidden_layers` (1000000000000) must be at most 4,096"),
    ({"intermediate_size": 10**15}, "`intermediate_size` (1000000000000000) must be at most "
                                    "1,048,576"),
    ({"hidden_size": 2**70}, "`hidden_size` (1180591620717411303424) must be at most 1,048,576"),
    ({"vocab_size": 2**63}, "`vocab_size` (9223372036854775808) must be at most 4,194,304"),
    ({"max_position_embeddings": 10**30}, "`max_position_embeddings` (100000000000000000000000"),
], ids=["layers-1e9", "layers-1e12", "huge-intermediate", "past-int64-hidden",
        "past-int64-vocab", "positions-1e30"])
def test_llama_config_past_a_bound_is_one_line(change, message):
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**LLAMA, **change})
    assert message in _one_line(info)


def test_top_k_past_the_expert_count_is_refused():
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**QWEN_MOE, "num_experts_per_tok": 129})
    assert "`experts_per_token` (129) must be between 1 and `num_experts` (128)" in _one_line(info)


def test_kv_heads_must_divide_heads():
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**LLAMA, "num_key_value_heads": 5})
    assert "`num_attention_heads` (32) must be divisible by `num_kv_heads` (5)" in _one_line(info)


# ---- RoPE scaling --------------------------------------------------------------------------------


@pytest.mark.parametrize("rope", [
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
    {"type": "longrope", "long_factor": [1.0, 1.5], "short_factor": [1.0, 1.0]},
    {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
     "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
    None,
], ids=["llama3", "longrope-lists", "per-layer-type", "null"])
def test_well_formed_rope_scaling_is_read(rope):
    architecture_from_hf_config({**LLAMA, "rope_scaling": rope})


@pytest.mark.parametrize(("rope", "message"), [
    ({"rope_type": "llama3", "factor": {"nested": {"x": 1}}},
     "`rope_scaling.factor` ({'nested': {'x': 1}}) must be a number, a string or a list of "
     "numbers"),
    ({"rope_type": "yarn", "factor": float("nan")}, "`rope_scaling.factor` (nan) must be a finite"),
    ({"full_attention": {"factor": [[1.0]]}}, "`rope_scaling.full_attention.factor` ([[1.0]])"),
    ([8.0], "`rope_scaling` ([8.0]) must be an object (or null)"),
], ids=["nested-factor", "nan-factor", "nested-list-per-layer-type", "not-an-object"])
def test_malformed_rope_scaling_is_refused_not_ignored(rope, message):
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**LLAMA, "rope_scaling": rope})
    assert message in _one_line(info)


# ---- unknown keys and assumed defaults -----------------------------------------------------------


def test_a_misspelt_shape_key_names_the_nearest_known_one():
    with pytest.raises(ConfigError) as info:
        architecture_from_hf_config({**LLAMA, "num_hiden_layers": 32})
    assert _one_line(info).endswith("may change the model's shape (did you mean "
                                     "`num_hidden_layers`?)")


def test_the_defaults_assumed_for_omitted_keys_are_named():
    """Llama 2 70B's config.json has no `attention_bias` or `mlp_bias`: LlamaConfig's False is
    assumed for both, and said; `head_dim` (derived: hidden / heads) is not listed."""
    model = load_model(HF_CONFIGS / "serving_Llama-2-70B.json")
    assert dict(model.assumed) == {"attention_bias": False, "mlp_bias": False}
    assert model.assumed_note == ("assumed llama's config-class defaults for keys the config "
                                  "omits: `attention_bias` = False, `mlp_bias` = False")


def test_a_config_that_states_every_key_assumes_nothing():
    model = load_model(HF_CONFIGS / "serving_Llama-3.3-70B-Instruct.json")
    assert dict(model.assumed) == {} and model.assumed_note is None


def test_a_model_type_that_is_not_a_string_is_one_error(tmp_path):
    """A list where `model_type` goes (found by the fuzzer: it reached a dict lookup and raised
    TypeError) is refused naming the field."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": ["llama"], "hidden_size": 64}))
    with pytest.raises(ConfigError, match="`model_type` must be a string"):
        load_model(path)
