"""Accuracy proxy: predicted pre-training loss of an architecture (`docs/accuracy_proxy.md`,
"notes" below).

    N_eff = N_ne,eff + w_emb·N_emb,counted
    L_hat = L_base(N_eff, D) · Π_terms P_term
    ΔL    = L_hat - L*(C),  C = 6·N_act·D,  L*(C) = min of L_base over 6ND = C
    CEF   = C*/C,           L*(C*) = L_hat

- N_ne,eff: dense, the non-embedding count; MoE, the active count times Clark et al. 2022's
  saturating effective-parameter multiplier in E/k and Krajewski et al. 2024's granularity gain
  (`capacity_terms`), never above the total.
- N_emb,counted: embedding params up to 4× Tao et al. 2024's optimal vocabulary, weighted between
  Kaplan's convention (0) and Chinchilla's (1).
- Terms (each 1 at Llama-3-8B's shape): depth (Gemstones width/depth law at fixed N), attention
  width and KV width relative to H, head dim, FFN width, the MLP/attention mix (Bian 2025b; dense
  GQA only, clipped to its fit range), vocabulary, linear-attention and sliding-window layers
  (`mixer_terms`), training precision. Free coefficients come from
  `objectives/data/accuracy_coefficients.toml`, fitted on the declared calibration set
  (`objectives.accuracy_fit`).

Every prediction carries a band: low/high are the optimistic/pessimistic coefficient sets, widened
by each range flag (`accuracy_flags`). The ranked loss is the central loss, or the high end when a
hard flag fires (notes §7.2). The default base law is Epoch's refit of Chinchilla Approach 3
(notes §1.1); absolute losses belong to MassiveText, so use deltas and orderings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cost_model.architecture import Architecture
from cost_model.errors import ConfigError
from cost_model.params import count_params
from cost_model.precision import get_precision
from objectives import accuracy_terms as terms
from objectives import capacity_terms as cap
from objectives import mixer_terms as mix
from objectives.accuracy_coefficients import SHIPPED, AccuracyCoefficients
from objectives.accuracy_flags import RangeFlag, all_flags, outside
from objectives.accuracy_terms import BaseLaw, ComputeOptimum

__all__ = [
    "BASE_LAWS",
    "CENTRAL_COEFFICIENTS",
    "DEFAULT_LAW",
    "OPTIMISTIC_COEFFICIENTS",
    "PENALTY_NAMES",
    "PESSIMISTIC_COEFFICIENTS",
    "LossProxy",
    "ProxyCoefficients",
    "RangeFlag",
    "ShapeSummary",
    "central_coefficients",
    "central_loss_nats",
    "effective_params",
    "predict_loss",
    "ptq_estimate",
    "ranking_loss_nats",
    "summarize_shape",
]  # fmt: skip

BASE_LAWS: Mapping[str, BaseLaw] = MappingProxyType(
    {"epoch": terms.EPOCH, "hoffmann": terms.HOFFMANN}
)
DEFAULT_LAW = "epoch"
PENALTY_NAMES = ("depth", "attention_width", "kv_width", "head_dim", "ffn_width", "mlp_mix",
                 "vocabulary", "linear_attention", "sliding_window", "precision")  # fmt: skip
PRECISION_BANDS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "lower": terms.PRECISION_MULTIPLIER_LOWER, "central": terms.PRECISION_MULTIPLIER_CENTRAL,
    "upper": terms.PRECISION_MULTIPLIER_UPPER,
})  # fmt: skip
# Policy: shape terms without a published error bar move by ±50% of their deviation from 1 across
# the band; each range flag widens the band by this share of the central loss on both sides.
TERM_BAND_FRAC = 0.5
BAND_WIDENING_PER_HARD_FLAG_FRAC = 0.01
BAND_WIDENING_PER_SOFT_FLAG_FRAC = 0.0025


class ProxyCoefficients(BaseModel):
    """One end of the coefficient bands (notes §7.2: "expose ... as configuration")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clark_start_offset: Literal[0, 1] = 1  # Clark's Ê with k = 1 (central) or 0 (~20% less EPC)
    # exponent on Krajewski's gain: fitted (central), half of it pessimistic
    granularity_scale: float = Field(default=SHIPPED.granularity_scale, ge=0.0, le=3.0)
    moe_power_mean_weight: float | None = Field(default=None, ge=0.0, le=1.0)  # optimistic floor
    embedding_weight: float = Field(default=cap.EMBEDDING_WEIGHT, ge=0.0, le=1.0)
    term_band: Literal[-1, 0, 1] = 0  # -1 optimistic, +1 pessimistic (TERM_BAND_FRAC)
    kv_width_coef: float = Field(default=cap.KV_WIDTH_COEF, ge=0.0)
    mix_law: Literal["task3", "1b_refit"] = "task3"
    precision_band: Literal["lower", "central", "upper"] = "central"
    fitted: AccuracyCoefficients = SHIPPED  # the data file's coefficients (central values)


def central_coefficients(fitted: AccuracyCoefficients) -> ProxyCoefficients:
    """The central set for a given fit (what `accuracy_fit` varies)."""
    return ProxyCoefficients(granularity_scale=fitted.granularity_scale,
                             kv_width_coef=fitted.kv_width_coef, fitted=fitted)  # fmt: skip


CENTRAL_COEFFICIENTS = central_coefficients(SHIPPED)
PESSIMISTIC_COEFFICIENTS = ProxyCoefficients(
    clark_start_offset=0, granularity_scale=0.5 * SHIPPED.granularity_scale,
    embedding_weight=cap.EMBEDDING_WEIGHT_BAND[0],
    term_band=1, kv_width_coef=cap.KV_WIDTH_COEF_BAND[1], precision_band="upper",
)  # fmt: skip
OPTIMISTIC_COEFFICIENTS = ProxyCoefficients(
    moe_power_mean_weight=terms.MOE_WEIGHT_CENTRAL, embedding_weight=cap.EMBEDDING_WEIGHT_BAND[1],
    term_band=-1, kv_width_coef=cap.KV_WIDTH_COEF_BAND[0], precision_band="lower",
)  # fmt: skip


@dataclass(frozen=True)
class LossProxy:
    loss_nats: float  # L_hat, central
    base_loss_nats: float  # L_base(N_eff, D), central
    effective_params: float  # N_eff (MoE-adjusted, embeddings weighted), central
    delta_loss_nats: float  # L_hat - L*(C), against the compute-optimal dense model
    compute_equivalence_frac: float  # CEF = C*/C
    penalties: Mapping[str, float]  # the multiplicative factors by name (PENALTY_NAMES)
    flags: tuple[str, ...]  # every out-of-range warning, hard and soft
    hard_flags: tuple[str, ...]  # the subset that puts the ranked loss at the band's high end
    compute_flop: float  # C = 6·N_act·D
    compute_optimum: ComputeOptimum  # the compute-optimal dense model at C
    law: str
    band_low_nats: float = math.nan  # optimistic coefficients, widened by the flags
    band_high_nats: float = math.nan  # pessimistic coefficients, widened by the flags
    ranked_loss_nats: float = math.nan  # what the search minimizes

    def to_dict(self) -> dict:
        return {"loss_nats": self.loss_nats, "band_nats": [self.band_low_nats, self.band_high_nats],
                "ranked_loss_nats": self.ranked_loss_nats, "base_loss_nats": self.base_loss_nats,
                "effective_params": self.effective_params, "delta_loss_nats": self.delta_loss_nats,
                "compute_equivalence_frac": self.compute_equivalence_frac,
                "terms": dict(self.penalties), "flags": list(self.flags),
                "hard_flags": list(self.hard_flags), "compute_flop": self.compute_flop,
                "law": self.law}  # fmt: skip


@dataclass(frozen=True)
class ShapeSummary:
    """The quantities of an architecture the proxy's terms read (exact counts from
    `count_params`)."""

    total_params: float
    active_params: float
    vocab_params: float  # N_emb: input embedding + untied lm_head (V·H, doubled if untied)
    attention_params: float  # q, k, v and o projections, all layers
    active_mlp_params: float  # dense MLPs + shared experts + router + k of E routed experts
    hidden_size: int
    num_layers: int
    vocab_size: int
    head_dim: int
    num_kv_heads: int
    attention_width_frac: float  # n_q·d_h / H (MLA: n_q·v_head_dim / H)
    kv_width_frac: float  # n_kv·d_h / H (MLA: MLA_KV_WIDTH_FRAC)
    ffn_width_frac: float  # narrowest active FFN of any layer kind, SwiGLU width in units of H
    num_experts: int = 0
    experts_per_token: int = 0
    expansion: float = 0.0  # E/k (routed experts per active expert; 0 for dense)
    granularity: float = 0.0  # G = min(k, (8/3)·H / d_expert) (MoE; 0 for dense)
    activation_frac: float = 1.0  # (k + shared) / (E + shared)
    moe_layer_frac: float = 0.0
    is_mla: bool = False
    sliding_layers: int = 0
    sliding_window: int = 0  # tokens (0: no sliding layer)
    sliding_attention_frac: float = 0.0  # sliding layers / attention layers
    full_attention_frac: float = 1.0  # attention layers / layers with a mixer (linear hybrids)
    linear_layers: int = 0

    @property
    def total_non_embedding_params(self) -> float:
        return self.total_params - self.vocab_params

    @property
    def active_non_embedding_params(self) -> float:
        return self.active_params - self.vocab_params

    @property
    def aspect_ratio(self) -> float:
        return self.hidden_size / self.num_layers

    @property
    def mlp_attention_ratio(self) -> float:
        """r of Bian et al. 2025b: MLP over attention parameters (MoE: the active MLP)."""
        return self.active_mlp_params / self.attention_params

    @property
    def uses_mix(self) -> bool:
        """Bian's mix term was fitted on dense all-attention GQA models only."""
        return not self.num_experts and not self.is_mla and not self.linear_layers


@lru_cache(maxsize=16384)  # every band pass reads it; archs are frozen
def summarize_shape(arch: Architecture) -> ShapeSummary:
    counts = count_params(arch)
    attention = sum(counts[key] for key in ("attention/q", "attention/kv", "attention/o"))
    hidden, mla = arch.hidden_size, arch.attention_kind == "mla"
    q_width = arch.num_attention_heads * (arch.value_head_dim if mla else arch.head_dim)
    return ShapeSummary(
        total_params=float(counts.total_params), active_params=float(counts.active_params),
        vocab_params=float(counts.embedding_params + counts.lm_head_params),
        attention_params=float(attention), active_mlp_params=_active_mlp_params(arch, counts),
        hidden_size=hidden, num_layers=arch.num_layers, vocab_size=arch.vocab_size,
        head_dim=arch.head_dim, num_kv_heads=arch.num_kv_heads,
        attention_width_frac=q_width / hidden,
        kv_width_frac=cap.MLA_KV_WIDTH_FRAC if mla else arch.num_kv_heads * arch.head_dim / hidden,
        ffn_width_frac=_ffn_width_frac(arch), is_mla=mla, **_mixer_summary(arch),
        **_moe_summary(arch),
    )  # fmt: skip


def _mixer_summary(arch: Architecture) -> dict:
    sliding, attention = arch.num_sliding_layers, arch.num_attention_layers
    return dict(sliding_layers=sliding, sliding_window=arch.sliding_window or 0,
                sliding_attention_frac=sliding / attention if attention else 0.0,
                full_attention_frac=attention / max(arch.num_mixer_layers, 1),
                linear_layers=arch.num_linear_attention_layers)  # fmt: skip


def _active_mlp_params(arch: Architecture, counts: Mapping[str, int]) -> float:
    dense = counts["mlp/gate"] + counts["mlp/up"] + counts["mlp/down"]
    routed = (
        counts["moe/experts"] * arch.experts_per_token / arch.num_experts if arch.is_moe else 0.0
    )
    return float(dense + counts["moe/shared"] + counts["moe/router"] + routed)


def _ffn_width_frac(arch: Architecture) -> float:
    """min over layer kinds of the active FFN width in SwiGLU units of H (non-gated: 2/3 of it)."""
    gated = 1.0 if arch.gated_mlp else 2.0 / 3.0
    widths = []
    if arch.num_dense_layers:
        widths.append(arch.intermediate_size)
    if arch.num_moe_layers:
        widths.append(
            arch.experts_per_token * arch.moe_intermediate_size
            + arch.shared_expert_intermediate_size
        )
    return gated * min(widths) / arch.hidden_size


def _moe_summary(arch: Architecture) -> dict:
    if not arch.is_moe:
        return {}
    k, shared = arch.experts_per_token, arch.num_shared_experts
    dense_width = cap.REFERENCE_FFN_EXPANSION * 2.0 / 3.0 * arch.hidden_size  # SwiGLU of 4·H params
    return dict(num_experts=arch.num_experts, experts_per_token=k, expansion=arch.num_experts / k,
                granularity=max(1.0, min(k, dense_width / arch.moe_intermediate_size)),
                activation_frac=(k + shared) / (arch.num_experts + shared),
                moe_layer_frac=arch.num_moe_layers / arch.num_layers)  # fmt: skip


# ---- the prediction ------------------------------------------------------------------------------


def predict_loss(
    arch: Architecture,
    training_tokens: float,
    precision: str = "bf16",
    *,
    law: str | BaseLaw = DEFAULT_LAW,
    coefficients: ProxyCoefficients = CENTRAL_COEFFICIENTS,
) -> LossProxy:
    """L_hat, its band and ranked value, ΔL, CEF, the term breakdown and the range flags of `arch`
    trained on `training_tokens` in `precision` (a `cost_model.precision` name). Raises
    `ConfigError` for tokens <= 0, an unknown precision or an unknown law."""
    tokens, fmt = _check_tokens(training_tokens), _training_format(precision)
    base_law, shape = _base_law(law), summarize_shape(arch)
    n_eff, base_nats, penalties, loss_nats = _loss_terms(shape, tokens, fmt, base_law, coefficients)
    flags = all_flags(shape, n_eff, tokens, fmt, _optimal_vocab(shape, coefficients))
    low, high, ranked = _band(shape, tokens, fmt, base_law, loss_nats, flags)
    compute_flop = terms.training_compute_flop(shape.active_params, tokens)
    optimum = terms.compute_optimum(base_law, compute_flop)
    return LossProxy(
        loss_nats=loss_nats, base_loss_nats=base_nats, effective_params=n_eff,
        delta_loss_nats=loss_nats - optimum.loss_nats,
        compute_equivalence_frac=terms.compute_equivalence_frac(base_law, loss_nats, compute_flop),
        penalties=MappingProxyType(penalties), flags=tuple(str(f) for f in flags),
        hard_flags=tuple(str(f) for f in flags if f.hard), compute_flop=compute_flop,
        compute_optimum=optimum, law=base_law.name, band_low_nats=low, band_high_nats=high,
        ranked_loss_nats=ranked,
    )  # fmt: skip


def ranking_loss_nats(
    arch: Architecture,
    training_tokens: float,
    precision: str = "bf16",
    *,
    law: str | BaseLaw = DEFAULT_LAW,
    central: LossProxy | None = None,
) -> float:
    """§7.2 policy: the central L_hat, or the high end of its band when a hard flag fires.
    Pass `central` (this arch's `predict_loss`) to skip recomputing it."""
    proxy = (
        central if central is not None else predict_loss(arch, training_tokens, precision, law=law)
    )
    return proxy.ranked_loss_nats


def _band(shape: ShapeSummary, tokens: float, fmt: str, base_law: BaseLaw, central_nats: float,
          flags: list[RangeFlag]) -> tuple[float, float, float]:  # fmt: skip
    """(low, high, ranked): the optimistic and pessimistic ends, each widened by the flags."""
    hard = sum(f.hard for f in flags)
    widen = (
        hard * BAND_WIDENING_PER_HARD_FLAG_FRAC
        + (len(flags) - hard) * BAND_WIDENING_PER_SOFT_FLAG_FRAC
    )
    low = _loss_terms(shape, tokens, fmt, base_law, OPTIMISTIC_COEFFICIENTS)[3]
    high = _loss_terms(shape, tokens, fmt, base_law, PESSIMISTIC_COEFFICIENTS)[3]
    low, high = (
        min(low, central_nats) - widen * central_nats,
        max(high, central_nats) + widen * central_nats,
    )
    return low, high, high if hard else central_nats


def _loss_terms(shape: ShapeSummary, tokens: float, fmt: str, base_law: BaseLaw,
                coefficients: ProxyCoefficients
                ) -> tuple[float, float, dict[str, float], float]:  # fmt: skip
    """(N_eff, L_base, terms, L_hat) for one set of coefficients."""
    non_embedding = effective_non_embedding_params(shape, coefficients)
    optimal_vocab = _optimal_vocab(shape, coefficients, non_embedding)
    n_eff = _with_embeddings(shape, coefficients, non_embedding, optimal_vocab)
    base_nats = terms.base_loss_nats(base_law, n_eff, tokens)
    penalties = _penalties(shape, tokens, fmt, coefficients, non_embedding, optimal_vocab)
    return n_eff, base_nats, penalties, base_nats * math.prod(penalties.values())


def effective_non_embedding_params(shape: ShapeSummary, coefficients: ProxyCoefficients) -> float:
    """Dense: the non-embedding count. MoE: active × (Clark EPC(E/k) × Krajewski gain(G)) to the
    share of MoE layers, at most the total (and, optimistically, at least the power mean)."""
    active, total = shape.active_non_embedding_params, shape.total_non_embedding_params
    if not shape.num_experts:
        return total
    epc = cap.clark_epc_multiplier(shape.expansion, active, coefficients.clark_start_offset)
    grain = cap.granularity_multiplier(shape.granularity, scale=coefficients.granularity_scale)
    n_eff = min(active * (epc * grain) ** shape.moe_layer_frac, total)
    weight = coefficients.moe_power_mean_weight
    return n_eff if weight is None else max(n_eff, active ** (1 - weight) * total**weight)


def _optimal_vocab(shape: ShapeSummary, coefficients: ProxyCoefficients,
                   non_embedding: float | None = None) -> float:  # fmt: skip
    if non_embedding is None:
        non_embedding = effective_non_embedding_params(shape, coefficients)
    exponent = coefficients.fitted.tao_vocab_exponent
    return cap.optimal_vocab_size(non_embedding, shape.hidden_size, exponent)


def _with_embeddings(shape: ShapeSummary, coefficients: ProxyCoefficients, non_embedding: float,
                     optimal_vocab: float) -> float:  # fmt: skip
    counted = cap.counted_vocab_params(shape.vocab_params, shape.vocab_size, optimal_vocab)
    return non_embedding + coefficients.embedding_weight * counted


def effective_params(
    shape: ShapeSummary, coefficients: ProxyCoefficients = CENTRAL_COEFFICIENTS
) -> float:
    """N_eff = N_ne,eff + w_emb · (embedding params up to 4× Tao's optimal vocabulary)."""
    non_embedding = effective_non_embedding_params(shape, coefficients)
    optimal = _optimal_vocab(shape, coefficients, non_embedding)
    return _with_embeddings(shape, coefficients, non_embedding, optimal)


def _banded(factor: float, band: int) -> float:
    """Move a term's deviation from 1 by ±TERM_BAND_FRAC: pessimistic grows penalties and shrinks
    bonuses, optimistic the reverse."""
    direction = 1.0 if factor >= 1.0 else -1.0
    return 1.0 + (factor - 1.0) * (1.0 + TERM_BAND_FRAC * band * direction)


def _penalties(shape: ShapeSummary, tokens: float, fmt: str, coefficients: ProxyCoefficients,
               non_embedding: float, optimal_vocab: float) -> dict[str, float]:  # fmt: skip
    mix = 1.0
    if shape.uses_mix:
        law = terms.MIX_LAWS[coefficients.mix_law]
        ratio = min(
            max(shape.mlp_attention_ratio, terms.MIX_RATIO_RANGE[0]), terms.MIX_RATIO_RANGE[1]
        )
        mix = law.factor(ratio) / law.factor(cap.REFERENCE_MIX_RATIO)
    fit = coefficients.fitted
    shape_terms = {
        "depth": cap.depth_penalty(non_embedding, shape.num_layers, tokens) ** fit.depth_scale,
        "attention_width": cap.attention_width_penalty(shape.attention_width_frac,
                                                       fit.attention_width_kappa),
        "kv_width": cap.kv_width_penalty(shape.kv_width_frac, coefficients.kv_width_coef),
        "head_dim": cap.head_dim_penalty(shape.head_dim, fit.head_dim_kappa),
        "ffn_width": cap.ffn_width_penalty(shape.ffn_width_frac, fit.ffn_width_kappa),
        "mlp_mix": mix,
        "vocabulary": cap.vocab_penalty(shape.vocab_size, optimal_vocab, fit.vocab_kappa),
        **_mixer_terms(shape, fit),
    }  # fmt: skip
    banded = {name: _banded(value, coefficients.term_band) for name, value in shape_terms.items()}
    banded["kv_width"] = shape_terms["kv_width"]  # its band is the coefficient's own
    return {**banded, "precision": _precision_multiplier(coefficients, fmt)}


def _mixer_terms(shape: ShapeSummary, fit: AccuracyCoefficients) -> dict[str, float]:
    return {
        "linear_attention": mix.linear_attention_penalty(shape.full_attention_frac,
                                                         fit.linear_attention_coef),
        "sliding_window": mix.sliding_window_penalty(
            shape.sliding_window or math.inf, shape.sliding_attention_frac,
            shape.sliding_layers < shape.num_layers - shape.linear_layers,
            fit.sliding_window_coef),
    }  # fmt: skip


def _precision_multiplier(coefficients: ProxyCoefficients, fmt: str) -> float:
    """The band's multiplier; the central one is the fit's (fp8_block shares fp8's)."""
    if coefficients.precision_band != "central":
        return PRECISION_BANDS[coefficients.precision_band][fmt]
    fit = coefficients.fitted
    fitted = {"fp8": fit.precision_fp8, "fp8_block": fit.precision_fp8,
              "nvfp4": fit.precision_nvfp4, "mxfp4": fit.precision_mxfp4}  # fmt: skip
    return fitted.get(fmt, PRECISION_BANDS["central"][fmt])


def central_loss_nats(arch: Architecture, training_tokens: float, precision: str,
                      fitted: AccuracyCoefficients, law: str | BaseLaw = DEFAULT_LAW
                      ) -> tuple[float, float]:  # fmt: skip
    """(central L_hat, central N_eff) of `arch` under the coefficients `fitted` (the fit's
    model)."""
    shape, coefficients = summarize_shape(arch), central_coefficients(fitted)
    n_eff, _, _, loss = _loss_terms(shape, _check_tokens(training_tokens),
                                    _training_format(precision), _base_law(law), coefficients)
    return loss, n_eff


# ---- argument checks -----------------------------------------------------------------------------


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


# ---- inference-only quantisation (§7.1 item 8): reported beside the loss, never folded in --------


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
        flags = outside("D/N (tokens per param) with 4-bit PTQ", tokens_per_param, limit,
                        "Kumar 2024: PTQ damage grows with D")  # fmt: skip
    return PtqEstimate(terms.PTQ_ACCURACY_DELTA_POINTS[name], tuple(str(f) for f in flags))
