"""Disaggregated prefill/decode serving (cost_model/disaggregated.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.deployment import Deployment, Workload
from cost_model.benchmark_ttft import shipped_terms, slot_wait_s
from cost_model.disaggregated import (
    PoolLimits, _PoolRatio, evaluate_disaggregated, prefill_wait_s, wave_queue_s,
)
from cost_model.evaluate import evaluate_points
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import PRECISIONS

from tests.cost_model.test_serving_properties import model

DEEPSEEK = Deployment(tp=8, ep=8, precision="fp8_block")
LONG = Workload(isl_tokens=8192, osl_tokens=1024)
H200 = get_hardware("h200")


def _disagg(concurrency, limits=PoolLimits(), dep=DEEPSEEK, hw=H200, stem="DeepSeek-V3",
            workload=LONG):
    return evaluate_disaggregated([model(stem)], [dep], [dep], hw, workload,
                                  np.asarray(concurrency, float), limits)


def test_prefill_wait_by_hand():
    """M/D/1: ρ = 0.5 → 0.5/(2·0.5) = 0.5 service times; ρ = 0.8 → 2; capped at the prompts
    that can be ahead (1 here); ρ ≥ 1 waits for all of them."""
    waits = prefill_wait_s(np.array([0.5, 0.8, 0.8, 1.0]), 0.1, np.array([9, 9, 1, 3]))
    assert waits == pytest.approx([0.05, 0.2, 0.1, 0.3])


def test_wave_queue_by_hand():
    """100 requests in flight on each of 3 decode instances start together and meet 2 prefill
    instances of 4 attention groups: 150 prompts per instance, ⌈150/4⌉ = 38 on the busiest
    group, so 37 ahead of the last, at 10 ms each: 0.37 s. One request alone waits for none."""
    ratio = _PoolRatio(np.nan, np.array(2.0), np.array(3.0), np.nan)
    assert float(wave_queue_s(0.01, 100.0, ratio, 4.0)) == pytest.approx(0.37, rel=1e-12)
    one = _PoolRatio(np.nan, np.array(1.0), np.array(1.0), np.nan)
    assert float(wave_queue_s(0.01, 1.0, one, 1.0)) == 0.0


@pytest.mark.parametrize("engine", [None, "trtllm", "sglang", "vllm"], ids=str)
def test_benchmark_ttft_is_the_closed_loops_with_the_prefill_pools_wave(engine):
    """The client's TTFT = steady TTFT + t_request + q · (N_g − 1) · S_prompt + slot wait, for
    the mean and the median with the engine's own terms; the wave grows with the requests in
    flight (1P2D: 2 prompts per prefill instance at c = 1, so one ahead)."""
    workload = LONG.model_copy(update={"engine": engine})
    p = evaluate_disaggregated([model("DeepSeek-V3")], [DEEPSEEK], [DEEPSEEK], H200, workload,
                               np.array([1.0, 16.0, 64.0]), PoolLimits(ratio=(1, 2)))
    terms = shipped_terms(engine)
    slot = slot_wait_s(p.concurrency, p.concurrency, 1.0)  # nothing beyond the cap: 0
    for statistic, client in (("mean", p.benchmark_ttft_s), ("median", p.benchmark_ttft_median_s)):
        expected = p.ttft_s + terms.overhead_s(statistic) \
            + terms.queue_share(statistic) * p.wave_queue_s + slot
        assert client == pytest.approx(expected, rel=1e-12)
    assert np.all(np.diff(p.wave_queue_s[0]) > 0)  # 2, 32, 128 prompts per prefill instance


def test_kv_transfer_by_hand():
    """DeepSeek-V3, 8,192-token prompt, FP8 latent KV (61 layers × (512 + 64) values, 1 byte,
    on every GPU of the decode instance): 287,834,112 bytes over each GPU's NIC (the 16 GPUs of
    both pools leave the 8-GPU domain): 15 µs + 287.83e6 / (50e9 · 0.85) = 6.787 ms."""
    assert _disagg([1.0]).kv_transfer_s[0, 0] == pytest.approx(6.787e-3, rel=1e-3)


def test_ttft_does_not_depend_on_decode_load():
    """The prompt's path through the prefill pool and its KV transfer are the same at every
    decode concurrency; only the prefill queue and the half decode step to join vary."""
    p = _disagg([1.0, 16.0, 64.0, 128.0])
    assert np.all(p.prefill_s[0] == p.prefill_s[0, 0])
    assert np.all(p.kv_transfer_s[0] == p.kv_transfer_s[0, 0])


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from(catalog_names()), st.sampled_from(["Llama-3.1-8B", "Qwen3-30B-A3B"]),
       st.sampled_from([1.0, 8.0, 64.0, 256.0]))
def test_decode_pool_tpot_is_never_above_aggregated(gpu, stem, concurrency):
    """Without prompt chunks beside them, decode steps are never slower than aggregated ones
    of the same deployment and concurrency."""
    hw = get_hardware(gpu)
    precision = "fp8" if hw.supports(PRECISIONS["fp8"]) else "bf16"
    dep = Deployment(tp=1, precision=precision)
    agg = evaluate_points([model(stem)], [dep], hw, LONG, np.array([concurrency]))
    dis = _disagg([concurrency], dep=dep, hw=hw, stem=stem)
    assert dis.tpot_s[0, 0] <= agg.tpot_s[0, 0] * (1 + 1e-6)


def test_pools_are_sized_below_saturation_and_to_the_ttft_target():
    """The chosen xPyD ratio keeps the prefill pool at ρ ≤ 0.8; a TTFT target below what the
    prompt's own prefill takes leaves no ratio (no point)."""
    p = _disagg([64.0])
    x, y = p.prefill_instances[0, 0], p.decode_instances[0, 0]
    assert 1 <= x <= 8 and 1 <= y <= 8
    assert p.queue_s[0, 0] <= 2.0 * p.prefill_s[0, 0]  # ρ/(2(1−ρ)) ≤ 2 at ρ ≤ 0.8
    strict = _disagg([64.0], PoolLimits(ttft_s=0.5 * float(p.prefill_s[0, 0])))
    assert np.isnan(strict.tokens_per_s_per_gpu[0, 0])


def test_a_starved_decode_side_runs_at_the_prefill_rate():
    """With the deployment's own ratio 1P1D at high concurrency the prefill pool saturates:
    throughput per GPU is the prefill pool's rate, and more decode instances do not help."""
    one = _disagg([256.0], PoolLimits(ratio=(1, 1)))
    four = _disagg([256.0], PoolLimits(ratio=(1, 4)))
    total_one = one.tokens_per_s_per_gpu[0, 0] * 16  # 1P + 1D of 8 GPUs
    total_four = four.tokens_per_s_per_gpu[0, 0] * 40
    assert total_four == pytest.approx(total_one, rel=1e-9) or total_four > total_one


def test_published_disaggregated_vs_aggregated_pair():
    """SemiAnalysis InferenceX, DeepSeek-R1-0528 FP8 on H200, 1k/1k (rows in
    tests/data/serving_published.csv and tests/data/serving/published_ttft_tpot.csv): aggregated
    TensorRT-LLM TP8 EP8 against Dynamo + TensorRT-LLM with 1 prefill instance (attention DP 8,
    EP 8) and 9 decode instances (TP8 EP8), at matched concurrency per decode instance.
    Published tokens/s/GPU disaggregated / aggregated: c = 16 per instance (144 in all) 91.33 /
    95.33 = 0.958; c = 64 (576 in all) 235.83 / 228.08 = 1.034. The model's ratios (0.93, 0.95)
    agree within 10%: at 1k/1k on H200 separate pools buy little, as measured."""
    arch = model("DeepSeek-V3")
    workload = Workload(isl_tokens=1024, osl_tokens=1024, engine="trtllm")  # the rows' engine
    agg = evaluate_points([arch], [DEEPSEEK], H200, workload, np.array([16.0, 64.0]))
    prefill = Deployment(tp=1, dp=8, ep=8, precision="fp8_block")
    dis = evaluate_disaggregated([arch], [prefill], [DEEPSEEK], H200, workload,
                                 np.array([16.0, 64.0]), PoolLimits(ratio=(1, 9)))
    ratio = dis.tokens_per_s_per_gpu[0] / agg.tokens_per_s_per_gpu[0]
    assert ratio == pytest.approx([91.33 / 95.33, 235.83 / 228.08], rel=0.10)
