"""The table of sharded weight GEMMs and its four consumers: step GEMMs, weight memory, exact
parameter counts, alignment dims (constraints)."""

import re
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constraints import gemm_dims
from cost_model.architecture import Architecture, field_value, make_architecture
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.layers import GemmList, layer_gemms
from cost_model.memory import weight_bytes_per_gpu
from cost_model.params import count_params
from cost_model.sharded_gemms import (
    ROWS, ArchColumns, is_kind, kernels, layer_count, per_gpu_count, per_gpu_k,
    per_gpu_n, rows_of,
)
from cost_model.step_load import StepLoad
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json")) + sorted(MODEL_CONFIGS.glob("*.json"))
IDS = [path.stem for path in CONFIGS]
KINDS = ("gqa", "mla", "gated_deltanet", "mamba2", "kimi_delta")
# what memory leaves out of the weights: parameters that are not weight GEMMs
NON_GEMM_KEYS = ("norm", "attention/norm", "attention/sinks", "linear_attention/conv",
                 "linear_attention/other")
LLAMA_8B = make_architecture(name="llama-3.1-8b", vocab_size=128256, hidden_size=4096,
                             num_layers=32, num_attention_heads=32, num_kv_heads=8, head_dim=128,
                             max_position_embeddings=131072, intermediate_size=14336)


def _arrays(arch: Architecture, dep: Deployment):
    return ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])


def _deployments(arch: Architecture) -> list[Deployment]:
    if arch.ffn.is_moe:
        return [Deployment(), Deployment(tp=4, dp=2, ep=8)]
    return [Deployment(), Deployment(tp=2, pp=2)]


def _bias_params(arch: Architecture) -> int:
    """Every bias, from the config's flags (transformers' modules; independent of the table)."""
    a, attention = arch, arch.num_attention_layers
    if a.attention.attention_kind == "mla":
        qkv = a.attention.q_lora_rank + a.attention.kv_lora_rank + a.attention.qk_rope_head_dim
    else:
        att = a.attention
        qkv = att.q_dim * (2 if att.attention_output_gate else 1) \
            + 2 * att.num_kv_heads * att.head_dim
    mlp = lambda width: ((2 if a.ffn.gated_mlp else 1) * width + a.hidden_size) if width else 0  # noqa
    assert not (a.ffn.mlp_bias and a.ffn.layer_ffn_widths)  # no family has both
    return (attention * (a.attention.qkv_bias * qkv + a.attention.o_bias * a.hidden_size)
            + a.ffn.mlp_bias * (a.num_dense_layers * mlp(a.ffn.intermediate_size)
                            + a.num_moe_layers * mlp(a.ffn.shared_expert_intermediate_size))
            + a.num_moe_layers * a.ffn.num_experts * (a.ffn.router_bias + a.ffn.expert_bias
                                                  * mlp(a.ffn.moe_intermediate_size)))


def _left_out_params(arch: Architecture) -> int:
    """Parameters weight memory does not store: norms, sinks, convs, per-head state parameters,
    biases and Gemma 4's router scales (H + E per MoE layer)."""
    counts = count_params(arch)
    scales = (arch.ffn.router_scales * arch.num_moe_layers
              * (arch.hidden_size + arch.ffn.num_experts))
    return sum(counts[key] for key in NON_GEMM_KEYS) + _bias_params(arch) + scales


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_weight_bytes_at_tp1_are_the_exact_count_less_what_memory_leaves_out(path):
    arch = load_architecture(path)
    a, d = _arrays(arch, Deployment())
    env = Env.create(get_hardware("h200"), "bf16", "bf16")
    weights = float(weight_bytes_per_gpu(a, d, env)[0, 0])
    total, left_out = count_params(arch).total_params, _left_out_params(arch)
    # transformers' exact count (test_params.py) less the non-GEMM parameters, 2 bytes each;
    # tolerance 0
    assert weights == 2 * (total - left_out)
    # what memory leaves out is < 0.04% of every real model (synthetic test configs are tiny:
    # < 0.5%); measured: gpt-oss-120b 0.035% (biases, sinks), Qwen3.5-27B 0.010%
    assert left_out / total < (5e-3 if path.stem.startswith("synthetic") else 4e-4)


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_weight_bytes_per_precision_class(path):
    """fp8 attention / dense / mixers (1 byte), nvfp4 experts (4.5 bits), BF16 embedding, LM
    head, router and indexer weights_proj."""
    arch = load_architecture(path)
    a, d = _arrays(arch, Deployment())
    env = Env.create(get_hardware("b200"), "fp8", "fp8", moe_precision="nvfp4")
    experts = arch.num_moe_layers * arch.ffn.num_experts * (3 if arch.ffn.gated_mlp else 2) * \
        arch.hidden_size * arch.ffn.moe_intermediate_size
    high = arch.vocab_size * arch.hidden_size * (1 if arch.tie_word_embeddings else 2) + \
        arch.hidden_size * (arch.num_moe_layers * arch.ffn.num_experts
                            + arch.num_attention_layers * arch.attention.index_heads)
    linear = count_params(arch).total_params - _left_out_params(arch) - experts - high
    expected = linear * 1.0 + experts * 4.5 / 8 + high * 2.0
    assert float(weight_bytes_per_gpu(a, d, env)[0, 0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_table_rows_are_the_exact_parameter_count(path):
    """Σ rows N·K (E per layer for experts) over the layers of their kind + embedding + the
    non-GEMM parameters = count_params (= transformers, test_params.py)."""
    arch = load_architecture(path)
    weights = 0
    for row in rows_of(arch):
        if row.tied and field_value(arch, row.tied):
            continue
        copies = arch.ffn.num_experts if row.experts else 1
        widths = [w for w in arch.ffn.layer_ffn_widths or () if w] if row.layers == "dense" else ()
        if widths:
            weights += sum(row.n.value(_width(arch, w)) * row.k.value(_width(arch, w))
                           for w in widths)
        else:
            layers = layer_count(arch, row.layers)
            weights += row.n.value(arch) * row.k.value(arch) * copies * layers
    embedding = arch.vocab_size * arch.hidden_size
    assert weights + embedding + _left_out_params(arch) == count_params(arch).total_params


def _width(arch: Architecture, width: float) -> Architecture:
    """`arch` whose dense FFN is `width` wide (one of its per-layer widths)."""
    return arch.model_copy(update={"ffn": arch.ffn.model_copy(update={"intermediate_size": width})})


def _step_kernels(arch: Architecture, dep: Deployment) -> dict[str, tuple]:
    """The step model's table GEMMs that run: name → (n, k, count)."""
    a, d = _arrays(arch, dep)
    g = GemmList((1, 1))
    load = StepLoad.single_group(np.full((1, 1), 64.0), decode_seqs=32.0)
    layer_gemms(g, a, d, load, a.attention_layers, a.mixer.linear_layers, a.ffn.dense_layers,
                a.ffn.moe_layers)
    scalar = lambda x: float(np.asarray(x).reshape(-1)[0])  # noqa: E731
    return {name: (scalar(n), scalar(k), scalar(count)) for name, (_, n, k, _, count)
            in zip(g.names, g.dims) if min(scalar(n), scalar(k), scalar(count)) > 0}


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_step_gemms_are_the_table_kernels(path):
    """Names: one step GEMM per kernel of the rows the model has (MLA's kv_b also absorbed in
    decode); N = Σ per-GPU N of its rows, K their K, both from the `Architecture` itself (so
    the vectorized `ArchColumns` view reads the same fields, kinds included)."""
    arch = load_architecture(path)
    rows = rows_of(arch)
    # per-layer FFN widths run at their mean (ArchArrays.ffn.dense_width: exact weights, FLOPs)
    src = _width(arch, arch.mean_dense_ffn_width)
    for dep in _deployments(arch):
        step = _step_kernels(arch, dep)
        expected = {row.kernel for row in rows} | {row.decode_kernel for row in rows
                                                   if row.decode_kernel}
        assert set(step) == expected
        for name, group in kernels(tuple(rows)).items():
            n, k, _ = step[name]
            assert n == pytest.approx(sum(per_gpu_n(row, src, dep) for row in group), rel=1e-12)
            assert k == pytest.approx(per_gpu_k(group[0], src, dep), rel=1e-12)


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_column_view_reads_each_kind(path):
    arch = load_architecture(path)
    view = ArchColumns(ArchArrays.from_architectures([arch]))
    for kind in KINDS:
        assert bool(np.asarray(view.is_kind(kind)).reshape(-1)[0]) == is_kind(arch, kind), kind


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_alignment_dims_are_checked_table_dims(path):
    """Each dim constraints check is the per-GPU N or K of a checked row of the model, and its
    label names only that row's fields."""
    arch = load_architecture(path)
    for dep in _deployments(arch):
        sizes = {}
        for row in rows_of(arch):
            for which in row.checked:
                size = per_gpu_n(row, arch, dep) if which == "n" else per_gpu_k(row, arch, dep)
                sizes.setdefault(float(size), set()).update(row.fields)
        for dim in gemm_dims(arch, dep):
            assert dim.size in sizes, dim.label
            assert set(re.findall(r"`(\w+)`", dim.label)) <= sizes[dim.size], dim.label


def test_llama_8b_shards_by_hand():
    """Llama-3.1-8B (H 4096, 32 q heads and 8 KV heads of 128, H′ 14336, V 128256) at TP 8:
    q N = 32·128/8 = 512; k, v N = ⌈8/8⌉·128 = 128 each, fused qkv N = 768; o K = 512;
    gate + up N = 2·14336/8 = 3584, down K = 1792; LM head N = 128256/8 = 16032. At TP 16 the 8
    KV heads replicate: k, v N = ⌈8/16⌉·128 = 128 each, q N = 256, qkv N = 512."""
    step = _step_kernels(LLAMA_8B, Deployment(tp=8))
    assert step["attention/qkv"][:2] == (768.0, 4096.0)
    assert step["attention/o"][:2] == (4096.0, 512.0)
    assert step["mlp/up"][:2] == (3584.0, 4096.0)
    assert step["mlp/down"][:2] == (4096.0, 1792.0)
    assert step["lm_head"][:2] == (16032.0, 4096.0)
    assert _step_kernels(LLAMA_8B, Deployment(tp=16))["attention/qkv"][:2] == (512.0, 4096.0)


def test_experts_split_over_ep_and_moe_tp_by_hand():
    """8 experts of H′ 14336 at TP 4, DP 2, EP 4: moe_tp = 4·2/4 = 2, so each GPU holds 8/4 = 2
    experts whose gate + up N = 2·14336/2 = 14336 and down K = 7168."""
    moe = LLAMA_8B.with_fields(num_experts=8, experts_per_token=2, moe_intermediate_size=14336)
    dep = Deployment(tp=4, dp=2, ep=4)
    experts = [row for row in ROWS if row.experts]
    assert {per_gpu_count(row, moe, dep) for row in experts} == {2.0}
    step = _step_kernels(moe, dep)
    assert step["moe/experts_up"][:2] == (14336.0, 4096.0)
    assert step["moe/experts_down"][:2] == (4096.0, 7168.0)


def test_non_gated_experts_run_up_and_down_only():
    """Nemotron-3-Nano's experts are relu² MLPs (up, down; no gate): experts_up N is H′
    (1,856), not 2·H′."""
    arch = load_architecture(HF_CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")
    assert not arch.ffn.gated_mlp
    n, k, _ = _step_kernels(arch, Deployment())["moe/experts_up"]
    assert (n, k) == (arch.ffn.moe_intermediate_size, arch.hidden_size)


def test_every_row_names_fields_of_the_architecture():
    """By their flat names (as users write them), each a field of the architecture or a part."""
    flat = set(LLAMA_8B.model_dump())
    for row in ROWS:
        assert set(row.fields) <= flat, row.name
        for flag in (row.when, row.unless, row.bias, row.tied):
            assert flag is None or flag in flat, (row.name, flag)


@cache
def _config(index: int) -> Architecture:
    return load_architecture(CONFIGS[index])


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, len(CONFIGS) - 1), tp=st.sampled_from([1, 2, 4, 8]))
def test_sharding_never_loses_weights(index, tp):
    """Over TP GPUs every weight is held at least once: TP × the per-GPU weights ≥ the
    weights on one GPU (equal without replicated rows: MLA's down-projections, the router, the
    indexer, KV heads beyond n_kv), and at most TP times them."""
    arch = _config(index)
    env = Env.create(get_hardware("h200"), "bf16", "bf16")

    def weights(t: int) -> float:  # experts over EP = TP (moe_tp 1)
        dep = Deployment(tp=t, ep=t if arch.ffn.is_moe else 1)
        return float(weight_bytes_per_gpu(*_arrays(arch, dep), env)[0, 0])

    one, many = weights(1), weights(tp)
    assert one * (1 - 1e-12) <= tp * many <= tp * one * (1 + 1e-12)


def _kda(heads: int) -> Architecture:
    arch = load_architecture(HF_CONFIGS / "synthetic-kimi-linear-checkpoint-form.json")
    return arch.with_fields(linear_num_key_heads=heads, linear_num_value_heads=heads)


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_kda_of_any_head_count_reads_as_kda(heads):
    """The column view's linear mixer is the `linear_kind` column. The former guess from the
    in_proj width read KDA's extra width beyond the conv, n_v + 2·d_v, as Mamba-2's z + dt,
    n_v·d_v + n_v, whenever they coincide: at n_v = 2. Every head count is KDA here, and runs
    KDA's kernels."""
    arch = _kda(heads)
    view = ArchColumns(ArchArrays.from_architectures([arch]))
    assert [bool(view.is_kind(k)[0, 0]) for k in KINDS] == [False, True, False, False, True]
    step = _step_kernels(arch, Deployment())
    # q, k, v (n·32 each), β (n), f_a and g_a (32 each): N = 97·n + 64 at K = H = 256
    assert step["linear_attention/in_proj"][:2] == (97.0 * heads + 64.0, 256.0)
    assert step["linear_attention/gate_up"][:2] == (2.0 * heads * 32.0, 32.0)


def test_shared_expert_gate_is_stored_and_run_on_every_moe_layer():
    """Qwen3-Next-80B-A3B: 48 MoE layers each with an H → 1 gate on the shared expert (H 2048):
    weight memory holds 48·2048 more BF16 weights than the same model without the gate (at
    TP 1: the gate is replicated), and the step runs `moe/shared_gate` (N 1, K 2048) on the 48
    layers."""
    arch = load_architecture(HF_CONFIGS / "Qwen3-Next-80B-A3B-Instruct.json")
    assert (arch.ffn.shared_expert_gate, arch.num_moe_layers, arch.hidden_size) == (True, 48, 2048)
    plain = arch.with_fields(shared_expert_gate=False)
    env = Env.create(get_hardware("h200"), "bf16", "bf16")
    bytes_of = lambda x: float(weight_bytes_per_gpu(*_arrays(x, Deployment()), env)[0, 0])  # noqa
    assert bytes_of(arch) - bytes_of(plain) == 48 * 2048 * 2.0
    assert _step_kernels(arch, Deployment(tp=4))["moe/shared_gate"] == (1.0, 2048.0, 48.0)
    assert "moe/shared_gate" not in _step_kernels(plain, Deployment(tp=4))
