"""cost_model/layers.py: the step model's GEMMs, built from the table of sharded weight GEMMs."""

from dataclasses import replace

import numpy as np
import pytest

from cost_model import step
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment
from cost_model.hardware import get_hardware
from cost_model.hf_config import load_architecture
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


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_step_gemm_time_is_the_table_kernels(path):
    """`step.stage_forward_load` runs exactly `layer_gemms` (every kernel of the table) on the
    stage's layers of each kind: its GEMM time is their sum (tolerance 1e-12), for a decode
    step and a step carrying a 2,048-token prefill chunk, on a PP-2 stage."""
    a, d, load, env = _setup(path)
    d = replace(d, pp=np.full_like(d.pp, 2.0))
    layers = np.ceil(a.layers / 2.0)
    attention, linear = step.stage_attention_layers(a, layers)
    share = layers / a.layers
    whole = GemmList((1, 2))
    layer_gemms(whole, a, d, load, attention, linear, a.dense_layers * share,
                a.moe_layers * share)
    expected = sum(whole.times_s(env).values())
    got = step.stage_forward_load(a, d, env, load, 4096.0, 1024.0).gemm_s
    np.testing.assert_allclose(got, expected, rtol=1e-12)


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
