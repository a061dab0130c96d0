"""Accuracy proxy: predicted pre-training loss of an architecture (`reference/accuracy_proxy.md` §7).

    L_hat = L_base(N_eff, D) · P_AR(R) · P_mix(r) · P_kv(n_q/n_kv) · P_prec(fmt)
    ΔL    = L_hat - L*(C),  C = 6·N_act·D,  L*(C) = min of L_base over 6ND = C
    CEF   = C*/C,           L*(C*) = L_hat

The default base law is Epoch's refit of Chinchilla Approach 3: the printed Hoffmann coefficients
misfit Chinchilla's own data (median |log residual| 1.8% against Epoch's 0.33%) and Epoch's
optimum at the Gopher budget (72B, 18 tokens/param) matches Chinchilla itself (notes §1.1, §7.1
item 3). The unrounded Hoffmann set is the sensitivity alternative (`law="hoffmann"`).

Absolute losses belong to MassiveText: use deltas and orderings, or recalibrate E, A, B on the
target corpus (`recalibrate_base_law`). Each value outside the fitted data raises a flag naming the
quantity, its value and the validated range; hard flags (§7.2) mark extrapolations of the law
itself, and `ranking_loss_nats` then ranks by the pessimistic end of the coefficient bands.
"""

from __future__ import annotations

import math
from functools import lru_cache
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from cost_model.architecture import Architecture
from cost_model.errors import ConfigError
from cost_model.params import count_params
from cost_model.precision import get_precision
from objectives import accuracy_terms as terms
from objectives.accuracy_terms import BaseLaw, ComputeOptimum

BASE_LAWS: Mapping[str, BaseLaw] = MappingProxyType({"epoch": terms.EPOCH, "hoffmann": terms.HOFFMANN})
DEFAULT_LAW = "epoch"
PENALTY_NAMES = ("aspect_ratio", "mlp_mix", "kv_sharing", "precision")
PRECISION_BANDS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {"central": terms.PRECISION_MULTIPLIER_CENTRAL, "upper": terms.PRECISION_MULTIPLIER_UPPER}
)


class ProxyCoefficients(BaseModel):
    """The tunable coefficients of §7.1 (§7.2: "expose ... κ, w and c_kv as configuration")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    moe_weight: float = Field(default=terms.MOE_WEIGHT_CENTRAL, ge=0.0, le=1.0)
    coarse_moe_weight: float = Field(default=terms.MOE_WEIGHT_COARSE, ge=0.0, le=1.0)
    aspect_kappa: float = Field(default=terms.ASPECT_KAPPA_CENTRAL, ge=0.0)
    # P_AR takes the largest penalty over these R*: one value, or the two ends of a band
    optimal_aspect_ratios: tuple[PositiveFloat, ...] = Field(
        default=(terms.ASPECT_RATIO_OPT_CENTRAL,), min_length=1
    )
    kv_sharing_coef: float = Field(default=terms.KV_SHARING_COEF_CENTRAL, ge=0.0)
    mix_law: Literal["task3", "1b_refit"] = "task3"
    precision_band: Literal["central", "upper"] = "central"


CENTRAL_COEFFICIENTS = ProxyCoefficients()
# §7.2: the pessimistic end of each band (lower w, larger κ over the R* band, larger c_kv, upper
# precision multipliers); P_mix's central fit already over-predicts (§7.4 case 6).
PESSIMISTIC_COEFFICIENTS = ProxyCoefficients(
    moe_weight=terms.MOE_WEIGHT_BAND[0],
    coarse_moe_weight=terms.MOE_WEIGHT_BAND[0],
    aspect_kappa=terms.ASPECT_KAPPA_BAND[1],
    optimal_aspect_ratios=terms.ASPECT_RATIO_OPT_BAND,
    kv_sharing_coef=terms.KV_SHARING_COEF_BAND[1],
    precision_band="upper",
)


@dataclass(frozen=True)
class RangeFlag:
    """One quantity outside the data its term was fitted on."""

    quantity: str
    value: float | str
    valid_range: str
    source: str
    hard: bool

    def __str__(self) -> str:
        value = f"{self.value:.4g}" if isinstance(self.value, float | int) else self.value
        kind = "hard" if self.hard else "soft"
        return f"{kind}: {self.quantity} = {value}, validated {self.valid_range} ({self.source})"


@dataclass(frozen=True)
class LossProxy:
    loss_nats: float  # L_hat, predicted pre-training loss
    base_loss_nats: float  # L_base(N_eff, D)
    effective_params: float  # N_eff (MoE-adjusted, §7.1 item 2)
    delta_loss_nats: float  # L_hat - L*(C), against the compute-optimal dense model
    compute_equivalence_frac: float  # CEF = C*/C
    penalties: Mapping[str, float]  # the multiplicative factors by name (PENALTY_NAMES)
    flags: tuple[str, ...]  # every out-of-range warning, hard and soft
    hard_flags: tuple[str, ...]  # the subset that widens the band (§7.2)
    compute_flop: float  # C = 6·N_act·D
    compute_optimum: ComputeOptimum  # the compute-optimal dense model at C
    law: str


@dataclass(frozen=True)
class ShapeSummary:
    """The quantities of an architecture the proxy's terms read (exact counts from `count_params`)."""

    total_params: float
    active_params: float
    vocab_params: float  # N_emb: input embedding + untied lm_head (V·H, doubled if untied)
    attention_params: float  # q, k, v and o projections, all layers
    active_mlp_params: float  # dense MLPs + shared experts + router + k of E routed experts
    aspect_ratio: float  # R = d_model / n_layers
    granularity: float  # G = d_ff / d_expert (MoE; 0 for dense)
    activation_frac: float  # (k + shared) / (E + shared) (1 for dense)

    @property
    def total_non_embedding_params(self) -> float:
        return self.total_params - self.vocab_params

    @property
    def active_non_embedding_params(self) -> float:
        return self.active_params - self.vocab_params

    @property
    def mlp_attention_ratio(self) -> float:
        """r of Bian et al. 2025b: MLP over attention parameters (MoE: the active MLP)."""
        return self.active_mlp_params / self.attention_params


@lru_cache(maxsize=16384)  # the central and pessimistic passes both read it; archs are frozen
def summarize_shape(arch: Architecture) -> ShapeSummary:
    counts = count_params(arch)
    attention = sum(counts[key] for key in ("attention/q", "attention/kv", "attention/o"))
    return ShapeSummary(
        total_params=float(counts.total_params),
        active_params=float(counts.active_params),
        vocab_params=float(counts.embedding_params + counts.lm_head_params),
        attention_params=float(attention),
        active_mlp_params=_active_mlp_params(arch, counts),
        aspect_ratio=arch.hidden_size / arch.num_layers,
        granularity=_granularity(arch),
        activation_frac=_activation_frac(arch),
    )


def _active_mlp_params(arch: Architecture, counts: Mapping[str, int]) -> float:
    dense = counts["mlp/gate"] + counts["mlp/up"] + counts["mlp/down"]
    routed = counts["moe/experts"] * arch.experts_per_token / arch.num_experts if arch.is_moe else 0.0
    return float(dense + counts["moe/shared"] + counts["moe/router"] + routed)


def _granularity(arch: Architecture) -> float:
    if not arch.is_moe:
        return 0.0
    dense_width = arch.intermediate_size or terms.REFERENCE_FFN_EXPANSION * arch.hidden_size
    return dense_width / arch.moe_intermediate_size


def _activation_frac(arch: Architecture) -> float:
    if not arch.is_moe:
        return 1.0
    shared = arch.num_shared_experts
    return (arch.experts_per_token + shared) / (arch.num_experts + shared)


def _is_coarse(shape: ShapeSummary) -> bool:
    return 0.0 < shape.granularity < terms.COARSE_GRANULARITY_MAX


# ---- the prediction ------------------------------------------------------------------------------


def predict_loss(
    arch: Architecture,
    training_tokens: float,
    precision: str = "bf16",
    *,
    law: str | BaseLaw = DEFAULT_LAW,
    coefficients: ProxyCoefficients = CENTRAL_COEFFICIENTS,
) -> LossProxy:
    """L_hat, ΔL, CEF, the penalty breakdown and the range flags of `arch` trained on
    `training_tokens` in the training format `precision` (a `cost_model.precision` name).
    Raises `ConfigError` for tokens <= 0, an unknown precision or an unknown law."""
    tokens, fmt = _check_tokens(training_tokens), _training_format(precision)
    base_law = _base_law(law)
    shape = summarize_shape(arch)
    n_eff, base_nats, penalties, loss_nats = _loss_terms(arch, shape, tokens, fmt, base_law,
                                                         coefficients)
    compute_flop = terms.training_compute_flop(shape.active_params, tokens)
    optimum = terms.compute_optimum(base_law, compute_flop)
    flags = _flags(arch, shape, n_eff, tokens, fmt)
    return LossProxy(
        loss_nats=loss_nats, base_loss_nats=base_nats, effective_params=n_eff,
        delta_loss_nats=loss_nats - optimum.loss_nats,
        compute_equivalence_frac=terms.compute_equivalence_frac(base_law, loss_nats, compute_flop),
        penalties=MappingProxyType(penalties), flags=tuple(str(f) for f in flags),
        hard_flags=tuple(str(f) for f in flags if f.hard), compute_flop=compute_flop,
        compute_optimum=optimum, law=base_law.name,
    )  # fmt: skip


def ranking_loss_nats(
    arch: Architecture, training_tokens: float, precision: str = "bf16", *, law: str | BaseLaw = DEFAULT_LAW,
    central: LossProxy | None = None,
) -> float:
    """§7.2 policy: the central L_hat, or the pessimistic end of the bands when a hard flag fires.
    Pass `central` (this arch's `predict_loss` with the central coefficients) to skip recomputing it."""
    proxy = central if central is not None else predict_loss(arch, training_tokens, precision, law=law)
    if not proxy.hard_flags:
        return proxy.loss_nats
    tokens, fmt = _check_tokens(training_tokens), _training_format(precision)
    shape = summarize_shape(arch)  # the flags are the central proxy's; only the loss is redone
    return _loss_terms(arch, shape, tokens, fmt, _base_law(law), PESSIMISTIC_COEFFICIENTS)[3]


def _loss_terms(
    arch: Architecture, shape: ShapeSummary, tokens: float, fmt: str, base_law: BaseLaw,
    coefficients: ProxyCoefficients,
) -> tuple[float, float, dict[str, float], float]:
    """(N_eff, L_base, penalties, L_hat) of §7.1 for one set of coefficients."""
    n_eff = effective_params(shape, coefficients)
    base_nats = terms.base_loss_nats(base_law, n_eff, tokens)
    penalties = _penalties(arch, shape, fmt, coefficients)
    return n_eff, base_nats, penalties, base_nats * math.prod(penalties.values())


def effective_params(
    shape: ShapeSummary, coefficients: ProxyCoefficients = CENTRAL_COEFFICIENTS
) -> float:
    """N_eff of §7.1 item 2; coarse experts (G = 1) use the lower `coarse_moe_weight`."""
    weight = coefficients.coarse_moe_weight if _is_coarse(shape) else coefficients.moe_weight
    active, total = shape.active_non_embedding_params, shape.total_non_embedding_params
    return terms.moe_effective_params(active, total, shape.vocab_params, weight)


def _penalties(
    arch: Architecture, shape: ShapeSummary, fmt: str, coefficients: ProxyCoefficients
) -> dict[str, float]:
    aspect = max(
        terms.aspect_ratio_penalty(shape.aspect_ratio, coefficients.aspect_kappa, optimal)
        for optimal in coefficients.optimal_aspect_ratios
    )
    mix = terms.mlp_mix_penalty(shape.mlp_attention_ratio, terms.MIX_LAWS[coefficients.mix_law])
    kv = 1.0  # §7.1 item 6: MLA is claimed >= MHA
    if arch.attention_kind != "mla":
        heads, kv_heads = arch.num_attention_heads, arch.num_kv_heads
        kv = terms.kv_sharing_penalty(heads, kv_heads, coefficients.kv_sharing_coef)
    precision = PRECISION_BANDS[coefficients.precision_band][fmt]
    return dict(zip(PENALTY_NAMES, (aspect, mix, kv, precision), strict=True))


# ---- argument checks -------------------------------------------------------------------------------


def _check_tokens(training_tokens: float) -> float:
    try:
        value = float(training_tokens)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"`training_tokens` must be a finite number > 0; got {training_tokens!r}")
    return value


def _training_format(precision: str) -> str:
    if not isinstance(precision, str):
        raise ConfigError(f"`precision` must be a format name (str); got {precision!r}")
    name = get_precision(precision, field="precision").name
    if name not in terms.PRECISION_MULTIPLIER_CENTRAL:
        known = ", ".join(sorted(terms.PRECISION_MULTIPLIER_CENTRAL))
        raise ConfigError(
            f"`precision` must be a training format with a loss term ({known}); got {precision!r}"
        )
    return name


def _base_law(law: str | BaseLaw) -> BaseLaw:
    if isinstance(law, BaseLaw):
        return law
    if law not in BASE_LAWS:
        raise ConfigError(f"`law` must be one of {', '.join(BASE_LAWS)}; got {law!r}")
    return BASE_LAWS[law]


# ---- flags (§7.1 "Flag if", §7.2 hard versus soft) -------------------------------------------------


def _outside(
    quantity: str, value: float, bounds: tuple[float, float], source: str, hard: bool = False
) -> list[RangeFlag]:
    low, high = bounds
    if low <= value <= high:
        return []
    return [RangeFlag(quantity, float(value), f"[{low:.4g}, {high:.4g}]", source, hard)]


def _flags(
    arch: Architecture, shape: ShapeSummary, n_eff: float, tokens: float, fmt: str
) -> list[RangeFlag]:
    return [
        *_base_law_flags(n_eff, tokens),
        *_moe_flags(arch, shape),
        *_depth_flags(arch, shape),
        *_mix_flags(arch, shape, n_eff, tokens),
        *_attention_flags(arch),
        *_precision_flags(shape, fmt),
    ]


def _base_law_flags(n_eff: float, tokens: float) -> list[RangeFlag]:
    source = "Chinchilla/Epoch fit data"
    max_per_param = (0.0, terms.BASE_LAW_MAX_TOKENS_PER_PARAM)
    return [
        *_outside("N_eff (params)", n_eff, terms.BASE_LAW_PARAMS_RANGE, source, hard=True),
        *_outside("D (training tokens)", tokens, terms.BASE_LAW_TOKENS_RANGE, source, hard=True),
        *_outside("D/N_eff (tokens per param)", tokens / n_eff, max_per_param,
                  "Chinchilla data; Sardana 2024: gains over-predicted at high D/N"),
    ]  # fmt: skip


def _moe_flags(arch: Architecture, shape: ShapeSummary) -> list[RangeFlag]:
    if not arch.is_moe:
        return []
    experts, activation = (1, terms.MOE_MAX_EXPERTS), (terms.MOE_MIN_ACTIVATION_FRAC, 1.0)
    flags = [
        *_outside("E (routed experts)", arch.num_experts, experts, "Clark 2022", hard=True),
        *_outside("activation ratio (k+shared)/(E+shared)", shape.activation_frac, activation,
                  "Ling 2.0 efficiency-leverage law"),
    ]  # fmt: skip
    if _is_coarse(shape):
        fine = f">= {terms.COARSE_GRANULARITY_MAX:g} (fine-grained experts)"
        source = "Krajewski 2024: G = 1 is not optimal; N_eff uses the coarse w"
        flags.append(RangeFlag("G (d_ff/d_expert)", shape.granularity, fine, source, hard=False))
    return flags


def _depth_flags(arch: Architecture, shape: ShapeSummary) -> list[RangeFlag]:
    layers = arch.num_layers
    ratio, name = shape.aspect_ratio, "R (d_model/n_layers)"
    flags = _outside(name, ratio, terms.ASPECT_RATIO_KAPLAN_RANGE, "Kaplan 2020 Fig. 5", hard=True)
    flags = flags or _outside(name, ratio, terms.ASPECT_RATIO_MORPH_RANGE, "Bian 2025 Morph runs")
    depth = _outside("L (layers)", layers, (terms.MIN_LAYERS_HARD, math.inf), "Kaplan 2020 Fig. 6", True)
    soft_min = (terms.MIN_LAYERS_SOFT, math.inf)
    flags += depth or _outside("L (layers)", layers, soft_min, "Bian 2025 Morph runs: 3 layers")
    optimal_layers = terms.levine_optimal_layers(arch.hidden_size)
    if optimal_layers > 0:  # the fit says nothing below d ≈ 154
        limit = terms.LEVINE_DEPTH_SLACK * optimal_layers
        flags += _outside("L (layers)", layers, (0, limit), "1.5 × Levine 2020 L_opt(d_model), [R]")
    return flags


def _mix_flags(arch: Architecture, shape: ShapeSummary, n_eff: float, tokens: float) -> list[RangeFlag]:
    ratio, name, source = shape.mlp_attention_ratio, "r (MLP/attention params)", "Bian 2025b"
    flags = _outside(name, ratio, terms.MIX_RATIO_HARD_RANGE, "§7.2 hard range", hard=True)
    flags = flags or _outside(name, ratio, terms.MIX_RATIO_RANGE, source)
    slack, centre = terms.MIX_TOKENS_PER_PARAM_SLACK, terms.MIX_TOKENS_PER_PARAM
    active = shape.active_non_embedding_params
    flags += _outside("N_act non-embedding (params)", active, terms.MIX_PARAMS_RANGE, source)
    flags += _outside("D/N_eff for P_mix (tokens per param)", tokens / n_eff,
                      (centre / slack, centre * slack), f"{source}: 100·N tokens")  # fmt: skip
    if arch.is_moe:
        untested = f"{source}: untested extrapolation to MoE"
        flags.append(RangeFlag(f"{name}, MoE active", ratio, "dense models", untested, hard=False))
    return flags


def _attention_flags(arch: Architecture) -> list[RangeFlag]:
    no_law = "no loss law; Kaplan 2020: weak effect"
    flags = _outside("d_h (head dim)", arch.head_dim, terms.HEAD_DIM_RANGE, no_law)
    if arch.attention_kind == "mla":
        one_lab = "DeepSeek-V2 Table 9: MLA >= MHA, one lab"
        flags.append(RangeFlag("attention", "MLA (P_kv = 1)", "MHA/GQA/MQA", one_lab, hard=False))
    elif arch.num_kv_heads == 1:
        unstable = "MQA: training instability (Ainslie 2023)"
        flags.append(RangeFlag("n_kv (KV heads)", 1.0, "[2, n_q]", unstable, hard=False))
    return flags


def _precision_flags(shape: ShapeSummary, fmt: str) -> list[RangeFlag]:
    if fmt == "fp8":
        fine = f"{terms.FINE_GRAINED_FP8} (1×128 / 128×128 scales)"
        recipe = "DeepSeek-V3 §3.3: the recipe behind the FP8 term"
        return [RangeFlag("precision", "fp8 (per-tensor scaling)", fine, recipe, hard=False)]
    if fmt not in terms.FP4_FORMATS:
        return []
    tested = "NVFP4 paper: 8B and 12B runs; its full recipe is assumed"
    return _outside(f"total params trained in {fmt}", shape.total_params,
                    terms.FP4_TESTED_PARAMS_RANGE, tested)  # fmt: skip


# ---- inference-only quantisation (§7.1 item 8): reported beside the loss, never folded in ---------


@dataclass(frozen=True)
class PtqEstimate:
    accuracy_delta_points: tuple[float, float]  # (worst, best) benchmark points vs BF16/FP8 serving
    flags: tuple[str, ...]


def ptq_estimate(serving_precision: str, tokens_per_param: float) -> PtqEstimate:
    """Δaccuracy of serving in `serving_precision` after training in higher precision (§5.2)."""
    name = get_precision(serving_precision, field="serving_precision").name
    if name not in terms.PTQ_ACCURACY_DELTA_POINTS:
        known = ", ".join(sorted(terms.PTQ_ACCURACY_DELTA_POINTS))
        raise ConfigError(
            f"`serving_precision` must be a format with PTQ evidence ({known}); "
            f"got {serving_precision!r}"
        )
    flags: list[RangeFlag] = []
    if name in terms.FP4_FORMATS:
        limit = (0.0, terms.PTQ_MAX_TOKENS_PER_PARAM)
        flags = _outside("D/N (tokens per param) with 4-bit PTQ", tokens_per_param, limit,
                         "Kumar 2024: PTQ damage grows with D")  # fmt: skip
    return PtqEstimate(terms.PTQ_ACCURACY_DELTA_POINTS[name], tuple(str(f) for f in flags))
