"""TTFT as a benchmark client measures it, beside the engine's steady-state TTFT of one request.

A client at concurrency C (vLLM/SGLang `bench_serving --max-concurrency C`, InferenceX,
trtllm-bench's serving mode) sends a new request as soon as one finishes. Requests of equal
ISL/OSL that start together also finish together, so some keep arriving in waves: such a
request finds the other prompts of its attention group (⌈C/dp⌉ − 1 of them) queued for the
engine's token budget. Its TTFT is
    t_request + T_steady + X + w · W_round + W_poll + W_slot
- t_request: what the serving stack adds per request (HTTP, tokenization, scheduling, the first
  token's detokenization and streaming);
- T_steady: the engine's steady-state TTFT of one request (its chunks through the pipeline and
  the wait for the step in progress, `cost_model.serving_steps`);
- X, the wait behind the other prompts of its group: a share of the requests arrives in a
  synchronized wave (the benchmark's first C at once; later ones as their predecessors finish
  together) and waits k · S_prompt for the k prompts ahead of it (S_prompt: one prompt at a full
  token budget), the rest arrive alone and wait for none. The median request waits
  q̃ · (C_g − 1) · S_prompt, the mean q̄ · (C_g − 1) · S_prompt with q̄ ≥ q̃ (the waves' long
  waits pull the mean up, not the median);
- W_round (`adp_round_wait_s`): TensorRT-LLM with attention DP and its balancer on holds new
  context requests until every DP rank has one or `timeout_iters` iterations have passed
  (tensorrt_llm/_torch/pyexecutor/py_executor.py, `_balance_adp_requests`; the design in
  docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md of github.com/NVIDIA/TensorRT-LLM),
  so a request waits for a full DP round of arrivals, dp − 1 more of them at the rate C/lifetime
  the closed-loop client sends, or the timeout, whichever comes first; w the share of that wait
  the median request sees. 0 without attention DP, and for engines without such a balancer.
- W_poll (`recv_poll_wait_s`): an engine that polls its request queue only every N forward steps
  (SGLang `--scheduler-recv-interval N`: python/sglang/srt/managers/scheduler_recv_skipper.py
  counts forward steps and receives when the count reaches N; InferenceX runs DeepSeek-R1 on
  B200 with N = 10, 30 from concurrency 16) leaves a request that arrives at a random moment
  (N − 1)/2 decode steps unseen on average. Nothing fitted: N is the run's setting.
- W_slot (`slot_wait_s`): once the client keeps more requests in flight than the engine admits
  (its batch cap, or the sequences its KV cache holds), the rest wait in the engine's queue for a
  slot; in a closed loop every request finds the same C − L ahead of it, so mean and median
  alike wait (C − L) / (requests completed per second). Nothing fitted.
The mean and the median share every term but X and t_request: published records report one or
the other (InferenceX's median TTFT, vLLM's and genai-perf's mean), and a benchmark's first
requests (cold caches, the first wave) lift its mean above its median, so the mean has its own
t_request and share where the fitted table gives them (`mean_request_overhead_ms`,
`mean_queue_share_frac`, fitted on rows that report a mean), else the median's.
The terms are per serving engine (`Workload.engine`: vllm, sglang, trtllm), with a generic set
for an unnamed one, fitted on published end-to-end measurements, never on kernel tables
(`cost_model/data/serving/benchmark.toml`, `tests/benchmarks/fit_benchmark_ttft.py`, the fit in
`search.calibration.serving`); a user's own runs refit them with `archscout calibrate --source
RESULTS…`, into the calibration folder's `serving/benchmark.toml`, read before the package's
(`cost_model.serving_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# GENERIC: the table used when no engine is named, or one without its own terms (the same name
# as the engine-less kernels of cost_model.efficiency)
from cost_model.efficiency import GENERIC
from cost_model.serving_files import serving_file
from cost_model.sourced import sourced_value
from cost_model.units import MS_PER_S

_FILE = "benchmark.toml"


STATISTICS = ("mean", "median")  # over a benchmark's requests


@dataclass(frozen=True)
class BenchmarkTerms:
    request_overhead_s: float  # t_request of the median request
    queue_share_frac: float  # q̃: the median request's share of the group's other prompts
    round_wait_share_frac: float = 0.0  # w: share of the attention-DP round wait
    mean_request_overhead_s: float | None = None  # the mean's t_request (None: the median's)
    mean_queue_share_frac: float | None = None  # q̄ (None: the median's)

    def overhead_s(self, statistic: str) -> float:
        """t_request of the `statistic` (one of STATISTICS); the mean's never below the
        median's (its requests' delays are skewed right, never left)."""
        if statistic == "mean" and self.mean_request_overhead_s is not None:
            return max(self.mean_request_overhead_s, self.request_overhead_s)
        return self.request_overhead_s

    def queue_share(self, statistic: str) -> float:
        """The share of (C_g − 1) · S_prompt the `statistic` waits: q̄ (never below q̃) or q̃."""
        if statistic == "mean" and self.mean_queue_share_frac is not None:
            return max(self.mean_queue_share_frac, self.queue_share_frac)
        return self.queue_share_frac


def shipped_terms(engine: str | None = None) -> BenchmarkTerms:
    """The fitted terms for `engine` (None or one without a table of its own: the generic
    terms): the user's calibrated file's (`cost_model.serving_files`), else the package's."""
    doc, origin = serving_file(_FILE)
    table = engine if engine in doc else GENERIC
    kind = f"benchmark ({origin})"
    value = lambda key, default=0.0: float(  # noqa: E731
        sourced_value(doc, f"{table}.{key}", {}, kind, default))
    optional = lambda key: sourced_value(doc, f"{table}.{key}", {}, kind, None)  # noqa
    mean_overhead, mean_share = optional("mean_request_overhead_ms"), optional(
        "mean_queue_share_frac")
    return BenchmarkTerms(value("request_overhead_ms") / MS_PER_S, value("queue_share_frac"),
                          value("round_wait_share_frac"),
                          None if mean_overhead is None else float(mean_overhead) / MS_PER_S,
                          None if mean_share is None else float(mean_share))


def prompt_queue_s(prompt_s, group_requests):
    """(C_g − 1) · S_prompt: the time the other prompts of a request's group take to drain."""
    ahead = np.maximum(np.asarray(group_requests, dtype=np.float64) - 1.0, 0.0)
    return ahead * prompt_s


def adp_round_wait_s(step_s, dp, concurrency, lifetime_s, timeout_steps):
    """W_round = min(timeout · step, (dp − 1) · lifetime / C): the time until dp − 1 more
    requests arrive at the closed-loop client's rate C / lifetime (one per DP rank), capped by
    the balancer's timeout. The balancer holds requests only while every rank is generating
    (the other c − 1 requests cover the dp ranks); 0 otherwise, for one attention group, and
    without a timeout (no balancer)."""
    c = np.maximum(np.asarray(concurrency, dtype=np.float64), 1.0)
    groups = np.asarray(dp, dtype=np.float64)
    arrivals_s = (groups - 1.0) * lifetime_s / c
    wait = np.minimum(timeout_steps * np.asarray(step_s, dtype=np.float64), arrivals_s)
    return np.where(c - 1.0 >= groups, wait, 0.0)


def recv_poll_wait_s(step_s, interval_steps, concurrency):
    """W_poll = (N − 1)/2 · step: the mean wait of a request arriving uniformly within one polling
    cycle of N decode steps, when other requests keep the engine stepping (c > 1); an idle engine
    loops without forward steps and sees the request at once (0 at c = 1, and for N = 1)."""
    busy = np.asarray(concurrency, dtype=np.float64) > 1.0
    return np.where(busy, (np.asarray(interval_steps, dtype=np.float64) - 1.0) / 2.0
                    * np.asarray(step_s, dtype=np.float64), 0.0)


def slot_wait_s(concurrency, in_flight, requests_per_s):
    """W_slot = (C − L) / R: the C − L requests beyond the L the engine holds, drained at the R
    requests per second it completes; 0 while C ≤ L."""
    waiting = np.maximum(np.asarray(concurrency, dtype=np.float64) - in_flight, 0.0)
    return np.divide(waiting, requests_per_s, out=np.zeros(np.broadcast(
        waiting, requests_per_s).shape), where=waiting > 0)


def benchmark_ttft_s(steady_ttft_s, queue_s, terms: BenchmarkTerms | None = None,
                     round_wait_s=0.0, statistic: str = "mean"):
    """t_request + T_steady + share · (C_g − 1) · S_prompt + w · W_round of the `statistic`
    over a benchmark's requests (arrays broadcast; W_poll and W_slot are added by the caller,
    they are the same for both)."""
    terms = terms or shipped_terms()
    return (terms.overhead_s(statistic) + steady_ttft_s + terms.queue_share(statistic) * queue_s
            + terms.round_wait_share_frac * round_wait_s)
