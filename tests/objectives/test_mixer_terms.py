"""Linear-attention and sliding-window terms (objectives/mixer_terms.py): golden values derived by
hand, monotonicity over their whole domain, and the flags where the evidence ends."""


import pytest

from objectives.accuracy import predict_loss
from objectives.accuracy_coefficients import SHIPPED
from objectives.mixer_terms import linear_attention_penalty, sliding_window_penalty
from objectives.shapes import build

LLAMA = "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"
TOKENS = 1e12


def test_linear_attention_penalty_golden():
    """c = 0.01: f = 0 gives 1 + c = 1.01; f = 1/16 is half-way below 1/8, 1 + c·0.5² = 1.0025;
    at or above 1/8 (MiniMax-01, Nemotron-H) no term."""
    assert linear_attention_penalty(0.0, 0.01) == pytest.approx(1.01)
    assert linear_attention_penalty(1 / 16, 0.01) == pytest.approx(1.0025)
    assert linear_attention_penalty(1 / 8, 0.01) == 1.0
    assert linear_attention_penalty(1.0, 0.01) == 1.0


def test_sliding_window_penalty_golden():
    """c = 0.005: 5 of 6 layers at 512 tokens with a global layer: 1 + c·(5/6)·1² = 1.0041667;
    every layer at 1,024 without a global layer: two halvings below 4,096, 1 + c·4 = 1.02."""
    assert sliding_window_penalty(512, 5 / 6, True, 0.005) == pytest.approx(1 + 0.005 * 5 / 6)
    assert sliding_window_penalty(1024, 1.0, False, 0.005) == pytest.approx(1.02)
    assert sliding_window_penalty(1024, 5 / 6, True, 0.005) == 1.0
    assert sliding_window_penalty(64, 0.0, True, 0.005) == 1.0


@pytest.mark.parametrize("frac", [i / 64 for i in range(64)])
def test_linear_attention_penalty_falls_as_full_attention_is_kept(frac):
    assert linear_attention_penalty(frac, 0.01) >= linear_attention_penalty(frac + 1 / 64, 0.01)


@pytest.mark.parametrize("window", [2**i for i in range(4, 14)])
@pytest.mark.parametrize("has_global", [True, False])
def test_sliding_window_penalty_falls_with_the_window(window, has_global):
    assert sliding_window_penalty(window, 0.8, has_global, 0.005) >= sliding_window_penalty(
        2 * window, 0.8, has_global, 0.005
    )


def _proxy(extra: str):
    return predict_loss(build(f"{LLAMA} {extra}".strip()), TOKENS)


def test_published_hybrids_carry_no_term_and_no_flag():
    """Qwen3-Next / Kimi Linear's 3 linear : 1 full, MiniMax-01's 7 : 1 and Gemma 3's 5 local
    (1,024) : 1 global are inside the evidence."""
    for extra in ("mix=1 full=4", "mix=2 full=4", "mix=3 full=8", "sw=1024 swp=6"):
        proxy = _proxy(extra)
        assert proxy.penalties["linear_attention"] == 1.0
        assert proxy.penalties["sliding_window"] == 1.0
        assert not proxy.flags or all("tokens per param" in f for f in proxy.flags), extra


def test_no_full_attention_is_penalized_and_hard_flagged():
    proxy = _proxy("mix=3 full=0")
    assert proxy.penalties["linear_attention"] == pytest.approx(1 + SHIPPED.linear_attention_coef)
    assert any("full-attention share" in f for f in proxy.hard_flags)
    assert proxy.ranked_loss_nats == proxy.band_high_nats > proxy.loss_nats


def test_few_full_attention_layers_soft_flagged():
    proxy = _proxy("mix=1 full=16")  # 2 of 32: 1/16 < 1/8
    assert proxy.penalties["linear_attention"] > 1.0
    assert any("full-attention share" in f for f in proxy.flags) and not proxy.hard_flags


def test_window_far_below_the_data_hard_flagged():
    soft, hard = _proxy("sw=512 swp=6"), _proxy("sw=128 swp=6")
    assert any("sliding window" in f for f in soft.flags) and not soft.hard_flags
    assert any("sliding window" in f for f in hard.hard_flags)
    assert hard.penalties["sliding_window"] > soft.penalties["sliding_window"] > 1.0


def test_every_sliding_layer_needs_a_longer_window():
    """Without a global layer the floor is Mistral 7B's 4,096 tokens: 2,048 is one halving, every
    layer slides: 1 + c·1·1²."""
    proxy = _proxy("sw=2048")
    assert proxy.penalties["sliding_window"] == pytest.approx(1 + SHIPPED.sliding_window_coef)
