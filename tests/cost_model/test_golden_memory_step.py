"""Golden numbers for memory, the non-GEMM step time, the LM head's tokens and the throughput
definition, each derived by hand in its docstring (every constant of the formula appears there,
so a one-line change to the formula fails here)."""

import numpy as np
import pytest

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.hf_config import load_architecture
from cost_model.host import request_step_s
from cost_model.layers import GemmList, lm_head_gemm
from cost_model.memory import max_concurrency, weight_bytes_per_gpu, workspace_bytes_per_gpu
from cost_model.step import StageLayers, _elementwise_values, _other_kernels, _other_s
from cost_model.step_load import StepLoad

from tests.data_paths import HF_CONFIGS

H200 = get_hardware("h200")


def _arrays(arch, dep):
    return ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])


def test_weights_llama_8b_fp8(load_model):
    """Llama-3.1-8B (H 4096, L 32, 32 q / 8 kv heads × 128, FFN 14,336, vocab 128,256, untied),
    FP8 linear layers (1 byte), BF16 embedding and LM head (2 bytes), one GPU:
    attention 4096·(4096 + 2·1024) + 4096·4096 = 41,943,040 per layer; MLP 3·4096·14336 =
    176,160,768; linear 32 · 218,103,808 = 6,979,321,856 bytes; vocab 2 · 128256·4096 · 2 bytes =
    2,101,346,304; total 9,080,668,160 bytes."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment(precision="fp8"))
    env = Env.create(H200, "fp8", "fp8")
    assert weight_bytes_per_gpu(a, d, env)[0, 0] == 9_080_668_160


def test_tied_embedding_is_stored_once(load_model):
    """gemma-2-9b ties its LM head to the embedding: the vocabulary costs 256000·3584·2 bytes
    once (1,835,008,000), not twice."""
    gemma = load_model("gemma-2-9b")
    a, d = _arrays(gemma, Deployment(precision="bf16"))
    untied = a.__class__(**{**a.__dict__, "tied": np.zeros_like(a.tied)})
    env = Env.create(H200, "bf16", "bf16")
    extra = weight_bytes_per_gpu(untied, d, env) - weight_bytes_per_gpu(a, d, env)
    assert extra[0, 0] == 256_000 * 3584 * 2


def test_weights_qwen3_moe_with_router(load_model):
    """Qwen3-30B-A3B (H 2048, L 48, 32 q / 4 kv heads × 128, 128 experts of 768, vocab 151,936,
    untied), FP8, one GPU: attention 2048·4096 + 2·2048·512 + 4096·2048 = 18,874,368; experts
    128·3·2048·768 = 603,979,776; linear 48 · 622,854,144 = 29,896,998,912 bytes; router (BF16)
    48·128·2048·2 = 25,165,824; vocab 2·151936·2048·2 = 1,244,659,712; total 31,166,824,448."""
    a, d = _arrays(load_model("Qwen3-30B-A3B"), Deployment(precision="fp8"))
    env = Env.create(H200, "fp8", "fp8")
    assert weight_bytes_per_gpu(a, d, env)[0, 0] == 31_166_824_448


def test_max_concurrency_llama_8b_by_hand(load_model):
    """H200 usable HBM 151,397,597,184 · (1 − 0.10) = 136,257,837,465.6 bytes; weights
    9,080,668,160; workspace of an 8,192-token chunk: 8192 · max(8·4096, 3·14336) · 2 =
    704,643,072; KV per sequence at 2,048 tokens (FP8): 2·32·8·128·2048 = 134,217,728;
    ⌊126,472,526,233.6 / 134,217,728⌋ = 942 sequences per group; dp = 2 holds 1,884."""
    llama = load_model("Llama-3.1-8B")
    env = Env.create(H200, "fp8", "fp8")
    a, d = _arrays(llama, Deployment(precision="fp8"))
    assert workspace_bytes_per_gpu(a, d, 8192.0)[0, 0] == 704_643_072
    assert max_concurrency(a, d, env, 2048.0, 8192.0)[0, 0] == 942
    _, d2 = _arrays(llama, Deployment(precision="fp8", dp=2))
    assert max_concurrency(a, d2, env, 2048.0, 8192.0)[0, 0] == 1884


def test_other_time_by_hand(load_model):
    """Non-GEMM time of 64 tokens of Llama-3.1-8B at TP 1: per layer two sub-blocks (attention,
    FFN) of 5·H (norm read + write, residual add two reads + one write), RoPE 2·H and the
    SwiGLU's (2 + 1)·H′: 10·4096 + 2·4096 + 3·14336 = 92,160 BF16 values per token read or
    written, 64·92160·2 bytes at the HBM rate × the BF16 bandwidth ceiling, plus 2 + 1 + 1 = 4
    kernel launches; per step 8 launches (÷ PP) and the scheduler's host time for the 64
    decoding sequences, 64 · h_x86 (H200 hosts are x86)."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment())
    env = Env.create(H200, "fp8", "fp8")
    launch = H200.kernel_launch_s
    rate = H200.hbm_bytes_per_s * env.eff.for_rate("bf16").bandwidth_ceiling_frac
    expected = 32 * (64 * 92_160 * 2 / rate + 4 * launch) + 8 * launch + 64 * request_step_s("x86")
    got = _other_s(a, d, env, StepLoad.single_group(64.0), StageLayers.of(a, d))
    assert float(np.asarray(got).reshape(-1)[0]) == pytest.approx(expected, rel=1e-9)


def test_single_mixer_layers_pay_one_sub_block_each():
    """Nemotron-H-56B (H 8,192, 118 layers: 54 Mamba-2, 10 attention, 54 squared-ReLU FFNs of
    32,768, each its own pre-norm and residual) at TP 1, as the engines run it: 118 sub-blocks of
    5·H, RoPE 2·H on the 10 attention layers, the ungated activation's (1 + 1)·H′ on the 54
    FFNs: 118·5·8192 + 10·2·8192 + 54·2·32768 = 4,833,280 + 163,840 + 3,538,944 = 8,536,064
    values per token (a transformer layer's 12·H + 3·H′ on each of the 118 would be
    23,199,744); launches 118 norms + 10 RoPE + 54 activations = 182 (not 4 · 118 = 472)."""
    a, d = _arrays(load_architecture(HF_CONFIGS / "Nemotron-H-56B-Base-8K.json"), Deployment())
    stage = StageLayers.of(a, d)
    assert float(_elementwise_values(a, d, stage)[0, 0]) == 8_536_064
    assert float(_other_kernels(a, stage)[0, 0]) == 182


def test_shared_experts_pay_their_activation_not_the_routed_ones(load_model):
    """DeepSeek-V3 (H 7,168, 61 layers: 3 dense FFNs of 18,432, 58 MoE layers with a 2,048-wide
    shared expert; SwiGLU) at TP 1: 122 sub-blocks · 5·H + 61 RoPE · 2·H + 3·(3·18432 +
    58·2048) = 4,372,480 + 874,496 + 522,240 = 5,769,216 values per token; launches 122 + 61
    + (3 + 58) = 244 (the routed experts' activation is the fused MoE's, `moe_overhead_s`)."""
    a, d = _arrays(load_model("DeepSeek-V3"), Deployment())
    stage = StageLayers.of(a, d)
    assert float(_elementwise_values(a, d, stage)[0, 0]) == 5_769_216
    assert float(_other_kernels(a, stage)[0, 0]) == 244


def test_lm_head_runs_on_decode_tokens_and_one_per_prompt(load_model):
    """10 decoding sequences and a 1,000-token chunk of one prompt: 10 + 1 = 11 logits rows."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment())
    gemms = GemmList((1, 1))
    lm_head_gemm(gemms, a, d, StepLoad.of(d, 10.0, 1000.0))
    m = gemms.dims[gemms.names.index("lm_head")][0]
    assert float(np.asarray(m).reshape(-1)[0]) == 11.0


def test_throughput_is_output_tokens_over_the_request_lifetime(load_model):
    """y = c · OSL / (GPUs · max(TTFT + (OSL − 1)·TPOT, OSL · TPOT)) (DESIGN "Throughput")."""
    llama = load_model("Llama-3.1-8B")
    workload = Workload(isl_tokens=1024, osl_tokens=256)
    p = evaluate_points([llama], [Deployment(tp=2)], H200, workload, np.array([1.0, 64.0]))
    c, osl = p.concurrency[0], 256.0
    lifetime = np.maximum(p.ttft_s[0] + (osl - 1) * p.tpot_s[0], osl * p.tpot_s[0])
    assert p.tokens_per_s_per_gpu[0] == pytest.approx(c * osl / (2 * lifetime), rel=1e-9)


def test_step_overhead_is_shared_by_pipeline_stages(load_model):
    """The 8 per-step kernels (embedding, final norm, sampling, scheduler) run once per step of
    the whole pipeline: each of PP = 2 stages carries 8/2 launches (16 layers per stage here);
    the host time of the micro-batch's 64 sequences is not divided (test_host.py says why)."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment(pp=2))
    env = Env.create(H200, "fp8", "fp8")
    launch = H200.kernel_launch_s
    rate = H200.hbm_bytes_per_s * env.eff.for_rate("bf16").bandwidth_ceiling_frac
    expected = 16 * (64 * 92_160 * 2 / rate + 4 * launch) + 8 * launch / 2 \
        + 64 * request_step_s("x86")
    got = _other_s(a, d, env, StepLoad.single_group(64.0), StageLayers.of(a, d))
    assert float(np.asarray(got).reshape(-1)[0]) == pytest.approx(expected, rel=1e-9)


def test_tp_all_reduces_by_hand(load_model):
    """Llama-3.1-8B at TP 2, 64 tokens: one all-reduce of 64·4096·2 bytes (BF16 activations)
    after attention and one after the FFN in each of the 32 layers: 64 all-reduces."""
    from cost_model.communication import all_reduce_s
    from cost_model.step import _communication_s

    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment(tp=2))
    env = Env.create(H200, "fp8", "fp8")
    got = _communication_s(a, d, env, StepLoad.single_group(64.0), 32.0, 0.0, 32.0)
    one = all_reduce_s(64 * 4096 * 2.0, 2, H200, env.eff)
    assert float(np.asarray(got).reshape(-1)[0]) == pytest.approx(64 * float(one), rel=1e-9)


def _moe_communication_s(arch, dep: Deployment, hw, tokens_per_group: float) -> float:
    """Communication of 48 MoE layers (no attention or dense layers) for a decode step of
    `tokens_per_group` tokens in each attention group, FP8."""
    from cost_model.step import _communication_s

    a, d = _arrays(arch, dep)
    env = Env.create(hw, "fp8", "fp8")
    load = StepLoad.of(d, dep.dp * tokens_per_group, 0.0)
    return float(np.ravel(_communication_s(a, d, env, load, 0.0, 48.0, 48.0))[0])


def _fp8_there_bf16_back_s(collective, values: float, gpus: int, hw) -> float:
    """A collective of `values` in FP8 (1 byte, the dispatch) plus one in BF16 (2 bytes, the
    combine) over `gpus` GPUs."""
    eff = Env.create(hw, "fp8", "fp8").eff
    return float(collective(values * 1.0, gpus, hw, eff) + collective(values * 2.0, gpus, hw, eff))


def test_moe_tokens_are_gathered_in_the_linear_format(load_model):
    """Qwen3-30B-A3B (H 2,048), 64 tokens per group, dp = 8 attention groups on an HGX H200
    board, FP8: the engines' default exchange is an all-gather of all 8 · 64 = 512 tokens'
    2,048 values in FP8 (1 byte) and a reduce-scatter of the BF16 partial outputs (2 bytes), over
    the 8 ranks, plus the TP all-reduces (none at TP 1), in each of 48 MoE layers. The same with
    EP 1 (every rank holds a slice of every expert and still needs every token): MoE TP over DP
    ranks is not free."""
    from cost_model.communication import all_gather_s

    per_layer = _fp8_there_bf16_back_s(all_gather_s, 512 * 2048, 8, H200)
    for ep in (8, 1):
        got = _moe_communication_s(load_model("Qwen3-30B-A3B"),
                                   Deployment(dp=8, ep=ep, precision="fp8"), H200, 64.0)
        assert got == pytest.approx(48 * per_layer, rel=1e-9)


def test_expert_dispatch_on_an_nvl72_domain_sends_routed_copies(load_model):
    """Qwen3-30B-A3B, dp = 16, EP 16 > top-k 8 on GB200 NVL72 (TensorRT-LLM's MNNVL
    all-to-all): each GPU sends its 64 tokens' 8 routed copies of 2,048 values, dispatch in FP8
    and combine in BF16, over the 16 EP ranks, in each of 48 MoE layers. With EP 8 = top-k (16
    attention groups, each expert over 2 ranks) the same rack all-gathers all 16 · 64 tokens over
    the 16 ranks (TensorRT-LLM turns the all-to-all off when moe_ep_size <= top_k)."""
    from cost_model.communication import all_gather_s, all_to_all_s

    gb200 = get_hardware("gb200")
    arch = load_model("Qwen3-30B-A3B")
    got = _moe_communication_s(arch, Deployment(dp=16, ep=16, precision="fp8"), gb200, 64.0)
    assert got == pytest.approx(48 * _fp8_there_bf16_back_s(all_to_all_s, 64 * 8 * 2048, 16,
                                                            gb200), rel=1e-9)
    got = _moe_communication_s(arch, Deployment(dp=16, ep=8, precision="fp8"), gb200, 64.0)
    assert got == pytest.approx(48 * _fp8_there_bf16_back_s(all_gather_s, 16 * 64 * 2048, 16,
                                                            gb200), rel=1e-9)


def test_workspace_of_a_wide_model(load_model):
    """DeepSeek-V3 at TP 1: max(8·7168, 3·18432) = 57,344 BF16 values per token of an 8,192-
    token chunk: 8192 · 57344 · 2 = 939,524,096 bytes."""
    a, d = _arrays(load_model("DeepSeek-V3"), Deployment())
    assert workspace_bytes_per_gpu(a, d, 8192.0)[0, 0] == 939_524_096


def test_attention_flops_per_key(load_model):
    """Per (query, key) pair and head: GQA scores (2·d_h) and weighted values (2·d_h) = 4·128 =
    512 FLOPs; absorbed MLA (DeepSeek-V3, latent 512 + RoPE 64): 2·(2·512 + 64) = 2,176."""
    from cost_model.attention import _head_flop_per_key

    llama = ArchArrays.from_architectures([load_model("Llama-3.1-8B")])
    deepseek = ArchArrays.from_architectures([load_model("DeepSeek-V3")])
    assert _head_flop_per_key(llama, absorbed=True)[0, 0] == 512
    assert _head_flop_per_key(deepseek, absorbed=True)[0, 0] == 2176
