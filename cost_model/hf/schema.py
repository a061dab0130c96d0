"""The Hugging Face config fields the cost model reads, as one schema: how a config file is read
(size, encoding, nesting), the bounds of every integer key a family reads (those of
`cost_model.architecture`, named by the HF key), the RoPE-scaling shape, the nearest known key
for an unknown shape key, and which defaults a config leaves to its config class.

Every refusal is one `ConfigError` line naming the key in backticks, the rule and the value.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cost_model.architecture import (
    MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_TOKENS, MAX_VOCAB, MAX_WIDTH,
)
from cost_model.errors import ConfigError
from cost_model.sourced import shown

# A config.json is a few kB; ModelOpt's largest (nvidia/MiniMax-M3-NVFP4, 22,422
# `quantized_layers`) is 3.1 MB: 64 MiB is 20x that.
MAX_CONFIG_BYTES = 64 << 20
# Nesting: a quantization_config's group weights sit 5 levels deep under a multimodal wrapper's
# text_config (text_config.quantization_config.config_groups.group_0.weights); 32 is 6x that.
MAX_NESTING = 32

_LAYER_KEYS = ("num_hidden_layers", "first_k_dense_replace", "decoder_sparse_step",
               "interleave_moe_layer_step", "max_window_layers", "no_rope_layer_interval",
               "num_kv_shared_layers", "moe_layer_freq", "full_attention_interval")
_WIDTH_KEYS = (
    "hidden_size", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size", "intermediate_size_mlp", "head_dim", "kv_lora_rank",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "index_head_dim",
    "linear_key_head_dim", "linear_value_head_dim", "linear_head_dim", "mamba_d_ssm",
    "mamba_d_state", "ssm_state_size", "mamba_head_dim", "hidden_size_per_layer_input",
    "global_head_dim", "conv_kernel", "linear_conv_kernel_dim", "mamba_d_conv", "mamba_expand",
)
_HEAD_KEYS = ("num_attention_heads", "num_key_value_heads", "index_n_heads",
              "linear_num_key_heads", "linear_num_value_heads", "linear_num_heads",
              "mamba_n_heads", "mamba_num_heads", "n_groups", "mamba_n_groups",
              "num_global_key_value_heads")
_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts", "n_shared_experts",
                "num_experts_per_tok", "top_k_experts", "experts_per_token")
_TOKEN_KEYS = ("max_position_embeddings", "sliding_window", "attention_chunk_size", "index_topk")
# HF key -> (largest value, why): the bounds of `cost_model.architecture`, by HF name
BOUNDS: dict[str, tuple[int, str]] = {
    **{k: (MAX_LAYERS, "layers: 4x DeepNet's 1,000") for k in _LAYER_KEYS},
    **{k: (MAX_WIDTH, "widths: 12.8x MT-NLG's 81,920-wide FFN") for k in _WIDTH_KEYS},
    **{k: (MAX_HEADS, "heads: 128x the 128 of the largest models") for k in _HEAD_KEYS},
    **{k: (MAX_EXPERTS, "experts: 4x PEER's 1,048,576") for k in _EXPERT_KEYS},
    **{k: (MAX_TOKENS, "tokens: ~100x Llama 4 Scout's 10M context") for k in _TOKEN_KEYS},
    "vocab_size": (MAX_VOCAB, "vocabulary: 16x Gemma 3's 262,144"),
}
ROPE_KEYS = ("rope_scaling", "rope_parameters")


def read_json_document(path: Path) -> dict[str, Any]:
    """A config file as a dict: at most MAX_CONFIG_BYTES of UTF-8 text without NUL bytes, a
    JSON object nested at most MAX_NESTING deep."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"`{path}` is {size:,} bytes: a config is at most "
                              f"{MAX_CONFIG_BYTES:,} bytes")
        raw = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path itself
        raise ConfigError(f"`{path}` cannot be read as JSON: {exc}") from None
    return parse_json_document(raw, str(path))


def parse_json_document(raw: bytes, label: str) -> dict[str, Any]:
    if (nul := raw.find(b"\x00")) >= 0:
        raise ConfigError(f"`{label}` holds a NUL byte at offset {nul}: not a JSON text file")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"`{label}` is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"`{label}` cannot be read as JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"`{label}` nests deeper than {MAX_NESTING} levels "
                          "(rule: a config nests at most that deep)") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"`{label}` must hold a JSON object; got {type(doc).__name__}")
    _check_nesting(doc, label)
    return doc


def _check_nesting(doc: Any, label: str) -> None:
    """Refuse a document nested deeper than MAX_NESTING (iteratively: no recursion limit)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ConfigError(f"`{label}` nests deeper than {MAX_NESTING} levels "
                              "(rule: a config nests at most that deep)")
        children = value.values() if isinstance(value, dict) else value \
            if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))


def check_bounds(config: Mapping[str, Any], read_keys: Iterable[str]) -> None:
    """Every integer key the family reads at most its physical bound (types and lower bounds
    are the readers' and the Architecture's)."""
    for key in read_keys:
        value = config.get(key)
        if key not in BOUNDS or isinstance(value, bool) or not isinstance(value, int):
            continue
        top, why = BOUNDS[key]
        if value > top:
            raise ConfigError(f"`{key}` ({shown(value)}) must be at most {top:,} ({why})")


def check_rope(config: Mapping[str, Any]) -> None:
    """RoPE scaling changes no shape or time, so the cost model ignores it; a malformed one is
    refused rather than ignored: a dict of numbers, strings, booleans or lists of numbers, or
    (transformers 5) such a dict per layer type."""
    for key in ROPE_KEYS:
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(f"`{key}` ({shown(value)}) must be an object (or null)")
        nested = [k for k, v in value.items() if isinstance(v, Mapping)]
        if nested and len(nested) == len(value) and all(k.endswith("attention") for k in nested):
            for layer_type in nested:  # transformers 5: one set of parameters per layer type
                _check_rope_values(value[layer_type], f"{key}.{layer_type}")
        else:
            _check_rope_values(value, key)


def _check_rope_values(values: Mapping[str, Any], where: str) -> None:
    for name, value in values.items():
        field = f"`{where}.{name}`"
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{field} ({value}) must be a finite number")
        if isinstance(value, list) and all(_is_number(v) for v in value):
            continue
        if not (value is None or isinstance(value, str | bool | int | float)):
            raise ConfigError(f"{field} ({shown(value)}) must be a number, a string or a list of "
                              "numbers (archscout ignores RoPE scaling: it changes no shape or "
                              "time, but a malformed one is refused)")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def nearest_key(key: str, known: Iterable[str]) -> str:
    """' (did you mean `x`?)' for the known key closest to `key`, or ''."""
    match = difflib.get_close_matches(key, sorted(set(known)), n=1, cutoff=0.75)
    return f" (did you mean `{match[0]}`?)" if match else ""


def assumed_defaults(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a family reads that the config omits, with the config class's value assumed
    (keys whose default is derived from others, e.g. head_dim = hidden / heads, are left out:
    transformers derives them the same way)."""
    return {k: v for k, v in defaults.items() if k not in given and v is not None}


def assumed_line(model_type: str, assumed: Mapping[str, Any]) -> str | None:
    """The one line saying which defaults were assumed (None: none)."""
    if not assumed:
        return None
    parts = ", ".join(f"`{k}` = {shown(v)}" for k, v in assumed.items())
    return f"assumed {model_type}'s config-class defaults for keys the config omits: {parts}"
