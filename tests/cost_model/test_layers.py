"""cost_model/layers.py: the step model's GEMMs, built from the table of sharded weight GEMMs."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model import step
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.layers import GemmList, attention_gemms, layer_gemms
from cost_model.step_load import StepLoad
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json")) + sorted(MODEL_CONFIGS.glob("*.json"))


def _setup(path):
    arch = load_architecture(path)
    dep = Deployment(tp=4, dp=2, ep=8) if arch.is_moe else Deployment(tp=2)
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
    layer_gemms(g, a, d, load, attention, linear, a.dense_layers, a.moe_layers)
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


MOE_CONFIGS = [p for p in CONFIGS if load_architecture(p).is_moe]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(MOE_CONFIGS), st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       st.floats(0.0, 1e5), st.floats(0.0, 1e5))
def test_busiest_gpu_experts_bounded_and_monotone(path, ep, t1, t2):
    """Every MoE config of tests/data, any EP that divides its experts: the busiest GPU reads at
    least the mean and at most its E/EP experts, exactly the mean at EP = 1, and never fewer
    experts for more tokens."""
    from cost_model.layers import busiest_rank_touched_experts, touched_expert_frac

    arch = load_architecture(path)
    experts, k = float(arch.num_experts), float(arch.experts_per_token)
    if arch.num_experts % ep:
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
