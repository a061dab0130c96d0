"""Architectures from a compact shape string: the calibration and validation rows of the accuracy
proxy (`tests/data/accuracy/*.csv`), its probe and its tests.

`"H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"` is Llama-3-8B's shape. Keys:
H hidden, L layers, q query heads, kv KV heads, dh head dim, ff dense FFN width, V vocabulary,
tied (0/1), E routed experts, k experts per token, de expert width, sh shared experts (each of
width de), fd leading dense layers, mla (MLA latent rank; then dh = nope + 64 rope, v_head =
dh - 64), qlora (MLA query rank).
Hybrids: mix (linear mixer: 1 Gated DeltaNet, 2 Kimi Delta Attention, 3 Mamba-2), full (one
attention layer per `full` layers, the last of each unit; 0: none), lh / ld (linear heads and head
dim, defaults 16 x 128), sw (sliding window in tokens), swp (one global layer per `swp` layers,
the last of each unit; 0: every layer sliding), gated (1: gated FFN, the default; 0: a two-matrix
FFN, ReLU/GeLU). Unknown keys raise.
"""

from __future__ import annotations

from cost_model.architecture import (
    ATTENTION_MIXER,
    FULL_ATTENTION,
    GATED_DELTANET_MIXER,
    KIMI_DELTA_MIXER,
    MAMBA2_MIXER,
    SLIDING_ATTENTION,
    Architecture,
    make_architecture,
)

MLA_ROPE_DIM = 64  # DeepSeek-V2/V3 qk_rope_head_dim
LINEAR_MIXER_CODES = {1: GATED_DELTANET_MIXER, 2: KIMI_DELTA_MIXER, 3: MAMBA2_MIXER}
LINEAR_HEADS_DEFAULT = 16  # Qwen3-Next-80B-A3B: 16 q/k heads of 128 (its config.json)
LINEAR_HEAD_DIM_DEFAULT = 128
LINEAR_CONV_KERNEL = 4  # Qwen3-Next / Nemotron-H / Kimi Linear configs: 4 taps
KEYS = ("H", "L", "q", "kv", "dh", "ff", "V", "tied", "E", "k", "de", "sh", "fd", "mla", "qlora",
        "mix", "full", "lh", "ld", "sw", "swp", "gated")  # fmt: skip
CONTEXT_TOKENS = 4096  # max_position_embeddings of every parsed shape


def parse_shape(text: str) -> dict[str, int]:
    fields = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key not in KEYS:
            raise ValueError(f"unknown shape key {key!r} in {text!r}")
        fields[key] = int(float(value))
    return fields


def _ffn_fields(f: dict[str, int]) -> dict:
    return {} if f.get("gated", 1) else {"gated_mlp": False, "hidden_act": "relu"}


def _moe_fields(f: dict[str, int]) -> dict:
    if not f.get("E"):
        return {}
    shared = f.get("sh", 0)
    return dict(num_experts=f["E"], experts_per_token=f["k"], moe_intermediate_size=f["de"],
                num_shared_experts=shared, shared_expert_intermediate_size=shared * f["de"],
                first_dense_layers=f.get("fd", 0))  # fmt: skip


def _mla_fields(f: dict[str, int]) -> dict:
    if not f.get("mla"):
        return {}
    nope = f["dh"] - MLA_ROPE_DIM
    return dict(attention_kind="mla", kv_lora_rank=f["mla"], q_lora_rank=f.get("qlora", 0),
                qk_nope_head_dim=nope, qk_rope_head_dim=MLA_ROPE_DIM, v_head_dim=nope)  # fmt: skip


def _periodic(layers: int, period: int, every: str, last: str) -> tuple[str, ...]:
    """`every` on each layer, `last` on the last layer of each unit of `period` (0: never)."""
    return tuple(last if period and (i + 1) % period == 0 else every for i in range(layers))


def _linear_fields(f: dict[str, int]) -> dict:
    if not f.get("mix"):
        return {}
    kind, heads = LINEAR_MIXER_CODES[f["mix"]], f.get("lh", LINEAR_HEADS_DEFAULT)
    dim = f.get("ld", LINEAR_HEAD_DIM_DEFAULT)
    mixers = _periodic(f["L"], f.get("full", 0), kind, ATTENTION_MIXER)
    return dict(layer_mixers=mixers, linear_num_key_heads=heads, linear_key_head_dim=dim,
                linear_num_value_heads=heads, linear_value_head_dim=dim,
                linear_conv_kernel=LINEAR_CONV_KERNEL)  # fmt: skip


def _sliding_fields(f: dict[str, int]) -> dict:
    if not f.get("sw"):
        return {}
    period = f.get("swp", 0)
    types = None if not period else _periodic(f["L"], period, SLIDING_ATTENTION, FULL_ATTENTION)
    return dict(sliding_window=f["sw"], layer_types=types)


def build(text: str, name: str | None = None) -> Architecture:
    f = parse_shape(text)
    kv = f["q"] if f.get("mla") else f.get("kv", f["q"])
    return make_architecture(
        name=name or text.replace(" ", "_"), vocab_size=f.get("V", 128256), hidden_size=f["H"],
        num_layers=f["L"], num_attention_heads=f["q"], num_kv_heads=kv, head_dim=f["dh"],
        max_position_embeddings=CONTEXT_TOKENS, intermediate_size=f.get("ff", 0),
        tie_word_embeddings=bool(f.get("tied", 0)), **_ffn_fields(f), **_moe_fields(f),
        **_mla_fields(f),
        **_linear_fields(f), **_sliding_fields(f),
    )  # fmt: skip
