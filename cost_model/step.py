"""Step times: one pipeline stage's forward for a given `StepLoad`, with the time breakdown
GEMM / attention / communication / other (NVIDIA, AI Model Co-Design (2026), Figure 2), and the
drafting pass of speculative decoding. What aggregated serving runs with them (TPOT, TTFT) is
`cost_model.serving_steps`.
Pipeline parallelism keeps PP micro-batches in flight, the busiest of ⌈c/PP⌉ whole sequences
(`micro_batch_seqs`); attention DP puts ⌈·/DP⌉ of them on the busiest group (`StepLoad`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from cost_model.architecture import Architecture
from cost_model.attention import (
    SPARSE_ATTENTION_CALIBRATED, decode_attention_s, prefill_attention_s,
)
from cost_model.hardware import HardwareSpec
from cost_model.host import host_step_s
from cost_model.linear_attention import (
    LINEAR_ATTENTION_CALIBRATED, linear_decode_s, linear_prefill_s,
)
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.communication import all_gather_s, all_reduce_s, all_to_all_s, point_to_point_s
from cost_model.layers import GemmList, layer_gemms, moe_overhead_s
from cost_model.step_load import StepLoad, busiest_group_seqs
from cost_model.units import BF16_BYTES

ACTIVATION_BYTES = BF16_BYTES  # the residual stream between layers and in collectives
# Non-GEMM kernels with fusion (TensorRT-LLM/vLLM/SGLang), counted per sub-block as the engines
# run them: each sub-block (a token mixer, or an FFN, with its own pre-norm and residual: a
# transformer layer has two, each of Nemotron-H's single-mixer layers one) one fused residual
# add + RMSNorm (+ quant); each attention layer one RoPE + KV-cache write; each dense FFN or
# shared expert one activation (SwiGLU + quant). A transformer layer: 2 + 1 + 1 = 4 (prior).
NORM_KERNELS_PER_SUB_BLOCK = 1
ROPE_KERNELS_PER_ATTENTION_LAYER = 1
ACTIVATION_KERNELS_PER_FFN = 1
# Elementwise traffic per token, in units of H activations: per sub-block the norm's read and
# write (2) and the residual add's two reads and one write (3); per attention layer RoPE's read
# and write of q and k (~2); a transformer layer ~12 H. An FFN's activation reads gate and up
# and writes their product: (gate factor + 1) · H′/TP, 3 H′/TP for a gated FFN
# (`elementwise_values`).
SUB_BLOCK_HIDDEN_PASSES = 5.0
ROPE_HIDDEN_PASSES = 2.0
# GPUs of an HGX NVLink domain; a larger scale-up domain is a multi-node NVLink one (NVL72)
HGX_DOMAIN_GPUS = 8
STEP_OVERHEAD_KERNELS = 8  # per step: embedding, final norm, sampling, scheduler sync (prior)


def bubble_frac(stages, chunks):
    """Pipeline bubble of S stages with m chunks in flight: (S−1)/(S−1+m) (seeds, §5)."""
    stages = np.asarray(stages, dtype=np.float64)
    return (stages - 1.0) / (stages - 1.0 + chunks)


@dataclass(frozen=True)
class StageTime:
    """Time of one pipeline stage's forward, split as in the seeds' Figure 2 (seconds). The four
    parts sum to the total; `linear_attention_s` is the share of `attention_s` spent in
    linear-attention layers (state updates and chunked scans; their projections are GEMMs)."""

    gemm_s: np.ndarray
    attention_s: np.ndarray
    communication_s: np.ndarray
    other_s: np.ndarray
    linear_attention_s: np.ndarray  # of which in `attention_s`

    @property
    def total_s(self) -> np.ndarray:
        return self.gemm_s + self.attention_s + self.communication_s + self.other_s

    def _parts(self):
        return (self.gemm_s, self.attention_s, self.communication_s, self.other_s,
                self.linear_attention_s)

    def scaled(self, factor) -> StageTime:
        return StageTime(*(x * factor for x in self._parts()))

    def plus(self, other: StageTime, factor=1.0) -> StageTime:
        return StageTime(*(x + factor * y for x, y in zip(self._parts(), other._parts())))

    def minus(self, other: StageTime) -> StageTime:
        return self.plus(other, -1.0)

    def part(self, index) -> StageTime:
        """The slice `index` of a leading axis (e.g. stacked cases)."""
        return StageTime(*(x[index] for x in self._parts()))


@dataclass(frozen=True)
class StageLayers:
    """The busiest stage's layers by kind, ⌈L/PP⌉ of them, each kind in its share (balanced by
    type, so fractional)."""

    layers: np.ndarray
    attention: np.ndarray  # attention mixers (full or sliding, parallel hybrids included)
    linear: np.ndarray  # linear-attention mixers
    mixer: np.ndarray  # layers with any token mixer (a parallel hybrid's two count once)
    dense: np.ndarray  # dense FFNs
    moe: np.ndarray

    @classmethod
    def of(cls, a: ArchArrays, d: DeployArrays) -> StageLayers:
        layers = np.ceil(a.layers / d.pp)
        share = layers / a.layers
        attention, linear = stage_attention_layers(a, layers)
        return cls(layers, attention, linear, (a.layers - a.mixer.mixerless_layers) * share,
                   a.ffn.dense_layers * share, a.ffn.moe_layers * share)

    @property
    def sub_blocks(self) -> np.ndarray:
        """Pre-norm + residual blocks: one per mixer and one per FFN."""
        return self.mixer + self.dense + self.moe


def stage_attention_layers(a: ArchArrays, layers):
    """Attention layers among the stage's `layers` (all of them unless some have no mixer or a
    linear one), and its linear-attention layers."""
    other = (a.mixer.mixerless_layers > 0) | (a.mixer.linear_layers > 0)
    return np.where(other, layers * a.attention_layers / a.layers, layers), \
        layers * a.mixer.linear_layers / a.layers


def _mixer_reduce_layers(a: ArchArrays, attention_layers, linear_layers, layers):
    """Layers whose mixer output is all-reduced over TP: a parallel hybrid sums its attention
    and Mamba outputs before one all-reduce."""
    return attention_layers + linear_layers - layers * a.mixer.parallel_layers / a.layers


def stage_communication_s(a, d, env: Env, load: StepLoad, dense_layers, moe_layers, layers):
    """TP all-reduces after attention and FFN (busiest group's tokens); with DP attention each
    MoE layer's token exchange (`moe_exchange_s`); PP send of the activations to the next
    stage."""
    tok = load.group_tokens
    hw, eff = env.hw, env.eff
    tp_reduce = all_reduce_s(tok * a.hidden * ACTIVATION_BYTES, d.ffn_tp, hw, eff)
    attention = layers * (tp_reduce + helix_all_to_all_s(a, d, env, tok))
    dense = dense_layers * tp_reduce
    moe_group_reduce = all_reduce_s(load.instance_tokens * a.hidden * ACTIVATION_BYTES,
                                    d.ffn_tp * d.dp, hw, eff)
    moe = moe_layers * np.where(d.dp > 1, moe_exchange_s(a, d, env, load) + tp_reduce,
                                moe_group_reduce)
    send = np.where(d.pp > 1, point_to_point_s(tok * a.hidden * ACTIVATION_BYTES, hw, eff,
                                               crosses_domain=stages_span_domains(d, hw)), 0.0)
    return attention + dense + moe + send


def stages_span_domains(d: DeployArrays, hw: HardwareSpec) -> np.ndarray:
    """True where the instance's GPUs span more than one scale-up domain: its stages sit one
    after another (each stage's tp·dp·kvp GPUs together), so some stage hands its activations
    to the next over the scale-out network, and the pipeline runs at that slowest stage's pace;
    inside one domain every send is on NVLink."""
    return d.gpus > hw.scale_up_domain_gpus


def uses_moe_all_to_all(a: ArchArrays, d: DeployArrays, hw: HardwareSpec) -> np.ndarray:
    """True where an MoE layer under attention DP exchanges only the routed copies (an
    all-to-all): TensorRT-LLM does so on a multi-node NVLink domain (MNNVL, NVL72) when the
    experts span more ranks than a token's top-k, and otherwise all-gathers
    (tensorrt_llm/_torch/modules/fused_moe, `select_alltoall_method_type`: NotEnabled when
    moe_ep_size <= top_k, MNNVL when supported, DeepEP only on request). vLLM's default
    `--all2all-backend` is allgather_reducescatter (docs.vllm.ai, Expert Parallel Deployment)
    and SGLang's DP attention gathers the tokens unless a DeepEP backend is asked for."""
    return (hw.scale_up_domain_gpus > HGX_DOMAIN_GPUS) & (d.ep > a.ffn.top_k)


def moe_exchange_s(a, d, env: Env, load: StepLoad):
    """One MoE layer's token exchange under attention DP. All-gather and reduce-scatter (every
    engine's default): every rank receives all DP groups' tokens in the experts' input format and
    returns BF16 partial outputs to their groups, over the dp·tp ranks, whatever the EP degree
    (with EP 1 the ranks hold slices of every expert and still need every token). All-to-all
    (`uses_moe_all_to_all`): each rank sends its tokens' routed copies, min(top-k, EP) per token,
    dispatch in the experts' input format and combine in BF16, over the EP ranks."""
    hw, eff = env.hw, env.eff
    gathered = load.instance_tokens * a.hidden
    group = d.dp * d.ffn_tp
    gather = all_gather_s(gathered * env.experts.activation_bytes_per_value, group, hw, eff) \
        + all_gather_s(gathered * ACTIVATION_BYTES, group, hw, eff)
    routed = load.group_tokens / d.ffn_tp * np.minimum(a.ffn.top_k, d.ep) * a.hidden
    exchange = all_to_all_s(routed * env.experts.activation_bytes_per_value, d.ep, hw, eff) \
        + all_to_all_s(routed * ACTIVATION_BYTES, d.ep, hw, eff)
    return np.where(uses_moe_all_to_all(a, d, hw), exchange, gather)


def helix_all_to_all_s(a, d, env: Env, tokens):
    """Helix's exchange after attention (arXiv 2507.07120 §3): each of the kvp ranks holds, for
    its tp share of the query heads, partial outputs over its slice of the sequence plus one
    log-sum-exp per head; an all-to-all over the kvp ranks leaves each with heads/(tp·kvp)
    heads combined. It sends (kvp−1)/kvp of tokens · heads/tp · (v_dim + 1) BF16 values. 0 when
    kvp = 1."""
    values = tokens * a.attention.heads_q / d.tp * (a.attention.v_dim + 1.0) * ACTIVATION_BYTES
    return all_to_all_s(values, d.kvp, env.hw, env.eff)


def elementwise_values(a: ArchArrays, d: DeployArrays, stage: StageLayers):
    """BF16 values read or written per token by the stage's non-GEMM kernels: the sub-blocks'
    norms and residual adds, the attention layers' RoPE, the dense FFNs' and shared experts'
    activations (`SUB_BLOCK_HIDDEN_PASSES` …)."""
    ffn = a.ffn.dense_width * stage.dense + a.ffn.shared_ffn * stage.moe
    return (SUB_BLOCK_HIDDEN_PASSES * stage.sub_blocks + ROPE_HIDDEN_PASSES * stage.attention) \
        * a.hidden + (a.ffn.gate_factor + 1.0) * ffn / d.ffn_tp


def other_kernel_launches(a: ArchArrays, stage: StageLayers):
    """Non-GEMM kernel launches of the stage's layers, as the engines fuse them."""
    activations = stage.dense + stage.moe * (a.ffn.shared_ffn > 0)
    return NORM_KERNELS_PER_SUB_BLOCK * stage.sub_blocks \
        + ROPE_KERNELS_PER_ATTENTION_LAYER * stage.attention \
        + ACTIVATION_KERNELS_PER_FFN * activations


def stage_other_s(a, d, env: Env, load: StepLoad, stage: StageLayers, host=True):
    """Non-GEMM kernels: elementwise traffic (`elementwise_values`), their launches
    (`other_kernel_launches`), the per-step kernels and each MoE layer's fused-MoE overhead on every
    group's tokens (`layers.moe_overhead_s`, on the step's engine's kernels: `Env.moe_terms`);
    with `host`, the scheduler's host time for the sequences of the
    busiest rank's micro-batch (`cost_model.host`): the first stage waits for it before each
    micro-batch, so a TPOT of PP micro-batches pays it for all c sequences."""
    elementwise = load.group_tokens * elementwise_values(a, d, stage) * ACTIVATION_BYTES / (
        env.hw.hbm_bytes_per_s * env.eff.for_rate("bf16").bandwidth_ceiling_frac)
    launches = other_kernel_launches(a, stage) * env.hw.kernel_launch_s
    scheduler = host_step_s(load.group_decode_seqs + load.group_prefill_seqs, env.hw.host_cpu) \
        if host else 0.0
    return elementwise + launches + STEP_OVERHEAD_KERNELS * env.hw.kernel_launch_s / d.pp \
        + scheduler + stage.moe * moe_overhead_s(a, d, env, load.instance_tokens)


def stage_forward(a: ArchArrays, d: DeployArrays, env: Env, decode_seqs, context,
                  prefill_tokens, prefill_context, prefill_seqs=None,
                  tokens_per_seq=1.0, host=True) -> StageTime:
    """One forward of the busiest stage for a micro-batch of `decode_seqs` whole decoding
    sequences at `context` tokens plus `prefill_tokens` prompt tokens of `prefill_seqs` requests
    (None: one request, a chunk) attending to `prefill_context` on average. Counts are for the
    whole instance (all DP groups); the busiest group's share is taken in whole requests
    (`StepLoad.of`); each decoding sequence puts `tokens_per_seq` tokens through the model (k + 1
    when verifying k speculative tokens). Broadcasts over every argument. Each MoE layer pays
    the fused-MoE overhead (`layers.moe_overhead_s`, in `other_s`). `host` False leaves out the
    scheduler's host time (a pass inside a step the scheduler already paid for: a draft pass)."""
    load = StepLoad.of(d, decode_seqs, prefill_tokens, prefill_seqs, tokens_per_seq)
    return stage_forward_load(a, d, env, load, context, prefill_context, host)


def stage_forward_load(a: ArchArrays, d: DeployArrays, env: Env, load: StepLoad, context,
                       prefill_context, host=True) -> StageTime:
    """`stage_forward` for a step given as a `StepLoad`."""
    stage = StageLayers.of(a, d)
    shape = np.broadcast_shapes(np.shape(load.group_tokens), np.shape(load.instance_tokens),
                                np.shape(prefill_context), a.hidden.shape)
    gemms = GemmList(shape)
    layer_gemms(gemms, a, d, load, stage.attention, stage.linear, stage.dense, stage.moe)
    gemm_s = cast(np.ndarray, sum(gemms.times_s(env).values(), np.zeros(shape)))
    attention_s = stage.attention * (
        decode_attention_s(a, d, env, load.group_decode_seqs, context,
                           load.decode_tokens_per_seq)
        + prefill_attention_s(a, d, env, load.group_prefill_tokens, prefill_context,
                              load.group_prefill_seqs))
    linear_s = np.zeros_like(attention_s) + _linear_mixer_s(a, d, env, load, stage.linear)
    return StageTime(
        gemm_s=gemm_s, attention_s=attention_s + linear_s, linear_attention_s=linear_s,
        communication_s=stage_communication_s(
            a, d, env, load, stage.dense, stage.moe,
            _mixer_reduce_layers(a, stage.attention, stage.linear, stage.layers)),
        other_s=stage_other_s(a, d, env, load, stage, host),
    )


def _linear_mixer_s(a, d, env: Env, load: StepLoad, linear_layers):
    """The linear-attention layers' state updates and chunked scans (counted as attention);
    0 s without linear layers (not evaluated then)."""
    if not np.any(a.mixer.linear_layers > 0):
        return 0.0
    per_layer = linear_decode_s(a, d, env, load.group_decode_seqs, load.decode_tokens_per_seq) \
        + linear_prefill_s(a, d, env, load.group_prefill_tokens)
    return linear_layers * per_layer


def micro_batch_seqs(concurrency, d: DeployArrays):
    """⌈c/PP⌉: whole sequences in the busiest of the PP micro-batches in flight."""
    return busiest_group_seqs(concurrency, d.pp)


def draft_pass(a: ArchArrays, d: DeployArrays, env: Env, concurrency, context) -> StageTime:
    """One drafting pass of speculative decoding for the busiest micro-batch: one transformer
    block of the model's kind (DeepSeek-V3's MTP module is one block sharing the embedding and
    output head, arXiv 2412.19437 §2.2; an EAGLE draft head is one decoder layer) and the LM
    head, on one token per sequence. k draft tokens take k such passes, one after another."""
    moe = np.minimum(a.ffn.moe_layers, 1.0)
    block = a.with_columns(layers=np.ones_like(a.layers), dense_layers=1.0 - moe, moe_layers=moe,
                           sliding_layers=np.zeros_like(a.attention.sliding_layers),
                           mixerless_layers=np.zeros_like(a.mixer.mixerless_layers),
                           linear_layers=np.zeros_like(a.mixer.linear_layers),
                           parallel_layers=np.zeros_like(a.mixer.parallel_layers))
    single = replace(d, pp=np.ones_like(d.pp))
    return stage_forward(block, single, env, micro_batch_seqs(concurrency, d), context, 0.0, 0.0,
                         host=False)


def uncalibrated_components(arch: Architecture) -> tuple[str, ...]:
    """The parts of `arch`'s step time costed by a roofline with cited efficiencies instead of
    calibrated kernel tables: "linear_attention" (any linear layer) and "sparse_attention" (DSA);
    () when every part is calibrated. What outputs flag as `uncalibrated`."""
    parts = (("linear_attention", arch.mixer.num_linear_attention_layers > 0,
              LINEAR_ATTENTION_CALIBRATED),
             ("sparse_attention", arch.attention.is_sparse_attention, SPARSE_ATTENTION_CALIBRATED))
    return tuple(name for name, used, calibrated in parts if used and not calibrated)
