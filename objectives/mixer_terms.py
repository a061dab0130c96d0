"""Accuracy terms for layers whose mixer is not full attention: linear attention with a recurrent
state (Gated DeltaNet, Kimi Delta Attention, Mamba-2: every linear mixer archscout models) and
sliding-window attention, as functions of the share of full-attention layers kept and of the
window. The term applies to every attention kind (GQA, MLA) and every linear mixer: the evidence
spans GQA/MQA (Griffin, xLSTM's Llama), MLA (Kimi Linear) and the selective-SSM and gated
linear-attention families (the comparison rows in `tests/data/accuracy/SOURCES.md`).

Evidence (calibration family `hybrid`, none of it from the reserved sources of `accuracy_sources`):
- Hybrids keeping 1/8 to 1/2 of the mixer layers as attention match or beat the all-attention model
  trained identically: Kimi Linear (arXiv 2510.26692) Table 1, KDA:MLA 1:1/3:1/7:1 validation
  perplexity 5.66/5.65/5.70 vs 5.77 for all-MLA, 15:1 worse (5.82) [V] (the fitted rows); signs
  only: Griffin (arXiv 2402.19427) Table 1, better than its MQA Transformer at 1B–7B [V];
  Waleffe et al. 2024 (arXiv 2406.07887) abstract, +2.65 points at 8B [V]; MiniMax-01 (arXiv
  2501.08313) Table 2, lower loss than softmax at equal compute [V].
- With no attention layer, no verified loss row (xLSTM's Table 1 was not found in a stored copy):
  signs only, Hawk trails Griffin's MQA at 1B and 7B, leads at 3B (Griffin Table 1) [V]; Meta
  Lingua's Hawk and Mamba trail its Transformer at 1B and 7B (README) [V]; MiniMax-01's pure
  lightning attention reaches a lower loss envelope than softmax (Table 2) [V]. The linear-only
  coefficient is set by Kimi Linear's 15:1 row alone, through the interpolation below 1/8.

The log-factor is piecewise linear in f, the attention share of mixer layers: `hybrid_coef` over
the hybrids' published range f ∈ [1/8, 1/2], `linear_only_coef` at f = 0, linear between 0 and 1/8,
and falling to 0 at f = 1 (continuity; no hybrid published above 1/2). Both coefficients are fitted
(`objectives/data/accuracy_coefficients.toml`); the sliding-window term is a policy penalty.
"""

from __future__ import annotations

import math

HYBRID_ATTENTION_SHARE_RANGE = (1.0 / 8.0, 1.0 / 2.0)  # Kimi Linear 7:1 … 1:1, MiniMax-01 7:1
# Smallest window with published parity: Gemma 3 (arXiv 2503.19786) Fig. 4, 4,096 down to 512 tokens
# at 1:1 and 3:1 local:global "without impacting perplexity" (Δppl within ±0.01) [V].
MIN_WINDOW_TOKENS = 512
# Mistral-7B-v0.1: every layer sliding with a 4,096-token window [V, config].
MIN_ALL_SLIDING_WINDOW_TOKENS = 4096
# Hard flag: a window 4x below the smallest published one (policy: "far below the data").
HARD_MIN_WINDOW_TOKENS = MIN_WINDOW_TOKENS // 4


def linear_mixer_log_factor(full_attention_frac: float, hybrid_coef: float,
                            linear_only_coef: float) -> float:  # fmt: skip
    """ln P_lin at attention share f (1: no linear layer, 0: no attention layer)."""
    low, high = HYBRID_ATTENTION_SHARE_RANGE
    share = min(max(full_attention_frac, 0.0), 1.0)
    if share >= high:
        return hybrid_coef * (1.0 - share) / (1.0 - high)
    if share >= low:
        return hybrid_coef
    return linear_only_coef + (hybrid_coef - linear_only_coef) * share / low


def linear_attention_factor(full_attention_frac: float, hybrid_coef: float,
                            linear_only_coef: float) -> float:  # fmt: skip
    return math.exp(linear_mixer_log_factor(full_attention_frac, hybrid_coef, linear_only_coef))


def _window_halvings(window_tokens: float, floor_tokens: float) -> float:
    return max(0.0, math.log2(floor_tokens / window_tokens))


def sliding_window_penalty(
    window_tokens: float, sliding_frac: float, has_global_layer: bool, coef: float
) -> float:
    """1 + c·s·h², s the share of attention layers that slide, h the halvings of the window below
    512 tokens (with a global layer; Gemma 3 Fig. 4) or 4,096 (every layer sliding; Mistral 7B)."""
    if sliding_frac <= 0.0:
        return 1.0
    floor = MIN_WINDOW_TOKENS if has_global_layer else MIN_ALL_SLIDING_WINDOW_TOKENS
    return 1.0 + coef * sliding_frac * _window_halvings(window_tokens, floor) ** 2
