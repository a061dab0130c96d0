"""Step times, memory, MoE and KV formulas: the worked numbers of NVIDIA, AI Model Co-Design (2026)
and the behaviour of the serving model (docs/DESIGN.md Vocabulary)."""


import numpy as np
import pytest

from cost_model.architecture import Architecture
from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, make_deployment
from cost_model.errors import ConfigError
from cost_model.evaluate import deployment_violations, evaluate_points
from cost_model.hardware import get_hardware
from cost_model.gemm import gemm_cost
from cost_model.layers import (
    GemmList, attention_gemms, ffn_gemms, tokens_per_expert,
    touched_expert_frac,
)
from cost_model.step import bubble_frac, stage_forward
from cost_model.step_load import StepLoad

H200 = get_hardware("h200")
CHAT = Workload(isl_tokens=1024, osl_tokens=1024)


def _points(arch, dep, hw=H200, workload=CHAT, concurrency=None):
    return evaluate_points([arch], [dep], hw, workload, concurrency)


def test_bubble_formula():
    """GPipe (Huang et al. 2019, arXiv 1811.06965): bubble = (S−1)/(S−1+m); balanced stages, m
    chunks in flight."""
    assert bubble_frac(4, 12) == pytest.approx(3 / 15)
    assert bubble_frac(1, 5) == 0.0


def test_moe_sizing_equation():
    """The co-design post, "Large expert parallelism": M_expert = C·k/E; for M* = 256, E = 256,
    k = 8: C ≥ 8,192."""
    assert tokens_per_expert(8192, 8, 256) == 256
    assert tokens_per_expert(8191, 8, 256) < 256


def test_touched_experts_at_small_batch():
    """One token touches exactly k of E experts; many tokens touch all of them."""
    assert touched_expert_frac(1, 8, 256) == pytest.approx(8 / 256)
    assert touched_expert_frac(10_000, 8, 256) == pytest.approx(1.0)


def test_kv_bytes_formula_gqa(load_model):
    """KV bytes per sequence = 2·L·n_kv·d_h·b_kv·S (Llama-3.1-8B: L=32, n_kv=8,
    d_h=128), exact."""
    a = ArchArrays.from_architectures([load_model("Llama-3.1-8B")])
    got = kv_cache_bytes_per_sequence(a, 4096, 1.0)[0, 0]
    assert got == 2 * 32 * 8 * 128 * 1.0 * 4096


def test_kv_bytes_formula_mla(load_model):
    """docs/DESIGN.md: MLA KV = L·(kv_lora_rank + rope_dim)·b_kv·S (DeepSeek-V3: 61·(512+64))."""
    a = ArchArrays.from_architectures([load_model("DeepSeek-V3")])
    assert kv_cache_bytes_per_sequence(a, 1000, 2.0)[0, 0] == 61 * (512 + 64) * 2.0 * 1000


def test_kv_bytes_sliding_window(load_model):
    """Gemma-2-9B: 21 global layers keep S tokens, 21 sliding layers at most 4,096."""
    a = ArchArrays.from_architectures([load_model("gemma-2-9b")])
    per_token_layer = 2 * 8 * 256 * 2.0
    assert kv_cache_bytes_per_sequence(a, 8192, 2.0)[0, 0] == \
        per_token_layer * (21 * 8192 + 21 * 4096)


def test_tp_beyond_kv_heads_replicates_the_cache(load_model):
    """The co-design post, "Hybrid parallel strategies": GQA with n_kv = 8 at TP = 16 stores every
    KV byte twice."""
    a = ArchArrays.from_architectures([load_model("Llama-3.1-8B")])
    whole = kv_cache_bytes_per_sequence(a, 1024, 1.0)[0, 0]
    for tp, copies in ((8, 1), (16, 2)):
        d = DeployArrays.from_deployments([Deployment(tp=tp)])
        per_gpu = kv_cache_bytes_per_sequence(a, 1024, 1.0, d)[0, 0]
        assert per_gpu * tp == copies * whole


def test_decode_at_concurrency_1_is_weight_bound(load_model):
    """Latency-first decode streams the whole model from HBM each step (the co-design post, "Hybrid
    parallel strategies": weight reads bound low-concurrency decode)."""
    llama = load_model("Llama-3.1-8B")
    tpot = _points(llama, Deployment(precision="fp8"), concurrency=[1]).tpot_s[0, 0]
    weights_s = 8.03e9 * 1.0 / H200.hbm_bytes_per_s  # ~8 GB of FP8 weights at 4.8 TB/s
    assert weights_s < tpot < 2.0 * weights_s


def test_tpot_and_throughput_grow_with_concurrency(load_model):
    p = _points(load_model("Llama-3.1-8B"), Deployment(precision="fp8"))
    c = np.isfinite(p.concurrency[0])
    assert np.all(np.diff(p.tpot_s[0][c]) > 0)
    assert p.tokens_per_s_per_gpu[0][c][-1] > 20 * p.tokens_per_s_per_gpu[0][c][0]


def test_breakdown_sums_to_tpot(load_model):
    p = _points(load_model("Qwen3-30B-A3B"), Deployment(tp=2, ep=2))
    parts = p.gemm_s + p.attention_s + p.communication_s + p.other_s
    assert np.allclose(parts, p.tpot_s, equal_nan=True)


def test_long_context_throughput_is_attention_heavy(load_model):
    """The co-design post, Figure 2: long-context throughput-oriented serving spends most time in
    attention; short-context latency-oriented serving is GEMM (weight) bound."""
    llama = load_model("Llama-3.1-8B")
    long = _points(llama, Deployment(), workload=Workload(isl_tokens=32768, osl_tokens=1024),
                   concurrency=[64])
    short = _points(llama, Deployment(), concurrency=[1])
    assert long.attention_s[0, 0] > long.gemm_s[0, 0]
    assert short.gemm_s[0, 0] > 5 * short.attention_s[0, 0]


def test_chunked_pipeline_cuts_ttft_not_throughput(load_model):
    """The co-design post, Figure 9: more PP stages lower first-token latency on long prompts while
    tokens/s/GPU stays roughly constant."""
    llama = load_model("Llama-3.1-8B")
    work = Workload(isl_tokens=65536, osl_tokens=256)
    one = _points(llama, Deployment(pp=1), workload=work, concurrency=[1])
    four = _points(llama, Deployment(pp=4), workload=work, concurrency=[1])
    assert four.ttft_s[0, 0] < 0.5 * one.ttft_s[0, 0]


def _resized(arch: Architecture, **changes) -> Architecture:
    return Architecture(**{**arch.model_dump(), **changes})


def test_wider_beats_deeper_at_equal_parameters(load_model):
    """The co-design post, Guideline 3: for a fixed budget, wider models have lower latency and
    higher throughput than deeper ones (fewer, larger operations)."""
    llama = load_model("Llama-3.1-8B")
    wide = _resized(llama, num_layers=16, hidden_size=5760, num_attention_heads=45,
                    num_kv_heads=9, intermediate_size=20224)
    deep = _resized(llama, num_layers=64, hidden_size=2816, num_attention_heads=22,
                    num_kv_heads=2, intermediate_size=10240)
    dep = Deployment()
    areas = [_points(m, dep).frontier_area(10, 1000)[0] for m in (wide, deep)]
    tpots = [_points(m, dep, concurrency=[1]).tpot_s[0, 0] for m in (wide, deep)]
    assert areas[0] > areas[1] and tpots[0] < tpots[1]


def test_model_that_cannot_fit_has_no_points(load_model):
    p = _points(load_model("DeepSeek-V3"), Deployment(precision="fp8"))
    assert p.max_concurrency[0, 0] == 0 and not p.fits_memory.any()


def test_lower_precision_fits_more_sequences(load_model):
    llama = load_model("Llama-3.1-8B")
    limits = [_points(llama, Deployment(precision=p, kv_precision=p)).max_concurrency[0, 0]
              for p in ("bf16", "fp8")]
    assert limits[1] > limits[0]


def test_vectorized_equals_one_by_one(load_model):
    """One batch mixing GQA and MoE shapes, weight formats and KV formats (per-candidate format
    columns) gives each candidate what it gets alone (a single format)."""
    models = [load_model(s) for s in ("Llama-3.1-8B", "Mistral-7B-v0.1", "Qwen3-30B-A3B",
                                      "Llama-3.1-8B")]
    deps = [Deployment(tp=2), Deployment(tp=1, precision="bf16"), Deployment(tp=2, ep=2),
            Deployment(tp=1, precision="fp8", kv_precision="fp8")]
    together = evaluate_points(models, deps, H200, CHAT, [1, 64, 512])
    for i, (m, d) in enumerate(zip(models, deps)):
        alone = evaluate_points([m], [d], H200, CHAT, [1, 64, 512])
        assert np.allclose(together.tpot_s[i], alone.tpot_s[0], rtol=1e-6)
        assert np.allclose(together.tokens_per_s_per_gpu[i], alone.tokens_per_s_per_gpu[0],
                           rtol=1e-6)
        assert together.max_concurrency[i, 0] == alone.max_concurrency[0, 0]


def test_gemms_no_candidate_runs_take_no_time(load_model):
    """A dense GQA batch skips the MLA and expert rows (0 s) and times the rest as gemm_cost."""
    llama = load_model("Llama-3.1-8B")
    a, d = ArchArrays.from_architectures([llama]), DeployArrays.from_deployments([Deployment()])
    env = Env.create(H200, "fp8", "fp8")
    gemms = GemmList((1, 1))
    load = StepLoad.single_group(np.array([[64.0]]))
    attention_gemms(gemms, a, d, load, a.layers)
    ffn_gemms(gemms, a, d, load, a.dense_layers, a.moe_layers)
    times = gemms.times_s(env)
    assert {name for name, t in times.items() if np.any(t > 0)} == \
        {"attention/qkv", "attention/o", "mlp/up", "mlp/down"}
    expected = gemm_cost(64, 2 * 14336, 4096, H200, "fp8").time_s * 32  # 32 layers
    assert float(times["mlp/up"][0, 0]) == pytest.approx(float(expected), rel=1e-5)


def test_deployment_rules_name_the_field(load_model):
    llama = load_model("Llama-3.1-8B")
    assert "`tp` (3) must divide `num_attention_heads` (32)" in deployment_violations(
        llama, Deployment(tp=3))
    assert any("`ep`" in m for m in deployment_violations(load_model("Mixtral-8x7B-v0.1"),
                                                            Deployment(tp=3, ep=3)))


def test_ep_must_divide_stage_gpus():
    with pytest.raises(ConfigError, match=r"`ep` \(4\) must divide the GPUs of a stage"):
        make_deployment(tp=2, ep=4)
    with pytest.raises(ConfigError, match="`tp`"):
        make_deployment(tp=0)


def test_chunk_step_share_over_dp_groups():
    """c = 3 over dp = 2 (the busiest group holds ⌈3/2⌉ = 2), ISL = OSL = 1024, one 1,024-token
    chunk: each group's step share p_g = 2 · 1024/1024 = 2 tokens, q = 2/1024; the two groups
    step together: s = 1 − (1 − 2/1024)² = 0.0039024 (dp = 1 at c = 2: q = 2/1024 = 0.0019531).
    At c = 1 only one group holds a request: s = 1/1024."""
    from cost_model.step import chunk_step_frac

    two = DeployArrays.from_deployments([Deployment(dp=2)])
    one = DeployArrays.from_deployments([Deployment()])
    share = lambda c, d: chunk_step_frac(c, d, 1024.0, 1024.0, 8192.0)[0, 0]  # noqa: E731
    assert share(3.0, two) == pytest.approx(0.0039024, rel=1e-4)
    assert share(2.0, one) == pytest.approx(2 / 1024)
    assert share(1.0, two) == pytest.approx(1 / 1024)


def test_balanced_groups_prefill_in_the_same_steps():
    """TensorRT-LLM's attention-DP balancer: the groups' new prompts are prefilled together.
    c = 64 over dp = 8 (8 per group), ISL = OSL = 1024, one 1,024-token chunk: p_g = 8 tokens per
    step, ρ_g = 8/1024 = 0.0078125. Independent arrivals: s = 1 − (1 − ρ_g)^8 = 0.0608175;
    balanced: s = ρ_g = 0.0078125 (eight chunks in one step). dp = 1: no balancing to do."""
    from cost_model.step import chunk_step_frac

    eight = DeployArrays.from_deployments([Deployment(dp=8)])
    share = lambda d, balanced: chunk_step_frac(  # noqa: E731
        64.0, d, 1024.0, 1024.0, 8192.0, balanced)[0, 0]
    assert share(eight, False) == pytest.approx(0.0608175, rel=1e-5)
    assert share(eight, True) == pytest.approx(0.0078125, rel=1e-9)


def test_balanced_tpot_by_hand(load_model):
    """Qwen3-30B-A3B at attention DP 8 / EP 8, c = 64, ISL = OSL = 1024, with the balancer on
    (`adp_balance_timeout_steps` > 0): TPOT = A + ρ_g·(B₈ − A), A the decode step of 8 sequences
    per group, B₈ the same step with one 1,024-token chunk on each of the 8 groups (every group
    prefills its own request: StepLoad puts ⌈8/8⌉ = 1 request on the busiest), ρ_g = 8/1024.
    Without it: A + (1 − (1 − ρ_g)^8)·(B₁ − A), B₁ one chunk on one group."""
    qwen = load_model("Qwen3-30B-A3B")
    dep = Deployment(tp=1, dp=8, ep=8, precision="fp8")
    a, d = ArchArrays.from_architectures([qwen]), DeployArrays.from_deployments([dep])
    env = Env.for_deployments(H200, [dep])  # a generic engine, as the workloads below
    context = 1024.0 + 512.0
    decode = stage_forward(a, d, env, 64.0, context, 0.0, 512.0).total_s[0, 0]
    one = stage_forward(a, d, env, 64.0, context, 1024.0, 512.0, 1.0).total_s[0, 0]
    eight = stage_forward(a, d, env, 64.0, context, 8 * 1024.0, 512.0, 8.0).total_s[0, 0]
    rho = 8 / 1024
    on = _points(qwen, dep, workload=Workload(adp_balance_timeout_steps=60), concurrency=[64.0])
    off = _points(qwen, dep, workload=Workload(), concurrency=[64.0])
    assert on.tpot_s[0, 0] == pytest.approx(decode + rho * (eight - decode), rel=1e-6)
    assert off.tpot_s[0, 0] == pytest.approx(
        decode + (1 - (1 - rho) ** 8) * (one - decode), rel=1e-6)


def test_ttft_is_the_requests_chunks_through_the_pipeline(load_model):
    """Steady-state TTFT, by hand: ISL 20,000 in ⌈20000/8192⌉ = 3 chunks of 6,666.7 tokens through
    PP = 2 stages takes (3 + 2 − 1) = 4 stage steps that carry one chunk each (attending to ISL/2
    on average) beside the other c − 1 sequences; at c = 1 nothing else runs, so no waiting; at
    c = 5 also half a stage step (TPOT/(2·PP)) for the step in progress."""
    llama = load_model("Llama-3.1-8B")
    dep = Deployment(tp=2, pp=2, precision="fp8")
    workload = Workload(isl_tokens=20_000, osl_tokens=100)
    a, d = ArchArrays.from_architectures([llama]), DeployArrays.from_deployments([dep])
    env = Env.create(H200, "fp8", dep.kv_cache_precision)
    chunk = 20_000 / 3
    alone = stage_forward(a, d, env, 0.0, 20_050.0, chunk, 10_000.0).total_s[0, 0]
    p1 = _points(llama, dep, workload=workload, concurrency=[1.0])
    assert p1.ttft_s[0, 0] == pytest.approx(4 * alone, rel=1e-5)
    beside = stage_forward(a, d, env, 2.0, 20_050.0, chunk, 10_000.0).total_s[0, 0]  # ⌈4/2⌉
    p5 = _points(llama, dep, workload=workload, concurrency=[5.0])
    assert p5.ttft_s[0, 0] == pytest.approx(4 * beside + p5.tpot_s[0, 0] / 4, rel=1e-5)


def test_request_lifetime_is_never_below_the_work_of_its_steps():
    """TTFT 0.5 s, TPOT 0.01 s: OSL 100 → max(0.5 + 99·0.01, 100·0.01) = 1.49 s; OSL 1 → max(0.5,
    0.01) = 0.5 s; TTFT 0.001 s, OSL 1, TPOT 0.01 s (a step carrying every request's prompt) →
    0.01 s."""
    from cost_model.evaluate import request_lifetime_s

    assert request_lifetime_s(0.5, 0.01, 100.0) == pytest.approx(1.49)
    assert request_lifetime_s(0.5, 0.01, 1.0) == pytest.approx(0.5)
    assert request_lifetime_s(0.001, 0.01, 1.0) == pytest.approx(0.01)


def test_moe_imbalance_scales_the_busiest_experts_only_with_ep(load_model):
    """Qwen3-30B-A3B, 4,096 tokens, E = 128, k = 8: M_expert = 4096·8/128 = 256 per expert; with
    EP = 8 and δ = 0.1 the busiest GPU's experts hold 256·1.1 = 281.6 tokens; at EP = 1, 256."""
    qwen = load_model("Qwen3-30B-A3B")
    a = ArchArrays.from_architectures([qwen, qwen])
    d = DeployArrays.from_deployments([Deployment(ep=8, dp=8, moe_imbalance_frac=0.1),
                                       Deployment(moe_imbalance_frac=0.1)])
    gemms = GemmList((2, 1))
    ffn_gemms(gemms, a, d, StepLoad.single_group(np.full((2, 1), 4096.0)), 0.0, 1.0)
    m_expert = gemms.dims[gemms.names.index("moe/experts_up")][0]
    assert m_expert.reshape(-1) == pytest.approx([281.6, 256.0], rel=1e-9)
