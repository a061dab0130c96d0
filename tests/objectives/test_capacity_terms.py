"""The capacity terms (objectives/capacity_terms.py) against the published numbers they carry:
Clark's EPC table (docs/accuracy_proxy.md §3.1, "notes" below), Krajewski's granularity law (§3.2),
the Gemstones width/depth law (§2.5), Tao's vocabulary anchor; and the normalization (Llama-3-8B's
shape carries none)."""

import math

import pytest

from objectives.capacity_terms import (
    REFERENCE_LAYERS,
    REFERENCE_MIX_RATIO,
    REFERENCE_NON_EMBEDDING_PARAMS,
    attention_width_penalty,
    clark_epc_multiplier,
    counted_vocab_params,
    depth_penalty,
    ffn_width_penalty,
    granularity_multiplier,
    head_dim_penalty,
    kv_width_penalty,
    optimal_vocab_size,
    reference_layers,
    vocab_penalty,
)  # fmt: skip

N_8B = REFERENCE_NON_EMBEDDING_PARAMS
T = 1e12

# ---- Clark et al. 2022: EPC, saturating, held at 1.3B --------------------------------------------

CLARK_TABLE = [  # notes §3.1 derived table, S-BASE: (dense N, E, EPC k = 1, EPC k = 0)
    (15e6, 8, 3.2, 2.3), (15e6, 64, 8.9, 6.0), (15e6, 512, 17.8, 11.8),
    (1.3e9, 8, 2.0, 1.6), (1.3e9, 64, 3.7, 2.9), (1.3e9, 512, 5.6, 4.4),
]  # fmt: skip


@pytest.mark.parametrize(
    "params, experts, k1, k0", CLARK_TABLE, ids=[f"{r[0]:.0e}-E{r[1]}" for r in CLARK_TABLE]
)
def test_clark_epc_reproduces_the_notes_table(params, experts, k1, k0):
    # source: notes §3.1 (one decimal printed; tolerance 0.05)
    assert clark_epc_multiplier(experts, params, 1) == pytest.approx(k1, abs=0.05)
    assert clark_epc_multiplier(experts, params, 0) == pytest.approx(k0, abs=0.05)


def test_clark_epc_saturates_and_is_held_above_1_3b():
    at = [clark_epc_multiplier(e, 1.3e9) for e in (64, 128, 256, 512, 1024, 2048)]
    steps = [b / a for a, b in zip(at, at[1:])]
    assert all(s > 1 for s in steps) and steps == sorted(steps, reverse=True)
    # saturation toward E_max = 314.5: 512 -> 1024 adds 7%, 1024 -> 10^6 less than 9%
    assert at[4] / at[3] == pytest.approx(1.069, abs=5e-3)
    assert clark_epc_multiplier(1e6, 1.3e9) / at[4] < 1.09
    # beyond Clark's largest dense size the exponent is held (Krajewski: the shrinkage is a fixed-D
    # artefact)
    assert clark_epc_multiplier(64, 2e10) == clark_epc_multiplier(64, 1.3e9)


# ---- Krajewski et al. 2024: granularity ----------------------------------------------------------


@pytest.mark.parametrize("grain, expected", [(1, 1.0), (8, 1.9302), (16, 2.1272), (64, 2.1272)])
def test_granularity_multiplier(grain, expected):
    """((2.1 + 18.1)/(2.1·G^-0.58 + 18.1))^(1/0.115): G = 8: 8^-0.58 = 0.29935,
    20.2/18.7286 = 1.07856, ^8.696 = 1.9302; G = 16: 16^-0.58 = 0.20029 -> 1.9304... 2.1272; held
    above 16."""
    assert granularity_multiplier(grain) == pytest.approx(expected, abs=5e-5)


def test_granularity_pessimistic_scale_halves_the_log_gain():
    assert granularity_multiplier(8, scale=0.5) == pytest.approx(math.sqrt(1.9302), abs=5e-5)


# ---- Gemstones: depth at fixed parameters --------------------------------------------------------


def test_reference_depth_carries_no_term():
    assert reference_layers(N_8B) == pytest.approx(REFERENCE_LAYERS, rel=1e-12)
    assert depth_penalty(N_8B, REFERENCE_LAYERS, 15 * T) == pytest.approx(1.0, abs=1e-12)


def test_depth_is_steep_below_a_few_layers_and_flat_for_deep_thin():
    """At Llama-3-8B's non-embedding count and 15T tokens: 2 layers +13%, 3 layers +9% (the
    issue's published 3-layer penalty: +5.7–6.0%), 8 +3.3%; 64 layers (R ≈ 48) slightly better
    than 32 (Gemstones' optimum R ≈ 20–40); 160 layers +0.5%, 337 +1.7%."""
    penalty = {layers: depth_penalty(N_8B, layers, 15 * T) for layers in (2, 3, 8, 64, 160, 337)}
    assert penalty[2] == pytest.approx(1.130, abs=5e-3) and penalty[3] == pytest.approx(
        1.092, abs=5e-3
    )
    assert penalty[8] == pytest.approx(1.033, abs=5e-3)
    assert 0.995 < penalty[64] < 1.0 < penalty[160] < 1.01 and penalty[337] < 1.02


# ---- attention, KV, head dim, FFN: 1 at the standard shape, growing below it ---------------------


def test_width_terms_at_the_standard_shape():
    assert attention_width_penalty(1.0) == kv_width_penalty(0.25) == head_dim_penalty(128) == 1.0
    assert ffn_width_penalty(14336 / 4096) == 1.0 and attention_width_penalty(2.0) == 1.0
    assert REFERENCE_MIX_RATIO == pytest.approx(4.2, abs=5e-3)  # notes §7.4 case 11


def test_width_terms_below_the_standard_shape():
    """H/8 attention: 1 + 0.002·3² = 1.018; H/16: 1.032; FFN 1344 at H 4096 (f = 0.328):
    1 + 0.01·1.6076² = 1.0258; d_h 32: 1 + 0.005·1 = 1.005."""
    assert attention_width_penalty(1 / 8) == pytest.approx(1.018, abs=1e-12)
    assert attention_width_penalty(1 / 16) == pytest.approx(1.032, abs=1e-12)
    assert ffn_width_penalty(1344 / 4096) == pytest.approx(1.0258, abs=5e-5)
    assert head_dim_penalty(32) == pytest.approx(1.005, abs=1e-12)


# ---- Tao et al. 2024: vocabulary -----------------------------------------------------------------


def test_tao_anchor_and_the_flat_band():
    # source: Tao 2024 abstract: Llama2-70B (68.45B non-embedding, d 8192) -> at least 216K
    assert optimal_vocab_size(68.45e9, 8192) == pytest.approx(216_000, rel=1e-9)
    # γ = 0.859, fitted on Tao's two optima (calibration rows tao-*):
    optimum = optimal_vocab_size(N_8B, 4096)  # 216K·8192·(6.98/68.45)^0.859/4096 = 60.8K
    assert optimum == pytest.approx(60.8e3, rel=2e-3)
    assert vocab_penalty(128_256, optimum) == 1.0  # Llama-3's vocabulary carries none
    # 1M tokens: ln(2^20/243.1K) = 1.4616 beyond the band: 1 + 0.005·1.4616² = 1.0107
    assert vocab_penalty(1 << 20, optimum) == pytest.approx(1.0107, abs=5e-5)
    # embedding params past the band's top (4 × 60.8K = 243.1K) add no capacity
    assert counted_vocab_params(1.0, 1 << 20, optimum) == pytest.approx(
        4 * optimum / (1 << 20), rel=1e-12
    )
    assert counted_vocab_params(1.0, 128_256, optimum) == 1.0
