"""Step times, memory, MoE and KV formulas: the worked numbers of NVIDIA, AI Model Co-Design (2026)
and the behaviour of the serving model (docs/DESIGN.md Vocabulary)."""


import numpy as np
import pytest

from cost_model.architecture import Architecture
from cost_model.attention import kv_cache_bytes_per_sequence
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, deployment_violations, make_deployment
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.layers import (
    GemmList, attention_gemms, ffn_gemms, tokens_per_expert,
    touched_expert_frac,
)
from cost_model.hf import load_architecture
from cost_model.serving_steps import ServingShape, rank_budget_tokens, serving_steps
from cost_model.gemm import HOT_DTYPE, gemm_cost, gemm_time_s
from cost_model.step import bubble_frac, stage_forward, stage_forward_load
from cost_model.step_load import PromptSchedule, StepLoad

from tests.data_paths import HF_CONFIGS

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
    return Architecture.model_validate({**arch.model_dump(), **changes})


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
    ffn_gemms(gemms, a, d, load, a.ffn.dense_layers, a.ffn.moe_layers)
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


def test_prompt_schedule_of_lockstep_groups_by_hand():
    """DeepSeek-V3 on 8 attention-DP groups (B200, ISL = OSL = 1024, budget 8,192): at
    c = 1,023 the busiest group holds ⌈1023/8⌉ = 128 sequences, so it must prefill
    p_g = 128 · 1024/1024 = 128 prompt tokens per step, in chunks of 1024/⌈1024/8192⌉ = 1,024:
    ρ = 128/1024 = 0.125. The 8 groups step together and prefill independently: a step carries
    prompts with s = 1 − 0.875⁸ = 1 − 0.3436089158 = 0.6563910842; such a step holds the
    busiest group's 1,024-token chunk and, over the groups, P/s = 1023/0.6563910842 =
    1,558.522083 prompt tokens (P = 1,023 per step). At c = 1,024 the busiest group is the
    same, P = 1,024: P/s = 1,560.045565; s does not move, so no step change between the two.
    With the balancer the groups prefill together: s = ρ = 0.125, P/s = 1023/0.125 = 8,184."""
    plan = PromptSchedule.of(128.0, 1023.0, 8.0, 1024.0, 1024.0, 8192.0, False)
    assert plan.chunk_tokens == pytest.approx(1024.0)
    assert plan.prompt_step_frac == pytest.approx(0.6563910842, rel=1e-9)
    assert plan.group_step_tokens == pytest.approx(1024.0)
    assert plan.instance_step_tokens == pytest.approx(1558.522083, rel=1e-9)
    more = PromptSchedule.of(128.0, 1024.0, 8.0, 1024.0, 1024.0, 8192.0, False)
    assert more.prompt_step_frac == plan.prompt_step_frac
    assert more.instance_step_tokens == pytest.approx(1560.045565, rel=1e-9)
    balanced = PromptSchedule.of(128.0, 1023.0, 8.0, 1024.0, 1024.0, 8192.0, True)
    assert balanced.prompt_step_frac == pytest.approx(0.125)
    assert balanced.instance_step_tokens == pytest.approx(8184.0)


def test_prompt_steps_hold_whole_chunks_by_hand():
    """The 8 independent groups above: a prompt step holds P/s = 1,558.522083 tokens on
    average, k = 1558.522083/1024 = 1.521994222 chunks: steps of one chunk (1,024 tokens) and
    of two (2,048), the latter in a share 0.521994222 (mean 1,024 + 0.521994222 · 1,024 =
    1,558.522083, as P/s). With the balancer k = 8184/1024 = 7.9921875: 7 or 8 chunks, 8 in a
    share 0.9921875. Past one chunk per step (ρ = 1) the unit is the group's 16,384 tokens."""
    plan = PromptSchedule.of(128.0, 1023.0, 8.0, 1024.0, 1024.0, 8192.0, False)
    assert (plan.low_step_tokens, plan.high_step_tokens) == (1024.0, 2048.0)
    assert plan.high_step_frac == pytest.approx(0.521994222, rel=1e-8)
    balanced = PromptSchedule.of(128.0, 1023.0, 8.0, 1024.0, 1024.0, 8192.0, True)
    assert (balanced.low_step_tokens, balanced.high_step_tokens) == (7168.0, 8192.0)
    assert balanced.high_step_frac == pytest.approx(0.9921875)
    many = PromptSchedule.of(1024.0, 1024.0, 1.0, 1024.0, 64.0, 8192.0, False)
    assert many.low_step_tokens == many.high_step_tokens == pytest.approx(16_384.0)
    assert many.high_step_frac == 0.0


def test_only_groups_holding_requests_prefill(load_model):
    """Qwen3-30B-A3B at DP 8 / EP 8 with c = 3 requests, ISL = OSL = 1024: three groups hold one
    each (ρ = 1 · 1024/1024 / 1024 = 1/1024), the other five are empty and take no prompt: a
    step carries prompts with s = 1 − (1023/1024)³ = 0.0029268, not 1 − (1023/1024)⁸ =
    0.0077858."""
    a = ArchArrays.from_architectures([load_model("Qwen3-30B-A3B")])
    d = DeployArrays.from_deployments([Deployment(dp=8, ep=8)])
    shape = ServingShape.of(Workload(isl_tokens=1024, osl_tokens=1024, prefill_chunk_tokens=8192))
    plan = serving_steps(a, d, np.array([[3.0]]), shape, 1024.0).schedule
    assert float(plan.prompt_step_frac[0, 0]) == pytest.approx(0.0029268, rel=1e-4)


def test_prompt_schedule_past_one_chunk_per_step():
    """ISL 20,000 in ⌈20000/8192⌉ = 3 chunks of 6,666.67 tokens: 16 sequences decoding 100
    steps need 16 · 20000/100 = 3,200 tokens per step, ρ = 3200/6666.67 = 0.48 (one group:
    s = ρ). ISL 1,024 at 1,024 sequences over 64 steps: p = 1024 · 1024/64 = 16,384 tokens
    per step, more than a 1,024-token prompt: every step (s = 1) carries 16,384 tokens of 16
    prompts."""
    long = PromptSchedule.of(16.0, 16.0, 1.0, 20_000.0, 100.0, 8192.0, False)
    assert long.chunk_tokens == pytest.approx(20_000 / 3)
    assert long.prompt_step_frac == pytest.approx(0.48)
    assert long.group_step_tokens == pytest.approx(20_000 / 3)
    many = PromptSchedule.of(1024.0, 1024.0, 1.0, 1024.0, 64.0, 8192.0, False)
    assert many.prompt_step_frac == 1.0
    assert many.group_step_tokens == pytest.approx(16_384.0)
    assert many.group_step_requests == pytest.approx(16.0)
    assert many.instance_step_tokens == pytest.approx(16_384.0)


def test_sglang_attention_dp_ranks_split_the_prompt_budget(load_model):
    """SGLang with DP attention divides `--chunked-prefill-size` by the DP size
    (server_args.py `_handle_data_parallelism`): 16,384 over 8 ranks is 2,048 tokens per rank,
    so an 8,192-token prompt takes ⌈8192/2048⌉ = 4 chunks of 2,048; TensorRT-LLM's
    `max_num_tokens` is per rank: one chunk of 8,192. A dense model's DP groups are replicas
    (no DP attention), so SGLang keeps the whole budget there."""
    deepseek, llama = load_model("DeepSeek-V3"), load_model("Llama-3.1-8B")
    a = ArchArrays.from_architectures([deepseek, llama])
    d = DeployArrays.from_deployments([Deployment(dp=8, ep=8), Deployment(dp=8)])
    budget = lambda engine: rank_budget_tokens(a, d, ServingShape.of(Workload(  # noqa: E731
        isl_tokens=8192, osl_tokens=1024, prefill_chunk_tokens=16_384, engine=engine)))[:, 0]
    assert list(budget("sglang")) == [2048.0, 16_384.0]
    assert list(budget("trtllm")) == [16_384.0, 16_384.0]


def _case_step(a, d, env, group_decode, group_prefill, instance, context=1536.0):
    """One stage step of an explicit load (one prompt per group's chunk)."""
    load = StepLoad(group_decode_seqs=np.asarray(group_decode, float),
                    group_prefill_tokens=np.asarray(group_prefill, float),
                    group_prefill_seqs=np.minimum(np.asarray(group_prefill, float), 1.0),
                    instance_tokens=np.asarray(instance, float))
    return float(np.ravel(stage_forward_load(a, d, env, load, context, 512.0).total_s)[0])


def test_balanced_tpot_by_hand(load_model):
    """Qwen3-30B-A3B at attention DP 8 / EP 8, c = 64, ISL = OSL = 1024: the busiest group
    holds 8 sequences and must prefill p_g = 8 · 1024/1024 = 8 tokens per step, ρ = 8/1024.
    TPOT = A + s·(B − A), A the decode step (8 per group, 64 tokens to the experts), B the step
    carrying the busiest group's 1,024-token chunk with P/s prompt tokens over the groups
    (P = 64 per step). With the balancer (`adp_balance_timeout_steps` > 0) s = ρ = 0.0078125 and
    P/s = 8,192 (a chunk on each group, k = 8); without it s = 1 − (1 − ρ)⁸ = 0.0608174594 and
    P/s = 64/0.0608174594 = 1,052.329392 tokens: k = 1052.329392/1024 = 1.0276654219 chunks on
    average, so B mixes the step of one chunk (1,024 tokens) and of two (2,048), the latter in
    a share k − 1 = 0.0276654219 of the prompt steps (steps hold whole chunks)."""
    qwen = load_model("Qwen3-30B-A3B")
    dep = Deployment(tp=1, dp=8, ep=8, precision="fp8")
    a, d = ArchArrays.from_architectures([qwen]), DeployArrays.from_deployments([dep])
    env = Env.for_deployments(H200, [dep])  # a generic engine, as the workloads below
    decode = _case_step(a, d, env, 8.0, 0.0, 64.0)
    balanced = _case_step(a, d, env, 8.0, 1024.0, 64.0 + 8192.0)
    one_chunk = _case_step(a, d, env, 8.0, 1024.0, 64.0 + 1024.0)
    two_chunks = _case_step(a, d, env, 8.0, 1024.0, 64.0 + 2048.0)
    alone = one_chunk + 0.0276654219 * (two_chunks - one_chunk)
    on = _points(qwen, dep, workload=Workload(adp_balance_timeout_steps=60), concurrency=[64.0])
    off = _points(qwen, dep, workload=Workload(), concurrency=[64.0])
    assert on.tpot_s[0, 0] == pytest.approx(decode + 0.0078125 * (balanced - decode), rel=1e-6)
    assert off.tpot_s[0, 0] == pytest.approx(
        decode + 0.0608174594 * (alone - decode), rel=1e-6)


def test_dense_dp_groups_are_replicas_by_hand(load_model):
    """Llama-3.1-8B over 8 DP groups shares no layer between them: each group is a replica
    stepping alone. At c = 64 every group holds 8: the same TPOT, TTFT and tokens/s/GPU as one
    replica (dp 1) at c = 8 (the 32k/1k case of issue 24: 146 → 504 tokens/s/GPU). At c = 9 one
    group holds 2 and seven hold 1: TPOT is the mean over requests, (2·T(2) + 7·T(1))/9, and
    tokens/s/GPU the groups' sum, (2/L(2) + 7/L(1)) · OSL / 8 GPUs, L(n) = max(TTFT +
    (OSL − 1)·TPOT, OSL · TPOT) of a replica at n."""
    llama = load_model("Llama-3.1-8B")
    work = Workload(isl_tokens=32_768, osl_tokens=1024)
    eight = _points(llama, Deployment(tp=1, dp=8), workload=work, concurrency=[64.0, 9.0])
    one = _points(llama, Deployment(tp=1), workload=work, concurrency=[8.0, 1.0, 2.0])
    for field in ("tpot_s", "ttft_s", "benchmark_ttft_s", "tokens_per_s_per_gpu"):
        assert getattr(eight, field)[0, 0] == pytest.approx(getattr(one, field)[0, 0], rel=1e-6)
    t1, t2 = one.tpot_s[0, 1], one.tpot_s[0, 2]
    assert eight.tpot_s[0, 1] == pytest.approx((2 * t2 + 7 * t1) / 9, rel=1e-6)
    life = lambda j: max(one.ttft_s[0, j] + 1023 * one.tpot_s[0, j],  # noqa: E731
                         1024 * one.tpot_s[0, j])
    assert eight.tokens_per_s_per_gpu[0, 1] == pytest.approx(
        (2 / life(2) + 7 / life(1)) * 1024 / 8, rel=1e-6)


def test_pipeline_send_crosses_the_scale_out_network_between_domains(load_model):
    """Llama-3.1-70B (H 8,192) at TP 8, PP 2 on H100 (HGX: 8-GPU NVLink domains): the 16 GPUs
    span two domains, so the stage-to-stage send of 64 tokens · 8192 · 2 bytes = 1,048,576 bytes
    goes over each GPU's NIC: scale-out latency + bytes / (scale-out bandwidth × its achieved
    fraction); at TP 4, PP 2 (8 GPUs, one domain) over NVLink: scale-up latency + bytes /
    (scale-up bandwidth × its fraction). With no layer on the stage the send is all the
    communication there is."""
    from cost_model.step import stage_communication_s, stages_span_domains

    h100 = get_hardware("h100-sxm")
    arch = load_architecture(HF_CONFIGS / "Llama-3.1-70B.json")
    a = ArchArrays.from_architectures([arch, arch])
    d = DeployArrays.from_deployments([Deployment(tp=8, pp=2), Deployment(tp=4, pp=2)])
    assert list(stages_span_domains(d, h100)[:, 0]) == [True, False]
    env = Env.create(h100, "fp8", "fp8")
    got = stage_communication_s(a, d, env, StepLoad.single_group(np.full((2, 1), 64.0)), 0.0, 0.0,
                           0.0)[:, 0]
    eff, message = env.eff, 64 * 8192 * 2.0
    out = h100.scale_out_latency_s + message / (h100.scale_out_bytes_per_s
                                                * eff.scale_out_bandwidth_frac)
    inside = h100.scale_up_latency_s + message / (h100.scale_up_bytes_per_s
                                                  * eff.scale_up_bandwidth_frac)
    assert list(got) == pytest.approx([out, inside], rel=1e-9)
    assert out > inside


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


def test_stage_gemm_time_runs_the_layers_shapes_by_hand(load_model):
    """Llama-3.1-8B (H 4,096, 32 q / 8 KV heads of 128, FFN 14,336 gated, vocab 128,256) at
    TP 2, PP 2, FP8: a 64-token decode step of the busiest stage runs ⌈32/2⌉ = 16 layers of
    - qkv: per GPU 32/2 = 16 query heads and ⌈8/2⌉ = 4 key and 4 value heads, N = 24 · 128 =
      3,072, K = 4,096;
    - o_proj: N = 4,096, K = 4,096/2 = 2,048;
    - gate + up fused: N = 2 · 14,336/2 = 14,336, K = 4,096; down: N = 4,096, K = 7,168;
    each with M = 64 in FP8, and the LM head once (BF16 weights, vocabulary over TP): M = 64
    logit tokens, N = 128,256/2 = 64,128, K = 4,096. Each GEMM's time is the GEMM model's
    (`gemm.gemm_time_s`, in the step's float32); the step's GEMM time is their sum."""
    a = ArchArrays.from_architectures([load_model("Llama-3.1-8B")])
    d = DeployArrays.from_deployments([Deployment(tp=2, pp=2, precision="fp8")])
    env = Env.create(H200, "fp8", "fp8")

    def t(n, k, rates):
        return float(gemm_time_s(64.0, n, k, 1.0, H200, rates, HOT_DTYPE))

    per_layer = sum(t(n, k, env.linear_rates)
                    for n, k in ((3072, 4096), (4096, 2048), (14_336, 4096), (4096, 7168)))
    expected = 16 * per_layer + t(64_128, 4096, env.high_rates)
    got = stage_forward_load(a, d, env, StepLoad.single_group(64.0), 2048.0, 0.0).gemm_s
    assert float(np.ravel(got)[0]) == pytest.approx(expected, rel=1e-6)
