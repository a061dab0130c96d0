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


def md1_mean_wait_s(group_rate_per_s, prompt_s):
    """W̄ = ρ · S / (2(1 − ρ)) (Pollaczek–Khinchine, deterministic service S); inf at ρ ≥ 1."""
    rho = prefill_utilization(group_rate_per_s, prompt_s)
    service = np.asarray(prompt_s, dtype=np.float64)
    stable = rho < 1.0
    return np.where(stable, rho * service / (2.0 * np.where(stable, 1.0 - rho, 1.0)), np.inf)


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


def client_ttft_s(arrivals: str, x: ClientInputs, terms: BenchmarkTerms) -> dict:
    """The TTFT of each statistic over a benchmark's requests: mean and median for every
    client, p99 under Poisson arrivals and offline (None for the closed loop, which does not
    model it)."""
    if arrivals == CLOSED_LOOP:
        out = {s: benchmark_ttft_s(x.steady_ttft_s, x.prompt_queue_s, terms, x.round_s, s)
               + x.poll_s + x.slot_s for s in ("mean", "median")}
        return {**out, "p99": None}
    if arrivals == OFFLINE:
        return {s: terms.overhead_s("mean" if s == "p99" else s) + x.steady_ttft_s
                + offline_wait_s(x.prompt_queue_s, x.slot_s, s) for s in QUANTILES}
    base = {s: terms.overhead_s("mean" if s == "p99" else s) + x.steady_ttft_s
            + terms.round_wait_share_frac * x.round_s + x.poll_s for s in QUANTILES}
    return {s: np.where(x.saturated, np.inf,
                        base[s] + poisson_wait_s(x.group_rate_per_s, x.prompt_s, s))
            for s in QUANTILES}


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
