"""Memory per GPU: weights + KV cache + workspace, and the largest concurrency that fits.

Weights are counted per GPU from the table of sharded weight GEMMs (`cost_model.sharded_gemms`,
the shapes `layers.py` runs), each row on the layers of its kind; routed experts in the
deployment's expert format (`moe_precision`), the other linear layers (attention, linear
mixers, dense FFN, shared experts) in its `precision`, embeddings / LM head / router / the DSA
indexer's weights_proj in BF16; block scales are part of each format's bytes per weight. Left
out, as too small to matter (< 0.04% of every real model in tests/data/hf_configs): norms,
biases, the linear mixers' convolutions and per-head state parameters, attention sinks and
Gemma 4's router scales.
"""

from __future__ import annotations

import numpy as np

from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.sharded_gemms import (
    LM_HEAD, ROWS, ArchColumns, PrecisionClass, active, column_layer_counts, per_gpu_count,
    per_gpu_k, per_gpu_n,
)
from cost_model.units import BF16_BYTES

# Fraction of HBM the serving engine leaves unused (fragmentation, CUDA context, NCCL buffers):
# vLLM's default gpu_memory_utilization = 0.9 and TensorRT-LLM's free_gpu_memory_fraction = 0.9.
RESERVED_MEMORY_FRAC = 0.10
WORKSPACE_HIDDEN_MULTIPLE = 8.0  # live activations per token of a max-size step, in units of H


def _layer_weight_elems_per_gpu(a: ArchArrays,
                                d: DeployArrays) -> dict[PrecisionClass, np.ndarray | float]:
    """Weights of every layer (before the stage's share) on one GPU by precision class
    (`linear`, `experts`, `high`): each row of the table on the layers of its kind."""
    src = ArchColumns(a)
    layers = column_layer_counts(a, a.attention_layers, a.mixer.linear_layers, a.ffn.dense_layers,
                                 a.ffn.moe_layers)
    layers.pop("model")  # the vocabulary: `_vocab_elems_per_gpu`
    elems: dict[PrecisionClass, np.ndarray | float] = {"linear": 0.0, "experts": 0.0, "high": 0.0}
    for row in ROWS:
        if row.layers in layers:
            elems[row.precision] = elems[row.precision] + layers[row.layers] * active(row, src) \
                * per_gpu_count(row, src, d) * per_gpu_n(row, src, d) * per_gpu_k(row, src, d)
    return elems


def _vocab_elems_per_gpu(a: ArchArrays, d: DeployArrays):
    """The busiest GPU's vocabulary-parallel embedding and LM head: with PP they sit on
    different stages, and a tied LM head is the embedding."""
    head = per_gpu_n(LM_HEAD, ArchColumns(a), d) * a.hidden
    return head * np.where(d.pp > 1, 1.0, 2.0 - a.tied)


def weight_bytes_per_gpu(a: ArchArrays, d: DeployArrays, env: Env):
    """Weights on the busiest GPU: the first or last stage's layers plus its embedding share."""
    share = np.ceil(a.layers / d.pp) / a.layers
    elems = _layer_weight_elems_per_gpu(a, d)
    return share * (elems["linear"] * env.linear.weight_bytes_per_value
                    + elems["experts"] * env.experts.weight_bytes_per_value
                    + elems["high"] * BF16_BYTES) + _vocab_elems_per_gpu(a, d) * BF16_BYTES


def workspace_bytes_per_gpu(a: ArchArrays, d: DeployArrays, chunk_tokens):
    """Activation workspace of the largest step: one prefill chunk, which belongs to one request
    and so runs whole on one attention-DP group."""
    widest = np.maximum(a.hidden * WORKSPACE_HIDDEN_MULTIPLE, 3.0 * a.ffn.dense_width / d.ffn_tp)
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
