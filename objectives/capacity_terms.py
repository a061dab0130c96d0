"""Shape and capacity terms of the accuracy proxy: MoE effective parameters (Clark's saturating
expert count, Krajewski's granularity), depth at fixed parameters (the Gemstones width/depth law),
attention and KV width relative to d_model, head dimension, FFN width, the MLP/attention mix
(dense only) and the vocabulary (Tao et al. 2024).

Every multiplicative term is normalized so that the reference shape, Llama-3-8B's (H 4096, 32
layers, 32 query / 8 KV heads of 128, FFN 14336, vocabulary 128256), carries none (factor 1).
Provenance tags as in `accuracy_terms`: [V] read in the paper, [V2] two copies agree, [S] one
secondary copy, [R] recalled, [D] derived here ("notes §x": `docs/accuracy_proxy.md` §x); "policy"
marks a size we chose where no published law exists (named, with the evidence that bounds it). Plain
floats in, plain floats out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from objectives.accuracy_coefficients import SHIPPED
from objectives.accuracy_terms import (
    CLARK_MAX_DENSE_PARAMS,
    CLARK_S_BASE,
    ClarkLaw,
    clark_saturated_experts,
)

# ---- the reference shape (Llama-3-8B, Meta config.json; exact counts from cost_model.params) -----

REFERENCE_NON_EMBEDDING_PARAMS = 6_979_588_096  # 32 layers × 218.1M
REFERENCE_LAYERS = 32
REFERENCE_KV_WIDTH_FRAC = 8 * 128 / 4096  # n_kv·d_h / H = 1/4
REFERENCE_MIX_RATIO = 3 * 14336 / (2 * 4096 + 2 * 1024)  # Bian's r: MLP / attention params = 4.2

# ---- MoE: Clark's saturating expert count, Krajewski's granularity -------------------------------


CLARK_MIN_DENSE_PARAMS = 15e6  # smallest dense size of Clark's runs (notes §3.1)


def clark_epc_multiplier(
    expansion: float, dense_params: float, start_offset: int = 1, law: ClarkLaw = CLARK_S_BASE,
) -> float:
    """N̄(N, Ê)/N̄(N, 1) of Clark et al. 2022 §5 (EPC), `expansion` = E/k routed experts per active
    expert, N the dense (active non-embedding) size. The exponent (b + c·log10 N)/a is Clark's
    inside their 15M–1.3B runs and held at 1.3B above: their fits shrink the gain with N at one
    token budget (130B), which Krajewski et al. 2024 show is an artefact of fixing D, so the
    shrinkage is not extrapolated (at 1.3B: 3.7× at E = 64, 5.6× at E = 512, notes §3.1)."""
    size = min(max(dense_params, CLARK_MIN_DENSE_PARAMS), CLARK_MAX_DENSE_PARAMS)
    exponent = (law.b + law.c * math.log10(size)) / law.a
    gain = clark_saturated_experts(law, expansion, start_offset) / clark_saturated_experts(
        law, 1.0, start_offset
    )
    return gain**exponent


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
    source="Krajewski et al. 2024 fitted coefficients (notes §3.2) [S]",
)  # fmt: skip
KRAJEWSKI_MAX_GRANULARITY = 16.0  # G range of the runs, 1–16 [R]; the gain is held beyond it
COARSE_GRANULARITY_MAX = 1.5  # "G = 1" read as G rounding to 1 (notes §7.1 item 2)
REFERENCE_FFN_EXPANSION = 4.0  # Krajewski's dense FFN is 4·d_model; G = 4·H / d_expert without one


def granularity_multiplier(
    granularity: float, law: KrajewskiLaw = KRAJEWSKI, scale: float = 1.0
) -> float:
    """Parameters a G = 1 MoE needs to match granularity G: ((g + a)/(g·G^-γ + a))^(1/α), raised to
    `scale` (fitted on the Krajewski-law rows `krajewski-*` of the calibration set, so that the
    gain is Krajewski's in loss under the Epoch base law; at scale 1: 1.93× at G = 8)."""
    grain = min(max(granularity, 1.0), KRAJEWSKI_MAX_GRANULARITY)
    ratio = (law.g + law.a) / (law.g * grain**-law.gamma + law.a)
    return ratio ** (scale / law.alpha)


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
    """Gemstones loss of this depth over that of the reference aspect ratio at the same N and D:
    steep below a few layers (L = 3 at 7B: +9%), nearly flat for deep-thin (L = 160: +0.5%)."""
    ref = reference_layers(non_embedding_params)
    actual = GEMSTONES.loss_nats(capacity_width(non_embedding_params / layers), layers,
                                 non_embedding_params, training_tokens)  # fmt: skip
    standard = GEMSTONES.loss_nats(capacity_width(non_embedding_params / ref), ref,
                                   non_embedding_params, training_tokens)  # fmt: skip
    return actual / standard


# ---- attention capacity: width and KV width relative to d_model ---------------------------------
# No published loss law varies attention width below d_model (Kaplan 2020 Fig. 5 varies head count
# and head size at n_q·d_h = d_model). Sizes are policy, bounded by: GQA-8/MQA cost −0.2%/−1.3% of
# score after uptraining (Ainslie 2023 Table 1 [V2]); from scratch at 7B, MHA > GQA-8 > MQA by 4
# and 8 MMLU points (DeepSeek-V2 App. D.1 Table 8 [V]); a low-rank head bottleneck hurts
# (Bhojanapalli 2020 [S]).

# Sizes from objectives/data/accuracy_coefficients.toml: KV_WIDTH_COEF fitted on Shazeer 2019's
# MHA/MQA loss pairs (calibration rows `shazeer-*`); the others policy (`fitted = false`).
ATTENTION_WIDTH_KAPPA = SHIPPED.attention_width_kappa  # per squared halving of n_q·d_h below H
KV_WIDTH_COEF = SHIPPED.kv_width_coef  # per halving of n_kv·d_h below H
KV_WIDTH_COEF_BAND = (0.0005, 0.005)  # Bian 2025b (GQA ~ neutral) to DeepSeek-V2 Table 8
HEAD_DIM_KAPPA = SHIPPED.head_dim_kappa  # per squared halving of d_h below 64
HEAD_DIM_FLOOR = 64  # no penalty in [64, 256] (notes §4.3)


def _halvings_below(value: float, floor: float) -> float:
    return max(0.0, math.log2(floor / value))


def attention_width_penalty(
    attention_width_frac: float, kappa: float = ATTENTION_WIDTH_KAPPA
) -> float:
    """1 + κ·log2(H/(n_q·d_h))² below H; 1 at or above (Llama-3-8B: n_q·d_h = H)."""
    return 1.0 + kappa * _halvings_below(attention_width_frac, 1.0) ** 2


MLA_KV_WIDTH_FRAC = 2.0  # policy: MLA read as one halving wider than MHA (DeepSeek-V2 Table 9:
# MLA beats MHA with fewer params, small and large MoE [V]); the widest KV that earns a bonus


def kv_width_penalty(kv_width_frac: float, coef: float = KV_WIDTH_COEF) -> float:
    """(1 + c·log2(H/(n_kv·d_h)))/(1 + c·log2(4)), the log clipped at -1: GQA-4 at H (Llama-3-8B)
    is 1, MHA 0.4% below, MLA 0.6% below, MQA at 8B 0.6% above (c = 0.002)."""
    halvings = max(math.log2(1.0 / kv_width_frac), -math.log2(MLA_KV_WIDTH_FRAC))
    reference = 1.0 + coef * math.log2(1.0 / REFERENCE_KV_WIDTH_FRAC)
    return (1.0 + coef * halvings) / reference


def head_dim_penalty(head_dim: float, kappa: float = HEAD_DIM_KAPPA) -> float:
    return 1.0 + kappa * _halvings_below(head_dim, HEAD_DIM_FLOOR) ** 2


# ---- FFN width relative to d_model ---------------------------------------------------------------
# Kaplan 2020 Fig. 5 (middle): loss is flat in d_ff/d_model over a wide range at fixed N [V,
# caption]; Bian 2025b's best models have gated d_ff = d_model (Panda-3B) [V]; nothing narrower was
# published. f = active FFN params per layer / (3·H²), a SwiGLU width in units of H.

FFN_WIDTH_KAPPA = SHIPPED.ffn_width_kappa  # policy: per squared halving of f below 1


def ffn_width_penalty(ffn_width_frac: float, kappa: float = FFN_WIDTH_KAPPA) -> float:
    return 1.0 + kappa * _halvings_below(ffn_width_frac, 1.0) ** 2


# ---- vocabulary (Tao et al. 2024, arXiv 2407.13623) ----------------------------------------------
# Optimal vocabulary parameters N_v = V·d grow as N_nv^γ, slower than non-vocabulary params [V,
# abstract]; "the optimal vocabulary size of Llama2-70B should have been at least 216K" [V].

TAO_ANCHOR_NON_VOCAB_PARAMS = 68.45e9  # Llama-2-70B non-embedding params (80 × 855.6M) [D]
TAO_ANCHOR_VOCAB_PARAMS = 216_000 * 8192  # its predicted optimum: 216K × d_model 8192 [V]
# N_v,opt ∝ N_nv^γ: γ fitted on Tao's published optima (calibration rows `tao-*`)
TAO_VOCAB_EXPONENT = SHIPPED.tao_vocab_exponent
VOCAB_FLAT_FACTOR = 4.0  # policy: no term within 4× of the optimum (Tao Fig. 1: a flat minimum)
VOCAB_KAPPA = SHIPPED.vocab_kappa  # policy: per squared e-fold beyond the flat band
VOCAB_DATA_MAX = 262_144  # largest vocabulary in the validation models (Gemma 2: 256,000) [V]


def optimal_vocab_size(
    non_vocab_params: float, hidden_size: float, exponent: float = TAO_VOCAB_EXPONENT
) -> float:
    """Tao's optimal vocabulary: V·d = N_v,anchor·(N_nv/N_nv,anchor)^γ, over d."""
    vocab_params = (
        TAO_ANCHOR_VOCAB_PARAMS * (non_vocab_params / TAO_ANCHOR_NON_VOCAB_PARAMS) ** exponent
    )
    return vocab_params / hidden_size


REFERENCE_VOCAB_SIZE = 128_256  # Llama-3's: the flat band always reaches it (the standard shape)


def vocab_flat_band(optimal: float) -> tuple[float, float]:
    """No vocabulary term within ÷4 … ×4 of Tao's optimum, widened up to the reference
    vocabulary."""
    return optimal / VOCAB_FLAT_FACTOR, max(optimal * VOCAB_FLAT_FACTOR, REFERENCE_VOCAB_SIZE)


def vocab_penalty(vocab_size: float, optimal: float, kappa: float = VOCAB_KAPPA) -> float:
    low, high = vocab_flat_band(optimal)
    excess = max(0.0, math.log(low / vocab_size), math.log(vocab_size / high))
    return 1.0 + kappa * excess**2


def counted_vocab_params(vocab_params: float, vocab_size: float, optimal: float) -> float:
    """Embedding params beyond the flat band's top add no capacity (Tao et al.: past the optimum
    larger vocabularies stop helping); within it they count (Chinchilla App. F convention)."""
    return vocab_params * min(1.0, vocab_flat_band(optimal)[1] / vocab_size)


# ---- embedding convention (Kaplan 2020 §3.1 vs Chinchilla App. F) --------------------------------
# Kaplan: non-embedding N predicts loss across shapes (Fig. 6) [V]; Chinchilla and Epoch fitted N
# with embeddings counted [V]. Central: the midpoint of the two conventions (policy); the band
# spans them.
EMBEDDING_WEIGHT = 0.5
EMBEDDING_WEIGHT_BAND = (0.0, 1.0)
