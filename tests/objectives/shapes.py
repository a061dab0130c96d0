"""Architectures from a compact shape string, for the accuracy tests, probe and validation rows.

`"H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"` is Llama-3-8B's shape. Keys:
H hidden, L layers, q query heads, kv KV heads, dh head dim, ff dense FFN width, V vocabulary,
tied (0/1), E routed experts, k experts per token, de expert width, sh shared experts (each of
width de), fd leading dense layers, mla (MLA latent rank; then dh = nope + 64 rope, v_head =
dh - 64), qlora (MLA query rank). Unknown keys raise.
"""

from __future__ import annotations

from cost_model.architecture import Architecture, make_architecture

MLA_ROPE_DIM = 64  # DeepSeek-V2/V3 qk_rope_head_dim
KEYS = ("H", "L", "q", "kv", "dh", "ff", "V", "tied", "E", "k", "de", "sh", "fd", "mla", "qlora")


def parse_shape(text: str) -> dict[str, int]:
    fields = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key not in KEYS:
            raise ValueError(f"unknown shape key {key!r} in {text!r}")
        fields[key] = int(float(value))
    return fields


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


def build(text: str, name: str | None = None) -> Architecture:
    f = parse_shape(text)
    kv = f["q"] if f.get("mla") else f.get("kv", f["q"])
    return make_architecture(
        name=name or text.replace(" ", "_"), vocab_size=f.get("V", 128256), hidden_size=f["H"],
        num_layers=f["L"], num_attention_heads=f["q"], num_kv_heads=kv, head_dim=f["dh"],
        max_position_embeddings=4096, intermediate_size=f.get("ff", 0),
        tie_word_embeddings=bool(f.get("tied", 0)), **_moe_fields(f), **_mla_fields(f),
    )  # fmt: skip
