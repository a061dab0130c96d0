"""Step times: one pipeline stage's forward, decode TPOT, prefill TTFT, with the time breakdown
GEMM / attention / communication / other (the seeds' Figure 2).

Aggregated serving with in-flight batching: in steady state each decode step of `c` sequences
must also absorb c·ISL/OSL prompt tokens (every request's ISL tokens are prefilled once per OSL
generated tokens); the engine runs them as prefill chunks batched into decode steps, and TPOT
carries their amortized cost, so prefill work is included in throughput.
Pipeline parallelism keeps PP micro-batches in flight, the busiest of ⌈c/PP⌉ whole sequences:
TPOT = PP · stage time. Attention DP puts ⌈·/DP⌉ of them on the busiest group (`StepLoad`).
TTFT is chunked-pipeline prefill of one request (seeds, guideline 6): m chunks through S stages take
(m + S − 1) stage times, i.e. a bubble of (S−1)/(S−1+m).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cost_model.attention import decode_attention_s, prefill_attention_s
from cost_model.hardware import HardwareSpec
from cost_model.host import host_step_s
from cost_model.linear_attention import linear_decode_s, linear_prefill_s
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.benchmark_ttft import benchmark_ttft_s, prompt_queue_s
from cost_model.deployment import expected_tokens_per_step
from cost_model.communication import all_gather_s, all_reduce_s, all_to_all_s, point_to_point_s
from cost_model.layers import GemmList, layer_gemms, moe_overhead_s
from cost_model.step_load import StepLoad, busiest_group_seqs

ACTIVATION_BYTES = 2.0  # BF16 residual stream between layers and in collectives
# Non-GEMM kernels per layer with fusion (TensorRT-LLM/vLLM): 2 fused add+RMSNorm(+quant),
# RoPE + KV-cache write, activation (SwiGLU + quant): prior, refit by calibration.
OTHER_KERNELS_PER_LAYER = 4
# Elementwise traffic per token per layer, in units of H activations: two norms (read + write),
# two residual adds, RoPE: ~12 H-sized reads/writes; the FFN activation adds 3 H′/TP.
ELEMENTWISE_HIDDEN_PASSES = 12.0
ELEMENTWISE_FFN_PASSES = 3.0
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


def _stage_layers(a: ArchArrays, d: DeployArrays):
    """Layers on the busiest stage, and its dense-FFN and MoE layers (balanced by type)."""
    layers = np.ceil(a.layers / d.pp)
    share = layers / a.layers
    return layers, a.dense_layers * share, a.moe_layers * share


def stage_attention_layers(a: ArchArrays, layers):
    """Attention layers among the stage's `layers` (all of them unless some have no mixer or a
    linear one), and its linear-attention layers."""
    other = (a.mixerless_layers > 0) | (a.linear_layers > 0)
    return np.where(other, layers * a.attention_layers / a.layers, layers), \
        layers * a.linear_layers / a.layers


def _mixer_reduce_layers(a: ArchArrays, attention_layers, linear_layers, layers):
    """Layers whose mixer output is all-reduced over TP: a parallel hybrid sums its attention
    and Mamba outputs before one all-reduce."""
    return attention_layers + linear_layers - layers * a.parallel_layers / a.layers


def _communication_s(a, d, env: Env, load: StepLoad, dense_layers, moe_layers, layers):
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
    send = np.where(d.pp > 1, point_to_point_s(tok * a.hidden * ACTIVATION_BYTES, hw, eff), 0.0)
    return attention + dense + moe + send


def uses_moe_all_to_all(a: ArchArrays, d: DeployArrays, hw: HardwareSpec) -> np.ndarray:
    """True where an MoE layer under attention DP exchanges only the routed copies (an
    all-to-all): TensorRT-LLM does so on a multi-node NVLink domain (MNNVL, NVL72) when the
    experts span more ranks than a token's top-k, and otherwise all-gathers
    (tensorrt_llm/_torch/modules/fused_moe, `select_alltoall_method_type`: NotEnabled when
    moe_ep_size <= top_k, MNNVL when supported, DeepEP only on request). vLLM's default
    `--all2all-backend` is allgather_reducescatter (docs.vllm.ai, Expert Parallel Deployment)
    and SGLang's DP attention gathers the tokens unless a DeepEP backend is asked for."""
    return (hw.scale_up_domain_gpus > HGX_DOMAIN_GPUS) & (d.ep > a.top_k)


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
    routed = load.group_tokens / d.ffn_tp * np.minimum(a.top_k, d.ep) * a.hidden
    exchange = all_to_all_s(routed * env.experts.activation_bytes_per_value, d.ep, hw, eff) \
        + all_to_all_s(routed * ACTIVATION_BYTES, d.ep, hw, eff)
    return np.where(uses_moe_all_to_all(a, d, hw), exchange, gather)


def helix_all_to_all_s(a, d, env: Env, tokens):
    """Helix's exchange after attention (arXiv 2507.07120 §3): each of the kvp ranks holds, for
    its tp share of the query heads, partial outputs over its slice of the sequence plus one
    log-sum-exp per head; an all-to-all over the kvp ranks leaves each with heads/(tp·kvp)
    heads combined. It sends (kvp−1)/kvp of tokens · heads/tp · (v_dim + 1) BF16 values. 0 when
    kvp = 1."""
    values = tokens * a.heads_q / d.tp * (a.v_dim + 1.0) * ACTIVATION_BYTES
    return all_to_all_s(values, d.kvp, env.hw, env.eff)


def _other_s(a, d, env: Env, load: StepLoad, layers, dense_layers, moe_layers=0.0, host=True):
    """Non-GEMM kernels: elementwise traffic, their launches, the per-step kernels and each MoE
    layer's fused-MoE overhead on every group's tokens (`layers.moe_overhead_s`, on the step's
    engine's kernels: `Env.moe_terms`); with `host`, the scheduler's host time for
    the sequences of the busiest rank's micro-batch (`cost_model.host`): the first stage waits
    for it before each micro-batch, so a TPOT of PP micro-batches pays it for all c sequences."""
    passes = ELEMENTWISE_HIDDEN_PASSES * a.hidden + ELEMENTWISE_FFN_PASSES * a.ffn / d.ffn_tp * \
        np.minimum(dense_layers, 1.0)
    elementwise = load.group_tokens * passes * ACTIVATION_BYTES / (
        env.hw.hbm_bytes_per_s * env.eff.for_rate("bf16").bandwidth_ceiling_frac)
    fixed = OTHER_KERNELS_PER_LAYER * env.hw.kernel_launch_s
    scheduler = host_step_s(load.group_decode_seqs + load.group_prefill_seqs, env.hw.host_cpu) \
        if host else 0.0
    return layers * (elementwise + fixed) + STEP_OVERHEAD_KERNELS * env.hw.kernel_launch_s / d.pp \
        + scheduler + moe_layers * moe_overhead_s(a, d, env, load.instance_tokens)


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
    layers, dense_layers, moe_layers = _stage_layers(a, d)
    shape = np.broadcast_shapes(np.shape(load.group_tokens), np.shape(load.instance_tokens),
                                np.shape(prefill_context), a.hidden.shape)
    gemms = GemmList(shape)
    attention_layers, linear_layers = stage_attention_layers(a, layers)
    layer_gemms(gemms, a, d, load, attention_layers, linear_layers, dense_layers, moe_layers)
    gemm_s = sum(gemms.times_s(env).values())
    attention_s = attention_layers * (
        decode_attention_s(a, d, env, load.group_decode_seqs, context,
                           load.decode_tokens_per_seq)
        + prefill_attention_s(a, d, env, load.group_prefill_tokens, prefill_context,
                              load.group_prefill_seqs))
    linear_s = np.zeros_like(attention_s) + _linear_mixer_s(a, d, env, load, linear_layers)
    return StageTime(
        gemm_s=gemm_s, attention_s=attention_s + linear_s, linear_attention_s=linear_s,
        communication_s=_communication_s(
            a, d, env, load, dense_layers, moe_layers,
            _mixer_reduce_layers(a, attention_layers, linear_layers, layers)),
        other_s=_other_s(a, d, env, load, layers, dense_layers, moe_layers, host),
    )


def _linear_mixer_s(a, d, env: Env, load: StepLoad, linear_layers):
    """The linear-attention layers' state updates and chunked scans (counted as attention);
    0 s without linear layers (not evaluated then)."""
    if not np.any(a.linear_layers > 0):
        return 0.0
    per_layer = linear_decode_s(a, d, env, load.group_decode_seqs, load.decode_tokens_per_seq) \
        + linear_prefill_s(a, d, env, load.group_prefill_tokens)
    return linear_layers * per_layer


def micro_batch_seqs(concurrency, d: DeployArrays):
    """⌈c/PP⌉: whole sequences in the busiest of the PP micro-batches in flight."""
    return busiest_group_seqs(concurrency, d.pp)


def _prefill_tokens(concurrency, d, isl_tokens, osl_tokens, chunk_tokens):
    """(prompt tokens each step must absorb in steady state, tokens of one prefill chunk): every
    request's ISL tokens are prefilled once per OSL generated tokens (an average rate over steps,
    not a count of requests)."""
    chunk = isl_tokens / np.ceil(isl_tokens / chunk_tokens)
    return concurrency / d.pp * isl_tokens / osl_tokens, chunk


def _forward_args(concurrency, d, isl_tokens, osl_tokens, chunk_tokens, cached_tokens=0.0,
                  decode_context=None, balanced=False):
    """Arguments of stage_forward for (a) a decode-only step, (b) the same step carrying prompt
    tokens: one chunk (one per group that holds requests when the groups prefill together,
    `balanced`), or all the step's share when that is more than those chunks, (c) a step that
    prefills one chunk of a newly arrived request beside the other c − 1 sequences (its TTFT)
    and (d) a step whose every group fills its token budget with prompts (the rate at which a
    queue of prompts drains). Stacked on a new leading axis so numpy's per-call cost is paid
    once. A prompt's first `cached_tokens` come from the prefix cache: only the rest is
    prefilled, attending to the cached prefix and, causally, to itself."""
    new = isl_tokens - cached_tokens
    micro = micro_batch_seqs(concurrency, d)
    others = micro_batch_seqs(np.maximum(concurrency - 1.0, 0.0), d)
    per_step, chunk = _prefill_tokens(concurrency, d, new, osl_tokens, chunk_tokens)
    shape = np.broadcast_shapes(np.shape(concurrency), d.pp.shape, d.dp.shape)
    full = lambda v: np.broadcast_to(v, shape)  # noqa: E731
    decode_seqs = np.stack([full(micro), full(micro), full(others), full(others)])
    chunks = _chunks_per_prompt_step(concurrency, d, balanced)
    # (d) every group's token budget filled with prompts: the engine's prefill rate
    prefill = np.stack([np.zeros(shape), full(np.maximum(per_step, chunks * chunk)), full(chunk),
                        full(d.dp * chunk_tokens)])
    # a chunk belongs to one request; a larger share is whole prompts of share/ISL requests;
    # chunks of balanced groups belong to one request each
    prefill_seqs = np.maximum(prefill / new, np.minimum(prefill, 1.0))
    prefill_seqs[1] = np.maximum(prefill_seqs[1], np.where(per_step < chunks * chunk, chunks, 0.0))
    context = isl_tokens + osl_tokens / 2.0 if decode_context is None else decode_context
    return decode_seqs, context, prefill, cached_tokens + new / 2.0, prefill_seqs, \
        d.spec_tokens + 1.0


def chunk_step_frac(concurrency, d: DeployArrays, isl_tokens, osl_tokens, chunk_tokens,
                    balanced=False):
    """Share of steps that carry a prefill chunk when each step's prompt share p is below a
    chunk: each DP group's requests need one every chunk/p_g steps (p_g its ⌈c/dp⌉ requests'
    share) and the groups step together, so a step carries at least one chunk with probability
    1 − (1 − p_g/chunk)^g over the g = min(dp, c) groups that hold requests (independent
    arrivals); 1 once p reaches a chunk. `balanced`: an attention-DP balancer holds new
    requests until every group has one (TensorRT-LLM's `attention_dp_config.enable_balance`:
    tensorrt_llm/_torch/pyexecutor/py_executor.py, `_balance_adp_requests`), so the groups'
    chunks land in the same steps and a share p_g/chunk of the steps carries them all."""
    per_group = prefill_utilization(concurrency, d, isl_tokens, osl_tokens, chunk_tokens)
    return np.where(balanced, per_group,
                    1.0 - (1.0 - per_group) ** _prefilling_groups(concurrency, d))


def _prefilling_groups(concurrency, d: DeployArrays):
    """g = min(dp, c): the attention-DP groups that hold requests, so take new prompts."""
    return np.minimum(d.dp, np.maximum(concurrency, 1.0))


def _chunks_per_prompt_step(concurrency, d: DeployArrays, balanced):
    """Chunks a step that carries prompts holds: one per prefilling group when the groups
    prefill together (`balanced`), else one."""
    return np.where(balanced, _prefilling_groups(concurrency, d), 1.0)


def prefill_utilization(concurrency, d: DeployArrays, isl_tokens, osl_tokens, chunk_tokens):
    """ρ_g = p_g / chunk, at most 1: the share of the busiest group's steps that its requests'
    prompts need (one chunk per step fits the engine's token budget)."""
    group_per_step, chunk = _prefill_tokens(busiest_group_seqs(concurrency, d.dp), d, isl_tokens,
                                            osl_tokens, chunk_tokens)
    return np.minimum(group_per_step / chunk, 1.0)


def draft_pass(a: ArchArrays, d: DeployArrays, env: Env, concurrency, context) -> StageTime:
    """One drafting pass of speculative decoding for the busiest micro-batch: one transformer
    block of the model's kind (DeepSeek-V3's MTP module is one block sharing the embedding and
    output head, arXiv 2412.19437 §2.2; an EAGLE draft head is one decoder layer) and the LM
    head, on one token per sequence. k draft tokens take k such passes, one after another."""
    moe = np.minimum(a.moe_layers, 1.0)
    block = replace(a, layers=np.ones_like(a.layers), dense_layers=1.0 - moe, moe_layers=moe,
                    sliding_layers=np.zeros_like(a.sliding_layers),
                    mixerless_layers=np.zeros_like(a.mixerless_layers),
                    linear_layers=np.zeros_like(a.linear_layers),
                    parallel_layers=np.zeros_like(a.parallel_layers))
    single = replace(d, pp=np.ones_like(d.pp))
    return stage_forward(block, single, env, micro_batch_seqs(concurrency, d), context, 0.0, 0.0,
                         host=False)


@dataclass(frozen=True)
class ServingTimes:
    tpot: StageTime  # per output token: the decode step (prefill amortized, × PP, drafts
    # included) over the tokens it yields
    ttft_s: np.ndarray  # steady-state TTFT of one request (the engine's)
    benchmark_ttft_s: np.ndarray  # what a benchmark client at this concurrency measures
    prompt_queue_s: np.ndarray  # (C_g − 1) · S_prompt: draining the group's other prompts


def serving_times(a, d, env: Env, concurrency, isl_tokens, osl_tokens, chunk_tokens,
                  cached_tokens=0.0, balanced=False) -> ServingTimes:
    """TPOT (a StageTime breakdown), steady-state TTFT and benchmark TTFT of aggregated serving
    at `concurrency` whole requests (`cost_model.benchmark_ttft` for the last).

    In steady state every step must absorb p = micro·ISL/OSL prompt tokens. When p is less than a
    chunk, the engine runs a chunk (≤ `chunk_tokens`, batched with the decode micro-batch; it
    reads each weight and MoE expert once) in a share s of the steps (`chunk_step_frac`):
    TPOT = A + s·(B − A), A the decode step, B the step with a chunk. Otherwise every step
    carries its p prompt tokens: TPOT = B with p tokens. All × PP, with ⌈c/PP⌉ sequences in the
    busiest micro-batch and ⌈·/DP⌉ of them in its busiest attention group.
    Steady-state TTFT of one request: its m chunks through S stages, (m + S − 1) steps that each
    carry one chunk beside the other c − 1 sequences, plus half a decode step of waiting for the
    step in progress when other sequences are running (none at c = 1). It does not depend on
    OSL: the other requests' prompt share is what TPOT pays.
    With a prefix cache (`cached_tokens` of each prompt reused, e.g. a shared system prompt)
    only ISL − cached tokens are prefilled, in every one of these terms. `balanced`: an
    attention-DP balancer prefills the groups' new requests together (`chunk_step_frac`): B
    carries one chunk per group, in a share p_g/chunk of the steps."""
    gained = expected_tokens_per_step(d.spec_tokens, d.spec_acceptance)
    decode_steps = osl_tokens / gained  # steps a request decodes for: prompts amortize over them
    new = isl_tokens - cached_tokens
    steps = stage_forward(a, d, env, *_forward_args(
        concurrency, d, isl_tokens, decode_steps, chunk_tokens, cached_tokens,
        isl_tokens + osl_tokens / 2.0, balanced))
    per_step, chunk = _prefill_tokens(concurrency, d, new, decode_steps, chunk_tokens)
    chunks = _chunks_per_prompt_step(concurrency, d, balanced)
    share = np.where(per_step >= chunks * chunk, 1.0,
                     chunk_step_frac(concurrency, d, new, decode_steps, chunk_tokens, balanced))
    step = steps.part(0).plus(steps.part(1).minus(steps.part(0)), share).scaled(d.pp)
    if d.speculative:
        step = step.plus(draft_pass(a, d, env, concurrency, isl_tokens + osl_tokens / 2.0),
                         d.spec_tokens)
    decode = step.scaled(1.0 / gained)
    chunks = np.ceil(new / chunk_tokens)
    waiting = np.where(np.asarray(concurrency) > 1.0, step.total_s / (2.0 * d.pp), 0.0)
    ttft = (chunks + d.pp - 1.0) * steps.part(2).total_s + waiting
    prompt_s = steps.part(3).total_s * new / chunk_tokens  # one budget per stage step
    queue = prompt_queue_s(prompt_s, busiest_group_seqs(concurrency, d.dp))
    return ServingTimes(decode, ttft, benchmark_ttft_s(ttft, queue), queue)
