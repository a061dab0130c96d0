"""Benchmark TTFT: t_request + T_steady + q·(C_g − 1)·S_prompt (cost_model/benchmark_ttft.py)."""

import numpy as np
import pytest

from cost_model.benchmark_ttft import (
    BenchmarkTerms, benchmark_ttft_s, prompt_queue_s, shipped_terms,
)
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware


def test_formula_by_hand():
    """t_request 50 ms, q = 0.5, T_steady 40 ms, S_prompt 10 ms: at C_g = 1 → 50 + 40 = 90 ms; at
    C_g = 9 → 90 + 0.5·8·10 = 130 ms."""
    terms = BenchmarkTerms(request_overhead_s=0.05, queue_share_frac=0.5)
    queue = prompt_queue_s(0.010, np.array([1.0, 9.0]))
    assert queue == pytest.approx([0.0, 0.08])
    assert benchmark_ttft_s(0.040, queue, terms) == pytest.approx([0.090, 0.130])


def test_shipped_terms_are_sourced_and_in_range():
    terms = shipped_terms()
    assert 0.0 <= terms.request_overhead_s < 1.0 and 0.0 <= terms.queue_share_frac <= 1.0


def test_benchmark_ttft_adds_to_the_engine_ttft(load_model):
    """At c = 1 the client adds t_request only; with more requests per group it also waits for
    their prompts, and DP groups split that queue (⌈c/dp⌉ requests per group)."""
    llama = load_model("Llama-3.1-8B")
    hw, workload = get_hardware("h200"), Workload(isl_tokens=2048, osl_tokens=256)
    c = np.array([1.0, 16.0])
    one = evaluate_points([llama], [Deployment(tp=1)], hw, workload, c)
    terms = shipped_terms()
    assert one.benchmark_ttft_s[0, 0] == pytest.approx(
        one.ttft_s[0, 0] + terms.request_overhead_s, rel=1e-6)
    assert one.prompt_queue_s[0, 0] == 0.0 and one.prompt_queue_s[0, 1] > 0.0
    four = evaluate_points([llama], [Deployment(tp=1, dp=4)], hw, workload, c)
    assert four.prompt_queue_s[0, 1] < one.prompt_queue_s[0, 1]
