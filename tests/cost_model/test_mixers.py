"""Cost of the new layer kinds: DeepSeek Sparse Attention (indexer + top-k MLA, its own cache)
and layers without a mixer (Puzzle / Nemotron-NAS), against hand formulas and their dense twins."""

import numpy as np
import pytest

from cost_model.attention import (
    decode_attention_s,
    kv_cache_bytes_per_sequence,
    prefill_attention_s,
)
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.step import stage_forward

from tests.data_paths import HF_CONFIGS

H200 = get_hardware("h200")
V32 = load_architecture(HF_CONFIGS / "DeepSeek-V3.2.json")
DENSE_V32 = V32.with_fields(**{"index_heads": 0, "index_head_dim": 0, "index_topk": 0})
NAS = load_architecture(HF_CONFIGS / "Llama-3_3-Nemotron-Super-49B-v1.json")
NAS_ALL_ATTENTION = NAS.with_fields(**{"layer_mixers": None})


def _env(precision="fp8"):
    return Env.create(H200, precision, "fp8")


def test_dsa_cache_holds_latent_and_indexer_key():
    """Per token and layer: MLA latent 512 + rope 64, plus one indexer key of 128 (FP8: 1 B)."""
    a = ArchArrays.from_architectures([V32])
    assert kv_cache_bytes_per_sequence(a, 1000, 1.0)[0, 0] == 61 * (512 + 64 + 128) * 1000


def test_dsa_decode_reads_top_k_latents_and_every_indexer_key():
    """At 128k context the main attention reads 2,048 latents, the indexer 128k keys of 128 B:
    far less than dense MLA's 128k latents of 576 B; below top-k both read everything and DSA
    only adds the indexer."""
    a, d, env = ArchArrays.from_architectures([V32, DENSE_V32]), DeployArrays.from_deployments(
        [Deployment(tp=8)] * 2), _env()
    long = decode_attention_s(a, d, env, 64.0, 131072.0)[:, 0]
    assert long[0] < 0.35 * long[1]
    short = decode_attention_s(a, d, env, 64.0, 1024.0)[:, 0]
    assert short[0] > short[1]
    # the main attention's share at 128k equals dense MLA's at 2,048 keys
    at_topk = decode_attention_s(a, d, env, 64.0, 2048.0)[1, 0]
    assert long[0] > at_topk


def test_dsa_prefill_caps_attention_flops():
    """One attention-DP rank prefilling 8k tokens at a mean context of 64k: the main attention
    reads 2,048 of 65,536 keys (1/32 of dense MLA's 128·(192+128)·2 MACs per key), the indexer
    scores every key with 64·128 MACs in FP8 (~1/10 of dense MLA's BF16 math): < 0.2 of dense."""
    a, d, env = ArchArrays.from_architectures([V32, DENSE_V32]), DeployArrays.from_deployments(
        [Deployment(tp=1)] * 2), _env()
    times = prefill_attention_s(a, d, env, 8192.0, 65536.0)[:, 0]
    assert times[0] < 0.2 * times[1]


def test_dsa_indexer_gemms_run_on_every_layer():
    """The indexer's projections (wq_b, wk, weights_proj) are GEMMs of the step: DSA's GEMM time
    exceeds its dense twin's by them, and only by them."""
    a, d, env = ArchArrays.from_architectures([V32, DENSE_V32]), DeployArrays.from_deployments(
        [Deployment(tp=8)] * 2), _env()
    gemm = stage_forward(a, d, env, 64.0, 4096.0, 0.0, 0.0).gemm_s[:, 0]
    assert gemm[1] < gemm[0] < 1.05 * gemm[1]


def test_layers_without_mixer_hold_no_kv_and_run_no_attention():
    """Nemotron-Super-49B: 49 of 80 layers attend (8 KV heads of 128): KV = 49·2·8·128·b·S;
    attention time and its all-reduce scale by 49/80 against the same model attending on every
    layer, and the GEMM time drops by the 31 layers' q/k/v/o."""
    a = ArchArrays.from_architectures([NAS, NAS_ALL_ATTENTION])
    assert kv_cache_bytes_per_sequence(a, 1000, 2.0)[0, 0] == 49 * 2 * 8 * 128 * 2.0 * 1000
    d, env = DeployArrays.from_deployments([Deployment(tp=1)] * 2), _env()
    step = stage_forward(a, d, env, 32.0, 8192.0, 0.0, 0.0)
    assert step.attention_s[0, 0] == pytest.approx(step.attention_s[1, 0] * 49 / 80, rel=1e-12)
    assert step.gemm_s[0, 0] < step.gemm_s[1, 0]


def test_heterogeneous_and_sparse_models_evaluate_end_to_end():
    """Nemotron-Super-49B on 1x H200 (FP8) and DeepSeek-V3.2 on 8x H200 (FP8) at 8k/1k: finite
    frontiers; Super-49B's KV per sequence is 49/80 of its all-attention twin, so more sequences
    fit."""
    workload = Workload(isl_tokens=8192, osl_tokens=1024)
    nas = evaluate_points(
        [NAS, NAS_ALL_ATTENTION], [Deployment(precision="fp8")] * 2, H200, workload
    )
    assert nas.max_concurrency[0, 0] > nas.max_concurrency[1, 0] >= 1
    v32 = evaluate_points([V32], [Deployment(tp=8, precision="fp8")], H200, workload)
    assert np.nanmax(v32.tokens_per_s_per_gpu) > 0


# ---- linear attention (Gated DeltaNet) -----------------------------------------------------------

QWEN35 = load_architecture(HF_CONFIGS / "Qwen3.5-35B-A3B.json")
QWEN35_ALL_ATTENTION = QWEN35.with_fields(**{
    "layer_mixers": None, "linear_num_key_heads": 0, "linear_key_head_dim": 0,
    "linear_num_value_heads": 0, "linear_value_head_dim": 0, "linear_conv_kernel": 0})


def test_linear_layers_hold_a_fixed_state_instead_of_kv():
    """Qwen3.5-35B-A3B: 10 attention layers keep 2·2·256 values per token; each of the 30 Gated
    DeltaNet layers keeps 32 states of 128 x 128 in fp32 plus 3 conv inputs of
    2·16·128 + 32·128 channels in BF16, whatever the context."""
    a = ArchArrays.from_architectures([QWEN35])
    state = 30 * (32 * 128 * 128 * 4.0 + 3 * 8192 * 2.0)
    for context in (1000, 100_000):
        kv = 10 * 2 * 2 * 256 * 2.0 * context
        assert kv_cache_bytes_per_sequence(a, context, 2.0)[0, 0] == kv + state
    d = DeployArrays.from_deployments([Deployment(tp=2)])
    per_gpu = kv_cache_bytes_per_sequence(a, 1000, 2.0, d)[0, 0]
    assert per_gpu == 10 * 2 * 1 * 256 * 2.0 * 1000 + state / 2  # KV heads 2/TP 2, states /TP


def test_hybrid_decodes_long_contexts_faster_and_fits_more():
    """At 64k in / 2k out on one H200 the 3:1 hybrid reads a quarter of the twin's KV plus
    fixed states: lower TPOT at the same concurrency, more sequences in memory; its step
    breakdown still sums to TPOT."""
    workload = Workload(isl_tokens=65536, osl_tokens=2048)
    deps = [Deployment(precision="fp8")] * 2
    fixed = evaluate_points([QWEN35, QWEN35_ALL_ATTENTION], deps, H200, workload, np.array([8.0]))
    assert fixed.tpot_s[0, 0] < 0.8 * fixed.tpot_s[1, 0]
    assert fixed.max_concurrency[0, 0] > 3 * fixed.max_concurrency[1, 0]
    parts = fixed.gemm_s + fixed.attention_s + fixed.communication_s + fixed.other_s
    assert np.allclose(parts, fixed.tpot_s)


def test_linear_projections_are_gemms_of_the_step():
    """The 30 linear layers' in_proj (H → 12,352) and out_proj (4,096 → H) run as GEMMs: at one
    token their weight reads dominate a decode step's linear-attention cost."""
    a = ArchArrays.from_architectures([QWEN35, QWEN35_ALL_ATTENTION])
    d, env = DeployArrays.from_deployments([Deployment(tp=1)] * 2), _env("bf16")
    step = stage_forward(a, d, env, 1.0, 1024.0, 0.0, 0.0)
    assert step.gemm_s[0, 0] != step.gemm_s[1, 0]
    assert step.total_s[0, 0] > 0


def test_mamba2_state_and_end_to_end():
    """Nemotron-H-56B: 10 attention layers keep 2·8·128 values per token; 54 Mamba-2 layers keep
    256 heads x 64 x 256 fp32 states plus 3 conv inputs of 256·64 + 2·8·256 channels (BF16).
    Nemotron-3-Nano-30B-A3B evaluates on one H200 at 8k in / 16k out."""
    big = load_architecture(HF_CONFIGS / "Nemotron-H-56B-Base-8K.json")
    a = ArchArrays.from_architectures([big])
    state = 54 * (256 * 64 * 256 * 4.0 + 3 * (256 * 64 + 2 * 8 * 256) * 2.0)
    assert kv_cache_bytes_per_sequence(a, 1000, 2.0)[0, 0] == 10 * 2 * 8 * 128 * 2.0 * 1000 + state
    nano = load_architecture(HF_CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")
    points = evaluate_points([nano], [Deployment(precision="fp8")], H200,
                             Workload(isl_tokens=8192, osl_tokens=16384))
    assert np.nanmax(points.tokens_per_s_per_gpu) > 0
    parts = points.gemm_s + points.attention_s + points.communication_s + points.other_s
    assert np.allclose(parts, points.tpot_s, equal_nan=True)


def test_parallel_hybrid_keeps_kv_and_state_on_every_layer():
    """Falcon-H1 layers attend and run Mamba-2: KV on all 4 layers plus 4 states; the attention
    time is that of 4 attention layers."""
    arch = load_architecture(HF_CONFIGS / "synthetic-falcon-h1-parallel-norm.json")
    a = ArchArrays.from_architectures([arch])
    state = 4 * (12 * 32 * 32 * 4.0 + 3 * (384 + 2 * 2 * 32) * 2.0)
    assert kv_cache_bytes_per_sequence(a, 100, 2.0)[0, 0] == 4 * 2 * 2 * 64 * 2.0 * 100 + state
    assert float(a.attention_layers[0, 0]) == 4.0


GEMMA4_26B = load_architecture(HF_CONFIGS / "gemma-4-26B-A4B.json")


def test_gemma4_full_layers_cache_their_own_kv_heads_by_hand():
    """Gemma-4-26B-A4B at 8,192 tokens, BF16 KV, one GPU: 25 sliding layers keep the window's
    1,024 tokens of 2·8·256 elements, the 5 full layers all 8,192 tokens of 2·2·512 (their own
    KV heads and width; k and v both cached):
    25·1024·4096·2 + 5·8192·2048·2 = 209,715,200 + 167,772,160 = 377,487,360 bytes. At TP 4
    the sliding layers hold ⌈8/4⌉ = 2 heads, the full ones ⌈2/4⌉ = 1 (replicated):
    25·1024·1024·2 + 5·8192·1024·2 = 52,428,800 + 83,886,080 = 136,314,880."""
    a = ArchArrays.from_architectures([GEMMA4_26B])
    assert kv_cache_bytes_per_sequence(a, 8192, 2.0)[0, 0] == 377_487_360
    d = DeployArrays.from_deployments([Deployment(tp=4, ep=4)])
    assert kv_cache_bytes_per_sequence(a, 8192, 2.0, d)[0, 0] == 136_314_880


def test_gemma4_full_layers_read_their_own_kv_in_decode():
    """Decode attention of the 26B at 131k tokens: its full layers read 2·2·512 = 2,048
    elements per key, half of the 2·8·256 = 4,096 a twin whose full layers had the sliding
    shape reads: faster than the twin, by less than 2x (the window-capped sliding layers and
    the fixed costs are the same)."""
    twin = GEMMA4_26B.with_fields(**{"global_head_dim": 0, "num_global_kv_heads": 0,
                                         "attention_k_eq_v": False})
    a, d = ArchArrays.from_architectures([GEMMA4_26B, twin]), DeployArrays.from_deployments(
        [Deployment()] * 2)
    times = decode_attention_s(a, d, _env(), 64.0, 131072.0)[:, 0]
    assert 0.5 * times[1] < times[0] < times[1]
