"""The effective parameter count N_eff of the accuracy proxy (objectives/accuracy_model.py): a
dense model's non-embedding count plus its weighted embeddings; an MoE's active count times the
Joint MoE law's and Krajewski's gains raised to the MoE layers' share (notes §7.4 case 7:
DeepSeekMoE 16B against DeepSeek 7B, "notes": docs/accuracy_proxy.md); and the MoE range flags."""

import math

import pytest

from cost_model import Architecture
from objectives import architecture_from_shape
from objectives.accuracy import predict_loss, summarize_shape
from objectives.accuracy_coefficients import SHIPPED
from objectives.capacity_terms import granularity_multiplier, joint_moe_multiplier
from tests.objectives.archs import B, DENSE_MODELS, MOE_MODELS, T, model, moe

# The shapes of calibration row `dsmoe16b-vs-deepseek7b` (Dai et al. 2024, arXiv 2401.06066):
# DeepSeekMoE 16B, 28 layers, the first dense, 64 routed experts of 1408 (top 6) and 2 shared;
# DeepSeek LLM 7B, 30 dense layers of 4096; both untied, vocabulary 102400.
DEEPSEEKMOE_16B = "H=2048 L=28 q=16 kv=16 dh=128 ff=10944 E=64 k=6 de=1408 sh=2 fd=1 V=102400"
DEEPSEEK_7B = "H=4096 L=30 q=32 kv=32 dh=128 ff=11008 V=102400"
UNIT_GAINS = SHIPPED.with_values(moe_scale=1.0, granularity_scale=1.0, embedding_weight=1.0)


def test_deepseekmoe_16b_effective_params_golden():
    """N_eff of DeepSeekMoE 16B at 2T tokens with moe_scale = granularity_scale = embedding_weight
    = 1 (the fitted values move; the formula does not), derived by hand:

    counts: attention 28·4·2048² = 469,762,048; dense FFN 3·2048·10944 = 67,239,936; per MoE layer
    active: shared 2·3·2048·1408 = 17,301,504 + router 64·2048 = 131,072 + 6 routed ·3·2048·1408
    = 51,904,512, so 69,337,088 × 27 = 1,872,101,376; norms 57·2048 = 116,736: N_act,ne =
    2,409,220,096 (all 64 experts: N_tot,ne = 15,956,297,728). Embeddings 2·102400·2048 =
    419,430,400, counted up to 96256/102400 = 0.94 of the rows: 394,264,576.

    Joint MoE law (Ludziejewski 2025 Table 3): expansion (64+2)/(6+2) = 8.25, N_act 2.83e9 clamped
    to 2.7e9, D to 73·2.7e9 = 1.971e11. Ê(8.25) = 1/(1/(7.25 + 2.088105) + 1/290.4521) = 9.047234:
    m = 35.91·Ê^-0.2285 = 21.70959, μ = -0.1889 + 0.0098·ln Ê = -0.1673159, n = 35.98·Ê^0.5529
    = 121.5958, ν = -0.1775 - 0.0259·ln Ê = -0.2345437; L = m·N^μ + n·D^ν + c = 0.5736334 +
    0.2727855 + 1.3637 = 2.2101189. The dense law (Ê(1) = 2.0732: m1 = 30.39925, μ1 =
    -0.1817549, n1 = 53.84335, ν1 = -0.1963835) reaches it at N_eq = ((2.2101189 - n1·D^ν1
    (= 0.3258681) - 1.3637)/m1)^(1/μ1) = (0.5205508/30.39925)^(1/μ1) = 5.230967e9: J = 1.937395.
    Krajewski: G = min(6, (8/3)·2048/1408) = 3.878788, ((2.1 + 18.1)/(2.1·G^-0.58 + 18.1))^(1/0.115)
    = (20.2/19.056700)^8.695652 = 1.659709.

    N_core = 2,409,220,096·(1.937395·1.659709)^(27/28) = 2,409,220,096·3.215513^0.9642857 =
    2,409,220,096·3.084141 = 7.430374e9 (below N_tot,ne); N_eff = 7.430374e9 + 394,264,576 =
    7.824638e9. The gain on every layer (no 27/28 share) would give 8.141143e9."""
    proxy = predict_loss(architecture_from_shape(DEEPSEEKMOE_16B), 2 * T, fitted=UNIT_GAINS)
    assert proxy.effective_params == pytest.approx(7.824638e9, rel=1e-6)
    shape = summarize_shape(architecture_from_shape(DEEPSEEKMOE_16B))
    assert (shape.active_params, shape.total_params) == (2_828_650_496, 16_375_728_128)
    assert (shape.expansion, shape.moe_layer_frac) == (8.25, 27 / 28)


def test_deepseekmoe_16b_matches_dense_7b():
    """Notes §7.4 case 7 with the shipped coefficients: DeepSeekMoE 16B (2.8B active) reaches
    DeepSeek 7B's loss at 2T tokens, 1-2% below it (Dai et al. 2024 Table 3: Pile bits per byte
    0.74 against 0.75, ln(0.74/0.75) = -1.342%; the pair is calibration row
    `dsmoe16b-vs-deepseek7b`, so this is in sample: within 0.5% of ln loss)."""
    moe_16b, dense_7b = (predict_loss(architecture_from_shape(s), 2 * T)
                         for s in (DEEPSEEKMOE_16B, DEEPSEEK_7B))
    assert math.log(moe_16b.loss_nats / dense_7b.loss_nats) == pytest.approx(
        math.log(0.74 / 0.75), abs=0.005)
    assert moe_16b.penalties["moe"] < 1.0 == dense_7b.penalties["moe"]
    assert 2.8 * B < dense_7b.effective_params < moe_16b.effective_params < 16.4 * B


@pytest.mark.parametrize("stem", MOE_MODELS)
def test_moe_effective_params_between_active_and_total(stem):
    shape = summarize_shape(model(stem))
    n_eff = predict_loss(model(stem), 1 * T).effective_params
    assert shape.active_params < n_eff < shape.total_params


@pytest.mark.parametrize("stem", DENSE_MODELS)
def test_dense_effective_params_count_the_embeddings(stem):
    """N_eff = N_ne + w·N_emb with the fitted weight (Chinchilla's convention at w = 1), the rows
    past a 96K vocabulary not counted (Tao's grid)."""
    shape = summarize_shape(model(stem))
    counted = shape.vocab_params * min(1.0, 96_256 / shape.vocab_size)
    expected = shape.total_non_embedding_params + SHIPPED.embedding_weight * counted
    assert predict_loss(model(stem), 1 * T).effective_params == pytest.approx(expected, rel=1e-12)


def test_moe_effective_params_follow_the_joint_law():
    """Mixtral (top-2 of 8, experts 14336 = 1.31·(8/3)H wide): G = 1, expansion 4: N_eff is the
    active non-embedding count times the Joint MoE multiplier (N_act clamped to 2.7B, D to 73 per
    parameter) to moe_scale, plus the embeddings; a G = 1 design is soft-flagged."""
    mixtral, qwen = model("Mixtral-8x7B-v0.1"), model("Qwen3-30B-A3B")
    shape, proxy = summarize_shape(mixtral), predict_loss(mixtral, 1 * T)
    assert shape.granularity == 1.0 and shape.expansion == 4.0
    gain = joint_moe_multiplier(4, shape.active_params, 1 * T) ** SHIPPED.moe_scale
    counted = shape.vocab_params * SHIPPED.embedding_weight
    expected = shape.active_non_embedding_params * gain + counted
    assert proxy.effective_params == pytest.approx(expected, rel=1e-9)
    assert any(flag.startswith("soft: G (granularity)") for flag in proxy.flags)
    assert not any("G (granularity)" in flag for flag in predict_loss(qwen, 1 * T).flags)


def test_moe_effective_params_depend_on_tokens():
    """The Joint MoE law's gain grows with training: Qwen3-30B-A3B's MoE factor at 50B tokens is
    smaller than at 150B (both inside the law's 73 tokens per active parameter)."""
    qwen = model("Qwen3-30B-A3B")
    few, more = (predict_loss(qwen, tokens).penalties["moe"] for tokens in (50 * B, 150 * B))
    assert more < few < 1.0


def test_granular_experts_gain_krajewski_s_multiplier():
    """The same MoE with experts cut 4 ways (4× the experts, 4× top-k): the expansion and the
    active and total sizes kept (up to the router), G from 2 to 8: the dense-equivalent core grows
    by Krajewski's (gain(8)/gain(2))^granularity_scale."""
    coarse = moe(64, 2).with_fields(**{"moe_intermediate_size": 1024})
    fine = moe(256, 8)
    a, b = summarize_shape(coarse), summarize_shape(fine)
    assert a.expansion == b.expansion and (a.granularity, b.granularity) == (2.0, 8.0)

    def gain(arch, shape):
        counted = SHIPPED.embedding_weight * shape.vocab_params
        joint = joint_moe_multiplier(shape.expansion, shape.active_params, 1 * T)
        return ((predict_loss(arch, 1 * T).effective_params - counted)
                / shape.active_non_embedding_params / joint**SHIPPED.moe_scale)

    expected = (granularity_multiplier(8) / granularity_multiplier(2)) ** SHIPPED.granularity_scale
    assert gain(fine, b) / gain(coarse, a) == pytest.approx(expected, rel=1e-9)


def test_moe_flags():
    many = predict_loss(moe(1024, 8), 1 * T)
    expected = "hard: E (routed experts) = 1024, validated [1, 512]"
    assert any(flag.startswith(expected) for flag in many.hard_flags)
    sparse = predict_loss(moe(512, 2), 1 * T).hard_flags
    assert any(
        flag.startswith("hard: activation ratio (k+shared)/(E+shared) = 0.003906")
        for flag in sparse
    )
    assert not any("r (MLP/attention" in flag for flag in predict_loss(moe(64, 8), 1 * T).flags)


def test_top1_of_many_experts_is_flagged_past_clarks_runs():
    """Top-1 past 64 experts: only Clark's runs (<= 1.3B dense); here 2.0B active."""
    def top1(experts: int) -> Architecture:
        return moe(experts, 1).with_fields(**{"moe_intermediate_size": 8192})
    flags = predict_loss(top1(128), 1 * T).hard_flags
    assert any(flag.startswith("hard: top-1 of E experts = 128, validated <= 64") for flag in flags)
    assert not any("top-1" in flag for flag in predict_loss(top1(64), 1 * T).flags)
