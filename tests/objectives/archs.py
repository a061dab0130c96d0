"""Architectures the accuracy tests share: the checked-in model configs, dense shapes, LLaMA-3.2-1B
(Bian 2025b's reference) and a small MoE."""

from cost_model import Architecture, load_architecture, make_architecture
from tests.data_paths import MODEL_CONFIGS

B = 1e9
T = 1e12
MOE_MODELS = ["Mixtral-8x7B-v0.1", "Qwen3-30B-A3B", "DeepSeek-V3"]
DENSE_MODELS = ["Llama-3.1-8B", "Mistral-7B-v0.1", "Phi-3-mini-4k-instruct", "gemma-2-9b"]


def model(stem: str) -> Architecture:
    return load_architecture(MODEL_CONFIGS / f"{stem}.json")


def dense(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int, ffn: int,
          vocab: int = 128256, tied: bool = False, **extra) -> Architecture:
    return make_architecture(
        name=f"dense-{hidden}x{layers}", vocab_size=vocab, hidden_size=hidden, num_layers=layers,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        max_position_embeddings=4096, intermediate_size=ffn, tie_word_embeddings=tied, **extra,
    )


def llama_3_2_1b(**changes) -> Architecture:
    """LLaMA-3.2-1B's shape (Bian 2025b Table 1 row 1): 2048 × 16 layers, d_ff 8192, 32/8 heads."""
    fields = dict(hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, ffn=8192, tied=True)
    return dense(**{**fields, **changes})


def moe(experts: int, top_k: int) -> Architecture:
    return make_architecture(
        name=f"moe-{experts}", vocab_size=32000, hidden_size=2048, num_layers=24,
        num_attention_heads=16, num_kv_heads=4, head_dim=128, max_position_embeddings=4096,
        intermediate_size=0, num_experts=experts, experts_per_token=top_k,
        moe_intermediate_size=256,
    )
