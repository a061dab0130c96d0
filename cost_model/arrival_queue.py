"""TTFT as a client that is not a closed loop measures it: Poisson arrivals, or an offline run.

`Workload.arrivals` says how a benchmark's client sends its requests:
- "closed_loop" (the default): C requests in flight, a new one as one finishes
  (`cost_model.benchmark_ttft`: waves of prompts queue behind each other, a fitted share of them);
- "poisson": requests arrive at Poisson-distributed times at rate λ (vLLM's `bench_serving
  --request-rate`, TensorRT-LLM's online-serving tables, MLPerf's Server and Interactive
  scenarios). A point at concurrency c is read as the steady state of arrivals at the rate it
  completes, λ = c / W (Little's law, L = λ·W: Little, "A Proof for the Queuing Formula
  L = λW", Operations Research 9(3):383–387, 1961), W the request's latency;
  `concurrency_at_rate` inverts it for a given λ.
- "offline": every request of the run is queued at once (trtllm-bench throughput, MLPerf
  Offline).

Poisson arrivals. A request's prompt waits for the prompts ahead of it in its attention group's
queue: the group prefills prompts at S_prompt each (one prompt at a full token budget,
`serving_steps.ServingTimes.prompt_s`), arrivals reach it at λ_g = λ / dp, so the prompt queue is
an M/D/1 queue of utilization ρ = λ_g · S_prompt. Its mean wait is the Pollaczek–Khinchine
formula, W̄ = λ_g E[S²] / (2(1 − ρ)) = ρ S_prompt / (2(1 − ρ)) for a deterministic S
(Kleinrock, Queueing Systems Vol. 1, Wiley 1975, ch. 5: the M/G/1 mean wait, E[S²] = S²).
The wait's distribution: an arrival finds the server busy with probability ρ (Poisson arrivals
see time averages: Wolff, Operations Research 30(2):223–231, 1982), and the wait of one that
finds it busy is taken exponential with the mean that gives W̄ overall,
P(W > t) ≈ ρ · exp(−ρ t / W̄): exact for M/M/1 (Kleinrock ch. 5: W(y) = 1 − ρ e^{−μ(1−ρ)y}),
and the heavy-traffic limit of every single-server queue (Kingman, "The single server queue in
heavy traffic", Proc. Camb. Phil. Soc. 57:902–904, 1961). So the q-quantile wait is 0 while
ρ ≤ 1 − q, else (W̄/ρ) · ln(ρ / (1 − q)).
The TTFT of the mean (median, p99) request is
    t_request + T_steady + w · W_round + W_poll + W̄ (W_0.5, W_0.99)
with every term as the closed loop's (`cost_model.benchmark_ttft`) but its wave queue and slot
wait: the prompts ahead are the M/D/1 queue's. Past the engine's in-flight cap (c above it) the
arrivals outrun the slots: no steady state (inf). As λ → 0 the wait vanishes and the TTFT is
t_request + T_steady of one request alone (the closed loop's at C = 1).

Input lengths that vary (`Workload.isl_mix_frac`: K equally likely request lengths as
fractions r_k of the mean ISL, e.g. quantiles of a benchmark dataset's input lengths; empty: every
request at the mean, the M/D/1 queue above exactly). A prompt's service time scales with its
length, S·r (S_prompt is linear in the prompt tokens, `serving_steps`), so the queue is M/G/1:
ρ = λ_g S E[r] = λ_g S and W̄ = λ_g E[S²] / (2(1 − ρ)) = ρ S E[r²] / (2(1 − ρ)) (the same
Pollaczek–Khinchine formula, Kleinrock ch. 5, with E[S²] = S² E[r²]). A request's own prefill
moves with its length at the marginal cost a budget-filled step charges a prompt token, S per
mean prompt (never more than its steady TTFT: a prompt of no tokens takes no less than nothing),
T_own(r) = T_steady + (r − 1) · min(S, T_steady); the rest of T_steady (the decode batch the
chunk rides with, the pipeline fill, the step in progress) does not depend on the length; a
long prompt's chunk rounding is ignored. Under FCFS a request's wait does not depend on its own
service time (it is the work ahead of it), so the TTFT is the sum of two independent parts and
P(TTFT > t) = (1/K) Σ_k P(W > t − T_own(r_k)), with P(W > u) = 1 for u < 0 and the tail above
for u ≥ 0; its q-quantile, inf{t : P(TTFT > t) ≤ 1 − q}, is found by bisection between
min T_own and max T_own + W_q (where the tail is ≤ 1 − q). The mean is E[T_own] + W̄ =
T_steady + W̄. The exponential tail is the approximation above, now with the M/G/1 mean.

Offline run. The N requests are queued at once and admitted L = min(N, cap) at a time; the
group's C_g − 1 other prompts of a wave drain one per S_prompt and the waves follow each other,
so a request's wait is uniform over the requests' positions: the q-quantile is q times the last
request's wait, (C_g − 1)·S_prompt + (N − L)/R (the closed loop's prompt queue and slot wait,
`benchmark_ttft.prompt_queue_s`, `slot_wait_s`), the mean and the median half of it. No balancer
round and no poll: every rank has requests queued from the start. Nothing here is fitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_model.benchmark_ttft import BenchmarkTerms, benchmark_ttft_s
from cost_model.deployment import ARRIVALS

CLOSED_LOOP, POISSON, OFFLINE = ARRIVALS
QUANTILES = {"mean": None, "median": 0.5, "p99": 0.99}  # statistic -> quantile of the wait


def prefill_utilization(group_rate_per_s, prompt_s):
    """ρ = λ_g · S_prompt: the share of time an attention group's prompt queue is busy."""
    return np.asarray(group_rate_per_s, dtype=np.float64) * np.asarray(prompt_s, dtype=np.float64)


def mg1_mean_wait_s(group_rate_per_s, prompt_s, second_moment_frac=1.0):
    """W̄ = ρ · S · E[r²] / (2(1 − ρ)) (Pollaczek–Khinchine, service S·r with E[r] = 1 and
    E[r²] = `second_moment_frac`); inf at ρ ≥ 1."""
    rho = prefill_utilization(group_rate_per_s, prompt_s)
    service = np.asarray(prompt_s, dtype=np.float64) * second_moment_frac
    stable = rho < 1.0
    return np.where(stable, rho * service / (2.0 * np.where(stable, 1.0 - rho, 1.0)), np.inf)


def md1_mean_wait_s(group_rate_per_s, prompt_s):
    """W̄ = ρ · S / (2(1 − ρ)) (Pollaczek–Khinchine, deterministic service S); inf at ρ ≥ 1."""
    return mg1_mean_wait_s(group_rate_per_s, prompt_s)


def wait_quantile_s(mean_wait_s, utilization, quantile: float):
    """The q-quantile of the wait, P(W > t) = ρ · exp(−ρ t / W̄): 0 while ρ ≤ 1 − q, else
    (W̄/ρ) · ln(ρ / (1 − q)); inf where W̄ is (ρ ≥ 1)."""
    rho = np.asarray(utilization, dtype=np.float64)
    mean = np.asarray(mean_wait_s, dtype=np.float64)
    tail = 1.0 - quantile
    waits = rho > tail
    safe_rho = np.where(waits, rho, 1.0)
    value = np.where(waits, mean / safe_rho * np.log(safe_rho / tail), 0.0)
    return np.where(np.isfinite(mean), value, np.inf)


def poisson_wait_s(group_rate_per_s, prompt_s, statistic: str):
    """The prompt-queue wait of the `statistic` (one of `QUANTILES`) under Poisson arrivals."""
    mean = md1_mean_wait_s(group_rate_per_s, prompt_s)
    quantile = QUANTILES[statistic]
    if quantile is None:
        return mean
    return wait_quantile_s(mean, prefill_utilization(group_rate_per_s, prompt_s), quantile)


def wait_tail_frac(wait_s, mean_wait_s, utilization):
    """P(W > u): 1 for u < 0, ρ · exp(−ρ u / W̄) for u ≥ 0 (0 when nothing waits, W̄ = 0)."""
    rho = np.asarray(utilization, dtype=np.float64)
    mean = np.asarray(mean_wait_s, dtype=np.float64)
    rate = np.where(mean > 0.0, rho / np.where(mean > 0.0, mean, 1.0), np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        tail = np.where(rate < np.inf, rho * np.exp(-rate * np.maximum(wait_s, 0.0)), 0.0)
    return np.where(wait_s < 0.0, 1.0, tail)


def isl_ratios(isl_mix_frac) -> np.ndarray:
    """The mix's request lengths over their mean (E[r] = 1 exactly)."""
    r = np.asarray(isl_mix_frac, dtype=np.float64)
    return r / r.mean()


def own_prefill_s(steady_ttft_s, prompt_s, ratios) -> np.ndarray:
    """T_own(r) = T_steady + (r − 1) · min(S, T_steady) for each length r (last axis)."""
    steady = np.asarray(steady_ttft_s, dtype=np.float64)[..., None]
    slope = np.minimum(np.asarray(prompt_s, dtype=np.float64)[..., None], steady)
    return steady + (np.asarray(ratios) - 1.0) * slope


def mixture_quantile_s(own_s, mean_wait_s, utilization, quantile: float,
                       iterations: int = 64) -> np.ndarray:
    """The q-quantile of T_own(r) + W, r equally likely over the last axis of `own_s` and W
    independent of it: inf{t : (1/K) Σ_k P(W > t − own_k) ≤ 1 − q}, by bisection on
    [min own, max own + W_q]; inf where W̄ is."""
    mean = np.asarray(mean_wait_s, dtype=np.float64)
    rho = np.asarray(utilization, dtype=np.float64)
    finite = np.isfinite(mean)
    safe_mean = np.where(finite, mean, 0.0)
    lo = own_s.min(axis=-1)
    hi = own_s.max(axis=-1) + wait_quantile_s(safe_mean, rho, quantile)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        tail = wait_tail_frac(mid[..., None] - own_s, safe_mean[..., None],
                              rho[..., None]).mean(axis=-1)
        below = tail <= 1.0 - quantile
        hi, lo = np.where(below, mid, hi), np.where(below, lo, mid)
    return np.where(finite, hi, np.inf)


def poisson_ttft_parts_s(x: ClientInputs, isl_mix_frac) -> dict:
    """Per statistic, the request's own prefill and its prompt-queue wait together under
    Poisson arrivals: T_steady + the M/D/1 wait (no mix), else the M/G/1 mixture's."""
    if len(isl_mix_frac) == 0:
        return {s: x.steady_ttft_s + poisson_wait_s(x.group_rate_per_s, x.prompt_s, s)
                for s in QUANTILES}
    r = isl_ratios(isl_mix_frac)
    mean = mg1_mean_wait_s(x.group_rate_per_s, x.prompt_s, float(np.mean(r * r)))
    shape = np.broadcast_shapes(np.shape(x.steady_ttft_s), np.shape(x.prompt_s), np.shape(mean))
    own = own_prefill_s(np.broadcast_to(x.steady_ttft_s, shape),
                        np.broadcast_to(x.prompt_s, shape), r)
    rho = np.broadcast_to(prefill_utilization(x.group_rate_per_s, x.prompt_s), shape)
    mean = np.broadcast_to(mean, shape)
    out = {"mean": own.mean(axis=-1) + mean}
    return {**out, **{s: mixture_quantile_s(own, mean, rho, q)
                      for s, q in QUANTILES.items() if q is not None}}


def offline_wait_s(prompt_queue_s, slot_s, statistic: str):
    """An offline run's wait of the `statistic`: the quantile q (½ for the mean) of the last
    request's wait (C_g − 1)·S_prompt + (N − L)/R, waits being uniform over the positions."""
    quantile = QUANTILES[statistic]
    share = 0.5 if quantile is None else quantile
    return share * (np.asarray(prompt_queue_s, dtype=np.float64) + slot_s)


@dataclass(frozen=True)
class ClientInputs:
    """What the clients' TTFT is made of at each point (arrays broadcast): the engine's steady
    TTFT, the group's other prompts drained, one prompt at a full budget, the balancer's round
    wait, the polling wait and the slot wait (`cost_model.benchmark_ttft`), the arrival rate
    per attention group λ / dp and whether the point is past the engine's in-flight cap."""

    steady_ttft_s: np.ndarray
    prompt_queue_s: np.ndarray
    prompt_s: np.ndarray
    round_s: np.ndarray
    poll_s: np.ndarray
    slot_s: np.ndarray
    group_rate_per_s: np.ndarray
    saturated: np.ndarray


def client_ttft_s(arrivals: str, x: ClientInputs, terms: BenchmarkTerms,
                  isl_mix_frac: tuple = ()) -> dict:
    """The TTFT of each statistic over a benchmark's requests: mean and median for every
    client, p99 under Poisson arrivals and offline (None for the closed loop, which does not
    model it); under Poisson arrivals with the input lengths of `isl_mix_frac`
    (`poisson_ttft_parts_s`)."""
    if arrivals == CLOSED_LOOP:
        out = {s: benchmark_ttft_s(x.steady_ttft_s, x.prompt_queue_s, terms, x.round_s, s)
               + x.poll_s + x.slot_s for s in ("mean", "median")}
        return {**out, "p99": None}
    if arrivals == OFFLINE:
        return {s: terms.overhead_s("mean" if s == "p99" else s) + x.steady_ttft_s
                + offline_wait_s(x.prompt_queue_s, x.slot_s, s) for s in QUANTILES}
    base = {s: terms.overhead_s("mean" if s == "p99" else s)
            + terms.round_wait_share_frac * x.round_s + x.poll_s for s in QUANTILES}
    own_and_wait = poisson_ttft_parts_s(x, isl_mix_frac)
    return {s: np.where(x.saturated, np.inf, base[s] + own_and_wait[s]) for s in QUANTILES}


def concurrency_at_rate(rate_per_s: float, concurrency, requests_per_s, allowed=None
                        ) -> float | None:
    """The concurrency L whose modelled completion rate is `rate_per_s` (Little's law's fixed
    point L = λ·W(L)), linear between the two points of a sweep that bracket it; None when the
    rate is above every allowed point's (no steady state) and 1 below the first."""
    c = np.asarray(concurrency, dtype=np.float64).ravel()
    rps = np.asarray(requests_per_s, dtype=np.float64).ravel()
    ok = np.isfinite(c) & np.isfinite(rps) & (True if allowed is None else np.ravel(allowed))
    c, rps = c[ok], rps[ok]
    if c.size == 0 or rate_per_s > rps.max():
        return None
    if rate_per_s <= rps[0]:
        return float(max(c[0] * rate_per_s / rps[0], 1.0))
    k = int(np.argmax(rps >= rate_per_s))  # the first point at or above the rate
    lo, hi = k - 1, k
    share = (rate_per_s - rps[lo]) / (rps[hi] - rps[lo])
    return float(c[lo] + share * (c[hi] - c[lo]))
