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
from cost_model.arrival_queue import ClientInputs, client_ttft_s
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.benchmark_ttft import (
    adp_round_wait_s, recv_poll_wait_s, shipped_terms, slot_wait_s,
)
from cost_model.deployment import (
    AGGREGATED, SERVING_MODES, Deployment, Workload, expected_tokens_per_step,
)
from cost_model.disaggregated import evaluate_disaggregated
from cost_model.errors import ConfigError
from cost_model.frontier import concurrency_grid
from cost_model.hardware import HardwareSpec
from cost_model.memory import max_concurrency
from cost_model.operating_points import OperatingPoints, merge_rows
from cost_model.serving_steps import (
    ServingShape, ServingTimes, mixed_times, rank_budget_tokens, serving_times,
)
from cost_model.step import StageTime
from cost_model.step_load import busiest_group_seqs, lockstep_groups


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
    if all(d.serving == AGGREGATED for d in deps):
        return _aggregated_points(archs, deps, hw, workload, concurrency)
    return _mixed_modes(archs, deps, hw, workload, concurrency)


def _mixed_modes(archs, deps, hw, workload, concurrency) -> OperatingPoints:
    """Aggregated and disaggregated candidates evaluated apart, rows merged back in order."""
    rows = {mode: [i for i, d in enumerate(deps) if d.serving == mode] for mode in SERVING_MODES}
    per_row = concurrency is not None and np.ndim(concurrency) == 2

    def own(index: list[int]):
        return np.asarray(concurrency)[index] if per_row else concurrency

    parts = {}
    for mode, index in rows.items():
        if not index:
            continue
        mode_archs, mode_deps = [archs[i] for i in index], [deps[i] for i in index]
        if mode == AGGREGATED:
            parts[mode] = _aggregated_points(mode_archs, mode_deps, hw, workload, own(index))
        else:
            parts[mode] = evaluate_disaggregated(mode_archs, mode_deps, mode_deps, hw, workload,
                                                 own(index)).as_operating_points()
    return merge_rows(parts, rows, len(deps))


def _aggregated_points(archs, deps, hw: HardwareSpec, workload: Workload, concurrency
                       ) -> OperatingPoints:
    env = Env.for_deployments(hw, deps, workload.engine)
    a = ArchArrays.from_architectures(archs)
    d = DeployArrays.from_deployments(deps)
    limits = concurrency_limits(a, d, env, workload)
    if concurrency is None:
        grid = concurrency_grid(limits.in_flight_seqs)
    elif np.ndim(concurrency) == 2:
        grid = np.broadcast_to(np.asarray(concurrency, float),
                               (len(archs), np.shape(concurrency)[1]))
    else:
        grid = np.broadcast_to(np.asarray(concurrency, float).reshape(1, -1),
                               (len(archs), np.size(concurrency)))
    return _points(a, d, env, workload, grid, limits)


@dataclass(frozen=True)
class ConcurrencyLimits:
    """Per candidate, shape (n, 1): the sequences the KV cache holds beside the weights and the
    workspace, and the requests the engine keeps in flight (that, and its batch cap of
    `max_batch_sequences` per attention group)."""

    memory_seqs: np.ndarray
    in_flight_seqs: np.ndarray


def concurrency_limits(a: ArchArrays, d: DeployArrays, env: Env,
                       workload: Workload) -> ConcurrencyLimits:
    """The `ConcurrencyLimits` of aggregated serving; the workspace is one prompt chunk of the
    rank's budget (`serving_steps.rank_budget_tokens`)."""
    memory_seqs = max_concurrency(a, d, env, float(workload.max_context_tokens),
                                  rank_budget_tokens(a, d, ServingShape.of(workload)),
                                  float(workload.cached_prefix_tokens))
    return ConcurrencyLimits(memory_seqs,
                             np.minimum(memory_seqs, workload.max_batch_sequences * d.dp))


def _points(a: ArchArrays, d: DeployArrays, env: Env, workload: Workload, concurrency,
            limits: ConcurrencyLimits) -> OperatingPoints:
    """Operating points at `concurrency`: at most `limits.in_flight_seqs` requests in flight
    (the rest wait for a slot), on lockstep or independent attention groups (`_Groups`); TPOT
    and TTFT are means over the requests, throughput the sum over the groups."""
    shape = ServingShape.of(workload)
    osl = shape.osl_tokens
    c = np.where(np.isfinite(concurrency), concurrency, 1.0)
    cap = limits.in_flight_seqs
    in_flight = np.where(cap >= 1, np.minimum(c, cap), c)
    groups = _Groups.of(a, d, in_flight)
    parts = _replica_times(a, groups, env, shape)
    times = mixed_times(parts.both, groups.shares)
    lifetimes = [request_lifetime_s(p.ttft_s, p.tpot.total_s, osl) for p in parts.both]
    requests_per_s = in_flight * sum(w / life for w, life in zip(groups.shares, lifetimes))
    step_s = times.tpot.total_s * expected_tokens_per_step(d.spec_tokens, d.spec_acceptance)
    rounds = adp_round_wait_s(step_s, d.dp, in_flight, in_flight / requests_per_s,
                              workload.adp_balance_timeout_steps)
    poll = recv_poll_wait_s(step_s, workload.scheduler_recv_interval_steps, c)
    slot = slot_wait_s(c, in_flight, requests_per_s)
    client = client_ttft_s(workload.arrivals, ClientInputs(
        times.ttft_s, times.prompt_queue_s, times.prompt_s, rounds, poll, slot,
        requests_per_s / d.dp, (cap >= 1) & (c > cap)), shipped_terms(workload.engine),
        workload.isl_mix_frac)
    fits = (c <= limits.memory_seqs) & (limits.memory_seqs >= 1)
    return _operating_points(concurrency, times, requests_per_s * osl / d.gpus,
                             _ClientWaits(rounds, poll, slot, client["mean"], client["median"],
                                          client["p99"]), fits, cap)


@dataclass(frozen=True)
class _Groups:
    """How `in_flight` requests sit on the attention groups: lockstep groups share one step (one
    evaluation at the instance's concurrency); independent ones (a dense model's replicas) hold
    ⌈c/dp⌉ in r of them and one fewer in the other dp − r, each a replica stepping alone."""

    replica: DeployArrays  # dp 1 where the groups are independent
    fuller_seqs: np.ndarray  # the concurrency each evaluation sees: n_hi (or the instance's c)
    lighter_seqs: np.ndarray  # n_hi − 1 (or c)
    fuller_share: np.ndarray  # share of the requests on the fuller groups (1 in lockstep)
    lighter_share: np.ndarray

    @classmethod
    def of(cls, a: ArchArrays, d: DeployArrays, in_flight) -> _Groups:
        alone = (d.dp > 1) & ~lockstep_groups(a.ffn.moe_layers, d.dp)
        n_hi = busiest_group_seqs(in_flight, d.dp)
        fuller = in_flight - d.dp * (n_hi - 1.0)  # r groups at n_hi
        share = np.where(alone, fuller * n_hi / in_flight, 1.0)
        return cls(replace(d, dp=np.where(alone, 1.0, d.dp)), np.where(alone, n_hi, in_flight),
                   np.where(alone, np.maximum(n_hi - 1.0, 1.0), in_flight), share, 1.0 - share)

    @property
    def shares(self) -> list[np.ndarray]:
        return [self.fuller_share, self.lighter_share]


@dataclass(frozen=True)
class _GroupTimes:
    """The serving times of the fuller and of the lighter attention groups (`_Groups`)."""

    fuller: ServingTimes
    lighter: ServingTimes

    @property
    def both(self) -> list[ServingTimes]:
        return [self.fuller, self.lighter]


def _replica_times(a, groups: _Groups, env: Env, shape: ServingShape) -> _GroupTimes:
    """The fuller and the lighter groups' serving times; the lighter evaluated only in the
    concurrency columns where some candidate has both (a sweep's last, at most)."""
    fuller = serving_times(a, groups.replica, env, groups.fuller_seqs, shape)
    columns = np.flatnonzero(np.any(np.atleast_2d(groups.lighter_share > 0), axis=0))
    if columns.size == 0:
        return _GroupTimes(fuller, fuller)
    lighter_seqs = np.atleast_2d(groups.lighter_seqs)
    lighter = serving_times(a, groups.replica, env, lighter_seqs[:, columns], shape)
    return _GroupTimes(fuller, _with_columns(fuller, lighter, columns, lighter_seqs.shape))


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


def request_lifetime_s(ttft_s, tpot_s, osl_tokens):
    """How long a request holds its slot in aggregated serving: its own path, TTFT + (OSL−1)·TPOT,
    and never less than the OSL steps in which the engine does the work of every request in
    flight (TPOT amortizes their prompts: c·ISL/OSL prompt tokens per step), so that a short OSL
    cannot claim prefill throughput above what the steps carry (work conservation)."""
    return np.maximum(ttft_s + (osl_tokens - 1.0) * tpot_s, osl_tokens * tpot_s)


@dataclass(frozen=True)
class _ClientWaits:
    """What a benchmark client waits beyond the engine's steady-state TTFT
    (`cost_model.benchmark_ttft`): the attention-DP round, the request-queue poll and a slot,
    and the benchmark TTFT of the mean, the median and (Poisson and offline clients,
    `cost_model.arrival_queue`) the p99 request with them."""

    round_s: np.ndarray
    poll_s: np.ndarray
    slot_s: np.ndarray
    mean_ttft_s: np.ndarray
    median_ttft_s: np.ndarray
    p99_ttft_s: np.ndarray | None = None


def _operating_points(concurrency, times: ServingTimes, throughput, waits: _ClientWaits, fits,
                      in_flight_cap) -> OperatingPoints:
    missing = ~np.isfinite(concurrency)

    def nan(values):
        return np.where(missing, np.nan, values)

    step = times.tpot
    return OperatingPoints(
        concurrency=np.asarray(concurrency, float), tpot_s=nan(step.total_s),
        ttft_s=nan(times.ttft_s), benchmark_ttft_s=nan(waits.mean_ttft_s),
        prompt_queue_s=nan(times.prompt_queue_s),
        tokens_per_s_per_user=nan(1.0 / step.total_s), tokens_per_s_per_gpu=nan(throughput),
        fits_memory=fits & ~missing, max_concurrency=in_flight_cap,
        gemm_s=nan(step.gemm_s), attention_s=nan(step.attention_s),
        communication_s=nan(step.communication_s), other_s=nan(step.other_s),
        linear_attention_s=nan(step.linear_attention_s), round_wait_s=nan(waits.round_s),
        poll_wait_s=nan(waits.poll_s), benchmark_ttft_median_s=nan(waits.median_ttft_s),
        slot_wait_s=nan(waits.slot_s),
        benchmark_ttft_p99_s=None if waits.p99_ttft_s is None else nan(waits.p99_ttft_s),
    )
