"""Attention math and KV traffic per layer and per GPU (GQA/MHA/MQA and MLA), and KV-cache size.

KV bytes per sequence (seeds, reading notes §5): 2·L·n_kv·d_h·b_kv·S for GQA; for MLA the latent
cache L·(kv_lora_rank + rope_dim)·b_kv·S. Sliding-window layers keep at most `window` tokens.
Tensor parallelism beyond the KV heads replicates them: each GPU holds ⌈n_kv/TP⌉ heads.
Layers without a mixer (Puzzle's no-op attention) hold no KV and run no attention.

DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5), an attention kind of its own: each query
attends to the `index_topk` keys a lightning indexer picks (arXiv 2512.02556 §2.1). Its cache is
the MLA latent plus one indexer key of `index_head_dim` per token and layer (in the KV format;
DeepSeek stores it in FP8). Per query the main MLA attention reads min(context, k) latents; the
indexer reads every indexer key and scores it with index_heads·index_head_dim MACs (its heads are
not sharded: vLLM's and SGLang's indexers replicate wq_b/wk/weights_proj on every TP rank). The
top-k selection itself is not costed. This part is a roofline with the dense-attention
efficiencies, not calibrated on DSA kernels (aiconfigurator-core ships no DSA tables).

Kernel time: a roofline (KV streaming for decode, flash-attention FLOPs for prefill) plus the SM
time of each work item (decode: one per sequence and KV head; prefill: one per sequence, query
head and 128-query tile — Q load, block scheduling, page-table walk, softmax epilogue and split-KV
reduction, spread over the SMs) plus a fixed per-call floor; `cost_model/efficiency.py` documents
the coefficients and `search/calibration/attention.py` fits them on measured kernels.
"""

from __future__ import annotations

import numpy as np

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.linear_attention import linear_state_bytes_per_sequence
from cost_model.precision import get_precision

# No measured DSA kernel table: outputs should flag DSA candidates (ArchArrays.index_heads > 0)
SPARSE_ATTENTION_CALIBRATED = False
# DeepSeek-V3.2 runs the indexer's scores in FP8 (arXiv 2512.02556 §2.1, DeepGEMM fp8_mqa_logits)
INDEXER_PRECISION = "fp8"

FLASH_QUERY_TILE_TOKENS = 128  # FlashAttention re-reads K/V once per 128-query tile (FA2/FA3 Br)


def kv_heads_per_gpu(a: ArchArrays, d: DeployArrays):
    """⌈n_kv / TP⌉: replication once TP exceeds the KV heads (seeds, guideline 7)."""
    return np.ceil(a.attention.heads_kv / d.tp)


def kv_elems_per_token_layer(a: ArchArrays, d: DeployArrays | None = None):
    """KV-cache elements per token per layer on one GPU (whole model when `d` is None)."""
    att = a.attention
    heads = att.heads_kv if d is None else kv_heads_per_gpu(a, d)
    return np.where(att.mla > 0, att.kv_lora + att.rope_dim, 2.0 * heads * att.head_dim)


def full_kv_elems_per_token_layer(a: ArchArrays, d: DeployArrays | None = None):
    """`kv_elems_per_token_layer` of a full-attention layer: Gemma 4's have their own KV heads
    and head width (`global_kv_heads` of `global_head_dim`; k and v both cached: under
    `attention_k_eq_v` the values are the keys before their norm and RoPE)."""
    att = a.attention
    heads = att.global_kv_heads if d is None else np.ceil(att.global_kv_heads / d.tp)
    return np.where(att.global_layers > 0, 2.0 * heads * att.global_head_dim,
                    kv_elems_per_token_layer(a, d))


def cache_elems_per_token_layer(a: ArchArrays, d: DeployArrays | None = None):
    """Cache elements per token per attention layer: the KV (or MLA latent) plus the DSA
    indexer key (none without DSA)."""
    return kv_elems_per_token_layer(a, d) + a.attention.index_head_dim


def kv_cache_bytes_per_sequence(a: ArchArrays, context_tokens,
                                kv_bytes_per_value: float | np.ndarray,
                                d: DeployArrays | None = None):
    """KV bytes of one sequence of `context_tokens` over all layers (per GPU when `d` given,
    counting the layers of the busiest pipeline stage); DSA's indexer keys included, layers
    without a mixer hold none. Linear-attention layers hold no KV: their fixed state is
    `linear_attention.linear_state_bytes_per_sequence`, added here so that every user of the
    per-sequence cache (max concurrency, KV transfer) sees it."""
    per_token = cache_elems_per_token_layer(a, d) * kv_bytes_per_value
    full_per_token = (full_kv_elems_per_token_layer(a, d) + a.attention.index_head_dim) \
        * kv_bytes_per_value
    full_layers = a.attention_layers - a.attention.sliding_layers
    sliding_tokens = np.minimum(context_tokens, a.attention.window)
    tokens_bytes = full_layers * context_tokens * full_per_token \
        + a.attention.sliding_layers * sliding_tokens * per_token
    stages, kvp = (1.0, 1.0) if d is None else (d.pp, d.kvp)
    kv = np.ceil(a.layers / stages) / a.layers * tokens_bytes / kvp
    return kv + linear_state_bytes_per_sequence(a, d)


def _head_flop_per_key(a: ArchArrays, absorbed: bool, full: bool = False):
    """FLOPs per (query, key) pair per head: scores + weighted values (`full`: in a
    full-attention layer, Gemma 4's of `global_head_dim`)."""
    width = np.where(a.attention.global_layers > 0, a.attention.global_head_dim,
                     a.attention.head_dim) if full else a.attention.head_dim
    gqa = 4.0 * width
    mla_absorbed = 2.0 * (2.0 * a.attention.kv_lora + a.attention.rope_dim)
    mla_plain = 2.0 * (a.attention.nope_dim + a.attention.rope_dim + a.attention.v_dim)
    return np.where(a.attention.mla > 0, mla_absorbed if absorbed else mla_plain, gqa)


def _layer_mean(a: ArchArrays, context, time_fn):
    """Average over attention layers of time_fn(context seen by that layer type, whether it is
    a full-attention layer); 0 for a model without attention layers (every mixer linear, or
    none), whose layers the callers weight by 0."""
    full = a.attention_layers - a.attention.sliding_layers
    sliding = time_fn(np.minimum(context, a.attention.window), False)
    total = full * time_fn(context, True) + a.attention.sliding_layers * sliding
    return np.divide(total, a.attention_layers, out=np.zeros(np.shape(total)),
                     where=a.attention_layers > 0)


def attended_keys(a: ArchArrays, context):
    """Keys one query of the main attention reads: all of `context`, DSA's top-k at most."""
    return np.where(a.attention.index_topk > 0, np.minimum(context, a.attention.index_topk),
                    context)


def _indexer_peak_flop_per_s(env: Env) -> float:
    """The indexer's math rate: FP8 tensor cores where the GPU has them (else BF16), at the
    attention kernels' compute fraction."""
    fp8 = get_precision(INDEXER_PRECISION)
    rate = env.hw.peak_for(fp8 if env.hw.supports(fp8) else env.high)
    return rate * env.eff.prefill_attention_compute_frac


def _indexer_s(a: ArchArrays, env: Env, queries, keys, key_reads):
    """Lightning-indexer time on one GPU: `queries` × `keys` scores of index_heads ·
    index_head_dim MACs, against streaming `key_reads` indexer keys from HBM. 0 without DSA."""
    peak = _indexer_peak_flop_per_s(env)
    flop = 2.0 * queries * keys * a.attention.index_heads * a.attention.index_head_dim
    read = key_reads * a.attention.index_head_dim * env.kv.activation_bytes_per_value
    return np.maximum(flop / peak, read / env.hw.hbm_bytes_per_s)


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
    return seqs * np.where(a.attention.mla > 0, 1.0, kv_heads_per_gpu(a, d))


def prefill_work_items(a: ArchArrays, d: DeployArrays, toks, seqs):
    """Work items of a prefill attention call on one GPU: one per (sequence, query head,
    128-query tile) — FlashAttention's grid."""
    per_seq = np.ceil(toks / np.maximum(seqs, 1.0) / FLASH_QUERY_TILE_TOKENS)
    return seqs * per_seq * a.attention.heads_q / d.tp


def decode_attention_s(a: ArchArrays, d: DeployArrays, env: Env, seqs, context,
                       queries_per_seq=1.0):
    """Mean per-layer time of decode attention on one GPU: `seqs` sequences of its attention
    group (whole requests: `StepLoad.group_decode_seqs`) decoding at `context`, each with
    `queries_per_seq` new tokens (k + 1 when verifying k speculative tokens: the KV is read
    once per sequence, the math grows with the queries)."""
    heads = a.attention.heads_q / d.tp
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac
    bandwidth = env.hw.hbm_bytes_per_s * env.eff.decode_attention_bandwidth_frac
    quantized = env.kv.activation_bytes_per_value < env.high.activation_bytes_per_value
    dequant_s_per_elem = np.where(quantized, 1.0 / env.eff.decode_kv_dequant_elements_per_s, 0.0)

    def one(ctx, full):
        kv_elems = (full_kv_elems_per_token_layer if full else kv_elems_per_token_layer)(a, d)
        kv_bytes = kv_elems * env.kv.activation_bytes_per_value
        local = ctx / d.kvp  # Helix: this GPU's slice of the sequence
        keys = attended_keys(a, local)
        flop = seqs * queries_per_seq * keys * heads * _head_flop_per_key(a, True, full)
        stream_s = seqs * keys * np.maximum(kv_bytes / bandwidth, kv_elems * dequant_s_per_elem)
        return np.maximum(flop / peak, stream_s) + _indexer_s(
            a, env, seqs * queries_per_seq, local, seqs * local)

    items_s = decode_work_items(a, d, seqs) * env.eff.decode_attention_per_sequence_s \
        / env.hw.sm_count
    return np.where(seqs > 0, _layer_mean(a, context, one) + items_s + attention_overhead_s(env),
                    0.0)


def _quantized_kv(env: Env):
    """1 where the KV cache is stored narrower than the attention math (FP8 KV), else 0."""
    return np.where(env.kv.activation_bytes_per_value < env.high.activation_bytes_per_value,
                    1.0, 0.0)


def prefill_attention_s(a: ArchArrays, d: DeployArrays, env: Env, toks, mean_context,
                        seqs=None):
    """Mean per-layer time of causal prefill attention on one GPU: `toks` new tokens of its
    attention group, of `seqs` requests (None: one, a chunk), that attend on average to
    `mean_context` keys (prior context + half the chunk). With a quantized KV cache the kernel's
    time beside its fixed floor is `prefill_quantized_kv_frac` times the BF16 cache's (the
    engine's context kernel writes and re-reads FP8 K/V: TensorRT-LLM's run faster, vLLM's
    FlashInfer ones slower; fitted per engine on measured kernels)."""
    seqs = np.minimum(toks, 1.0) if seqs is None else seqs
    heads = a.attention.heads_q / d.tp
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac

    def one(ctx, full):
        kv_elems = (full_kv_elems_per_token_layer if full else kv_elems_per_token_layer)(a, d)
        kv_bytes = kv_elems * env.kv.activation_bytes_per_value
        local = ctx / d.kvp  # Helix: this GPU's slice of the keys
        keys = attended_keys(a, local)
        flop = toks * keys * heads * _head_flop_per_key(a, False, full)
        reread = np.ceil(toks / FLASH_QUERY_TILE_TOKENS) * keys * kv_bytes
        indexer_reads = np.ceil(toks / FLASH_QUERY_TILE_TOKENS) * local
        return np.maximum(flop / peak, reread / env.hw.hbm_bytes_per_s) + _indexer_s(
            a, env, toks, local, indexer_reads)

    items_s = (prefill_work_items(a, d, toks, seqs) * env.eff.prefill_attention_per_tile_s
               + toks * heads * env.eff.prefill_attention_per_token_s) / env.hw.sm_count
    kv_scale = 1.0 + _quantized_kv(env) * (env.eff.prefill_quantized_kv_frac - 1.0)
    return np.where(toks > 0, kv_scale * (_layer_mean(a, mean_context, one) + items_s)
                    + prefill_overhead_s(env), 0.0)
