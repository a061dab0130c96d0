"""TTFT as a benchmark client measures it, beside the engine's steady-state TTFT of one request.

A client at concurrency C (vLLM/SGLang `bench_serving --max-concurrency C`, InferenceX,
trtllm-bench's serving mode) sends a new request as soon as one finishes. Requests of equal
ISL/OSL that start together also finish together, so they keep arriving in waves: a request
finds the other prompts of its attention group (⌈C/dp⌉ − 1 of them) queued for the engine's
token budget. Its TTFT is
    t_request + T_steady + q · (C_g − 1) · S_prompt
- t_request: what the serving stack adds per request (HTTP, tokenization, scheduling, the first
  token's detokenization and streaming);
- T_steady: the engine's steady-state TTFT of one request (its chunks through the pipeline and
  the wait for the step in progress, `cost_model.step`);
- S_prompt: the time one prompt takes when prompts fill the token budget (a budget-full step's
  time × ISL / budget);
- q: the share of the other prompts a request waits for (½ for perfectly synchronized waves,
  0 for arrivals that never meet).
t_request and q are fitted on published end-to-end measurements, never on kernel tables
(`cost_model/data/serving/benchmark.toml`, `tests/benchmarks/fit_benchmark_ttft.py`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from cost_model.sourced import sourced_value
from cost_model.units import MS_PER_S

_PACKAGE = "cost_model.data.serving"
_FILE = "benchmark.toml"


@dataclass(frozen=True)
class BenchmarkTerms:
    request_overhead_s: float  # t_request
    queue_share_frac: float  # q


@cache
def shipped_terms() -> BenchmarkTerms:
    """The fitted terms shipped with the package."""
    doc = tomllib.loads(resources.files(_PACKAGE).joinpath(_FILE).read_text())
    value = lambda key: float(sourced_value(doc, key, {}, "benchmark"))  # noqa: E731
    return BenchmarkTerms(value("request.overhead_ms") / MS_PER_S, value("queue.share_frac"))


def prompt_queue_s(prompt_s, group_requests):
    """(C_g − 1) · S_prompt: the time the other prompts of a request's group take to drain."""
    ahead = np.maximum(np.asarray(group_requests, dtype=np.float64) - 1.0, 0.0)
    return ahead * prompt_s


def benchmark_ttft_s(steady_ttft_s, queue_s, terms: BenchmarkTerms | None = None):
    """t_request + T_steady + q · (C_g − 1) · S_prompt (arrays broadcast)."""
    terms = terms or shipped_terms()
    return terms.request_overhead_s + steady_ttft_s + terms.queue_share_frac * queue_s
