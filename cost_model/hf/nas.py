"""Nemotron-NAS (DeciLM, NVIDIA Puzzle): Llama-3.x layers with per-layer attention/FFN blocks.
transformers 5.x has no class for it (its repos ship remote code): the defaults are its remote
config class's (DeciLMConfig subclasses LlamaConfig); `block_configs` is required."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cost_model.architecture import ATTENTION_MIXER, NO_MIXER
from cost_model.errors import ConfigError
from cost_model.hf.common import Family, biases, read_int
from cost_model.hf.gqa import FAMILIES as GQA_FAMILIES


_NAS_ATTENTION_OFF = {"replace_with_linear": (False, None), "sparsify": (None,),
                      "window_length": (None,), "num_sink_tokens": (None,),
                      "unshifted_sink": (False, None),
                      "use_prefill_window_in_sink_attention": (False, None)}
_NAS_FFN_OFF = {"replace_with_linear": (False, None), "sparsify": (None,)}


def _nas_ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's `_ffn_mult_to_intermediate_size`: int(2·mult·H/3) rounded up to a multiple of
    256."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def _nas_block(block: Any, index: int) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    attention, ffn = (block.get(part) if isinstance(block, Mapping) else None
                      for part in ("attention", "ffn"))
    if not isinstance(attention, Mapping) or not isinstance(ffn, Mapping):
        raise ConfigError(
            f"`block_configs[{index}]` ({block!r}) must hold `attention` and `ffn` dicts"
        )
    for part, values, off in (("attention", attention, _NAS_ATTENTION_OFF),
                              ("ffn", ffn, _NAS_FFN_OFF)):
        for key, allowed in off.items():
            if values.get(key) not in allowed:
                raise ConfigError(f"`block_configs[{index}].{part}.{key}` ({values.get(key)!r}) "
                                  f"is not supported: must be {' or '.join(map(repr, allowed))}")
    return attention, ffn


def _nas_ffn(ffn: Mapping[str, Any], hidden: int, index: int) -> int:
    if ffn.get("no_op"):
        return 0
    if ffn.get("intermediate_size") is not None:
        return read_int(ffn, "intermediate_size")
    mult = ffn.get("ffn_mult")
    if isinstance(mult, bool) or not isinstance(mult, int | float) or mult <= 0:
        raise ConfigError(f"`block_configs[{index}].ffn.ffn_mult` ({mult!r}) must be a number > 0")
    return _nas_ffn_width(mult, hidden)


def _read_nemotron_nas(c: Mapping[str, Any]) -> dict[str, Any]:
    """Llama-3.x-Nemotron (DeciLM, NVIDIA Puzzle): each of `block_configs` gives a layer's
    attention (`no_op`: none, and no input norm; else GQA with n_q / `n_heads_in_group` KV
    heads) and FFN (`no_op`: none, and no post-attention norm; else a SwiGLU of
    `_nas_ffn_width(ffn_mult)`). KV heads must be the same on every attention layer."""
    blocks, layers, heads = c["block_configs"], c["num_hidden_layers"], c["num_attention_heads"]
    if not isinstance(blocks, list | tuple) or len(blocks) != layers:
        raise ConfigError(f"`block_configs` must list one block per layer ({layers} layers)")
    mixers, widths, groups = [], [], set()
    for index, block in enumerate(blocks):
        attention, ffn = _nas_block(block, index)
        mixers.append(NO_MIXER if attention.get("no_op") else ATTENTION_MIXER)
        if not attention.get("no_op"):
            groups.add(read_int(attention, "n_heads_in_group"))
        widths.append(_nas_ffn(ffn, c["hidden_size"], index))
    if len(groups) > 1:
        raise ConfigError(f"`block_configs` n_heads_in_group ({sorted(groups)}) is not supported: "
                          "every attention layer must have the same KV heads")
    kv_heads = heads // groups.pop() if groups else heads
    return {**biases(c), "mlp_bias": c["mlp_bias"], "num_kv_heads": kv_heads,
            "layer_mixers": tuple(mixers) if NO_MIXER in mixers else None,
            "layer_ffn_widths": tuple(widths) if len(set(widths)) > 1 else None,
            "intermediate_size": max(widths)}


FAMILIES: dict[str, Family] = {
    "nemotron-nas": Family(_read_nemotron_nas, {
        **GQA_FAMILIES["llama"].defaults, "intermediate_size": None, "block_configs": None,
    }),
}
