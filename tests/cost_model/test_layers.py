"""cost_model/layers.py: the step model's GEMMs, built from the table of sharded weight GEMMs."""

import numpy as np
import pytest

from cost_model import step
from cost_model.attention import indexer_gemms
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment
from cost_model.hardware import get_hardware
from cost_model.hf_config import load_architecture
from cost_model.layers import (
    ADDED_BY_STEP, GemmList, attention_gemms, ffn_gemms, layer_gemms, lm_head_gemm,
)
from cost_model.linear_attention import linear_gemms
from cost_model.step_load import StepLoad
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json")) + sorted(MODEL_CONFIGS.glob("*.json"))
KDA_ONLY = {"linear_attention/gate_up"}  # KDA's f_b / g_b: the step model does not run them yet


def _setup(path):
    arch = load_architecture(path)
    dep = Deployment(tp=4, dp=2, ep=8) if arch.is_moe else Deployment(tp=2)
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    load = StepLoad.of(d, np.array([[1.0, 64.0]]), np.array([[0.0, 2048.0]]))
    return a, d, load, Env.create(get_hardware("h200"), "fp8", "fp8")


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_layer_gemms_time_what_the_step_model_adds_piecewise(path):
    """`step.stage_forward_load` adds attention_gemms, ffn_gemms, lm_head_gemm and, through
    their own modules, the output gate, DSA indexer and linear-mixer GEMMs (`ADDED_BY_STEP`);
    `layer_gemms` adds the same GEMMs in one call, each with the same time (tolerance 1e-12),
    plus KDA's gate up-projections."""
    a, d, load, env = _setup(path)
    attention, linear = step.stage_attention_layers(a, a.layers)
    piecewise = GemmList((1, 2))
    attention_gemms(piecewise, a, d, load, attention)
    ffn_gemms(piecewise, a, d, load, a.dense_layers, a.moe_layers)
    lm_head_gemm(piecewise, a, d, load)
    indexer_gemms(piecewise, a, load, attention)
    step._output_gate_gemm(piecewise, a, d, load, attention)
    linear_gemms(piecewise, a, d, load, linear)
    whole = GemmList((1, 2))
    layer_gemms(whole, a, d, load, attention, linear, a.dense_layers, a.moe_layers)
    old, new = piecewise.times_s(env), whole.times_s(env)
    assert set(new) - set(old) <= KDA_ONLY and set(old) <= set(new)
    assert ADDED_BY_STEP <= set(new)
    for name in old:
        np.testing.assert_allclose(new[name], old[name], rtol=1e-12, err_msg=name)


def test_attention_gemms_leave_out_what_step_adds_itself():
    a, d, load, _ = _setup(HF_CONFIGS / "Qwen3.5-35B-A3B.json")
    g = GemmList((1, 2))
    attention_gemms(g, a, d, load, a.layers)
    assert not set(g.names) & ADDED_BY_STEP


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
