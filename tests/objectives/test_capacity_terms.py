"""The capacity terms (objectives/capacity_terms.py) against the published numbers they carry:
the Joint MoE law's reduced coefficients (Ludziejewski 2025 App. B Table 4), Krajewski's
granularity law (docs/accuracy_proxy.md §3.2, "notes" below), the Gemstones width/depth law
(§2.5), Tao's tokens per character (the authors' per-run data); clamping at the runs' edges; and the
normalization (Llama-3-8B's shape carries none)."""

import math

import pytest

from objectives.capacity_terms import (
    JOINT_MOE,
    JOINT_MOE_MAX_TOKENS_PER_PARAM,
    MLA_PARITY_RANK_FRAC,
    REFERENCE_LAYERS,
    REFERENCE_MIX_RATIO,
    REFERENCE_NON_EMBEDDING_PARAMS,
    attention_width_penalty,
    depth_penalty,
    ffn_gating_penalty,
    ffn_width_penalty,
    granularity_multiplier,
    head_dim_penalty,
    joint_moe_multiplier,
    kv_width_penalty,
    mla_kv_width_frac,
    reference_layers,
    tokens_per_char,
    vocab_tokens_frac,
)  # fmt: skip

N_8B = REFERENCE_NON_EMBEDDING_PARAMS
T = 1e12

# ---- the Joint MoE law (Ludziejewski et al. 2025) -----------------------------------------------

TABLE_4 = [  # E, m, µ, n, ν: the paper's Eq. 6 reduced to Chinchilla's form per E (App. B)
    (1, 30.3640, -0.1817, 53.9838, -0.1965), (2, 27.7982, -0.1780, 66.8401, -0.2065),
    (4, 24.8462, -0.1731, 87.7022, -0.2192), (8, 21.8330, -0.1676, 119.9126, -0.2338),
    (16, 19.0159, -0.1617, 167.5073, -0.2494), (32, 16.5424, -0.1557, 234.6726, -0.2652),
]  # fmt: skip


@pytest.mark.parametrize("experts, m, mu, n, nu", TABLE_4, ids=[f"E{r[0]}" for r in TABLE_4])
def test_joint_law_reproduces_table_4(experts, m, mu, n, nu):
    """Table 3's coefficients (printed to 4–5 digits) give Table 4's to 0.3%: E = 1 has
    Ê = E_start = 2.0732 (1/Ê = (1/E_start − 1/E_max) + 1/E_max), m = 35.91·2.0732^-0.2285."""
    got = JOINT_MOE.loss_terms(experts)
    assert got[0] == pytest.approx(m, rel=3e-3) and got[2] == pytest.approx(n, rel=3e-3)
    assert got[1] == pytest.approx(mu, abs=2e-4) and got[3] == pytest.approx(nu, abs=2e-4)
    assert JOINT_MOE.saturated_experts(1) == pytest.approx(JOINT_MOE.e_start, rel=1e-12)


def test_joint_multiplier_golden():
    """E = 8, N = 1e9, D = 2e10 from Table 4: L_8 = 21.8330·N^-0.1676 + 119.9126·D^-0.2338 + c
    = 0.67719 + 0.46826 + c; the dense size of equal loss solves 30.3640·N_eq^-0.1817 = L_8 − c −
    53.9838·D^-0.1965 = 1.14545 − 0.51064 = 0.63482, N_eq = (0.63482/30.3640)^(1/-0.1817) =
    1.756e9: 1.756× (Table 3's unrounded form: within 0.5%)."""
    assert joint_moe_multiplier(8, 1e9, 2e10) == pytest.approx(1.7556, rel=5e-3)
    assert joint_moe_multiplier(1, 1e9, 2e10) == pytest.approx(1.0, abs=1e-12)


def test_joint_multiplier_grows_with_experts_and_with_tokens():
    """More experts, more gain; at a fixed active size the gain grows with training (ζ < 0: the
    MoE's data term falls faster; ω > 0: it starts higher), so effective parameters depend on D."""
    gains = [joint_moe_multiplier(e, 1e9, 2e10) for e in (1, 2, 4, 8, 16, 32)]
    assert gains == sorted(gains) and gains[0] == pytest.approx(1.0)
    by_tokens = [joint_moe_multiplier(8, 1e9, d) for d in (5e9, 1e10, 2e10, 4e10, 7e10)]
    assert by_tokens == sorted(by_tokens) and by_tokens[-1] > 1.05 * by_tokens[0]


def test_joint_multiplier_is_clamped_to_the_runs():
    """E <= 32, N_act 79M–2.7B, D/N_act <= 73 (App. E): held at the edge, never extrapolated."""
    assert joint_moe_multiplier(64, 1e9, 2e10) == joint_moe_multiplier(32, 1e9, 2e10)
    assert joint_moe_multiplier(8, 3e10, 1e13) == joint_moe_multiplier(8, 2.7e9, 1e13)
    edge = JOINT_MOE_MAX_TOKENS_PER_PARAM * 1e9
    assert joint_moe_multiplier(8, 1e9, 15e12) == joint_moe_multiplier(8, 1e9, edge)


# ---- Krajewski et al. 2024: granularity ----------------------------------------------------------


@pytest.mark.parametrize("grain, expected", [(1, 1.0), (8, 1.9302), (16, 2.1272), (64, 2.1272)])
def test_granularity_multiplier(grain, expected):
    """((2.1 + 18.1)/(2.1·G^-0.58 + 18.1))^(1/0.115): G = 8: 8^-0.58 = 0.29935,
    20.2/18.7286 = 1.07856, ^8.696 = 1.9302; G = 16: 2.1272; held above 16 (the runs)."""
    assert granularity_multiplier(grain) == pytest.approx(expected, abs=5e-5)


# ---- Gemstones: depth at fixed parameters --------------------------------------------------------


def test_reference_depth_carries_no_term():
    assert reference_layers(N_8B) == pytest.approx(REFERENCE_LAYERS, rel=1e-12)
    assert depth_penalty(N_8B, REFERENCE_LAYERS, 15 * T) == pytest.approx(1.0, abs=1e-12)


def test_depth_is_steep_below_a_few_layers_and_clamped_past_the_runs():
    """At Llama-3-8B's non-embedding count and 15T tokens: 3 layers +9%, 8 +3.3%, 64 layers
    slightly better than 32 (Gemstones' optimum R ≈ 20–40); below 3 and above 80 layers the depth
    is held at the runs' edge (only the width term keeps moving)."""
    penalty = {layers: depth_penalty(N_8B, layers, 15 * T) for layers in (2, 3, 8, 64, 80, 160)}
    assert penalty[3] == pytest.approx(1.092, abs=5e-3) and penalty[8] == pytest.approx(
        1.033, abs=5e-3)
    assert 0.995 < penalty[64] < 1.0 < penalty[160]
    assert penalty[2] < penalty[3]  # the depth held at 3; the wider layers still help
    assert penalty[160] > penalty[80]


# ---- attention, KV, MLA, head dim, FFN: 1 at the standard shape ---------------------------------


def test_width_terms_at_the_standard_shape():
    assert attention_width_penalty(1.0, 0.002) == kv_width_penalty(0.25, 0.003) == 1.0
    assert head_dim_penalty(128, 0.005) == ffn_width_penalty(14336 / 4096, 0.01) == 1.0
    assert REFERENCE_MIX_RATIO == pytest.approx(4.2, abs=5e-3)  # notes §7.4 case 11


def test_width_terms_below_the_standard_shape():
    """H/8 attention: 1 + 0.002·3² = 1.018; FFN 1344 at H 4096 (f = 0.328): 1 + 0.01·1.6076² =
    1.0258; d_h 32: 1 + 0.005·1 = 1.005; KV H/32 (5 halvings, GQA-4 is 2): (1 + 5c)/(1 + 2c)."""
    assert attention_width_penalty(1 / 8, 0.002) == pytest.approx(1.018, abs=1e-12)
    assert ffn_width_penalty(1344 / 4096, 0.01) == pytest.approx(1.0258, abs=5e-5)
    assert head_dim_penalty(32, 0.005) == pytest.approx(1.005, abs=1e-12)
    assert kv_width_penalty(1 / 32, 0.003) == pytest.approx(1.015 / 1.006, rel=1e-12)


def test_kv_width_earns_nothing_past_mha():
    """MHA (n_kv·d_h = H) is the widest KV the evidence rewards: (1 + 0)/(1 + 2c)."""
    assert kv_width_penalty(1.0, 0.003) == pytest.approx(1 / 1.006, rel=1e-12)
    assert kv_width_penalty(2.0, 0.003) == kv_width_penalty(1.0, 0.003)


def test_mla_reads_its_rank_against_deepseek_v2_parity():
    """Rank 512 at H 5120 (DeepSeek-V2 Table 9, ≥ MHA) is MHA's KV width; 512 at 7168: 0.714;
    rank 16 at H 4096: 16/4096/0.1 = 0.039 (4.7 halvings below MHA) — not rank 512's."""
    assert MLA_PARITY_RANK_FRAC == pytest.approx(0.1)
    assert mla_kv_width_frac(512, 5120) == 1.0 and mla_kv_width_frac(512, 2048) == 1.0
    assert mla_kv_width_frac(512, 7168) == pytest.approx(512 / 716.8, rel=1e-12)
    assert mla_kv_width_frac(16, 4096) == pytest.approx(0.0390625, rel=1e-12)
    assert kv_width_penalty(mla_kv_width_frac(16, 4096), 0.003) > kv_width_penalty(
        mla_kv_width_frac(256, 4096), 0.003) > kv_width_penalty(mla_kv_width_frac(512, 4096), 0.003)


def test_ffn_gating_penalty():
    assert ffn_gating_penalty(True, 0.024) == 1.0
    assert ffn_gating_penalty(False, 0.024) == pytest.approx(1.024, rel=1e-12)


# ---- Tao et al. 2024: tokens per character ------------------------------------------------------

# The authors' runs (github.com/sail-sg/scaling-with-vocab exp_data.csv): every vocabulary of the
# 33M-non-vocabulary group trained on 1.2e9 tokens; final checkpoints' characters by vocabulary.
TAO_RUNS = [(4096, 1.2e9 / 3616410817.0415235), (32768, 1.2e9 / 4765633261.121313),
            (96256, 1.2e9 / 5170557756.965066)]


@pytest.mark.parametrize("vocab, published", TAO_RUNS, ids=[str(r[0]) for r in TAO_RUNS])
def test_tokens_per_char_reproduces_tao_runs(vocab, published):
    """f(V) = 0.00639222·ln²V − 0.15811069·lnV + 1.20470122 (the repo's utils.py) against the
    runs' tokens/characters: 4096: ln = 8.317766, 0.442247 − 1.315128 + 1.204701 = 0.331820 vs
    1.2e9/3.6164e9 = 0.331821."""
    assert tokens_per_char(vocab) == pytest.approx(published, rel=1e-5)


def test_vocab_tokens_frac():
    """f(96256)/f(8192): ln 96256 = 11.474766: 0.841666 − 1.814283 + 1.204701 = 0.232084; ln 8192
    = 9.010913: 0.519026 − 1.424722 + 1.204701 = 0.299005; ratio 0.776183. At and above 96K: 1."""
    assert vocab_tokens_frac(8192) == pytest.approx(0.776183, abs=2e-6)
    assert vocab_tokens_frac(128_256) == vocab_tokens_frac(96_256) == 1.0
    assert vocab_tokens_frac(1024) == vocab_tokens_frac(4096)  # clamped to the grid
    assert math.isclose(vocab_tokens_frac(50_000) * tokens_per_char(50_000),
                        tokens_per_char(96_256), rel_tol=1e-12)
