"""Helix parallelism (arXiv 2507.07120): attention over tp × kvp GPUs with the KV split along the
sequence, then the output projection and FFN as one TP group of tp·kvp."""

import numpy as np
import pytest

from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, deployment_violations
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.step import helix_all_to_all_s
from cost_model.hf import load_architecture

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA_405B = load_architecture(HF_CONFIGS / "serving_Llama-3.1-405B-Instruct.json")
GB200 = get_hardware("gb200")


def _kv_per_gpu(dep: Deployment, context: float) -> float:
    a, d = ArchArrays.from_architectures([LLAMA_405B]), DeployArrays.from_deployments([dep])
    return float(kv_cache_bytes_per_sequence(a, context, 1.0, d)[0, 0])


def test_kv_per_gpu_by_hand():
    """KV bytes per rank (Helix, arXiv 2507.07120: KV sharded over kvp): 2·L·⌈n_kv/tp⌉·d_h·b·S/kvp.
    Llama-3.1-405B (L = 126, n_kv = 8, d_h = 128), FP8 KV, S = 1,000,000, tp = 8, kvp = 4:
    2·126·1·128·1·1e6/4 = 8.064e9 bytes."""
    assert _kv_per_gpu(Deployment(tp=8, kvp=4), 1e6) == pytest.approx(8.064e9)


@pytest.mark.parametrize("gpus", [16, 32, 64])
def test_helix_stops_duplicating_the_kv_cache_past_n_kv(gpus):
    """n_kv = 8 on `gpus` GPUs: TP alone keeps ⌈8/TP⌉ = 1 head per GPU, so the cache is stored
    gpus/8 times; Helix (tp = 8, kvp = gpus/8) stores it exactly once; per GPU it falls as 1/kvp."""
    whole = 2 * 126 * 8 * 128 * 1.0 * 1e6
    tp_only = _kv_per_gpu(Deployment(tp=gpus), 1e6) * gpus
    helix = _kv_per_gpu(Deployment(tp=8, kvp=gpus // 8), 1e6) * gpus
    assert tp_only == pytest.approx(whole * gpus / 8)
    assert helix == pytest.approx(whole)


def test_helix_holds_more_sequences_at_long_context():
    """Same GPUs, 1M-token context on GB200: Helix fits more concurrent sequences than TP."""
    workload = Workload(isl_tokens=1_000_000, osl_tokens=1024)
    limits = [float(evaluate_points([LLAMA_405B], [dep], GB200, workload).max_concurrency[0, 0])
              for dep in (Deployment(tp=16, precision="fp8"),
                          Deployment(tp=8, kvp=2, precision="fp8"))]
    assert limits[1] > 2 * limits[0] - 1


def test_helix_all_to_all_by_hand():
    """kvp = 4, tp = 8, 16 tokens of Llama-405B (128 query heads, v_dim 128): each GPU sends
    16·(128/8)·(128 + 1)·2 bytes = 66,048 bytes, 3/4 of it to the other ranks of its (NVL72)
    domain: latency 8 µs (catalog α) + 0.75·66,048 / (900e9 · frac); 0 without Helix."""
    a = ArchArrays.from_architectures([LLAMA_405B])
    env = Env.create(GB200, "fp8", "fp8")
    none = helix_all_to_all_s(a, DeployArrays.from_deployments([Deployment(tp=8)]), env, 16.0)
    four = helix_all_to_all_s(a, DeployArrays.from_deployments([Deployment(tp=8, kvp=4)]), env,
                              16.0)
    bandwidth = GB200.scale_up_bytes_per_s * env.eff.scale_up_bandwidth_frac
    assert float(none[0, 0]) == 0.0
    assert float(four[0, 0]) == pytest.approx(GB200.scale_up_latency_s + 0.75 * 66_048 / bandwidth)


def test_helix_sharding_rules_name_kvp():
    """tp·kvp must divide the heads the output projection is sharded over."""
    messages = deployment_violations(LLAMA_405B, Deployment(tp=8, kvp=3))
    assert any("`tp`·`kvp` (24)" in m for m in messages)
    assert Deployment(tp=8, kvp=4).gpus == 32


def test_kvp_1_is_plain_tp():
    workload, c = Workload(isl_tokens=8192, osl_tokens=512), np.array([1.0, 16.0])
    plain = evaluate_points([LLAMA_405B], [Deployment(tp=8)], GB200, workload, c)
    same = evaluate_points([LLAMA_405B], [Deployment(tp=8, kvp=1)], GB200, workload, c)
    assert np.array_equal(plain.tpot_s, same.tpot_s)


def test_helix_ttl_gain_for_deepseek_r1_at_1m_tokens_matches_the_paper():
    """Bhatia et al. 2025 (arXiv 2507.07120, abstract): at multi-million-token context Helix
    "reduces TTL by up to 1.5x at fixed batch sizes ... for DeepSeek-R1" on Blackwell. 64 GB200
    (one NVL72 domain), 1M-token context, NVFP4, decode pool only (disaggregated, 1P1D), batch 1:
    the best plain mapping (TP 64 × EP 64; attention DP 8 × TP 8; attention DP 64) against
    Helix (kvp 64 × EP 64). The model's gain is 1.50 (tolerance ±15%)."""
    from cost_model.disaggregated import PoolLimits, evaluate_disaggregated

    r1 = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
    workload = Workload(isl_tokens=1_000_000, osl_tokens=1024)
    prefill = Deployment(tp=8, ep=8, precision="nvfp4")

    def ttl(dep):
        p = evaluate_disaggregated([r1], [prefill], [dep], GB200, workload, np.array([1.0]),
                                   PoolLimits(ratio=(1, 1)))
        return float(p.tpot_s[0, 0])

    plain = min(ttl(Deployment(tp=64, ep=64, precision="nvfp4")),
                ttl(Deployment(tp=8, dp=8, ep=64, precision="nvfp4")),
                ttl(Deployment(tp=1, dp=64, ep=64, precision="nvfp4")))
    helix = ttl(Deployment(tp=1, kvp=64, ep=64, precision="nvfp4"))
    assert plain / helix == pytest.approx(1.5, rel=0.15)
