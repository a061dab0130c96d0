"""Memory per GPU: weights + KV cache + workspace, and the largest concurrency that fits.

Weights are counted per GPU from the sharded shapes (the same sharding as `layers.py`); routed
experts in the deployment's expert format (`moe_precision`), the other linear layers (attention,
dense FFN, shared experts) in its `precision`, embeddings / LM head / router in BF16; block
scales are part of each format's bytes per weight.
"""

from __future__ import annotations

import numpy as np

from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env

# Fraction of HBM the serving engine leaves unused (fragmentation, CUDA context, NCCL buffers):
# vLLM's default gpu_memory_utilization = 0.9 and TensorRT-LLM's free_gpu_memory_fraction = 0.9.
RESERVED_MEMORY_FRAC = 0.10
BF16_BYTES = 2.0
WORKSPACE_HIDDEN_MULTIPLE = 8.0  # live activations per token of a max-size step, in units of H


def attention_weight_elems_per_gpu(a: ArchArrays, d: DeployArrays):
    """Attention weights of one layer on one GPU (MLA down-projections are replicated)."""
    heads = a.heads_q / d.tp
    o_heads = a.heads_q / d.ffn_tp  # Helix shards the output projection over tp·kvp
    gqa = a.hidden * (heads + 2 * np.ceil(a.heads_kv / d.tp)) * a.head_dim + o_heads * \
        a.head_dim * a.hidden
    q = np.where(a.q_lora > 0, a.hidden * a.q_lora + a.q_lora * heads * (a.nope_dim + a.rope_dim),
                 a.hidden * heads * (a.nope_dim + a.rope_dim))
    kv = a.hidden * (a.kv_lora + a.rope_dim) + a.kv_lora * heads * (a.nope_dim + a.v_dim)
    mla = q + kv + o_heads * a.v_dim * a.hidden
    return np.where(a.mla > 0, mla, gqa)


def ffn_weight_elems_per_gpu(a: ArchArrays, d: DeployArrays):
    """(dense FFN elements per dense layer, routed-expert and shared-expert elements per MoE
    layer) on one GPU."""
    dense = (a.gate_factor + 1.0) * a.hidden * a.ffn / d.ffn_tp
    experts = a.experts / d.ep * 3.0 * a.hidden * a.expert_ffn / d.moe_tp
    shared = 3.0 * a.hidden * a.shared_ffn / d.ffn_tp
    return dense, experts, shared


def weight_bytes_per_gpu(a: ArchArrays, d: DeployArrays, env: Env):
    """Weights on the busiest GPU: the first or last stage's layers plus its embedding share."""
    share = np.ceil(a.layers / d.pp) / a.layers
    dense, experts, shared = ffn_weight_elems_per_gpu(a, d)
    linear = share * (a.layers * attention_weight_elems_per_gpu(a, d)
                      + a.dense_layers * dense + a.moe_layers * shared)
    routed = share * a.moe_layers * experts
    router = share * a.moe_layers * a.experts * a.hidden
    # vocab-parallel embedding and LM head; with PP they sit on different stages
    vocab = a.vocab * a.hidden / d.ffn_tp * np.where(d.pp > 1, 1.0, 2.0 - a.tied)
    return (linear * env.linear.weight_bytes_per_value
            + routed * env.experts.weight_bytes_per_value + (router + vocab) * BF16_BYTES)


def workspace_bytes_per_gpu(a: ArchArrays, d: DeployArrays, chunk_tokens):
    """Activation workspace of the largest step: one prefill chunk, which belongs to one request
    and so runs whole on one attention-DP group."""
    widest = np.maximum(a.hidden * WORKSPACE_HIDDEN_MULTIPLE, 3.0 * a.ffn / d.ffn_tp)
    return chunk_tokens * widest * BF16_BYTES


def usable_bytes_per_gpu(env: Env) -> float:
    """HBM the serving engine may fill (RESERVED_MEMORY_FRAC left unused)."""
    return env.hw.hbm_capacity_bytes * (1.0 - RESERVED_MEMORY_FRAC)


def kv_bytes_per_gpu_per_sequence(a: ArchArrays, d: DeployArrays, env: Env, context_tokens):
    """KV cache of one sequence of `context_tokens` on each GPU of its attention group."""
    return kv_cache_bytes_per_sequence(a, context_tokens, env.kv.activation_bytes_per_value, d)


def max_concurrency(a: ArchArrays, d: DeployArrays, env: Env, max_context_tokens, chunk_tokens,
                    shared_prefix_tokens=0.0):
    """Largest number of sequences at `max_context_tokens` whose KV fits next to the weights and
    workspace (0 when even the weights do not fit). A prefix every sequence shares (a cached
    system prompt) is stored once per GPU, and each sequence holds only the rest."""
    # the prefix's own KV: a sequence's fixed recurrent state (linear-attention layers) is not
    # part of it, each sequence keeps its own
    shared = kv_bytes_per_gpu_per_sequence(a, d, env, shared_prefix_tokens) - \
        kv_bytes_per_gpu_per_sequence(a, d, env, 0.0)
    free = usable_bytes_per_gpu(env) - weight_bytes_per_gpu(a, d, env) \
        - workspace_bytes_per_gpu(a, d, chunk_tokens) - shared
    per_seq = kv_bytes_per_gpu_per_sequence(a, d, env, max_context_tokens) - shared
    return np.maximum(np.floor(free / per_seq), 0.0) * d.dp
