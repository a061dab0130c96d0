"""Terms of the accuracy proxy (`docs/accuracy_proxy.md` §7): the Chinchilla-form base law and
its compute optimum, the range limits the flags read, the MLP/attention mix law, the training
formats, PTQ and the depth-versus-width penalty `search/lint/guidelines.py` prices (P_AR in
R = H/L; the proxy itself uses `capacity_terms`' Gemstones law). The notes' research-only laws
(the printed Hoffmann set, Clark's routed-model law, the corpus re-anchoring and the downstream
mapping) reproduce the notes' §7.4 cases in `tests/objectives/notes_laws.py`.

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

from cost_model import FLOP_PER_MAC

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
# Fit range of either set (notes §1.1 "Fit range to enforce", §7.1 item 3).
BASE_LAW_PARAMS_RANGE = (7e7, 1.6e10)  # N of the Chinchilla runs / digitised points [V]
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


# ---- MoE: where the routed-model evidence ends (notes §3.1, §7.2) --------------------------------

MOE_MAX_EXPERTS = 512  # Clark et al. 2022 tested E ≤ 512 (§3.1) [S]; §7.2: E > 512 is a hard flag
MOE_MIN_ACTIVATION_FRAC = 1.0 / 128  # Ling 2.0 report Eq. 1: power law holds down to 1/128 [V]
CLARK_MAX_DENSE_PARAMS = 1.3e9  # largest dense size of Clark et al. 2022's runs (notes §3.1) [S]


# ---- P_AR: depth versus width, R = d_model / n_layers (notes §2.4, §7.1 item 4) ------------------

ASPECT_KAPPA_CENTRAL = 0.005  # §7.1 item 4, central
ASPECT_RATIO_OPT_CENTRAL = 48.0  # symmetric refit of Bian 2025 (Morph) runs with N ≥ 237M [D]
ASPECT_RATIO_MORPH_RANGE = (17.0, 384.0)  # R of the Morph runs (soft flag) [V]
ASPECT_RATIO_KAPLAN_RANGE = (10.0, 700.0)  # Kaplan 2020 Fig. 5 (§7.2: hard flag) [V]


def aspect_ratio_penalty(aspect_ratio: float, kappa: float, optimal_aspect_ratio: float) -> float:
    """P_AR = 1 + kappa·(ln(R/R*))² (notes §7.1 item 4)."""
    return 1.0 + kappa * math.log(aspect_ratio / optimal_aspect_ratio) ** 2


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


BIAN_TASK3 = MixLaw(
    "task3", b0=0.3870, b1=0.0063, b2=0.0065,
    source="Bian et al. 2025b (arXiv 2510.18245) Eq. 3, Task-3 fit on 80M–297M models [V]; "
           "r* = 1.03",
)
MIX_RATIO_RANGE = (0.5, 5.0)  # Bian 2025b excluded r outside [0.5, 5] as outliers [V] (soft flag)
MIX_PARAMS_RANGE = (8e7, 3e9)  # Bian 2025b: fit 80M–297M, validated at 1B and 3B [V]
HEAD_DIM_RANGE = (64, 256)  # no loss law; Kaplan Fig. 5 weak effect, production 64–256 (§4.3)


# ---- P_prec: training number format (notes §5.1, §7.1 item 7) -----------------------------------
# Names are `cost_model.precision` names; the multipliers are fitted (`accuracy_model`:
# `precision_multiplier`). FP32/FP16 have no term in the notes: BF16's 1.0 is used.

TRAINING_FORMATS = frozenset({"fp32", "bf16", "fp16", "fp8", "fp8_block", "nvfp4", "mxfp4"})
FP4_FORMATS = frozenset({"nvfp4", "mxfp4"})
FP4_TESTED_PARAMS_RANGE = (8e9, 1.2e10)  # the NVFP4 paper's 8B and 12B runs (§7.1 item 7)
FINE_GRAINED_FP8 = "fp8_block"  # the recipe behind the FP8 multiplier

# ---- inference-only quantisation: Δaccuracy, not folded into the loss (§5.2, §7.1 item 8) --------

PTQ_ACCURACY_DELTA_POINTS: Mapping[str, tuple[float, float]] = MappingProxyType({
    "fp32": (0.0, 0.0), "bf16": (0.0, 0.0), "fp16": (0.0, 0.0),
    "fp8": (-0.5, 0.0), "fp8_block": (-0.5, 0.0),  # §7.1 item 8: "about 0 to -0.5 points"
    "nvfp4": (-1.2, 0.0),  # NVIDIA DeepSeek-R1 NVFP4 model card vs FP8: worst MATH-500 -1.2 [V2]
})
PTQ_MAX_TOKENS_PER_PARAM = 1000.0  # Kumar et al. 2024 PTQ law [S]: damage grows with D/N
