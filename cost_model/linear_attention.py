"""Linear-attention mixers with a recurrent state (Gated DeltaNet, Mamba-2): projections, state,
time. Mamba-2 is costed with the same forms (SSD, arXiv 2405.21060 §6: its chunked scan is the
same block decomposition, B/C playing keys/queries of the state size, x the values).

A Gated DeltaNet layer (arXiv 2412.06464; transformers' Qwen3NextGatedDeltaNet) projects the
hidden state to q, k (n_k heads of d_k), v and the output gate z (n_v heads of d_v) and per-head
β and decay, runs a short causal depthwise conv over q, k, v, updates a d_k x d_v state per v head
and projects n_v·d_v back to H. TP shards the heads. What one sequence keeps is fixed, whatever
its length: the states (fp32) and the conv's last kernel-1 inputs (BF16).

Decode reads and writes each state once per token (≈ 3 MACs per state element: q·S, k·S and the
rank-1 update): memory-bound, costed as a roofline over the state bytes at the decode-attention
bandwidth fraction. Prefill runs the chunked form (FLA's chunk_gated_delta_rule, 64-token chunks):
per token and head 2·C·(d_k + d_v) FLOPs inside the chunk plus 6·d_k·d_v against the state, at
the attention compute fraction, with one state read and write per chunk. Neither is calibrated:
aiconfigurator-core ships no Gated DeltaNet kernel tables; outputs should flag it.
"""

from __future__ import annotations

import numpy as np

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.units import BF16_BYTES

LINEAR_STATE_BYTES = 4.0  # fp32 recurrent state (FLA kernels, vLLM's mamba_ssm_dtype float32)
CONV_STATE_BYTES = BF16_BYTES  # the short conv's past inputs, BF16
SCAN_CHUNK_TOKENS = 64.0  # FLA chunk_gated_delta_rule's chunk size
STATE_MACS_PER_ELEM = 3.0  # q·S, k·S (delta rule's prediction) and the rank-1 state update
# No measured kernel table: the time is a roofline, flagged as uncalibrated whenever a candidate
# has linear layers (`cost_model.step.uncalibrated_components`).
LINEAR_ATTENTION_CALIBRATED = False


def _heads_per_gpu(a: ArchArrays, d: DeployArrays):
    return a.mixer.linear_heads / d.tp


def linear_state_bytes_per_sequence(a: ArchArrays, d: DeployArrays | None = None):
    """Fixed state of one sequence over all linear layers (per GPU with `d`: the busiest
    stage's layers, heads sharded by TP)."""
    tp, stages = (1.0, 1.0) if d is None else (d.tp, d.pp)
    mix = a.mixer
    states = mix.linear_heads * mix.linear_key_dim * mix.linear_value_dim * LINEAR_STATE_BYTES
    conv = np.maximum(mix.linear_conv_kernel - 1.0, 0.0) * mix.linear_conv_width \
        * CONV_STATE_BYTES
    share = np.ceil(a.layers / stages) / a.layers
    return a.mixer.linear_layers * share * (states + conv) / tp


def linear_decode_s(a: ArchArrays, d: DeployArrays, env: Env, seqs, tokens_per_seq=1.0):
    """One linear layer's state read + update for `seqs` sequences on one GPU."""
    elems = seqs * _heads_per_gpu(a, d) * a.mixer.linear_key_dim * a.mixer.linear_value_dim
    flop = 2.0 * STATE_MACS_PER_ELEM * elems * tokens_per_seq
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac
    bandwidth = env.hw.hbm_bytes_per_s * env.eff.decode_attention_bandwidth_frac
    stream_s = 2.0 * elems * LINEAR_STATE_BYTES / bandwidth
    return np.where(seqs > 0, np.maximum(flop / peak, stream_s) + env.hw.kernel_launch_s, 0.0)


def linear_prefill_s(a: ArchArrays, d: DeployArrays, env: Env, toks):
    """One linear layer's chunked scan over `toks` prompt tokens on one GPU."""
    heads, key, value = _heads_per_gpu(a, d), a.mixer.linear_key_dim, a.mixer.linear_value_dim
    per_token = 2.0 * SCAN_CHUNK_TOKENS * (key + value) + 2.0 * STATE_MACS_PER_ELEM * key * value
    peak = env.hw.peak_for(env.high) * env.eff.prefill_attention_compute_frac
    state_io = 2.0 * np.ceil(toks / SCAN_CHUNK_TOKENS) * heads * key * value * LINEAR_STATE_BYTES
    time = np.maximum(toks * heads * per_token / peak, state_io / env.hw.hbm_bytes_per_s)
    return np.where(toks > 0, time + env.hw.kernel_launch_s, 0.0)
