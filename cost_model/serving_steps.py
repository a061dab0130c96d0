"""Aggregated serving with in-flight batching: the steps a micro-batch runs, and from them TPOT,
steady-state TTFT and the time a queue of prompts takes to drain.

In steady state each decode step of a micro-batch must also absorb its requests' prompts (every
request's ISL tokens are prefilled once per OSL generated tokens); the engine runs them as chunks
batched into decode steps (`step_load.PromptSchedule` says in which share of the steps and how
large), so TPOT carries their amortized cost and throughput includes the prefill work.
Pipeline parallelism keeps PP micro-batches in flight, the busiest of ⌈c/PP⌉ whole sequences:
TPOT = PP · stage time. Attention DP puts ⌈·/DP⌉ of them on the busiest group; groups in
lockstep (an MoE model's: `step_load.lockstep_groups`) share each step, independent ones (a dense
model's) are replicas and step alone (`cost_model.evaluate` mixes their group sizes).
TTFT is chunked-pipeline prefill of one request (the co-design post, guideline 6): m chunks
through S stages take (m + S − 1) stage times, i.e. a bubble of (S−1)/(S−1+m).
A step carries at most one budget of prompt tokens (TensorRT-LLM `max_num_tokens`, vLLM
`max_num_batched_tokens`, SGLang `--chunked-prefill-size`: the engines cap each forward), so an
attention group keeps at most n* = ⌊budget · decode_steps / new⌋ requests decoding: past that
the prompts its requests bring per step exceed the budget (`budget_decode_seqs`). The other
c_g − n* requests of a micro-batch wait for their prefill: the n* decoding ones each hold the
group for their lifetime W_0 (their TTFT and OSL − 1 TPOTs, at least OSL TPOTs: the lifetime
`cost_model.evaluate` counts), so the group completes n* / W_0 requests per second and the
others wait (c_g − n*) / n* · W_0 (Little's law, L = λW: the c_g requests then live
c_g / n* · W_0; `budget_wait_s`), which the steady TTFT carries; steps hold n* decoding
sequences beside a full budget of prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.benchmark_ttft import prompt_queue_s
from cost_model.deployment import Workload, expected_tokens_per_step
from cost_model.step import StageTime, draft_pass, micro_batch_seqs, stage_forward_load
from cost_model.step_load import (
    PromptSchedule, StepLoad, busiest_group_seqs, lockstep_groups, rank_chunk_tokens,
)

# The steps `serving_times` prices, stacked on a leading axis in this order (numpy's per-call
# cost is paid once): the decode-only step, the same step carrying prompts (⌊k⌋ and ⌈k⌉ of the
# groups' chunks, `PromptSchedule.step_units`), the step that prefills one chunk of a newly
# arrived request beside the other c − 1 sequences (its TTFT), and a step whose every group
# fills its token budget with prompts (the rate a queue drains).
CASES = ("decode", "prompt", "prompt_high", "first_chunk", "budget")


@dataclass(frozen=True)
class ServingSteps:
    """What `stage_forward_load` needs for the `CASES`, stacked on axis 0, the prompt
    schedule they follow, and the busiest group's requests of a micro-batch that wait for the
    step budget per request decoding ((c_g − n*) / n*, `budget_decode_seqs`)."""

    load: StepLoad
    decode_context_tokens: np.ndarray | float  # what a decoding sequence attends to
    prompt_context_tokens: np.ndarray | float  # what a prompt token attends to, on average
    schedule: PromptSchedule
    waiting_per_decoding_frac: np.ndarray | float = 0.0


@dataclass(frozen=True)
class ServingTimes:
    tpot: StageTime  # per output token: the decode step (prompts amortized, × PP, drafts
    # included) over the tokens it yields
    ttft_s: np.ndarray  # steady-state TTFT of one request (the engine's)
    prompt_queue_s: np.ndarray  # (C_g − 1) · S_prompt: draining the group's other prompts
    prompt_s: np.ndarray  # S_prompt: one prompt at a full token budget


@dataclass(frozen=True)
class ServingShape:
    """The request shape and the engine's budget, as the serving steps read them (floats): ISL,
    OSL, the context a decoding sequence attends to on average, the configured prompt budget,
    the cached prefix, whether an attention-DP balancer runs and the engine."""

    isl_tokens: float
    osl_tokens: float
    decode_context_tokens: float  # `Workload.mean_decode_context_tokens`
    chunk_tokens: float  # the engine's configured prompt budget per step
    cached_tokens: float = 0.0
    balanced: bool = False
    engine: str | None = None

    @classmethod
    def of(cls, workload: Workload) -> ServingShape:
        return cls(float(workload.isl_tokens), float(workload.osl_tokens),
                   workload.mean_decode_context_tokens, float(workload.prefill_chunk_tokens),
                   float(workload.cached_prefix_tokens), workload.adp_balance_timeout_steps > 0,
                   workload.engine)

    @property
    def new_tokens(self) -> float:
        """Prompt tokens each request prefills (the rest come from the prefix cache)."""
        return self.isl_tokens - self.cached_tokens


def rank_budget_tokens(a: ArchArrays, d: DeployArrays, shape: ServingShape):
    """The prompt budget of one attention group's step (`step_load.rank_chunk_tokens`)."""
    return rank_chunk_tokens(shape.chunk_tokens, d.dp, lockstep_groups(a.ffn.moe_layers, d.dp),
                             shape.engine)


def _stack(*arrays) -> np.ndarray:
    shape = np.broadcast_shapes(*(np.shape(x) for x in arrays))
    return np.stack([np.broadcast_to(np.asarray(x, dtype=np.float64), shape) for x in arrays])


def budget_decode_seqs(budget_tokens, new_tokens, decode_steps):
    """n* = ⌊budget · decode_steps / new⌋ (at least 1): the most requests one attention group
    keeps decoding when each prefills `new` prompt tokens once per `decode_steps` steps and a
    step carries at most `budget_tokens` of them."""
    steps = np.asarray(decode_steps, dtype=np.float64)
    return np.maximum(np.floor(np.asarray(budget_tokens, dtype=np.float64) * steps / new_tokens),
                      1.0)


def budget_wait_s(waiting_per_decoding, ttft_s, tpot_s, osl_tokens):
    """(c_g − n*) / n* · W_0, W_0 = max(TTFT + (OSL − 1) · TPOT, OSL · TPOT) the lifetime of a
    decoding request: the wait behind the c_g − n* requests the step budget holds back."""
    tpot = np.asarray(tpot_s)
    lifetime = np.maximum(np.asarray(ttft_s) + (osl_tokens - 1.0) * tpot, osl_tokens * tpot)
    return np.asarray(waiting_per_decoding) * lifetime


def _decoding(seqs, cap):
    """(the requests of a group's `seqs` that decode under the budget's `cap`, the waiting
    ones per decoding one)."""
    seqs = np.asarray(seqs, dtype=np.float64)
    decoding = np.minimum(seqs, cap)
    shape = np.broadcast(seqs, decoding).shape
    return decoding, np.divide(seqs - decoding, decoding, out=np.zeros(shape),
                               where=decoding > 0)


def serving_steps(a: ArchArrays, d: DeployArrays, concurrency, shape: ServingShape,
                  decode_steps) -> ServingSteps:
    """The `CASES` for `concurrency` whole requests, each decoding for `decode_steps` steps
    (OSL over the tokens a step yields), the prompt schedule they follow, and the requests the
    step budget holds back (`budget_decode_seqs`)."""
    lockstep = lockstep_groups(a.ffn.moe_layers, d.dp)
    budget = rank_budget_tokens(a, d, shape)
    cap = budget_decode_seqs(budget, shape.new_tokens, decode_steps)
    micro = micro_batch_seqs(concurrency, d)
    group, waiting = _decoding(busiest_group_seqs(micro, d.dp), cap)
    # what the experts see: every group's (each at most n*: once the busiest group is past it,
    # the others, one request lighter at most, are at it), or its own
    instance = np.where(lockstep, np.minimum(micro, d.dp * cap), group)
    groups = np.where(lockstep, np.minimum(d.dp, np.maximum(micro, 1.0)), 1.0)
    plan = PromptSchedule.of(group, instance, groups, shape.new_tokens, decode_steps, budget,
                             shape.balanced & lockstep)
    others = micro_batch_seqs(np.maximum(np.asarray(concurrency, float) - 1.0, 0.0), d)
    others_group = _decoding(busiest_group_seqs(others, d.dp), cap)[0]
    others_instance = np.where(lockstep, np.minimum(others, d.dp * cap), others_group)
    tokens_per_seq = d.spec_tokens + 1.0  # each decoding sequence's: k drafts verified + 1
    load = StepLoad(
        group_decode_seqs=_stack(group, group, group, others_group, others_group),
        group_prefill_tokens=_stack(0.0, plan.group_step_tokens, plan.group_step_tokens,
                                    plan.chunk_tokens, budget),
        group_prefill_seqs=_stack(0.0, plan.group_step_requests, plan.group_step_requests, 1.0,
                                  np.maximum(budget / shape.new_tokens, 1.0)),
        instance_tokens=_stack(
            instance * tokens_per_seq, instance * tokens_per_seq + plan.low_step_tokens,
            instance * tokens_per_seq + plan.high_step_tokens,
            others_instance * tokens_per_seq + plan.chunk_tokens,
            others_instance * tokens_per_seq + np.where(lockstep, d.dp, 1.0) * budget),
        decode_tokens_per_seq=tokens_per_seq)
    return ServingSteps(load, shape.decode_context_tokens,
                        shape.cached_tokens + shape.new_tokens / 2.0, plan, waiting)


def serving_times(a, d, env: Env, concurrency, shape: ServingShape) -> ServingTimes:
    """TPOT (a StageTime breakdown), steady-state TTFT and the prompt-queue time of aggregated
    serving at `concurrency` whole requests.

    TPOT = PP · (A + s·(B − A)) over the tokens a step yields, A the decode step, B the step
    carrying prompts (the mix of its ⌊k⌋- and ⌈k⌉-chunk steps) and s the share of steps that do
    (`PromptSchedule`), plus the drafting
    passes of speculative decoding. Steady-state TTFT of one request: its ⌈new/budget⌉ chunks
    through S stages, (m + S − 1) steps that each carry one chunk beside the other c − 1
    sequences, plus half a stage step of waiting for the step in progress when other sequences
    are running (none at c = 1). It does not depend on OSL: the other requests' prompts are what
    TPOT pays. With a prefix cache only ISL − cached tokens are prefilled, in every term. Past
    the requests the step budget keeps decoding, the steady TTFT adds the wait for it
    (`budget_wait_s`)."""
    tokens_per_step = expected_tokens_per_step(d.spec_tokens, d.spec_acceptance)
    steps = serving_steps(a, d, concurrency, shape, shape.osl_tokens / tokens_per_step)
    cases = stage_forward_load(a, d, env, steps.load, steps.decode_context_tokens,
                               steps.prompt_context_tokens)
    case = dict(zip(CASES, (cases.part(i) for i in range(len(CASES)))))
    prompt = case["prompt"].plus(case["prompt_high"].minus(case["prompt"]),
                                 steps.schedule.high_step_frac)
    step = case["decode"].plus(prompt.minus(case["decode"]),
                               steps.schedule.prompt_step_frac).scaled(d.pp)
    if d.speculative:
        step = step.plus(draft_pass(a, d, env, concurrency, steps.decode_context_tokens),
                         d.spec_tokens)
    budget = rank_budget_tokens(a, d, shape)
    chunks = np.ceil(shape.new_tokens / budget)
    waiting = np.where(np.asarray(concurrency) > 1.0, step.total_s / (2.0 * d.pp), 0.0)
    ttft = (chunks + d.pp - 1.0) * case["first_chunk"].total_s + waiting
    ttft = ttft + budget_wait_s(steps.waiting_per_decoding_frac, ttft,
                                step.total_s / tokens_per_step, shape.osl_tokens)
    prompt_s = case["budget"].total_s * shape.new_tokens / budget  # one budget per stage step
    queue = prompt_queue_s(prompt_s, busiest_group_seqs(concurrency, d.dp))
    return ServingTimes(step.scaled(1.0 / tokens_per_step), ttft, queue, prompt_s)


def mixed_times(parts: list[ServingTimes], weights: list) -> ServingTimes:
    """Σ wᵢ · timesᵢ, field by field (weights broadcast): a request-weighted mean."""
    def mix(values):
        return sum(w * v for w, v in zip(weights, values))
    tpot = StageTime(*(mix([getattr(p.tpot, f.name) for p in parts])
                       for f in fields(StageTime)))
    return ServingTimes(tpot, *(mix([getattr(p, name) for p in parts])
                                for name in ("ttft_s", "prompt_queue_s", "prompt_s")))
