"""Terms of the accuracy proxy (`docs/accuracy_proxy.md` §7): the Chinchilla-form base law and
its compute optimum, Clark's routed-model law, the MLP/attention mix law, the precision
multipliers, PTQ and the downstream mapping, each with its fitted coefficients and validated range.
The notes' first-round shape terms (P_AR in R = H/L, the power-mean N_eff, P_kv in n_q/n_kv) stay
here for `search/lint/guidelines.py` and the notes' §7.4 cases; the proxy itself uses
`capacity_terms`
(issue 11: saturating MoE, depth at fixed N, attention/FFN capacity, vocabulary).

Every coefficient is a named constant carrying its paper, equation or table and the notes'
provenance tag: [V] read in the paper, [V2] two copies agree, [S] one secondary copy, [R] recalled,
[D] derived by the notes' author from published per-run data. "Notes §x" points into
`docs/accuracy_proxy.md`. Functions take and return plain floats in the units their names carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from cost_model import FLOP_PER_MAC
from objectives.accuracy_coefficients import SHIPPED

# ---- base law: L(N, D) = E + A / N^alpha + B / D^beta (notes §1.1, §7.1 item 3) ------------------


@dataclass(frozen=True)
class BaseLaw:
    """L(N, D) = e_nats + a_coef / N^alpha + b_coef / D^beta; N counts every parameter, embeddings
    included (Chinchilla App. F), D the training tokens; nats/token on the fitting corpus."""

    name: str
    e_nats: float  # E, the irreducible loss
    a_coef: float  # A
    b_coef: float  # B
    alpha: float  # parameter exponent
    beta: float  # token exponent
    source: str


EPOCH = BaseLaw(
    name="epoch",
    e_nats=1.8172,  # SE 0.03
    a_coef=482.01,  # SE 124.58
    b_coef=2085.43,  # SE 1293.23
    alpha=0.3478,  # SE 0.02
    beta=0.3658,  # SE 0.02
    source="Besiroglu, Erdil, Barnett, You 2024 (arXiv 2404.10102), refit of Chinchilla Approach 3 "
    "on the digitised Figure 4 points [V2]; notes §1.1",
)
HOFFMANN = BaseLaw(
    name="hoffmann",
    e_nats=1.6934,
    a_coef=406.4,
    b_coef=410.7,
    alpha=0.3392,
    beta=0.2849,
    source="Hoffmann et al. 2022 (arXiv 2203.15556) App. D.2 Eq. 10, unrounded from the paper's "
    "TeX source as quoted by Epoch [V2]; reproduces Table A3 (notes §1.1)",
)
HOFFMANN_PRINTED = BaseLaw(
    name="hoffmann_printed",
    e_nats=1.69,
    a_coef=406.4,
    b_coef=410.7,
    alpha=0.34,
    beta=0.28,
    source="Hoffmann et al. 2022 App. D.2 Eq. 10 as printed [V]: rounded, biased (32.2B instead of "
    "the paper's 40B at the Gopher budget); kept to reproduce the notes' §7.4 cases, not a default",
)

# Fit range of either set (notes §1.1 "Fit range to enforce", §7.1 item 3).
BASE_LAW_PARAMS_RANGE = (7e7, 1.6e10)  # N of the Chinchilla runs / digitised points [V]
BASE_LAW_TOKENS_RANGE = (5e9, 5e11)  # "5B to 500B tokens" (Hoffmann §3.3) [V]
BASE_LAW_MAX_TOKENS_PER_PARAM = 341.0  # largest D/N in the digitised Chinchilla data [V]

# C ≈ 6·N·D: forward + backward ≈ 3 passes of one MAC per parameter per token (Kaplan 2020 §2.1;
# Chinchilla Eq. 4); 2 FLOP per MAC is the project's one FLOP convention.
TRAINING_PASSES_PER_TOKEN = 3.0
TRAINING_FLOP_PER_PARAM_TOKEN = FLOP_PER_MAC * TRAINING_PASSES_PER_TOKEN


def base_loss_nats(law: BaseLaw, model_params: float, training_tokens: float) -> float:
    """L(N, D) of `law` (broadcasts over numpy arrays)."""
    return (
        law.e_nats + law.a_coef / model_params**law.alpha + law.b_coef / training_tokens**law.beta
    )


def training_compute_flop(active_params: float, training_tokens: float) -> float:
    """C = 6·N_act·D (notes §7.1: the compute of ΔL and CEF)."""
    return TRAINING_FLOP_PER_PARAM_TOKEN * active_params * training_tokens


@dataclass(frozen=True)
class ComputeOptimum:
    """The compute-optimal dense model of a base law at one training compute."""

    model_params: float
    training_tokens: float
    loss_nats: float

    @property
    def tokens_per_param(self) -> float:
        return self.training_tokens / self.model_params


def _frontier_scale(law: BaseLaw) -> float:
    """G = (alpha·A / (beta·B))^(1/(alpha+beta)) of Chinchilla Eq. 4."""
    return (law.alpha * law.a_coef / (law.beta * law.b_coef)) ** (1.0 / (law.alpha + law.beta))


def compute_optimum(law: BaseLaw, compute_flop: float) -> ComputeOptimum:
    """argmin of L over 6ND = C (Chinchilla Eq. 4): N_opt = G·(C/6)^a, D_opt = (C/6)^b / G."""
    scale, param_tokens = _frontier_scale(law), compute_flop / TRAINING_FLOP_PER_PARAM_TOKEN
    exponent_sum = law.alpha + law.beta
    params = scale * param_tokens ** (law.beta / exponent_sum)
    tokens = param_tokens ** (law.alpha / exponent_sum) / scale
    return ComputeOptimum(params, tokens, base_loss_nats(law, params, tokens))


def compute_for_loss_flop(law: BaseLaw, loss_nats: float) -> float:
    """C* with L*(C*) = `loss_nats`; infinite at or below E.

    On the frontier both reducible terms fall as (C/6)^(-alpha·beta/(alpha+beta)), so
    L*(C) - E = K·(C/6)^(-alpha·beta/(alpha+beta)) with K = A·G^-alpha + B·G^beta: closed form.
    """
    excess_nats = loss_nats - law.e_nats
    if excess_nats <= 0:
        return math.inf
    scale = _frontier_scale(law)
    coef_nats = law.a_coef * scale**-law.alpha + law.b_coef * scale**law.beta
    decay = law.alpha * law.beta / (law.alpha + law.beta)
    return TRAINING_FLOP_PER_PARAM_TOKEN * (excess_nats / coef_nats) ** (-1.0 / decay)


def compute_equivalence_frac(law: BaseLaw, loss_nats: float, compute_flop: float) -> float:
    """CEF = C*/C: the fraction of `compute_flop` an optimal dense model needs to reach
    `loss_nats`."""
    return compute_for_loss_flop(law, loss_nats) / compute_flop


def recalibrate_base_law(
    law: BaseLaw, model_params: np.ndarray, training_tokens: np.ndarray, losses_nats: np.ndarray
) -> BaseLaw:
    """Refit E, A, B on a target corpus with `law`'s exponents kept (linear least squares).

    Notes §6.1 and §7.1 item 3: absolute losses are not portable across corpora and tokenizers;
    re-anchor on a reference family trained on the target corpus.
    """
    design = np.stack([np.ones_like(model_params, dtype=float),
                       np.asarray(model_params, dtype=float) ** -law.alpha,
                       np.asarray(training_tokens, dtype=float) ** -law.beta], axis=1)  # fmt: skip
    (e_nats, a_coef, b_coef), *_ = np.linalg.lstsq(
        design, np.asarray(losses_nats, float), rcond=None
    )
    name, source = f"{law.name}_recalibrated", f"{law.name} exponents, E/A/B refit on target data"
    return BaseLaw(name, float(e_nats), float(a_coef), float(b_coef), law.alpha, law.beta, source)


# ---- MoE: effective parameter count (notes §3.7, §7.1 item 2) ------------------------------------

MOE_WEIGHT_CENTRAL = 0.5  # geometric mean; DeepSeekMoE 16B ≈ DeepSeek 7B implies 0.51 [D] (§3.7)
MOE_WEIGHT_BAND = (0.45, 0.65)  # DeepSeekMoE 145B ≈ 67B at 28.5% FLOPs implies ≈ 0.62 [D] (§3.7)
MOE_WEIGHT_COARSE = 0.45  # §7.1 item 2: "G = 1 (coarse experts): apply w toward 0.45"
# Granularity G = d_ff / d_expert (Krajewski et al. 2024, arXiv 2402.07871 [V2]); "G = 1" read as
# G rounding to 1. Without a dense layer, d_ff is Krajewski's dense FFN of 4·d_model.
COARSE_GRANULARITY_MAX = 1.5
REFERENCE_FFN_EXPANSION = 4.0
MOE_MAX_EXPERTS = 512  # Clark et al. 2022 tested E ≤ 512 (§3.1) [S]; §7.2: E > 512 is a hard flag
MOE_MIN_ACTIVATION_FRAC = 1.0 / 128  # Ling 2.0 report Eq. 1: power law holds down to 1/128 [V]


def moe_effective_params(
    active_non_embedding_params: float,
    total_non_embedding_params: float,
    embedding_params: float,
    moe_weight: float,
) -> float:
    """N_eff = N_emb + N_act,ne^(1-w) · N_tot,ne^w (notes §7.1 item 2); dense: N_act = N_tot."""
    mean = (
        active_non_embedding_params ** (1.0 - moe_weight) * total_non_embedding_params**moe_weight
    )
    return embedding_params + mean


@dataclass(frozen=True)
class ClarkLaw:
    """log10 L = a·log10 N + b·log10 Ê + c·log10 N·log10 Ê + d, with Ê the saturating transform
    of E (Clark et al. 2022, arXiv 2202.01169, §4–5); N is the dense (active) parameter count."""

    a: float
    b: float
    c: float
    d: float
    e_start: float
    e_max: float
    source: str


CLARK_S_BASE = ClarkLaw(
    a=-0.082, b=-0.108, c=0.009, d=1.104, e_start=1.847, e_max=314.5,
    source="Clark et al. 2022 (arXiv 2202.01169) S-BASE fit [S]; notes §3.1",
)  # fmt: skip
CLARK_MAX_DENSE_PARAMS = 1.3e9  # largest dense size of Clark's runs (notes §3.1)


def clark_saturated_experts(law: ClarkLaw, experts: float, start_offset: int = 1) -> float:
    """Ê: 1/Ê = 1/(E - 1 + (1/(E_start - k) - 1/E_max)^-1) + 1/E_max, k = `start_offset` ∈ {0, 1}
    (notes §3.1: which k the paper uses is open, §9 item 2)."""
    start = 1.0 / (1.0 / (law.e_start - start_offset) - 1.0 / law.e_max)
    return 1.0 / (1.0 / (experts - 1.0 + start) + 1.0 / law.e_max)


def clark_epc_ratio(
    law: ClarkLaw, dense_params: float, experts: float, start_offset: int = 1
) -> float:
    """Clark's effective parameter count over that of the same model with one expert,
    N̄(N,E)/N̄(N,1) (§5): log10 N̄ = log10 N + (b + c·log10 N)·log10 Ê / a. A cross-check of N_eff
    only."""
    log_params = math.log10(dense_params)
    gain = math.log10(clark_saturated_experts(law, experts, start_offset))
    base = math.log10(clark_saturated_experts(law, 1.0, start_offset))
    return 10.0 ** ((law.b + law.c * log_params) * (gain - base) / law.a)


# ---- P_AR: depth versus width, R = d_model / n_layers (notes §2.4, §7.1 item 4) ------------------

ASPECT_KAPPA_CENTRAL = 0.005  # §7.1 item 4, central
ASPECT_KAPPA_BAND = (0.0034, 0.0076)  # Kaplan 2020 Fig. 5 1.5B pair; Morph refit, <= 300M [D]
ASPECT_RATIO_OPT_CENTRAL = 48.0  # symmetric refit of Bian 2025 (Morph) runs with N ≥ 237M [D]
ASPECT_RATIO_OPT_BAND = (36.0, 64.0)  # all-groups refit R* = 35.9 [D]; per-group best R = 64 [V]
ASPECT_RATIO_MORPH_RANGE = (17.0, 384.0)  # R of the Morph runs (soft flag) [V]
ASPECT_RATIO_KAPLAN_RANGE = (10.0, 700.0)  # Kaplan 2020 Fig. 5 (§7.2: hard flag) [V]
MIN_LAYERS_SOFT = 4  # §7.1 item 4: L < 4 is a soft flag (Morph data go down to 3 layers)
MIN_LAYERS_HARD = 2  # Kaplan 2020 Fig. 6: fewer than 2 layers deviate strongly [V]
LEVINE_LOG_WIDTH_INTERCEPT = 5.039  # Levine et al. 2020: ln d_opt ≈ 5.039 + 0.0555·L [R]
LEVINE_LOG_WIDTH_PER_LAYER = 0.0555  # [R], verify before relying on it (notes §9 item 1)
LEVINE_DEPTH_SLACK = 1.5  # §7.1 item 4: soft flag when L > 1.5·L_opt(H)


def aspect_ratio_penalty(aspect_ratio: float, kappa: float, optimal_aspect_ratio: float) -> float:
    """P_AR = 1 + kappa·(ln(R/R*))² (notes §7.1 item 4)."""
    return 1.0 + kappa * math.log(aspect_ratio / optimal_aspect_ratio) ** 2


def levine_optimal_layers(hidden_size: float) -> float:
    """L_opt(d) = (ln d - 5.039)/0.0555 (Levine et al. 2020 [R]); <= 0 below d ≈ 154."""
    return (math.log(hidden_size) - LEVINE_LOG_WIDTH_INTERCEPT) / LEVINE_LOG_WIDTH_PER_LAYER


# ---- P_mix: MLP-to-attention parameter ratio r (Bian et al. 2025b; notes §4.4, §7.1 item 5) ------


@dataclass(frozen=True)
class MixLaw:
    """g(r) = b0 + b1·ln r + b2/r of Bian et al. 2025b Eq. 3; minimal at r* = b2/b1."""

    name: str
    b0: float
    b1: float
    b2: float
    source: str

    def factor(self, ratio: float) -> float:
        return self.b0 + self.b1 * math.log(ratio) + self.b2 / ratio

    @property
    def optimal_ratio(self) -> float:
        return self.b2 / self.b1


BIAN_TASK3 = MixLaw(
    "task3", b0=0.3870, b1=0.0063, b2=0.0065,
    source="Bian et al. 2025b (arXiv 2510.18245) Eq. 3, Task-3 fit on 80M–297M models [V]; "
           "r* = 1.03",
)  # fmt: skip
BIAN_1B_REFIT = MixLaw(
    "1b_refit", b0=0.5104, b1=0.0051, b2=0.0062,
    source="Bian et al. 2025b Eq. 3 refit on the 1B variants [V]; b2/b1 = 1.22 (paper: r* = 1.23)",
)  # fmt: skip
MIX_LAWS = MappingProxyType({law.name: law for law in (BIAN_TASK3, BIAN_1B_REFIT)})
MIX_RATIO_RANGE = (0.5, 5.0)  # Bian 2025b excluded r outside [0.5, 5] as outliers [V] (soft flag)
MIX_RATIO_HARD_RANGE = (0.2, 12.0)  # §7.2 hard flag
MIX_PARAMS_RANGE = (8e7, 3e9)  # Bian 2025b: fit 80M–297M, validated at 1B and 3B [V]
MIX_TOKENS_PER_PARAM = 100.0  # Bian 2025b trained every model on 100·N tokens [V]
MIX_TOKENS_PER_PARAM_SLACK = 10.0  # §7.1 item 5: flag D/N more than ~10× away from 100


def mlp_mix_penalty(mlp_attention_ratio: float, law: MixLaw = BIAN_TASK3) -> float:
    """P_mix = g(r)/g(r*) >= 1 (notes §7.1 item 5)."""
    return law.factor(mlp_attention_ratio) / law.factor(law.optimal_ratio)


# ---- P_kv: KV-head sharing (notes §4.1, §7.1 item 6) ---------------------------------------------

KV_SHARING_COEF_CENTRAL = 0.001  # per halving of KV heads; Ainslie 2023 Table 1, Bian 2025b [V2/V]
KV_SHARING_COEF_BAND = (0.0, 0.005)  # upper end: DeepSeek-V2 App. D.1 Table 8 [V]
HEAD_DIM_RANGE = (64, 256)  # no loss law; Kaplan Fig. 5 weak effect, production 64–256 (§4.3)


def kv_sharing_penalty(num_query_heads: int, num_kv_heads: int, coef: float) -> float:
    """P_kv = 1 + c_kv·log2(n_q/n_kv) (GQA/MQA; MLA uses 1.0, notes §7.1 item 6)."""
    return 1.0 + coef * math.log2(num_query_heads / num_kv_heads)


# ---- P_prec: training number format (notes §5.1, §7.1 item 7) -----------------------------------
# Keys are `cost_model.precision` names. FP32/FP16 have no term in the notes: BF16's 1.0 is used.

# Central values fitted on the calibration rows `fp8-*`, `nvfp4-*`, `mxfp4-*` (DeepSeek-V3
# (arXiv 2412.19437) §3.3: FP8 relative loss error < 0.25% [V2]; Pretraining LLMs with NVFP4
# (arXiv 2509.25149): NVFP4 ≈ 1.5% above FP8 at 12B, 10T tokens [V2]; MXFP4 ≈ 2.5% at 8B [S]).
PRECISION_MULTIPLIER_CENTRAL: Mapping[str, float] = MappingProxyType({
    "fp32": 1.0, "bf16": 1.0, "fp16": 1.0,
    "fp8": SHIPPED.precision_fp8, "fp8_block": SHIPPED.precision_fp8,  # the same recipe
    "nvfp4": SHIPPED.precision_nvfp4, "mxfp4": SHIPPED.precision_mxfp4,
})  # fmt: skip
PRECISION_MULTIPLIER_UPPER: Mapping[str, float] = MappingProxyType({
    "fp32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 1.0025, "fp8_block": 1.0025,
    "nvfp4": 1.0175, "mxfp4": 1.03,
})  # §7.1 item 7, upper end of each band; NVFP4: 1.5% over FP8's 0.25% [D]  # fmt: skip
PRECISION_MULTIPLIER_LOWER: Mapping[str, float] = MappingProxyType({
    "fp32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 1.0, "fp8_block": 1.0,
    "nvfp4": 1.010, "mxfp4": 1.02,
})  # §7.1 item 7, lower end of each band  # fmt: skip
FP4_FORMATS = frozenset({"nvfp4", "mxfp4"})
FP4_TESTED_PARAMS_RANGE = (8e9, 1.2e10)  # the NVFP4 paper's 8B and 12B runs (§7.1 item 7)
FINE_GRAINED_FP8 = "fp8_block"  # the recipe behind the FP8 multiplier

# ---- inference-only quantisation: Δaccuracy, not folded into the loss (§5.2, §7.1 item 8) --------

PTQ_ACCURACY_DELTA_POINTS: Mapping[str, tuple[float, float]] = MappingProxyType({
    "fp32": (0.0, 0.0), "bf16": (0.0, 0.0), "fp16": (0.0, 0.0),
    "fp8": (-0.5, 0.0), "fp8_block": (-0.5, 0.0),  # §7.1 item 8: "about 0 to -0.5 points"
    "nvfp4": (-1.2, 0.0),  # NVIDIA DeepSeek-R1 NVFP4 model card vs FP8: worst MATH-500 -1.2 [V2]
})  # fmt: skip
PTQ_MAX_TOKENS_PER_PARAM = 1000.0  # Kumar et al. 2024 PTQ law [S]: damage grows with D/N


# ---- optional downstream mapping (Gadre et al. 2024; notes §6.4, §7.1 item 9) --------------------


@dataclass(frozen=True)
class DownstreamMapping:
    """Err = eps_frac - k_frac·exp(-gamma_per_nat·L), fitted per evaluation suite and corpus."""

    eps_frac: float
    k_frac: float
    gamma_per_nat: float
    source: str


CEREBRAS_GPT_ZERO_SHOT = DownstreamMapping(
    eps_frac=0.750, k_frac=4.156, gamma_per_nat=1.625,
    source="notes §6.4 [D]: Cerebras-GPT Pile loss vs 7-task 0-shot average error; Pile only",
)  # fmt: skip


def downstream_error_frac(loss_nats: float, mapping: DownstreamMapping) -> float:
    """Average task error predicted from the loss (broadcasts over numpy arrays); fitted per corpus
    and suite, so only its shape transfers (notes §6.4)."""
    return mapping.eps_frac - mapping.k_frac * np.exp(-mapping.gamma_per_nat * loss_nats)
