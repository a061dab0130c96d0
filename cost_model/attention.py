"""Attention math and KV traffic per layer and per GPU (GQA/MHA/MQA and MLA), and KV-cache size.

KV bytes per sequence (seeds, reading notes §5): 2·L·n_kv·d_h·b_kv·S for GQA; for MLA the latent
cache L·(kv_lora_rank + rope_dim)·b_kv·S. Sliding-window layers keep at most `window` tokens.
Tensor parallelism beyond the KV heads replicates them: each GPU holds ⌈n_kv/TP⌉ heads.

Kernel time: a roofline (KV streaming for decode, flash-attention FLOPs for prefill) plus the SM
time of each work item (decode: one per sequence and KV head; prefill: one per sequence, query
head and 128-query tile — Q load, block scheduling, page-table walk, softmax epilogue and split-KV
reduction, spread over the SMs) plus a fixed per-call floor; `cost_model/efficiency.py` documents
the coefficients and `search/calibration_attention.py` fits them on measured kernels.
"""

from __future__ import annotations

import numpy as np

from cost_model.batch import ArchArrays, DeployArrays, Env

FLASH_QUERY_TILE_TOKENS = 128  # FlashAttention re-reads K/V once per 128-query tile (FA2/FA3 Br)


def kv_heads_per_gpu(a: ArchArrays, d: DeployArrays):
    """⌈n_kv / TP⌉: replication once TP exceeds the KV heads (seeds, guideline 7)."""
    return np.ceil(a.heads_kv / d.tp)


def kv_elems_per_token_layer(a: ArchArrays, d: DeployArrays | None = None):
    """KV-cache elements per token per layer on one GPU (whole model when `d` is None)."""
    heads = a.heads_kv if d is None else kv_heads_per_gpu(a, d)
    return np.where(a.mla > 0, a.kv_lora + a.rope_dim, 2.0 * heads * a.head_dim)


def kv_cache_bytes_per_sequence(a: ArchArrays, context_tokens, kv_bytes_per_value: float,
                                d: DeployArrays | None = None):
    """KV bytes of one sequence of `context_tokens` over all layers (per GPU when `d` given,
    counting the layers of the busiest pipeline stage)."""
    per_token = kv_elems_per_token_layer(a, d) * kv_bytes_per_value
    full_layers = a.layers - a.sliding_layers
    sliding_tokens = np.minimum(context_tokens, a.window)
    tokens = full_layers * context_tokens + a.sliding_layers * sliding_tokens
    stages, kvp = (1.0, 1.0) if d is None else (d.pp, d.kvp)
    return per_token * np.ceil(a.layers / stages) / a.layers * tokens / kvp


def _head_flop_per_key(a: ArchArrays, absorbed: bool):
    """FLOPs per (query, key) pair per head: scores + weighted values."""
    gqa = 4.0 * a.head_dim
    mla_absorbed = 2.0 * (2.0 * a.kv_lora + a.rope_dim)
    mla_plain = 2.0 * (a.nope_dim + a.rope_dim + a.v_dim)
    return np.where(a.mla > 0, mla_absorbed if absorbed else mla_plain, gqa)


def _layer_mean(a: ArchArrays, context, time_fn):
    """Average over layers of time_fn(context seen by that layer type)."""
    full = a.layers - a.sliding_layers
    return (full * time_fn(context) + a.sliding_layers * time_fn(np.minimum(context, a.window))) \
        / a.layers


def attention_overhead_s(env: Env) -> float:
    """Fixed time of one decode attention call: the calibrated overhead, else the kernel launch."""
    fixed = env.eff.attention_fixed_overhead_s
    return env.hw.kernel_launch_s if fixed is None else fixed


def prefill_overhead_s(env: Env) -> float:
    """Fixed time of one prefill attention call (its own calibrated floor, else decode's)."""
    fixed = env.eff.prefill_attention_fixed_overhead_s
    return attention_overhead_s(env) if fixed is None else fixed


def decode_work_items(a: ArchArrays, d: DeployArrays, seqs):
    """Work items of a decode attention call on one GPU: one per (sequence, KV head) — a GQA
    decode kernel gives each KV head's query group one block; MLA's latent cache is one head."""
    return seqs * np.where(a.mla > 0, 1.0, kv_heads_per_gpu(a, d))


def prefill_work_items(a: ArchArrays, d: DeployArrays, toks, seqs):
    """Work items of a prefill attention call on one GPU: one per (sequence, query head,
    128-query tile) — FlashAttention's grid."""
    per_seq = np.ceil(toks / np.maximum(seqs, 1.0) / FLASH_QUERY_TILE_TOKENS)
    return seqs * per_seq * a.heads_q / d.tp


def decode_attention_s(a: ArchArrays, d: DeployArrays, env: Env, seqs, context,
                       queries_per_seq=1.0):
    """Mean per-layer time of decode attention on one GPU: `seqs` sequences of its attention
    group (whole requests: `StepLoad.group_decode_seqs`) decoding at `context`, each with
    `queries_per_seq` new tokens (k + 1 when verifying k speculative tokens: the KV is read
    once per sequence, the math grows with the queries)."""
    heads = a.heads_q / d.tp
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac
    bandwidth = env.hw.hbm_bytes_per_s * env.eff.decode_attention_bandwidth_frac
    kv_elems = kv_elems_per_token_layer(a, d)
    kv_bytes = kv_elems * env.kv.activation_bytes_per_value
    quantized = env.kv.activation_bytes_per_value < env.high.activation_bytes_per_value
    dequant_s_per_elem = np.where(quantized, 1.0 / env.eff.decode_kv_dequant_elements_per_s, 0.0)

    def one(ctx):
        local = ctx / d.kvp  # Helix: this GPU's slice of the sequence
        flop = seqs * queries_per_seq * local * heads * _head_flop_per_key(a, absorbed=True)
        stream_s = seqs * local * np.maximum(kv_bytes / bandwidth, kv_elems * dequant_s_per_elem)
        return np.maximum(flop / peak, stream_s)

    items_s = decode_work_items(a, d, seqs) * env.eff.decode_attention_per_sequence_s \
        / env.hw.sm_count
    return np.where(seqs > 0, _layer_mean(a, context, one) + items_s + attention_overhead_s(env),
                    0.0)


def prefill_attention_s(a: ArchArrays, d: DeployArrays, env: Env, toks, mean_context,
                        seqs=None):
    """Mean per-layer time of causal prefill attention on one GPU: `toks` new tokens of its
    attention group, of `seqs` requests (None: one, a chunk), that attend on average to
    `mean_context` keys (prior context + half the chunk)."""
    seqs = np.minimum(toks, 1.0) if seqs is None else seqs
    heads = a.heads_q / d.tp
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac
    kv_bytes = kv_elems_per_token_layer(a, d) * env.kv.activation_bytes_per_value

    def one(ctx):
        local = ctx / d.kvp  # Helix: this GPU's slice of the keys
        flop = toks * local * heads * _head_flop_per_key(a, absorbed=False)
        reread = np.ceil(toks / FLASH_QUERY_TILE_TOKENS) * local * kv_bytes
        return np.maximum(flop / peak, reread / env.hw.hbm_bytes_per_s)

    items_s = (prefill_work_items(a, d, toks, seqs) * env.eff.prefill_attention_per_tile_s
               + toks * heads * env.eff.prefill_attention_per_token_s) / env.hw.sm_count
    return np.where(toks > 0, _layer_mean(a, mean_context, one) + items_s
                    + prefill_overhead_s(env), 0.0)
