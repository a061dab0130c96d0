"""Export to the model_types that express GQA MoE with shared experts / leading dense layers
(glm4_moe, qwen2_moe) and serial Mamba-2 hybrids (bamba; nemotron_h with a layer as two
blocks), and import back to the same design; the one-line refusals of designs no transformers
model_type expresses, and the equivalences the exporter relies on, run on real tensors.

source of every count: transformers 5.24 meta-device model of the exported config; tolerance 0.
"""

import pytest

from cost_model.architecture import Architecture
from cost_model.errors import ConfigError
from cost_model.hf import architecture_from_hf_config, architecture_to_hf_config
from cost_model.params import count_params

from tests.cost_model.transformers_meta import meta_model, transformers_config

BASE = dict(
    name="custom", vocab_size=1000, hidden_size=128, num_layers=4, num_attention_heads=4,
    num_kv_heads=2, head_dim=32, intermediate_size=256, max_position_embeddings=4096,
)
MOE = dict(BASE, num_experts=8, experts_per_token=2, moe_intermediate_size=64)
MAMBA = dict(linear_num_key_heads=2, linear_key_head_dim=16, linear_num_value_heads=8,
             linear_value_head_dim=32, linear_conv_kernel=4, linear_conv_bias=True)
# every layer a mixer and a gated MLP; the Mamba-2 width 8 x 32 = 256 = 2 x hidden_size
MAMBA_HYBRID = dict(BASE, layer_mixers=("mamba2", "mamba2", "mamba2", "attention"), **MAMBA)
MLA = dict(BASE, attention_kind="mla", num_kv_heads=4, head_dim=24, kv_lora_rank=32,
           qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)

EXPORTABLE = [
    ("gqa-moe-shared-dense-first", dict(MOE, num_shared_experts=1, first_dense_layers=1),
     "glm4_moe"),
    ("gqa-moe-two-shared-as-one-mlp", dict(MOE, num_shared_experts=2), "glm4_moe"),
    ("gqa-moe-dense-first-no-shared", dict(MOE, first_dense_layers=3), "glm4_moe"),
    ("gqa-moe-qk-norm-qkv-bias-shared", dict(MOE, num_shared_experts=1, qk_norm=True,
                                              qkv_bias=True), "glm4_moe"),
    ("gqa-moe-qk-norm-dense-first", dict(MOE, qk_norm=True, first_dense_layers=1), "qwen3_moe"),
    ("gqa-moe-gated-shared-period-2",
     dict(MOE, num_shared_experts=1, shared_expert_intermediate_size=96, shared_expert_gate=True,
          moe_layer_period=2, qkv_bias=True), "qwen2_moe"),
    ("mamba2-attention-gated-mlp", MAMBA_HYBRID, "bamba"),
    ("mamba2-attention-ungated-mlp-split",
     dict(MAMBA_HYBRID, gated_mlp=False, hidden_act="relu2", linear_num_value_heads=4),
     "nemotron_h"),
]


@pytest.mark.parametrize(("fields", "model_type"), [c[1:] for c in EXPORTABLE],
                         ids=[c[0] for c in EXPORTABLE])
def test_designs_export_to_the_family_that_expresses_them(fields, model_type):
    arch = Architecture.model_validate(fields)
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == model_type
    model = meta_model(transformers_config(exported))
    assert sum(p.numel() for p in model.parameters()) == count_params(arch).total_params


@pytest.mark.parametrize("fields", [c[1] for c in EXPORTABLE], ids=[c[0] for c in EXPORTABLE])
def test_the_export_imports_back_to_the_same_design(fields):
    """import(export(arch)) is arch: the same `design_key` (the nemotron_h split read back one
    layer per mixer/FFN pair, n shared experts as n, the shared-MLP width, the placement)."""
    arch = Architecture.model_validate(fields)
    again = architecture_from_hf_config(architecture_to_hf_config(arch))
    assert again.design_key == arch.design_key


def test_glm4_moe_rotates_the_whole_head_and_routes_in_one_group():
    """Glm4MoeConfig defaults `partial_rotary_factor` to 0.5; our GQA rotates every channel."""
    config = transformers_config(architecture_to_hf_config(
        Architecture.model_validate(dict(MOE, num_shared_experts=1, first_dense_layers=1))))
    assert config.rope_parameters["partial_rotary_factor"] == 1.0
    assert (config.n_group, config.topk_group, config.first_k_dense_replace) == (1, 1, 1)


def test_nemotron_h_split_keeps_the_layer_order():
    """4 layers (M, M, M, *), each followed by its MLP: 8 blocks M - M - M - * -."""
    arch = Architecture.model_validate(dict(MAMBA_HYBRID, gated_mlp=False, hidden_act="relu2",
                               linear_num_value_heads=4))
    exported = architecture_to_hf_config(arch)
    assert exported["layers_block_type"] == ["linear_attention", "mlp"] * 3 + [
        "full_attention", "mlp"]
    assert exported["num_hidden_layers"] == 8


REFUSED = [
    ("mla-gated-deltanet",
     dict(MLA, layer_mixers=("gated_deltanet",) * 3 + ("attention",), **dict(
         MAMBA, linear_conv_bias=False)),
     "`attention_kind` 'mla' with gated_deltanet layers (`layer_mixers`)"),
    ("mla-mamba2", dict(MLA, layer_mixers=("mamba2",) * 3 + ("attention",), **MAMBA),
     "`attention_kind` 'mla' with mamba2 layers (`layer_mixers`)"),
    ("mla-sliding",
     dict(MLA, sliding_window=64, layer_types=("sliding_attention", "full_attention") * 2),
     "`attention_kind` 'mla' with sliding-window layers (`sliding_window`)"),
    ("mamba2-gated-mlp-width-not-a-multiple",
     dict(MAMBA_HYBRID, linear_num_value_heads=6),
     "`gated_mlp` (True) with Mamba-2 layers: nemotron_h's FFNs are ungated, and bamba needs the "
     "Mamba-2 width `linear_num_value_heads` x `linear_value_head_dim` (192) to be a whole "
     "multiple of `hidden_size` (128)"),
]


@pytest.mark.parametrize(("fields", "reason"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_unexpressible_designs_are_refused_in_one_line_naming_the_field(fields, reason):
    with pytest.raises(ConfigError) as info:
        architecture_to_hf_config(Architecture.model_validate(fields))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot export `custom` as a Hugging Face config")
    assert reason in message


# ---- the equivalences the exporter relies on, on real tensors ------------------------------------


def _swiglu(torch, x, gate, up, down):
    return torch.nn.functional.silu(x @ gate.T) * (x @ up.T) @ down.T


def test_n_shared_swiglu_experts_are_one_mlp_n_times_as_wide():
    """Σ_i down_i(silu(gate_i x) ⊙ up_i x) = [down_1 … down_n](silu([gate_1; …] x) ⊙ [up_1; …] x):
    silu and ⊙ act per channel, so stacking the n experts' channels is the same function, with
    n·3·H·W weights either way and the same 2·3·H·(nW) FLOP per token."""
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    hidden, width, n = 16, 8, 3
    x = torch.randn(5, hidden, generator=gen, dtype=torch.float64)
    experts = [[torch.randn(width, hidden, generator=gen, dtype=torch.float64) for _ in "gu"]
               + [torch.randn(hidden, width, generator=gen, dtype=torch.float64)]
               for _ in range(n)]
    summed = sum(_swiglu(torch, x, g, u, d) for g, u, d in experts)
    gate, up = (torch.cat([e[i] for e in experts]) for i in (0, 1))
    down = torch.cat([e[2] for e in experts], dim=1)
    torch.testing.assert_close(_swiglu(torch, x, gate, up, down), summed, rtol=1e-12, atol=1e-12)
    assert sum(t.numel() for e in experts for t in e) == gate.numel() + up.numel() + down.numel()


def test_glm4_moe_zero_width_shared_mlp_adds_exactly_zero():
    """With `n_shared_experts` 0 Glm4Moe's shared MLP has no weights and outputs zeros: the MoE
    layer is the routed experts alone (a small real model on CPU)."""
    torch = pytest.importorskip("torch")
    arch = Architecture.model_validate(dict(MOE, first_dense_layers=1))
    config = transformers_config(architecture_to_hf_config(arch))
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    shared = model.model.layers[1].mlp.shared_experts
    assert sum(p.numel() for p in shared.parameters()) == 0
    out = shared(torch.randn(2, 3, arch.hidden_size))
    assert out.shape == (2, 3, arch.hidden_size) and torch.count_nonzero(out) == 0
