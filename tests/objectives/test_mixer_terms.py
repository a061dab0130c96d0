"""Linear-attention and sliding-window terms (objectives/mixer_terms.py): golden values derived by
hand, the term applied to every attention kind and linear mixer alike, and the flags where the
evidence ends."""

import math

import pytest

from objectives.accuracy import predict_loss
from objectives.accuracy_coefficients import SHIPPED
from objectives.mixer_terms import linear_mixer_log_factor, sliding_window_penalty
from objectives.shapes import build

LLAMA = "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"
MLA = "H=4096 L=32 q=32 dh=192 mla=512 ff=14336 V=128256"
TOKENS = 1e12


@pytest.mark.parametrize("share, expected", [
    (1.0, 0.0), (0.75, -0.005), (0.5, -0.01), (0.25, -0.01), (0.125, -0.01), (1 / 16, 0.005),
    (0.0, 0.02),
], ids=str)  # fmt: skip
def test_linear_mixer_log_factor_golden(share, expected):
    """hybrid −0.01, linear-only +0.02: flat on the hybrids' 1/8–1/2; at 3/4 half-way to 0
    (−0.01·0.25/0.5); at 1/16 half-way to the linear-only end (0.02 − 0.03·0.5 = 0.005)."""
    assert linear_mixer_log_factor(share, -0.01, 0.02) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("share", [i / 64 for i in range(65)])
def test_linear_mixer_log_factor_stays_between_its_ends(share):
    got = linear_mixer_log_factor(share, -0.01, 0.02)
    assert min(-0.01, 0.0, 0.02) <= got <= max(-0.01, 0.0, 0.02)


def test_sliding_window_penalty_golden():
    """c = 0.005: 5 of 6 layers at 256 tokens with a global layer: one halving below Gemma 3's
    512, 1 + c·(5/6)·1² = 1.0041667; every layer at 1,024 without a global layer: two halvings
    below 4,096, 1 + c·4 = 1.02."""
    assert sliding_window_penalty(256, 5 / 6, True, 0.005) == pytest.approx(1 + 0.005 * 5 / 6)
    assert sliding_window_penalty(512, 5 / 6, True, 0.005) == 1.0
    assert sliding_window_penalty(1024, 1.0, False, 0.005) == pytest.approx(1.02)
    assert sliding_window_penalty(1024, 5 / 6, True, 0.005) == 1.0
    assert sliding_window_penalty(64, 0.0, True, 0.005) == 1.0


@pytest.mark.parametrize("window", [2**i for i in range(4, 14)])
@pytest.mark.parametrize("has_global", [True, False])
def test_sliding_window_penalty_falls_with_the_window(window, has_global):
    assert sliding_window_penalty(window, 0.8, has_global, 0.005) >= sliding_window_penalty(
        2 * window, 0.8, has_global, 0.005
    )


def _proxy(base: str, extra: str):
    return predict_loss(build(f"{base} {extra}".strip()), TOKENS)


@pytest.mark.parametrize("mixer", [1, 2, 3], ids=["gated_deltanet", "kimi_delta", "mamba2"])
@pytest.mark.parametrize("base", [LLAMA, MLA], ids=["gqa", "mla"])
def test_published_hybrids_take_the_fitted_hybrid_term(base, mixer):
    """3 linear : 1 attention (Qwen3-Next, Kimi Linear) and 7 : 1 (MiniMax-01) are inside the
    hybrid rows' range: exp(hybrid_coef), no mixer flag, for every mixer and attention kind."""
    for period in (4, 8):
        proxy = _proxy(base, f"mix={mixer} full={period}")
        assert proxy.penalties["linear_attention"] == pytest.approx(math.exp(SHIPPED.hybrid_coef))
        assert not any("attention share" in f for f in proxy.flags)
        assert "hybrid" in proxy.band_families


def test_no_attention_layer_is_hard_flagged():
    proxy = _proxy(LLAMA, "mix=3 full=0")
    assert proxy.penalties["linear_attention"] == pytest.approx(math.exp(SHIPPED.linear_only_coef))
    assert any("attention share" in f for f in proxy.hard_flags)
    assert proxy.ranked_loss_nats == proxy.band_high_nats > proxy.loss_nats


def test_few_attention_layers_soft_flagged():
    proxy = _proxy(LLAMA, "mix=1 full=16")  # 2 of 32: 1/16 < 1/8, interpolated
    expected = (SHIPPED.hybrid_coef + SHIPPED.linear_only_coef) / 2
    assert proxy.penalties["linear_attention"] == pytest.approx(math.exp(expected))
    assert any("attention share" in f for f in proxy.flags) and not proxy.hard_flags


def test_window_far_below_the_data_hard_flagged():
    soft, hard = _proxy(LLAMA, "sw=256 swp=6"), _proxy(LLAMA, "sw=64 swp=6")
    assert any("sliding window" in f for f in soft.flags) and not soft.hard_flags
    assert any("sliding window" in f for f in hard.hard_flags)
    assert hard.penalties["sliding_window"] > soft.penalties["sliding_window"] > 1.0


def test_every_sliding_layer_needs_a_longer_window():
    """Without a global layer the floor is Mistral 7B's 4,096 tokens: 2,048 is one halving, every
    layer slides: 1 + c·1·1²."""
    proxy = _proxy(LLAMA, "sw=2048")
    assert proxy.penalties["sliding_window"] == pytest.approx(1 + SHIPPED.sliding_window_coef)
