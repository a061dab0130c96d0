"""cost_model/layers.py: the step model's GEMMs, built from the table of sharded weight GEMMs."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model import step
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import ENGINES, Deployment, Workload
from cost_model.efficiency import Efficiency, get_efficiency
from cost_model.evaluate import evaluate_points
from cost_model.gemm import GemmRates, gemm_time_s
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.layers import GemmList, attention_gemms, layer_gemms, moe_overhead_s
from cost_model.precision import get_precision
from cost_model.step_load import StepLoad
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json")) + sorted(MODEL_CONFIGS.glob("*.json"))


def _setup(path):
    arch = load_architecture(path)
    dep = Deployment(tp=4, dp=2, ep=8) if arch.ffn.is_moe else Deployment(tp=2)
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    load = StepLoad.of(d, np.array([[1.0, 64.0]]), np.array([[0.0, 2048.0]]))
    return a, d, load, Env.create(get_hardware("h200"), "fp8", "fp8")


def test_kda_runs_its_gate_up_projections():
    """Kimi Linear's KDA layers run f_b / g_b (d_v → n_v·d_v each, `linear_attention/gate_up`):
    the synthetic config's 6 KDA layers of 4 heads of 32 at TP 4 (the MoE deployment of
    `_setup`) give the fused pair N = 2·4·32/4 = 64, K = 32, on 6 layers."""
    a, d, load, _ = _setup(HF_CONFIGS / "synthetic-kimi-linear-checkpoint-form.json")
    g = GemmList((1, 2))
    attention, linear = step.stage_attention_layers(a, a.layers)
    layer_gemms(g, a, d, load, attention, linear, a.ffn.dense_layers, a.ffn.moe_layers)
    _, n, k, _, count = g.dims[g.names.index("linear_attention/gate_up")]
    assert (float(np.max(n)), float(np.max(k)), float(np.max(count))) == (64.0, 32.0, 6.0)


def test_mla_kv_b_runs_absorbed_in_decode_by_hand():
    """DeepSeek-V3 (128 heads, nope 128, v 128, kv_lora 512) at TP 8 (16 heads per GPU):
    prefill kv_b N = 16·(128 + 128) = 4096, K = 512; decode absorb_k = 16 GEMMs of N = 512
    (the latent), K = 128 (the query's nope part); absorb_v = 16 of N = 128, K = 512."""
    arch = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([Deployment(tp=8)])
    g = GemmList((1, 1))
    attention_gemms(g, a, d, StepLoad.single_group(np.full((1, 1), 8.0), decode_seqs=4.0), 1.0)
    dims = {name: tuple(float(np.asarray(x).reshape(-1)[0]) for x in dim[1:4])
            for name, dim in zip(g.names, g.dims)}
    assert dims["attention/kv_b"] == (4096.0, 512.0, 1.0)
    assert dims["attention/absorb_k"] == (512.0, 128.0, 16.0)
    assert dims["attention/absorb_v"] == (128.0, 512.0, 16.0)


def test_busiest_expert_parallel_gpu_touches_more_experts_by_hand():
    """DeepSeek-V3 (E = 256, k = 8), 16 tokens: p = 1 − (1 − 8/256)^16 = 1 − 0.96875^16
    = 1 − e^(16·ln 0.96875) = 1 − e^(−0.507979) = 0.398290. EP 8: n = 32 experts per GPU,
    mean n·p = 12.74527, spread √(n·p·(1 − p)) = √(12.74527 · 0.601710) = √7.668960 = 2.769289;
    z_8 = Φ⁻¹(7.625/8.25) = Φ⁻¹(0.924242) = 1.434200, so the busiest GPU reads
    12.74527 + 1.434200 · 2.769289 = 16.71698 experts. EP 1: the mean, 256·p = 101.9622. At
    10,000 tokens p = 1 and both are every local expert (32, 256)."""
    from cost_model.layers import busiest_rank_touched_experts, touched_expert_frac

    p = touched_expert_frac(16.0, 8.0, 256.0)
    assert p == pytest.approx(0.398290, rel=1e-5)
    busiest = busiest_rank_touched_experts(np.array([p, p]), 256.0, np.array([8.0, 1.0]))
    assert busiest == pytest.approx([16.71698, 101.9622], rel=1e-5)
    full = touched_expert_frac(10_000.0, 8.0, 256.0)
    assert busiest_rank_touched_experts(np.array([full, full]), 256.0, np.array([8.0, 1.0])) \
        == pytest.approx([32.0, 256.0])


def test_expert_parallel_step_reads_the_busiest_gpus_experts(load_model):
    """The routed experts' grouped GEMMs of a step run busiest_rank_touched_experts groups:
    DeepSeek-V3 at 16 decode tokens, EP 8 (attention DP 8): 16.71698 groups (the hand value of
    the test above), each of M = 16·8/256 / p = 0.5/0.398290 = 1.255368 tokens · (1 + δ 0.1)
    = 1.380904."""
    arch = load_model("DeepSeek-V3")
    a = ArchArrays.from_architectures([arch])
    d = DeployArrays.from_deployments([Deployment(tp=1, dp=8, ep=8, moe_imbalance_frac=0.1)])
    gemms = GemmList((1, 1))
    layer_gemms(gemms, a, d, StepLoad.of(d, np.array([[16.0]]), np.array([[0.0]])), 0.0, 0.0,
                0.0, 1.0)
    m, _, _, groups, _ = gemms.dims[gemms.names.index("moe/experts_up")]
    assert float(np.ravel(groups)[0]) == pytest.approx(16.71698, rel=1e-5)
    assert float(np.ravel(m)[0]) == pytest.approx(1.380904, rel=1e-5)


MOE_CONFIGS = [p for p in CONFIGS if load_architecture(p).ffn.is_moe]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(MOE_CONFIGS), st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       st.floats(0.0, 1e5), st.floats(0.0, 1e5))
def test_busiest_gpu_experts_bounded_and_monotone(path, ep, t1, t2):
    """Every MoE config of tests/data, any EP that divides its experts: the busiest GPU reads at
    least the mean and at most its E/EP experts, exactly the mean at EP = 1, and never fewer
    experts for more tokens."""
    from cost_model.layers import busiest_rank_touched_experts, touched_expert_frac

    arch = load_architecture(path)
    experts, k = float(arch.ffn.num_experts), float(arch.ffn.experts_per_token)
    if arch.ffn.num_experts % ep:
        return
    lo, hi = sorted((t1, t2))
    p_lo, p_hi = (touched_expert_frac(t, k, experts) for t in (lo, hi))
    busiest_lo, busiest_hi = (busiest_rank_touched_experts(p, experts, float(ep))
                              for p in (p_lo, p_hi))
    mean = experts / ep * p_lo
    assert mean * (1 - 1e-12) <= busiest_lo <= experts / ep * (1 + 1e-12)
    assert busiest_lo <= busiest_hi * (1 + 1e-12)
    if ep == 1:
        assert busiest_lo == pytest.approx(mean)


# ---- the fused MoE, per format and engine ------------------------------------------------------

def _moe_efficiency(**formats) -> Efficiency:
    """H200's TensorRT-LLM file with `[moe.<format>]` set to (fixed, per local copy, per scanned
    copy) µs: every other term of the file kept."""
    eff = get_efficiency("h200", "trtllm")
    moe = {fmt: eff.moe["bf16"].model_copy(update={
        "fixed_overhead_s": fixed * 1e-6, "per_local_copy_s": local * 1e-6,
        "per_scanned_copy_s": scanned * 1e-6}) for fmt, (fixed, local, scanned) in formats.items()}
    return eff.model_copy(update={"moe": moe, "moe_ep1": {}})


def test_fused_moe_overhead_by_hand_per_format(load_model):
    """DeepSeek-V3 (H = 7,168, k = 8) at 64 tokens, EP 1: 64 · 8 = 512 local copies and 512
    scanned indices. FP8 experts at (20 µs, 0.02 µs per copy of 4,096 elements, 0.001 µs per
    index): 20 + 512 · 0.02 · 7168/4096 + 512 · 0.001 = 20 + 17.92 + 0.512 = 38.432 µs; NVFP4
    experts at (10, 0.01, 0.002): 10 + 8.96 + 1.024 = 19.984 µs; at EP 8 (DP 8, all 64 tokens
    gathered) 64 local copies: FP8 20 + 2.24 + 0.512 = 22.752 µs. A batch mixing the two
    formats gives each candidate its own; Llama-3.1-8B (dense) 0."""
    ds, llama = load_model("DeepSeek-V3"), load_model("Llama-3.1-8B")
    eff = _moe_efficiency(fp8=(20.0, 0.02, 0.001), nvfp4=(10.0, 0.01, 0.002),
                          bf16=(99.0, 0.0, 0.0))
    a = ArchArrays.from_architectures([ds, ds, llama])
    deps = [Deployment(precision="fp8"), Deployment(precision="fp8", moe_precision="nvfp4"),
            Deployment(precision="fp8")]
    d = DeployArrays.from_deployments(deps)
    env = replace(Env.for_deployments(get_hardware("b200"), deps), eff=eff)
    overhead_us = moe_overhead_s(a, d, env, np.array([[64.0]]))[:, 0] * 1e6
    assert overhead_us == pytest.approx([38.432, 19.984, 0.0], rel=1e-9)
    d8 = DeployArrays.from_deployments([Deployment(tp=1, dp=8, ep=8, precision="fp8")])
    env8 = replace(Env.create(get_hardware("h200"), "fp8", "fp8"), eff=eff)
    assert moe_overhead_s(a.take([0]), d8, env8, 64.0)[0, 0] * 1e6 == pytest.approx(22.752)


def test_an_ep1_deployment_runs_the_ep1_entry_and_ep_above_1_the_joint_one(load_model):
    """DeepSeek-V3 (H = 7,168, k = 8) at 64 tokens, FP8 experts: joint `[moe.fp8]` at (20 µs,
    0.02 µs per copy of 4,096 elements, 0.001 µs per index), `[moe.fp8.ep1]` at (6, 0.01, 0).
    One batch of two deployments: EP 1 (TP 1) runs the EP = 1 entry: 512 local copies,
    6 + 512 · 0.01 · 7168/4096 + 0 = 6 + 8.96 = 14.96 µs; EP 8 (attention DP 8) the joint one:
    64 local copies, 20 + 64 · 0.02 · 7168/4096 + 512 · 0.001 = 20 + 2.24 + 0.512 = 22.752 µs.
    Without the EP = 1 entry the EP 1 deployment runs the joint one: 20 + 17.92 + 0.512 =
    38.432 µs."""
    ds = load_model("DeepSeek-V3")
    joint = _moe_efficiency(fp8=(20.0, 0.02, 0.001))
    ep1 = _moe_efficiency(fp8=(6.0, 0.01, 0.0)).moe["fp8"]
    both = joint.model_copy(update={"moe_ep1": {"fp8": ep1}})
    deps = [Deployment(precision="fp8"), Deployment(tp=1, dp=8, ep=8, precision="fp8")]
    a, d = ArchArrays.from_architectures([ds, ds]), DeployArrays.from_deployments(deps)
    env = Env.for_deployments(get_hardware("h200"), deps)
    for eff, expected_us in ((both, [14.96, 22.752]), (joint, [38.432, 22.752])):
        overhead = moe_overhead_s(a, d, replace(env, eff=eff), np.array([[64.0]]))
        assert overhead[:, 0] * 1e6 == pytest.approx(expected_us, rel=1e-9)


def test_an_ep1_deployments_expert_gemms_stream_at_the_ep1_entrys_ceiling():
    """The grouped expert GEMM of test_grouped_expert_gemms_stream_at_the_fused_kernels_ceiling
    (8 BF16 experts, M = 1, N = 4,096, K = 7,168: 469,942,272 bytes, every other term neutral)
    for two deployments in one list: EP 1 at the `[moe.bf16.ep1]` HBM ceiling 0.25:
    469,942,272 / (4.8e12 · 0.25) = 391.619 µs; EP 8 at the joint entry's 0.5: 195.809 µs."""
    eff = _neutral_bf16_experts(moe_bandwidth_frac=0.5)
    ep1 = eff.moe["bf16"].model_copy(update={"bandwidth_ceiling_frac": 0.25})
    eff = eff.model_copy(update={"moe_ep1": {"bf16": ep1}})
    env = replace(Env.create(get_hardware("h200"), "bf16", "bf16"), eff=eff)
    g = GemmList(shape=(2, 1), expert_ep=np.array([[1.0], [8.0]]))
    g.add("moe/experts_up", 1.0, 4096.0, 7168.0, 1.0, groups=8.0, moe=True)
    times_us = np.ravel(g.times_s(env, np.float64)["moe/experts_up"]) * 1e6
    assert times_us == pytest.approx([391.619, 195.809], rel=1e-5)


@pytest.mark.parametrize("ep", [1, 8])
def test_a_stage_runs_the_ep1_entry_exactly_at_ep1(load_model, ep):
    """A DeepSeek-V3 step on B200's TensorRT-LLM NVFP4 file (joint J, `ep1` E): at EP 1 it
    costs what the file with E as its only entry costs (grouped GEMMs and overhead), at EP 8
    what J alone costs; the two entries price the step differently."""
    from cost_model.step import stage_forward

    a = ArchArrays.from_architectures([load_model("DeepSeek-V3")])
    d = DeployArrays.from_deployments([Deployment(tp=8 // ep, dp=ep, ep=ep, precision="nvfp4")])
    eff = get_efficiency("b200", "trtllm")
    env = Env.create(get_hardware("b200"), "nvfp4", "fp8", engine="trtllm")

    def step_s(e):
        return float(np.ravel(stage_forward(a, d, replace(env, eff=e), 64.0, 1024.0, 0.0,
                                            512.0).total_s)[0])

    alone = {name: step_s(eff.model_copy(update={"moe": {"nvfp4": entry}, "moe_ep1": {}}))
             for name, entry in (("joint", eff.moe["nvfp4"]), ("ep1", eff.moe_ep1["nvfp4"]))}
    assert step_s(eff) == alone["ep1" if ep == 1 else "joint"]
    assert alone["ep1"] != pytest.approx(alone["joint"], rel=1e-3)


def test_a_stage_pays_the_fused_moe_once_per_moe_layer(load_model):
    """`step.stage_other_s` adds moe_layers · `moe_overhead_s`: DeepSeek-V3 has 58 MoE layers of 61;
    at PP 2 the busiest stage holds ⌈61/2⌉ = 31 layers, 31 · 58/61 = 29.4754 of them MoE. With
    FP8 experts at (20, 0.02, 0.001) a 64-token step's layer costs 38.432 µs (above): 58 ·
    38.432 = 2,229.056 µs at PP 1, 29.4754 · 38.432 = 1,132.80 µs at PP 2."""
    from cost_model.step import stage_forward

    a = ArchArrays.from_architectures([load_model("DeepSeek-V3")])
    none = _moe_efficiency(fp8=(0.0, 0.0, 0.0))
    some = _moe_efficiency(fp8=(20.0, 0.02, 0.001))
    for pp, expected_us in ((1, 2229.056), (2, 1132.80)):
        d = DeployArrays.from_deployments([Deployment(pp=pp, precision="fp8")])
        env = Env.create(get_hardware("h200"), "fp8", "fp8")
        added = (stage_forward(a, d, replace(env, eff=some), 64.0, 1024.0, 0.0, 512.0).other_s
                 - stage_forward(a, d, replace(env, eff=none), 64.0, 1024.0, 0.0, 512.0).other_s)
        assert float(np.ravel(added)[0]) * 1e6 == pytest.approx(expected_us, rel=1e-5)


def test_under_attention_dp_the_fused_moe_sees_every_groups_tokens(load_model):
    """DeepSeek-V3 (H = 7,168, k = 8, 58 MoE layers of 61) at attention DP 8 / EP 8 with 64
    decoding sequences (8 per group): the all-gather hands each GPU's fused MoE all 64 tokens, so
    with FP8 experts at (20, 0.02, 0.001) a layer costs 22.752 µs (above: 64 local copies, 512
    scanned indices), and the step's 58 layers 58 · 22.752 = 1,319.616 µs; on the busiest group's
    8 tokens alone it would be 58 · (20 + 8 · 0.02 · 7168/4096 + 64 · 0.001) = 1,179.952 µs."""
    from cost_model.step import stage_forward

    a = ArchArrays.from_architectures([load_model("DeepSeek-V3")])
    d = DeployArrays.from_deployments([Deployment(tp=1, dp=8, ep=8, precision="fp8")])
    env = Env.create(get_hardware("h200"), "fp8", "fp8")
    none = _moe_efficiency(fp8=(0.0, 0.0, 0.0))
    some = _moe_efficiency(fp8=(20.0, 0.02, 0.001))
    added = (stage_forward(a, d, replace(env, eff=some), 64.0, 1024.0, 0.0, 512.0).other_s
             - stage_forward(a, d, replace(env, eff=none), 64.0, 1024.0, 0.0, 512.0).other_s)
    assert float(np.ravel(added)[0]) * 1e6 == pytest.approx(1319.616, rel=1e-5)


def _neutral_bf16_experts(moe_bandwidth_frac: float):
    """H200's TensorRT-LLM file with the BF16 GEMM entry neutral (compute and per-SM stream
    rates unbounded, no overheads, full overlap) and the BF16 fused-MoE entry at HBM ceiling
    `moe_bandwidth_frac` with unbounded compute and per-SM rates."""
    eff = get_efficiency("h200", "trtllm")
    neutral = eff.gemm["bf16"].model_copy(update=dict(
        compute_ceiling_frac=1.0, bandwidth_ceiling_frac=1.0, fixed_overhead_s=0.0,
        n_half_dim=0.0, k_half_dim=0.0, overlap_frac=1.0, split_k_overhead_s=1.0,
        sm_bandwidth_bytes_per_s=1e18))
    moe = eff.moe["bf16"].model_copy(update=dict(
        compute_ceiling_frac=1.0, bandwidth_ceiling_frac=moe_bandwidth_frac,
        sm_bandwidth_bytes_per_s=1e18))
    return eff.model_copy(update={"gemm": {"bf16": neutral}, "moe": {"bf16": moe}})


def test_grouped_expert_gemms_stream_at_the_fused_kernels_ceiling():
    """8 BF16 experts of M = 1, N = 4,096, K = 7,168 on H200 with every kernel term neutral
    (compute and per-SM stream rates unbounded, no overheads, full overlap): the launch streams
    8 · (7168 · (1 + 4096) · 2 + 4096 · 2) = 8 · 58,742,784 = 469,942,272 bytes. At the fused
    MoE's HBM ceiling 0.5: 469,942,272 / (4.8e12 · 0.5) = 195.809 µs; the dense entry's (1.0)
    as a grouped dense launch: 97.905 µs."""
    eff = _neutral_bf16_experts(moe_bandwidth_frac=0.5)
    hw, bf16 = get_hardware("h200"), get_precision("bf16")
    experts = GemmRates.for_experts(hw, bf16, eff)
    dense = GemmRates.of(hw, bf16, efficiency=eff)
    assert gemm_time_s(1.0, 4096.0, 7168.0, 8.0, hw, experts) * 1e6 == pytest.approx(195.809,
                                                                                    rel=1e-5)
    assert gemm_time_s(1.0, 4096.0, 7168.0, 8.0, hw, dense) * 1e6 == pytest.approx(97.905,
                                                                                  rel=1e-5)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_prices_its_own_kernels(load_model, engine):
    """The step's engine selects its kernels: Qwen3-30B-A3B's and Llama-3.1-8B's TPOT on H200
    under `engine` are those of an environment built from that engine's file, and differ from
    every other engine's (each engine's tables time other kernels)."""
    qwen, llama = load_model("Qwen3-30B-A3B"), load_model("Llama-3.1-8B")
    dep = Deployment(precision="fp8")
    h200 = get_hardware("h200")

    def tpot(arch, eng):
        return evaluate_points([arch], [dep], h200, Workload(engine=eng),
                               np.array([64.0])).tpot_s[0, 0]

    env = Env.for_deployments(h200, [dep], engine)
    assert env.eff == get_efficiency("h200", engine)
    for other in (e for e in ENGINES if e != engine):
        for arch in (qwen, llama):
            assert tpot(arch, engine) != tpot(arch, other), (arch.name, other)
