"""Capacity terms of the accuracy proxy: what a design's parameters are worth against a dense
Transformer's. MoE (the Joint MoE law's token-dependent expert gain and Krajewski's granularity
gain), the vocabulary (Tao et al.'s tokens per character and vocabulary grid), depth at fixed
parameters (the Gemstones law), attention and KV width (MLA read through its latent rank), head
dimension, FFN width and gating.

Every multiplicative term is normalized so that the reference shape, Llama-3-8B's (H 4096, 32
layers, 32 query / 8 KV heads of 128, FFN 14336, vocabulary 128256), carries none (factor 1).
Every law is used inside the range of the runs it was fitted on: outside, its inputs are clamped
to the range's edge (never extrapolated) and `accuracy_flags` raises a flag. Provenance tags as in
`accuracy_terms`: [V] read in the paper, [V2] two copies agree, [S] one secondary copy (a full-text
transcription read for this module), [R] recalled; "policy" marks a size chosen where no published
law exists, penalty-only (it can never make a design better than the standard shape). Plain floats
in, plain floats out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# ---- the reference shape (Llama-3-8B, Meta config.json; exact counts from cost_model.params) -----

REFERENCE_NON_EMBEDDING_PARAMS = 6_979_588_096  # 32 layers × 218.1M
REFERENCE_LAYERS = 32
REFERENCE_KV_WIDTH_FRAC = 8 * 128 / 4096  # n_kv·d_h / H = 1/4
REFERENCE_MIX_RATIO = 3 * 14336 / (2 * 4096 + 2 * 1024)  # Bian's r: MLP / attention params = 4.2


def clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


# ---- MoE: the Joint MoE law (Ludziejewski et al. 2025, arXiv 2502.05172) ------------------------


@dataclass(frozen=True)
class JointMoELaw:
    """L(N, D, Ê) = a·Ê^δ·N^(α + γ ln Ê) + b·Ê^ω·D^(β + ζ ln Ê) + c (Eq. 6), Ê the saturating
    transform of the expert count (Eq. 4); N the active parameters with embeddings, D tokens."""

    a: float
    alpha: float
    delta: float
    gamma: float
    b: float
    beta: float
    omega: float
    zeta: float
    e_start: float
    e_max: float
    c: float

    def saturated_experts(self, experts: float) -> float:
        """1/Ê = 1/(E − 1 + (1/E_start − 1/E_max)^-1) + 1/E_max; Ê(1) = E_start."""
        start = 1.0 / (1.0 / self.e_start - 1.0 / self.e_max)
        return 1.0 / (1.0 / (experts - 1.0 + start) + 1.0 / self.e_max)

    def loss_terms(self, experts: float) -> tuple[float, float, float, float]:
        """(m, μ, n, ν) of the law reduced to Chinchilla's form at E (App. B Table 4)."""
        hat = self.saturated_experts(experts)
        log_hat = math.log(hat)
        return (self.a * hat**self.delta, self.alpha + self.gamma * log_hat,
                self.b * hat**self.omega, self.beta + self.zeta * log_hat)  # fmt: skip

    def loss(self, params: float, tokens: float, experts: float) -> float:
        m, mu, n, nu = self.loss_terms(experts)
        return m * params**mu + n * tokens**nu + self.c


JOINT_MOE = JointMoELaw(
    a=35.91, alpha=-0.1889, delta=-0.2285, gamma=0.0098, b=35.98, beta=-0.1775, omega=0.5529,
    zeta=-0.0259, e_start=2.0732, e_max=290.4521, c=1.3637,
)  # fmt: skip  # App. B Table 3 [S: full-text transcription; Table 4's E = 1 row reproduces]
# The runs of App. E: Switch (top-1) MoE with E <= 32 experts of the dense FFN's size, 79M–2.7B
# active parameters, at most 80B tokens on 1.1B (73 tokens per active parameter) [S].
JOINT_MOE_EXPANSION_RANGE = (1.0, 32.0)
JOINT_MOE_PARAMS_RANGE = (7.9e7, 2.7e9)
JOINT_MOE_MAX_TOKENS_PER_PARAM = 73.0


def joint_moe_multiplier(expansion: float, active_params: float, tokens: float,
                         law: JointMoELaw = JOINT_MOE) -> float:  # fmt: skip
    """N_eq/N: the dense size the law gives the loss of an MoE with `expansion` routed experts per
    active expert, at the same active size and tokens. Depends on tokens (the law's ζ, ω: the MoE's
    gain grows with training) and on N (γ). Inputs clamped to the runs (`JOINT_MOE_*`)."""
    experts = clamp(expansion, JOINT_MOE_EXPANSION_RANGE)
    params = clamp(active_params, JOINT_MOE_PARAMS_RANGE)
    tokens = min(tokens, JOINT_MOE_MAX_TOKENS_PER_PARAM * params)
    m1, mu1, n1, nu1 = law.loss_terms(1.0)
    excess = law.loss(params, tokens, experts) - n1 * tokens**nu1 - law.c
    if excess <= 0.0:  # no dense size reaches it: the caller caps N_eff at the total
        return math.inf
    return (excess / m1) ** (1.0 / mu1) / params


@dataclass(frozen=True)
class KrajewskiLaw:
    """L(N, D, G) = c + (g/G^gamma + a)·N^-alpha + b·D^-beta (Krajewski et al. 2024, arXiv
    2402.07871, Eq. 5 [S]); only the G dependence is used, as a multiplier on N."""

    a: float
    alpha: float
    g: float
    gamma: float
    source: str


KRAJEWSKI = KrajewskiLaw(
    a=18.1, alpha=0.115, g=2.1, gamma=0.58,
    source="Krajewski et al. 2024 fitted coefficients (docs/accuracy_proxy.md §3.2) [S]",
)  # fmt: skip
KRAJEWSKI_GRANULARITY_RANGE = (1.0, 16.0)  # G of the runs, 1–16 [R]; clamped beyond
COARSE_GRANULARITY_MAX = 1.5  # "G = 1" read as G rounding to 1 (notes §7.1 item 2)
REFERENCE_FFN_EXPANSION = 4.0  # Krajewski's dense FFN is 4·d_model; G = 4·H / d_expert without one


def granularity_multiplier(granularity: float, law: KrajewskiLaw = KRAJEWSKI) -> float:
    """Parameters a G = 1 MoE needs to match granularity G: ((g + a)/(g·G^-γ + a))^(1/α)
    (1.93× at G = 8); G clamped to the runs."""
    grain = clamp(granularity, KRAJEWSKI_GRANULARITY_RANGE)
    return ((law.g + law.a) / (law.g * grain**-law.gamma + law.a)) ** (1.0 / law.alpha)


# ---- vocabulary: Tao et al. 2024, Scaling Laws with Vocabulary (arXiv 2407.13623) --------------

# Tao et al. 2024 (arXiv 2407.13623) §2.2 Eq. 3: tokens per character of BPE tokenizers from 1K to
# 1024K, f(V) = a·ln²V + b·lnV + c [V: the authors' github.com/sail-sg/scaling-with-vocab utils.py
# D_to_H, 0.00639222, -0.15811069, 1.20470122]. Their runs' vocabularies span 4K–96K (exp_data.csv,
# 4096–96256) [V]:
# embedding rows beyond a 96K vocabulary count as no capacity (no run shows them worth any).
TAO_FERTILITY = (0.00639222, -0.15811069, 1.20470122)
TAO_VOCAB_RANGE = (4096.0, 96256.0)


def tokens_per_char(vocab: float) -> float:
    a, b, c = TAO_FERTILITY
    log_vocab = math.log(vocab)
    return a * log_vocab**2 + b * log_vocab + c


def vocab_tokens_frac(vocab_size: float) -> float:
    """Text seen per training token against the 96K tokenizer, f(96K)/f(V): a smaller vocabulary
    cuts the same text into more tokens (8K: 0.78 of the text per token); V clamped to the grid."""
    return tokens_per_char(TAO_VOCAB_RANGE[1]) / tokens_per_char(clamp(vocab_size, TAO_VOCAB_RANGE))


# ---- depth at fixed parameters: the Gemstones law ------------------------------------------------


@dataclass(frozen=True)
class GemstonesLaw:
    """L = e + a_w·w^-w_exp + a_d·d^-d_exp + a_n·N^-n_exp + b·D^-b_exp (McLeish et al. 2025,
    arXiv 2502.06857, Approach 3 with width and depth, "hot" checkpoints >= 100B tokens [V])."""

    e_nats: float
    a_width: float
    width_exp: float
    a_depth: float
    depth_exp: float
    a_params: float
    params_exp: float
    b_tokens: float
    tokens_exp: float

    def loss_nats(self, width: float, depth: float, params: float, tokens: float) -> float:
        return (self.e_nats + self.a_width * width**-self.width_exp
                + self.a_depth * depth**-self.depth_exp
                + self.a_params * params**-self.params_exp
                + self.b_tokens * tokens**-self.tokens_exp)  # fmt: skip


GEMSTONES = GemstonesLaw(
    e_nats=math.exp(0.3966), a_width=math.exp(1.0739), width_exp=0.2053,
    a_depth=math.exp(-0.2098), depth_exp=0.4741, a_params=math.exp(6.2175), params_exp=0.3721,
    b_tokens=math.exp(10.904), tokens_exp=0.5116,
)  # fmt: skip  # parameters_delta-3/approach_3_width_depth_..._hot_100b+.json (notes §2.5) [V]
GEMSTONES_DEPTH_RANGE = (3, 80)  # depths of the 22 Gemstones models [V]
# Width seen by the law: sqrt(per-layer params / 12), the 12·w² of a standard block, so that a
# narrow attention or FFN at a large d_model does not buy the width term (Gemstones' models are
# standard blocks: width and per-layer params move together).
PARAMS_PER_WIDTH_SQ = 12.0


def capacity_width(params_per_layer: float) -> float:
    return math.sqrt(params_per_layer / PARAMS_PER_WIDTH_SQ)


def reference_layers(non_embedding_params: float) -> float:
    """Layers of the reference aspect ratio (Llama-3-8B's width/depth) at `non_embedding_params`:
    w/L = R_ref with w = sqrt(N/(12·L)) gives L = (sqrt(N/12)/R_ref)^(2/3)."""
    ref_width = capacity_width(REFERENCE_NON_EMBEDDING_PARAMS / REFERENCE_LAYERS)
    ref_ratio = ref_width / REFERENCE_LAYERS
    return (math.sqrt(non_embedding_params / PARAMS_PER_WIDTH_SQ) / ref_ratio) ** (2.0 / 3.0)


def depth_penalty(non_embedding_params: float, layers: float, training_tokens: float) -> float:
    """Gemstones loss of this depth over that of the reference aspect ratio at the same N and D
    (depth clamped to the Gemstones models' 3–80): steep below a few layers, flat for deep-thin."""
    ref = reference_layers(non_embedding_params)
    depth = clamp(layers, GEMSTONES_DEPTH_RANGE)
    actual = GEMSTONES.loss_nats(capacity_width(non_embedding_params / layers), depth,
                                 non_embedding_params, training_tokens)  # fmt: skip
    standard = GEMSTONES.loss_nats(capacity_width(non_embedding_params / ref),
                                   clamp(ref, GEMSTONES_DEPTH_RANGE), non_embedding_params,
                                   training_tokens)  # fmt: skip
    return actual / standard


# ---- attention capacity: width and KV width relative to d_model ---------------------------------
# The KV term's coefficient is fitted on MHA/MQA loss pairs (calibration family `attention`); the
# width and head-dim terms are policy penalties below the published shapes (no loss law varies
# n_q·d_h below d_model; Kaplan 2020 Fig. 5 keeps n_q·d_h = d_model).


def _halvings_below(value: float, floor: float) -> float:
    return max(0.0, math.log2(floor / value))


def attention_width_penalty(attention_width_frac: float, kappa: float) -> float:
    """1 + κ·log2(H/(n_q·d_h))² below H; 1 at or above (Llama-3-8B: n_q·d_h = H)."""
    return 1.0 + kappa * _halvings_below(attention_width_frac, 1.0) ** 2


# MLA: DeepSeek-V2 App. D.2 Table 9 [V]: MoE with MLA (latent rank 512) scores at least as MHA at
# H 2048 and at H 5120, so a latent rank of H/10 reads as MHA's KV width; a smaller rank reads
# proportionally narrower (the GQA evidence per halving), never wider than MHA.
MLA_PARITY_RANK_FRAC = 512 / 5120


def mla_kv_width_frac(kv_lora_rank: float, hidden_size: float) -> float:
    return min(1.0, kv_lora_rank / hidden_size / MLA_PARITY_RANK_FRAC)


def kv_width_penalty(kv_width_frac: float, coef: float) -> float:
    """(1 + c·log2(H/(n_kv·d_h)))/(1 + c·log2(4)), the log clipped at 0: at most MHA's KV width
    earns a bonus (GQA-4 at H, Llama-3-8B, is 1; MHA is (1/(1+2c))."""
    halvings = max(math.log2(1.0 / kv_width_frac), 0.0)
    reference = 1.0 + coef * math.log2(1.0 / REFERENCE_KV_WIDTH_FRAC)
    return (1.0 + coef * halvings) / reference


HEAD_DIM_FLOOR = 64  # no penalty in [64, 256] (notes §4.3)


def head_dim_penalty(head_dim: float, kappa: float) -> float:
    return 1.0 + kappa * _halvings_below(head_dim, HEAD_DIM_FLOOR) ** 2


# ---- FFN width and gating -----------------------------------------------------------------------
# Width: Kaplan 2020 Fig. 5 (middle) flat in d_ff/d_model at fixed N [V, caption]; Bian 2025b's
# best models have gated d_ff = d_model (Panda-3B) [V]; nothing narrower was published (policy
# penalty below). Gating: Narang et al. 2021 (arXiv 2102.11972) Table 1 [V]: at equal parameters,
# SwiGLU/GeGLU/ReGLU beat ReLU/GeLU/Swish FFNs (the calibration family `ffn`).


def ffn_width_penalty(ffn_width_frac: float, kappa: float) -> float:
    return 1.0 + kappa * _halvings_below(ffn_width_frac, 1.0) ** 2


def ffn_gating_penalty(gated: bool, coef: float) -> float:
    """1 + c for a non-gated FFN (two matrices) against a gated one of equal parameters."""
    return 1.0 if gated else 1.0 + coef
