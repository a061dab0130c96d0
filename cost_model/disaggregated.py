"""Disaggregated prefill/decode serving: prefill and decode pools, each with its own deployment.

Decode instances run only decode steps (no prompt chunks beside them): TPOT = the decode-only
step × PP (+ speculative drafts) over the tokens a step yields. Prefill instances run prompts
at their token budget; a request's KV then moves to a decode instance over the network.
With x prefill and y decode instances (xPyD, each count 1 … `max_instances`):
- requests/s the decode side completes: y · R_d, R_d = c / (OSL · TPOT) per instance at
  concurrency c;
- what the prefill side can start: x · R_p, R_p = dp · budget / ISL prompts per budget-full
  stage step; its utilization ρ = y·R_d / (x·R_p) must stay below 1 (a pool at ρ ≥ 1 cannot
  keep the decode side fed);
- output tokens/s/GPU = y · R_d · OSL / (x · g_p + y · g_d), maximized over (x, y): each
  operating point names the ratio that realizes it.
TTFT (steady state) = the prompt's m chunks through the prefill pipeline, (m + S_p − 1) chunk
steps + the M/D/1 wait for the prefill pool, ρ/(2(1−ρ)) · S (S a prompt's service time) + the
KV transfer (the decode GPU's share of the sequence's KV over its NIC, or NVLink when both pools
fit in one scale-up domain; not overlapped with the prefill, a conservative choice) + half a
decode step to join the running batch. It does not depend on the decode pool's load except
through that last half step and ρ. The benchmark TTFT is the closed-loop client's
(`cost_model.benchmark_ttft`) with the prefill pool as the queue its waves meet: the fitted
per-request overhead t_request, the share q of the prompts ahead of a request in its prefill
group's wave, q · (N_g − 1) · S_prompt (N_g = ⌈c · y / (x · dp_p)⌉ the requests one prefill
attention group receives when the c requests of each of the y decode instances start together,
S_prompt one prompt at a full token budget on that group: its budget step · ISL / budget, as
the aggregated engine's `serving_steps.ServingTimes.prompt_s`), each with its mean and its
median, and, past what a decode instance holds (memory, the engine's batch cap), the wait for a
slot: the decode side keeps that many in flight and the rest queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cost_model.architecture import Architecture
from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.benchmark_ttft import STATISTICS, prompt_queue_s, shipped_terms, slot_wait_s
from cost_model.communication import point_to_point_s
from cost_model.deployment import Deployment, Workload, expected_tokens_per_step
from cost_model.errors import ConfigError
from cost_model.operating_points import OperatingPoints
from cost_model.frontier import concurrency_grid, frontier_area
from cost_model.hardware import HardwareSpec
from cost_model.memory import max_concurrency
from cost_model.step import StageTime, draft_pass, micro_batch_seqs, stage_forward
from cost_model.step_load import busiest_group_seqs

DEFAULT_MAX_INSTANCES = 8  # xPyD ratios searched: 1 … 8 instances of each pool
# Prefill pools are sized below saturation: at ρ = 0.8 the M/D/1 wait is 2 prompt service
# times (ρ/(2(1−ρ))), a common planning margin for queues (it stays bounded when load wobbles).
DEFAULT_MAX_PREFILL_UTILIZATION = 0.8


@dataclass(frozen=True)
class DisaggregatedPoints:
    """Arrays of shape (candidates, concurrencies); NaN = no point (memory, or no ratio keeps
    the prefill pool below saturation)."""

    concurrency: np.ndarray  # sequences per decode instance
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    benchmark_ttft_s: np.ndarray  # the mean over a benchmark's requests
    benchmark_ttft_median_s: np.ndarray
    tokens_per_s_per_user: np.ndarray
    tokens_per_s_per_gpu: np.ndarray  # over both pools
    fits_memory: np.ndarray
    prefill_instances: np.ndarray  # x of the xPyD ratio that realizes the point
    decode_instances: np.ndarray  # y
    prefill_s: np.ndarray  # the prompt through the prefill pipeline
    queue_s: np.ndarray  # waiting for the prefill pool
    wave_queue_s: np.ndarray  # (N_g − 1) · S_prompt: the prompts ahead in a prefill group's wave
    kv_transfer_s: np.ndarray
    max_concurrency: np.ndarray  # (candidates, 1) per decode instance
    tpot_parts: StageTime  # TPOT split as GEMM / attention / communication / other

    def as_operating_points(self) -> OperatingPoints:
        """The same points as `OperatingPoints` (what the search and the reports read): the
        prefill queue stands in the prompt-queue field, TPOT's breakdown is the decode pool's."""
        parts = self.tpot_parts
        return OperatingPoints(
            concurrency=self.concurrency, tpot_s=self.tpot_s, ttft_s=self.ttft_s,
            benchmark_ttft_s=self.benchmark_ttft_s, prompt_queue_s=self.queue_s,
            benchmark_ttft_median_s=self.benchmark_ttft_median_s,
            tokens_per_s_per_user=self.tokens_per_s_per_user,
            tokens_per_s_per_gpu=self.tokens_per_s_per_gpu, fits_memory=self.fits_memory,
            max_concurrency=self.max_concurrency, gemm_s=parts.gemm_s,
            attention_s=parts.attention_s, communication_s=parts.communication_s,
            other_s=parts.other_s, linear_attention_s=parts.linear_attention_s,
            prefill_instances=self.prefill_instances, decode_instances=self.decode_instances)

    def frontier_area(self, x_lo: float, x_hi: float, log_x: bool = True) -> np.ndarray:
        y = np.where(self.fits_memory, self.tokens_per_s_per_gpu, np.nan)
        return frontier_area(self.tokens_per_s_per_user, y, x_lo, x_hi, log_x)


@dataclass(frozen=True)
class _DecodeStep:
    """A decode instance's step: per output token as a breakdown (the decode-only step × PP
    plus drafts, over the tokens a step yields), and the whole step."""

    per_token: StageTime
    step_s: np.ndarray


def _decode_step(a, d, env, c, workload: Workload) -> _DecodeStep:
    context = workload.mean_decode_context_tokens
    step = stage_forward(a, d, env, micro_batch_seqs(c, d), context, 0.0, 0.0,
                         tokens_per_seq=d.spec_tokens + 1.0).scaled(d.pp)
    if d.speculative:
        step = step.plus(draft_pass(a, d, env, c, context), d.spec_tokens)
    gained = expected_tokens_per_step(d.spec_tokens, d.spec_acceptance)
    return _DecodeStep(step.scaled(1.0 / gained), step.total_s)


@dataclass(frozen=True)
class _PrefillPool:
    """One prefill instance: a prompt's chunks through its pipeline, the prompts per second it
    starts at a full token budget, one prompt's service time at that rate, and one prompt at a
    full budget on one of its attention groups (budget step · ISL / budget)."""

    through_pipeline_s: np.ndarray
    prompts_per_s: np.ndarray
    service_s: np.ndarray
    group_prompt_s: np.ndarray


def _prefill_pool(a, d, env, workload: Workload) -> _PrefillPool:
    isl, budget = float(workload.isl_tokens), float(workload.prefill_chunk_tokens)
    chunks = np.ceil(isl / budget)
    chunk = stage_forward(a, d, env, 0.0, 0.0, isl / chunks, isl / 2.0).total_s
    full = d.dp * budget
    budget_step = stage_forward(a, d, env, 0.0, 0.0, full, isl / 2.0,
                                np.maximum(full / isl, 1.0)).total_s
    return _PrefillPool((chunks + d.pp - 1.0) * chunk, full / isl / budget_step, chunks * chunk,
                        budget_step * isl / budget)


def _kv_transfer_s(a, d_decode, env_decode, hw: HardwareSpec, isl, both_pools_gpus):
    """The decode GPU's share of one sequence's KV, from the prefill pool."""
    per_gpu = kv_cache_bytes_per_sequence(a, isl, env_decode.kv.activation_bytes_per_value,
                                          d_decode)
    crosses = both_pools_gpus > hw.scale_up_domain_gpus
    return point_to_point_s(per_gpu, hw, env_decode.eff, crosses_domain=crosses)


@dataclass(frozen=True)
class _PoolRatio:
    """The xPyD ratio realizing each point: per-GPU requests/s, x prefill and y decode
    instances, and the prefill pool's utilization ρ (NaN where no ratio qualifies)."""

    requests_per_s_per_gpu: np.ndarray
    prefill_instances: np.ndarray
    decode_instances: np.ndarray
    prefill_utilization: np.ndarray


def _fixed_ratio(decode_rate, prefill_rate, g_prefill, g_decode, ratio) -> _PoolRatio:
    """A deployment's own xPyD ratio: requests/s is the smaller of what the decode side
    completes and the prefill side starts (a saturated prefill pool starves decode)."""
    x, y = (float(v) for v in ratio)
    served = np.minimum(y * decode_rate, x * prefill_rate)
    rho = np.minimum(y * decode_rate / (x * prefill_rate), 1.0)
    return _PoolRatio(served / (x * g_prefill + y * g_decode), np.full_like(rho, x),
                      np.full_like(rho, y), rho)


def _best_ratio(decode_rate, prefill_rate, g_prefill, g_decode, ttft_of_rho,
                limits: PoolLimits) -> _PoolRatio:
    """The xPyD ratio of most output per GPU (per OSL token) whose prefill utilization ρ stays
    at most `limits.utilization` and whose TTFT at that ρ at most `limits.ttft_s` (or the
    deployment's own `limits.ratio`); NaN where no ratio qualifies. Every (x, y) of
    1 … `limits.max_instances` is tried, on two leading axes that broadcast against (n, c)."""
    if limits.ratio is not None:
        return _fixed_ratio(decode_rate, prefill_rate, g_prefill, g_decode, limits.ratio)
    counts = np.arange(1, limits.max_instances + 1, dtype=np.float64)
    x, y = counts[:, None, None, None], counts[None, :, None, None]
    rho = y * decode_rate / (x * prefill_rate)
    ok = (rho <= limits.utilization) & (ttft_of_rho(rho) <= limits.ttft_s)
    per_gpu = np.where(ok, y * decode_rate / (x * g_prefill + y * g_decode), -np.inf)
    flat = per_gpu.reshape(-1, *per_gpu.shape[2:])
    best = np.argmax(flat, axis=0)[None]

    def pick(values):
        return np.take_along_axis(np.broadcast_to(values, per_gpu.shape).reshape(flat.shape),
                                  best, 0)[0]

    value = pick(per_gpu)
    found = np.isfinite(value)
    return _PoolRatio(*(np.where(found, v, np.nan) for v in (value, pick(x), pick(y), pick(rho))))


@dataclass(frozen=True)
class PoolLimits:
    """How the pools are sized: at most `max_instances` of each, prefill utilization at most
    `utilization` (the M/D/1 wait grows without bound as ρ → 1) and, when given, TTFT at most
    `ttft_s` (the TTFT target disaggregated deployments are sized for); or exactly `ratio`."""

    max_instances: int = DEFAULT_MAX_INSTANCES
    utilization: float = DEFAULT_MAX_PREFILL_UTILIZATION
    ttft_s: float = np.inf
    ratio: tuple[int, int] | None = None  # a given (prefill, decode) instance count instead


def prefill_wait_s(utilization, service_s, prompts_ahead_max):
    """M/D/1 mean wait ρ/(2(1−ρ)) · S; in a closed loop never more than the prompts that can be
    ahead of a request (a saturated pool, ρ ≥ 1, waits for all of them)."""
    rho = np.asarray(utilization, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        queued = np.where(rho < 1.0, rho / (2.0 * (1.0 - rho)), np.inf)
    return np.minimum(queued, np.maximum(prompts_ahead_max, 0.0)) * service_s


def wave_queue_s(group_prompt_s, in_flight, ratio: _PoolRatio, prefill_dp):
    """(N_g − 1) · S_prompt: the prompts ahead of a request when the in-flight requests of the
    y decode instances start together and meet the x prefill instances' dp_p attention groups,
    N_g = ⌈in_flight · y / (x · dp_p)⌉ on the busiest group (`benchmark_ttft.prompt_queue_s`)."""
    per_instance = in_flight * ratio.decode_instances / ratio.prefill_instances
    return prompt_queue_s(group_prompt_s, busiest_group_seqs(per_instance, prefill_dp))


def evaluate_disaggregated(archs: Sequence[Architecture], prefill: Sequence[Deployment],
                           decode: Sequence[Deployment], hw: HardwareSpec, workload: Workload,
                           concurrency=None, limits: PoolLimits = PoolLimits()
                           ) -> DisaggregatedPoints:
    """Operating points of candidate i = (archs[i], prefill[i], decode[i]). `concurrency`: one
    1-D array of sequences per decode instance for every candidate, or None for the sweep up
    to each decode instance's memory limit. `limits` sizes the pools."""
    if not len(archs) == len(prefill) == len(decode):
        raise ConfigError(f"`prefill` and `decode` deployments must match `architectures` one "
                          f"to one; got {len(prefill)}, {len(decode)} and {len(archs)}")
    a = ArchArrays.from_architectures(archs)
    pools = _Pools(DeployArrays.from_deployments(prefill), DeployArrays.from_deployments(decode),
                   *(Env.for_deployments(hw, pool, workload.engine) for pool in (prefill, decode)))
    cap = _decode_in_flight_cap(a, pools, workload)
    grid = concurrency_grid(cap) if concurrency is None else np.broadcast_to(
        np.asarray(concurrency, float).reshape(1, -1), (len(archs), np.size(concurrency)))
    return _points(a, pools, hw, workload, grid, cap, limits)


@dataclass(frozen=True)
class _Pools:
    """The prefill and the decode instances' deployments and environments."""

    prefill: DeployArrays
    decode: DeployArrays
    prefill_env: Env
    decode_env: Env


def _decode_in_flight_cap(a: ArchArrays, pools: _Pools, workload: Workload) -> np.ndarray:
    """Sequences a decode instance keeps in flight: what its KV cache holds beside the weights
    and one prompt chunk of workspace, at most the engine's batch cap per attention group."""
    held = max_concurrency(a, pools.decode, pools.decode_env, float(workload.max_context_tokens),
                           float(workload.prefill_chunk_tokens))
    return np.minimum(held, workload.max_batch_sequences * pools.decode.dp)


def _prompt_fits_prefill(a: ArchArrays, pools: _Pools, workload: Workload) -> np.ndarray:
    """Whether one prompt's KV fits a prefill instance beside its weights and workspace."""
    return max_concurrency(a, pools.prefill, pools.prefill_env, float(workload.isl_tokens),
                           float(workload.prefill_chunk_tokens)) >= 1


def _points(a, pools: _Pools, hw: HardwareSpec, workload: Workload, grid, cap,
            limits: PoolLimits) -> DisaggregatedPoints:
    isl, osl = float(workload.isl_tokens), float(workload.osl_tokens)
    c = np.where(np.isfinite(grid), grid, 1.0)
    in_flight = np.where(cap >= 1, np.minimum(c, cap), c)  # the rest wait for a slot
    decode = _decode_step(a, pools.decode, pools.decode_env, in_flight, workload)
    tpot = decode.per_token.total_s
    pool = _prefill_pool(a, pools.prefill, pools.prefill_env, workload)
    decode_rate = in_flight / (osl * tpot)  # requests/s one decode instance completes
    kv = _kv_transfer_s(a, pools.decode, pools.decode_env, hw, isl,
                        pools.prefill.gpus + pools.decode.gpus)
    fixed = pool.through_pipeline_s + kv + decode.step_s / (2.0 * pools.decode.pp)
    ratio = _best_ratio(decode_rate, pool.prompts_per_s, pools.prefill.gpus, pools.decode.gpus,
                        lambda r: fixed + prefill_wait_s(r, pool.service_s, np.inf), limits)
    queue = prefill_wait_s(ratio.prefill_utilization, pool.service_s,
                           in_flight * ratio.decode_instances / ratio.prefill_instances - 1.0)
    ttft = fixed + queue
    wave = wave_queue_s(pool.group_prompt_s, in_flight, ratio, pools.prefill.dp)
    terms = shipped_terms(workload.engine)
    client = {s: ttft + terms.overhead_s(s) + terms.queue_share(s) * wave
              + slot_wait_s(c, in_flight, decode_rate) for s in STATISTICS}
    missing = ~np.isfinite(grid)

    def nan(values):
        return np.where(missing, np.nan, np.broadcast_to(values, grid.shape))

    fits = (c <= cap) & ~missing & (cap >= 1) & _prompt_fits_prefill(a, pools, workload) \
        & np.isfinite(ratio.requests_per_s_per_gpu)
    return DisaggregatedPoints(
        concurrency=grid, tpot_s=nan(tpot), ttft_s=nan(ttft),
        benchmark_ttft_s=nan(client["mean"]), benchmark_ttft_median_s=nan(client["median"]),
        tokens_per_s_per_user=nan(1.0 / tpot),
        tokens_per_s_per_gpu=nan(ratio.requests_per_s_per_gpu * osl), fits_memory=fits,
        prefill_instances=nan(ratio.prefill_instances),
        decode_instances=nan(ratio.decode_instances), prefill_s=nan(pool.through_pipeline_s),
        queue_s=nan(queue), wave_queue_s=nan(wave), kv_transfer_s=nan(kv), max_concurrency=cap,
        tpot_parts=StageTime(*(nan(part) for part in decode.per_token._parts())))
