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
    """What `stage_forward_load` needs for the `CASES`, stacked on axis 0, and the prompt
    schedule they follow."""

    load: StepLoad
    decode_context_tokens: np.ndarray | float  # what a decoding sequence attends to
    prompt_context_tokens: np.ndarray | float  # what a prompt token attends to, on average
    schedule: PromptSchedule


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


def serving_steps(a: ArchArrays, d: DeployArrays, concurrency, shape: ServingShape,
                  decode_steps) -> ServingSteps:
    """The `CASES` for `concurrency` whole requests, each decoding for `decode_steps` steps
    (OSL over the tokens a step yields), and the prompt schedule they follow."""
    lockstep = lockstep_groups(a.ffn.moe_layers, d.dp)
    budget = rank_budget_tokens(a, d, shape)
    micro = micro_batch_seqs(concurrency, d)
    group = busiest_group_seqs(micro, d.dp)
    instance = np.where(lockstep, micro, group)  # what the experts see: every group, or its own
    groups = np.where(lockstep, np.minimum(d.dp, np.maximum(micro, 1.0)), 1.0)
    plan = PromptSchedule.of(group, instance, groups, shape.new_tokens, decode_steps, budget,
                             shape.balanced & lockstep)
    others = micro_batch_seqs(np.maximum(np.asarray(concurrency, float) - 1.0, 0.0), d)
    others_group = busiest_group_seqs(others, d.dp)
    others_instance = np.where(lockstep, others, others_group)
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
                        shape.cached_tokens + shape.new_tokens / 2.0, plan)


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
    TPOT pays. With a prefix cache only ISL − cached tokens are prefilled, in every term."""
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
