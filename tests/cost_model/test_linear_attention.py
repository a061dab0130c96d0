"""Linear-attention time in the step breakdown (a share of attention, zero without linear
layers) and the `uncalibrated` flag of roofline-costed mixers."""

import numpy as np
import pytest

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.linear_attention import linear_decode_s, uncalibrated_components

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

H200 = get_hardware("h200")
QWEN35 = load_architecture(HF_CONFIGS / "Qwen3.5-35B-A3B.json")
NANO = load_architecture(HF_CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")
DENSE = load_architecture(MODEL_CONFIGS / "Qwen3-30B-A3B.json")
WORKLOAD = Workload(isl_tokens=8192, osl_tokens=16384)


def _points(archs):
    deps = [Deployment(precision="fp8")] * len(archs)
    return evaluate_points(archs, deps, H200, WORKLOAD, np.array([1.0, 64.0]))


def test_linear_share_is_part_of_attention_and_zero_without_linear_layers():
    points = _points([NANO, QWEN35, DENSE])
    linear, attention = points.linear_attention_s, points.attention_s
    assert np.all(linear[:2] > 0) and np.all(linear[:2] < attention[:2])
    assert np.all(linear[2] == 0)
    parts = points.gemm_s + attention + points.communication_s + points.other_s
    assert np.allclose(parts, points.tpot_s)


def test_nemotron_nano_state_update_golden():
    """One Mamba-2 layer of Nemotron-3-Nano decoding 64 sequences on one H200 (TP 1): 64 heads x
    64 x 128 fp32 states = 2,097,152 bytes per sequence, read and written: 2 · 64 · 2,097,152 =
    268,435,456 bytes at 4.8 TB/s x 0.6596 (TensorRT-LLM's decode-attention bandwidth fraction,
    cost_model/data/efficiency/trtllm/h200.toml) = 84.79 µs, plus a 2 µs launch: 86.79 µs. The 3
    MACs per state element (201 MFLOP) take 0.34 µs at 0.5992 of 989.4 TFLOP/s: bandwidth
    bound."""
    a = ArchArrays.from_architectures([NANO])
    d = DeployArrays.from_deployments([Deployment(precision="bf16")])
    env = Env.for_deployments(H200, [Deployment(precision="bf16")], "trtllm")
    got = float(np.ravel(linear_decode_s(a, d, env, 64.0))[0])
    assert got == pytest.approx(268_435_456 / (4.8e12 * 0.6596) + 2e-6, rel=1e-9)


@pytest.mark.parametrize(
    ("arch", "flags"),
    [(NANO, ("linear_attention",)), (QWEN35, ("linear_attention",)), (DENSE, ())],
    ids=["mamba2", "gated-deltanet", "full-attention"],
)
def test_roofline_costed_mixers_are_flagged_uncalibrated(arch, flags):
    assert uncalibrated_components(arch) == flags


def test_sparse_attention_is_flagged_too():
    assert uncalibrated_components(load_architecture(HF_CONFIGS / "DeepSeek-V3.2.json")) == (
        "sparse_attention",)
