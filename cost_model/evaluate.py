"""Operating points of architectures × deployments on a GPU: the public, vectorized entry point.

`evaluate_points` takes parallel sequences of architectures and deployments (one candidate each)
and a concurrency array (or sweeps 1 … the memory limit) and returns arrays of shape
(candidates, concurrencies). Candidates may differ in number formats (per-candidate columns).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Sequence

import numpy as np

from cost_model.architecture import Architecture
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.benchmark_ttft import (
    STATISTICS, adp_round_wait_s, benchmark_ttft_s, recv_poll_wait_s, shipped_terms, slot_wait_s,
)
from cost_model.deployment import Deployment, Workload, expected_tokens_per_step
from cost_model.errors import ConfigError
from cost_model.frontier import concurrency_grid, frontier_area, pareto_mask
from cost_model.hardware import HardwareSpec
from cost_model.memory import max_concurrency
from cost_model.serving_steps import (
    ServingShape, ServingTimes, mixed_times, rank_budget_tokens, serving_times,
)
from cost_model.step import StageTime
from cost_model.step_load import busiest_group_seqs, lockstep_groups


@dataclass(frozen=True)
class OperatingPoints:
    """Arrays of shape (candidates, concurrencies); NaN concurrency = no point there."""

    concurrency: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray  # steady-state TTFT of one request (the engine's prefill path)
    benchmark_ttft_s: np.ndarray  # TTFT a benchmark client at this concurrency measures
    prompt_queue_s: np.ndarray  # the other prompts of its attention group, drained
    tokens_per_s_per_user: np.ndarray  # interactivity x = 1 / TPOT
    tokens_per_s_per_gpu: np.ndarray  # throughput y, prefill included
    fits_memory: np.ndarray
    max_concurrency: np.ndarray  # (candidates, 1): fits memory and the engine's batch cap
    gemm_s: np.ndarray  # TPOT breakdown (NVIDIA, AI Model Co-Design (2026), Figure 2)
    attention_s: np.ndarray
    communication_s: np.ndarray
    other_s: np.ndarray
    # disaggregated candidates: the xPyD ratio realizing each point (NaN for aggregated ones)
    prefill_instances: np.ndarray | None = None
    decode_instances: np.ndarray | None = None
    # of `attention_s`, the linear-attention layers' state updates and scans (a roofline:
    # `cost_model.linear_attention.uncalibrated_components`); None where not split out
    linear_attention_s: np.ndarray | None = None
    # parts of `benchmark_ttft_s` (cost_model.benchmark_ttft): the attention-DP balancer's round
    # wait W_round before its fitted share, and the request-queue polling wait W_poll
    round_wait_s: np.ndarray | None = None
    poll_wait_s: np.ndarray | None = None
    # the median request's benchmark TTFT (`benchmark_ttft_s` is the mean over a benchmark's
    # requests), and the wait for a slot once the concurrency exceeds what the engine admits
    benchmark_ttft_median_s: np.ndarray | None = None
    slot_wait_s: np.ndarray | None = None

    def frontier_area(self, x_lo: float, x_hi: float, log_x: bool = True) -> np.ndarray:
        y = np.where(self.fits_memory, self.tokens_per_s_per_gpu, np.nan)
        return frontier_area(self.tokens_per_s_per_user, y, x_lo, x_hi, log_x)

    def ratio(self, i: int, j: int) -> str | None:
        """`3P5D` for a disaggregated point, None for an aggregated one."""
        if self.prefill_instances is None or not np.isfinite(self.prefill_instances[i, j]):
            return None
        return f"{self.prefill_instances[i, j]:.0f}P{self.decode_instances[i, j]:.0f}D"

    def pareto_mask(self) -> np.ndarray:
        y = np.where(self.fits_memory, self.tokens_per_s_per_gpu, np.nan)
        return pareto_mask(self.tokens_per_s_per_user, y)


def validate_deployment(arch: Architecture, dep: Deployment) -> None:
    """Raise `ConfigError` naming the first sharding rule `dep` breaks for `arch`."""
    for message in deployment_violations(arch, dep):
        raise ConfigError(message)


def deployment_violations(arch: Architecture, dep: Deployment) -> list[str]:
    """Every divisibility rule of the deployment that the architecture breaks, as messages."""
    rules = [
        (arch.num_attention_heads % dep.tp == 0,
         f"`tp` ({dep.tp}) must divide `num_attention_heads` ({arch.num_attention_heads})"),
        (arch.num_kv_heads % dep.tp == 0 or dep.tp % arch.num_kv_heads == 0,
         f"`tp` ({dep.tp}) and `num_kv_heads` ({arch.num_kv_heads}) must divide one another"),
        (arch.num_dense_layers == 0 or arch.intermediate_size % dep.ffn_tp == 0,
         f"`tp`{'·`kvp`' if dep.kvp > 1 else ''} ({dep.ffn_tp}) must divide "
         f"`intermediate_size` ({arch.intermediate_size})"),
        (dep.kvp == 1 or arch.num_attention_heads % dep.ffn_tp == 0,
         f"`tp`·`kvp` ({dep.ffn_tp}) must divide `num_attention_heads` "
         f"({arch.num_attention_heads}): the output projection is sharded over them"),
        (dep.pp <= arch.num_layers,
         f"`pp` ({dep.pp}) must not exceed `num_layers` ({arch.num_layers})"),
    ]
    if arch.is_moe:
        rules += [
            (arch.num_experts % dep.ep == 0,
             f"`ep` ({dep.ep}) must divide `num_experts` ({arch.num_experts})"),
            (arch.moe_intermediate_size % dep.moe_tp == 0,
             f"`tp`·`dp`{'·`kvp`' if dep.kvp > 1 else ''}/`ep` ({dep.moe_tp}) must divide "
             f"`moe_intermediate_size` "
             f"({arch.moe_intermediate_size})"),
        ]
    elif dep.ep > 1:
        rules.append((False, f"`ep` ({dep.ep}) must be 1 for a dense model"))
    return [message for ok, message in rules if not ok]


def request_lifetime_s(ttft_s, tpot_s, osl_tokens):
    """How long a request holds its slot in aggregated serving: its own path, TTFT + (OSL−1)·TPOT,
    and never less than the OSL steps in which the engine does the work of every request in
    flight (TPOT amortizes their prompts: c·ISL/OSL prompt tokens per step), so that a short OSL
    cannot claim prefill throughput above what the steps carry (work conservation)."""
    return np.maximum(ttft_s + (osl_tokens - 1.0) * tpot_s, osl_tokens * tpot_s)


def _shape(workload: Workload) -> ServingShape:
    return ServingShape(float(workload.isl_tokens), float(workload.osl_tokens),
                        float(workload.prefill_chunk_tokens), float(workload.cached_prefix_tokens),
                        workload.adp_balance_timeout_steps > 0, workload.engine)


@dataclass(frozen=True)
class _Groups:
    """How `in_flight` requests sit on the attention groups: lockstep groups share one step (one
    evaluation at the instance's concurrency); independent ones (a dense model's replicas) hold
    ⌈c/dp⌉ in r of them and one fewer in the other dp − r, each a replica stepping alone."""

    replica: DeployArrays  # dp 1 where the groups are independent
    high: np.ndarray  # the concurrency each evaluation sees: n_hi (or the instance's c)
    low: np.ndarray  # n_hi − 1 (or c)
    high_share: np.ndarray  # share of the requests on the fuller groups (1 in lockstep)
    low_share: np.ndarray

    @classmethod
    def of(cls, a: ArchArrays, d: DeployArrays, in_flight) -> _Groups:
        alone = (d.dp > 1) & ~lockstep_groups(a.moe_layers, d.dp)
        n_hi = busiest_group_seqs(in_flight, d.dp)
        fuller = in_flight - d.dp * (n_hi - 1.0)  # r groups at n_hi
        share = np.where(alone, fuller * n_hi / in_flight, 1.0)
        return cls(replace(d, dp=np.where(alone, 1.0, d.dp)), np.where(alone, n_hi, in_flight),
                   np.where(alone, np.maximum(n_hi - 1.0, 1.0), in_flight), share, 1.0 - share)


def _replica_times(a, groups: _Groups, env: Env, shape: ServingShape):
    """The fuller and the lighter groups' serving times; the lighter evaluated only in the
    concurrency columns where some candidate has both (a sweep's last, at most)."""
    high = serving_times(a, groups.replica, env, groups.high, shape)
    columns = np.flatnonzero(np.any(np.atleast_2d(groups.low_share > 0), axis=0))
    if columns.size == 0:
        return high, high
    low = serving_times(a, groups.replica, env, np.atleast_2d(groups.low)[:, columns], shape)
    return high, _with_columns(high, low, columns, np.shape(np.atleast_2d(groups.low)))


def _with_columns(base: ServingTimes, part: ServingTimes, columns, shape) -> ServingTimes:
    """`base` (broadcast to `shape`) with `part`'s values in `columns` (axis 1)."""
    def put(whole, values):
        out = np.array(np.broadcast_to(whole, shape), dtype=float)
        out[:, columns] = values
        return out
    tpot = StageTime(*(put(getattr(base.tpot, f.name), getattr(part.tpot, f.name))
                       for f in fields(StageTime)))
    return ServingTimes(tpot, *(put(getattr(base, name), getattr(part, name))
                                for name in ("ttft_s", "prompt_queue_s", "prompt_s")))


def _points(a: ArchArrays, d: DeployArrays, env: Env, workload: Workload, concurrency,
            memory_limit, limit) -> OperatingPoints:
    """Operating points at `concurrency`: at most `limit` requests in flight (the rest wait for
    a slot), on lockstep or independent attention groups (`_Groups`); TPOT and TTFT are means
    over the requests, throughput the sum over the groups."""
    shape = _shape(workload)
    osl = shape.osl_tokens
    c = np.where(np.isfinite(concurrency), concurrency, 1.0)
    in_flight = np.where(limit >= 1, np.minimum(c, limit), c)
    groups = _Groups.of(a, d, in_flight)
    parts = _replica_times(a, groups, env, shape)
    weights = [groups.high_share, groups.low_share]
    times = mixed_times(list(parts), weights)
    lifetimes = [request_lifetime_s(p.ttft_s, p.tpot.total_s, osl) for p in parts]
    requests_per_s = in_flight * sum(w / life for w, life in zip(weights, lifetimes))
    lifetime = in_flight / requests_per_s
    step_s = times.tpot.total_s * expected_tokens_per_step(d.spec_tokens, d.spec_acceptance)
    rounds = adp_round_wait_s(step_s, d.dp, in_flight, lifetime,
                              workload.adp_balance_timeout_steps)
    poll = recv_poll_wait_s(step_s, workload.scheduler_recv_interval_steps, c)
    slot = slot_wait_s(c, in_flight, requests_per_s)
    terms = shipped_terms(workload.engine)
    client = {s: benchmark_ttft_s(times.ttft_s, times.prompt_queue_s, terms, rounds, s)
              + poll + slot for s in STATISTICS}
    return _operating_points(concurrency, times, requests_per_s * osl / d.gpus, client, rounds,
                             poll, slot, (c <= memory_limit) & (memory_limit >= 1), limit)


def _operating_points(concurrency, times: ServingTimes, throughput, client: dict, rounds, poll,
                      slot, fits, limit) -> OperatingPoints:
    missing = ~np.isfinite(concurrency)
    nan = lambda v: np.where(missing, np.nan, v)  # noqa: E731
    step = times.tpot
    return OperatingPoints(
        concurrency=np.asarray(concurrency, float), tpot_s=nan(step.total_s),
        ttft_s=nan(times.ttft_s), benchmark_ttft_s=nan(client["mean"]),
        prompt_queue_s=nan(times.prompt_queue_s),
        tokens_per_s_per_user=nan(1.0 / step.total_s), tokens_per_s_per_gpu=nan(throughput),
        fits_memory=fits & ~missing, max_concurrency=limit,
        gemm_s=nan(step.gemm_s), attention_s=nan(step.attention_s),
        communication_s=nan(step.communication_s), other_s=nan(step.other_s),
        linear_attention_s=nan(step.linear_attention_s), round_wait_s=nan(rounds),
        poll_wait_s=nan(poll), benchmark_ttft_median_s=nan(client["median"]),
        slot_wait_s=nan(slot),
    )


def evaluate_points(archs: Sequence[Architecture], deps: Sequence[Deployment], hw: HardwareSpec,
                    workload: Workload, concurrency=None) -> OperatingPoints:
    """Operating points of candidate i = (archs[i], deps[i]). `concurrency`: a 1-D array used for
    every candidate, a (candidates, k) array of each candidate's own, or None for the sweep 1, 2,
    4, … up to each candidate's memory limit. Deployments whose `serving` is "disaggregated"
    are prefill and decode pools of instances of that shape (`cost_model.disaggregated`, the
    xPyD ratio sized per point); their concurrency is per decode instance."""
    if len(archs) != len(deps):
        raise ConfigError(f"`deployments` must match `architectures` one to one; got "
                          f"{len(deps)} and {len(archs)}")
    split = [d.serving == "disaggregated" for d in deps]
    if any(split):
        return _mixed_modes(archs, deps, hw, workload, concurrency, split)
    return _aggregated_points(archs, deps, hw, workload, concurrency)


def _mixed_modes(archs, deps, hw, workload, concurrency, split) -> OperatingPoints:
    """Aggregated and disaggregated candidates evaluated apart, rows merged back in order."""
    from cost_model.disaggregated import evaluate_disaggregated  # it builds on this module

    rows = {mode: [i for i, s in enumerate(split) if s == mode] for mode in (False, True)}
    pick = lambda seq, idx: [seq[i] for i in idx]  # noqa: E731
    per_row = concurrency is not None and np.ndim(concurrency) == 2
    own = lambda idx: np.asarray(concurrency)[idx] if per_row else concurrency  # noqa: E731
    parts = {}
    if rows[False]:
        parts[False] = _aggregated_points(pick(archs, rows[False]), pick(deps, rows[False]), hw,
                                          workload, own(rows[False]))
    disagg = pick(deps, rows[True])
    parts[True] = evaluate_disaggregated(pick(archs, rows[True]), disagg, disagg, hw, workload,
                                         own(rows[True])).as_operating_points()
    return _merge(parts, rows, len(deps))


def _merge(parts: dict, rows: dict, n: int) -> OperatingPoints:
    columns = max(p.concurrency.shape[1] for p in parts.values())
    merged = {}
    for f in fields(OperatingPoints):
        if any(getattr(part, f.name) is None for part in parts.values()):
            merged[f.name] = _ratio_column(parts, rows, n, columns, f.name)
            continue
        sample = getattr(next(iter(parts.values())), f.name)
        width = 1 if f.name == "max_concurrency" else columns
        out = np.full((n, width), False if sample.dtype == bool else np.nan, dtype=sample.dtype)
        for mode, part in parts.items():
            values = getattr(part, f.name)
            out[rows[mode], :values.shape[1]] = values
        merged[f.name] = out
    return OperatingPoints(**merged)


def _ratio_column(parts: dict, rows: dict, n: int, columns: int, name: str) -> np.ndarray:
    """An xPyD column where only the disaggregated part has one (NaN elsewhere)."""
    out = np.full((n, columns), np.nan)
    for mode, part in parts.items():
        values = getattr(part, name)
        if values is not None:
            out[rows[mode], :values.shape[1]] = values
    return out


def concurrency_limits(a: ArchArrays, d: DeployArrays, env: Env, workload: Workload):
    """(sequences the KV cache holds, requests the engine keeps in flight: that and its batch
    cap of `max_batch_sequences` per attention group), each (n, 1). The workspace is one prompt
    chunk of the rank's budget (`serving_steps.rank_budget_tokens`)."""
    memory_limit = max_concurrency(a, d, env, float(workload.max_context_tokens),
                                   rank_budget_tokens(a, d, _shape(workload)),
                                   float(workload.cached_prefix_tokens))
    return memory_limit, np.minimum(memory_limit, workload.max_batch_sequences * d.dp)


def _aggregated_points(archs, deps, hw: HardwareSpec, workload: Workload, concurrency
                       ) -> OperatingPoints:
    env = Env.for_deployments(hw, deps, workload.engine)
    a = ArchArrays.from_architectures(archs)
    d = DeployArrays.from_deployments(deps)
    memory_limit, limit = concurrency_limits(a, d, env, workload)
    if concurrency is None:
        grid = concurrency_grid(limit)
    elif np.ndim(concurrency) == 2:
        grid = np.broadcast_to(np.asarray(concurrency, float),
                               (len(archs), np.shape(concurrency)[1]))
    else:
        grid = np.broadcast_to(np.asarray(concurrency, float).reshape(1, -1),
                               (len(archs), np.size(concurrency)))
    return _points(a, d, env, workload, grid, memory_limit, limit)
