"""Prefix caching: a share of each prompt is reused from the cache (cost_model/step.py,
cost_model/memory.py), so it is neither prefilled again nor stored per sequence."""

import numpy as np
import pytest

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.memory import max_concurrency

H200 = get_hardware("h200")


def test_a_shared_prefix_is_stored_once(load_model):
    """Llama-3.1-8B FP8 on one H200 at 2,048 tokens of context, half of a 1,024-token prompt
    cached (512 tokens): KV per token 2·32·8·128·1 = 65,536 bytes; the prefix's 33,554,432 bytes
    are stored once, each sequence holds (2048 − 512)·65,536 = 100,663,296; free memory
    126,472,526,233.6 − 33,554,432 = 126,438,971,801.6 bytes: ⌊1256.06⌋ = 1,256 sequences
    (942 without the cache, tests/cost_model/test_golden_memory_step.py)."""
    a = ArchArrays.from_architectures([load_model("Llama-3.1-8B")])
    d = DeployArrays.from_deployments([Deployment(precision="fp8")])
    env = Env.create(H200, "fp8", "fp8")
    assert max_concurrency(a, d, env, 2048.0, 8192.0, 512.0)[0, 0] == 1256
    assert max_concurrency(a, d, env, 2048.0, 8192.0, 0.0)[0, 0] == 942


@pytest.mark.parametrize("stem", ["Llama-3.1-8B", "Qwen3-30B-A3B"])
def test_more_cache_never_costs_more(load_model, stem):
    """TTFT and TPOT are non-increasing and the memory limit non-decreasing in the cached share;
    no cache is the plain model."""
    arch, dep = load_model(stem), Deployment(tp=1, precision="fp8")
    c = np.array([1.0, 16.0, 128.0])
    runs = [evaluate_points([arch], [dep], H200, Workload(isl_tokens=8192, osl_tokens=256,
                                                          prefix_cached_frac=f), c)
            for f in (0.0, 0.25, 0.5, 0.9)]
    for before, after in zip(runs, runs[1:]):
        assert np.all(after.ttft_s <= before.ttft_s) and np.all(after.tpot_s <= before.tpot_s)
        assert after.max_concurrency[0, 0] >= before.max_concurrency[0, 0]
    plain = evaluate_points([arch], [dep], H200, Workload(isl_tokens=8192, osl_tokens=256), c)
    assert np.array_equal(plain.tpot_s, runs[0].tpot_s)
    assert runs[-1].ttft_s[0, 0] < 0.5 * runs[0].ttft_s[0, 0]  # 90% cached: a fraction left
