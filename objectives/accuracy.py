"""Accuracy proxy: predicted pre-training loss of an architecture (`docs/accuracy_proxy.md`,
"notes" below; the evidence behind every term: `tests/data/accuracy/SOURCES.md`).

    L_hat = L_base(N_act,ne + w_emb·N_emb, D) · Π_terms P_term
    ΔL    = L_hat - L*(C),  C = 6·N_act·D,  L*(C) = min of L_base over 6ND = C
    CEF   = C*/C,           L*(C*) = L_hat

- L_base: Epoch's refit of Chinchilla (notes §1.1) at the active non-embedding parameters plus
  the fitted weight of the embeddings (rows up to a 96K vocabulary; Chinchilla counted them).
- Capacity terms (`accuracy_model`): `moe` (the Joint MoE law's token-dependent expert multiplier
  times Krajewski's granularity gain, capped at the total), `vocabulary` (Tao et al. 2024: the text
  a token covers against a 96K tokenizer).
- Shape terms (each 1 at Llama-3-8B's shape): depth (Gemstones width/depth law at fixed N), the
  MLP/attention mix (Bian 2025b; dense all-attention models only), attention width, KV width (MLA
  through its latent rank), head dim, FFN width and gating, linear-attention and sliding-window
  layers (`mixer_terms`), training precision.

Every coefficient comes from `objectives/data/accuracy_coefficients.toml`, fitted by source on
the declared calibration set (`objectives.accuracy_fit`). The band is the design's difference from
a standard dense Transformer: the quadrature sum of the left-out residual widths of the families
the design departs in (`FAMILY_OF_TERM`), widened by each range flag (`accuracy_flags`). The ranked
loss is the central loss, or the band's high end when a hard flag fires (notes §7.2). Absolute
losses belong to MassiveText: use deltas and orderings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cost_model.architecture import Architecture
from cost_model.errors import ConfigError
from cost_model.precision import get_precision
from objectives import accuracy_model as model
from objectives import accuracy_terms as terms
from objectives.accuracy_coefficients import SHIPPED, AccuracyCoefficients
from objectives.accuracy_flags import RangeFlag, all_flags, outside
from objectives.accuracy_model import FAMILY_OF_TERM, PENALTY_NAMES
from objectives.accuracy_shape import ShapeSummary, summarize_shape
from objectives.accuracy_terms import BaseLaw, ComputeOptimum

__all__ = [
    "BASE_LAWS",
    "DEFAULT_LAW",
    "FAMILY_OF_TERM",
    "PENALTY_NAMES",
    "LossProxy",
    "RangeFlag",
    "ShapeSummary",
    "active_families",
    "central_loss_nats",
    "effective_params",
    "predict_loss",
    "ptq_estimate",
    "ranking_loss_nats",
    "shape_loss_nats",
    "summarize_shape",
]  # fmt: skip

BASE_LAWS: Mapping[str, BaseLaw] = MappingProxyType(
    {"epoch": terms.EPOCH, "hoffmann": terms.HOFFMANN}
)
DEFAULT_LAW = "epoch"
# Policy: each range flag widens the band by this share of the central loss on both sides
# (a hard flag marks a design no published run covers).
BAND_WIDENING_PER_HARD_FLAG_FRAC = 0.01
BAND_WIDENING_PER_SOFT_FLAG_FRAC = 0.0025
TERM_MOVED = 1e-6  # |ln factor| above which a term counts as moved (its family in the band)


@dataclass(frozen=True)
class LossProxy:
    loss_nats: float  # L_hat, central
    base_loss_nats: float  # L_base(N_act,ne, D)
    effective_params: float  # N_eff: the dense non-embedding size of equal loss (MoE, vocabulary)
    delta_loss_nats: float  # L_hat - L*(C), against the compute-optimal dense model
    compute_equivalence_frac: float  # CEF = C*/C
    penalties: Mapping[str, float]  # the multiplicative factors by name (PENALTY_NAMES)
    flags: tuple[str, ...]  # every out-of-range warning, hard and soft
    hard_flags: tuple[str, ...]  # the subset that puts the ranked loss at the band's high end
    compute_flop: float  # C = 6·N_act·D
    compute_optimum: ComputeOptimum  # the compute-optimal dense model at C
    law: str
    band_low_nats: float = math.nan  # central · exp(-half-width), widened by the flags
    band_high_nats: float = math.nan  # central · exp(+half-width), widened by the flags
    ranked_loss_nats: float = math.nan  # what the search minimizes
    band_families: tuple[str, ...] = ()  # the families of difference the band sums

    def to_dict(self) -> dict:
        return {"loss_nats": self.loss_nats, "band_nats": [self.band_low_nats, self.band_high_nats],
                "ranked_loss_nats": self.ranked_loss_nats, "base_loss_nats": self.base_loss_nats,
                "effective_params": self.effective_params, "delta_loss_nats": self.delta_loss_nats,
                "compute_equivalence_frac": self.compute_equivalence_frac,
                "terms": dict(self.penalties), "band_families": list(self.band_families),
                "flags": list(self.flags), "hard_flags": list(self.hard_flags),
                "compute_flop": self.compute_flop, "law": self.law}  # fmt: skip


# ---- the prediction ------------------------------------------------------------------------------


def predict_loss(
    arch: Architecture,
    training_tokens: float,
    precision: str = "bf16",
    *,
    law: str | BaseLaw = DEFAULT_LAW,
    fitted: AccuracyCoefficients = SHIPPED,
) -> LossProxy:
    """L_hat, its band and ranked value, ΔL, CEF, the term breakdown and the range flags of `arch`
    trained on `training_tokens` in `precision` (a `cost_model.precision` name). Raises
    `ConfigError` for tokens <= 0, an unknown precision or an unknown law."""
    tokens, fmt = _check_tokens(training_tokens), _training_format(precision)
    base_law, shape = _base_law(law), summarize_shape(arch)
    n_eff, base_nats, penalties, loss_nats = _loss_terms(shape, tokens, fmt, base_law, fitted)
    flags = all_flags(shape, n_eff, tokens, fmt, penalties)
    families = active_families(shape, penalties)
    low, high, ranked = _band(loss_nats, band_half_width(families, penalties, fitted), flags)
    compute_flop = terms.training_compute_flop(shape.active_params, tokens)
    optimum = terms.compute_optimum(base_law, compute_flop)
    return LossProxy(
        loss_nats=loss_nats, base_loss_nats=base_nats, effective_params=n_eff,
        delta_loss_nats=loss_nats - optimum.loss_nats,
        compute_equivalence_frac=terms.compute_equivalence_frac(base_law, loss_nats, compute_flop),
        penalties=MappingProxyType(penalties), flags=tuple(str(f) for f in flags),
        hard_flags=tuple(str(f) for f in flags if f.hard), compute_flop=compute_flop,
        compute_optimum=optimum, law=base_law.name, band_low_nats=low, band_high_nats=high,
        ranked_loss_nats=ranked, band_families=families,
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


def active_families(shape: ShapeSummary, penalties: Mapping[str, float]) -> tuple[str, ...]:
    """The families of difference between this design and a standard dense Transformer: those
    whose terms moved, those of its kind (MoE, hybrid, MLA, non-gated FFN), and always depth/width
    (every design picks a width, a depth and an MLP/attention split)."""
    moved = {FAMILY_OF_TERM[name] for name, factor in penalties.items()
             if abs(math.log(factor)) > TERM_MOVED}  # fmt: skip
    kinds = {"moe": bool(shape.num_experts), "hybrid": bool(shape.linear_layers
                                                            or shape.sliding_layers),
             "attention": shape.is_mla, "ffn": not shape.gated_ffn, "depth_width": True}
    moved |= {family for family, present in kinds.items() if present}
    return tuple(sorted(moved))


def band_half_width(families: tuple[str, ...], penalties: Mapping[str, float],
                    fitted: AccuracyCoefficients) -> float:  # fmt: skip
    """ln(high/central): the quadrature sum over the families of difference of each family's
    left-out residual width plus the relative width times the family's |ln factor|."""
    log_factor = dict.fromkeys(families, 0.0)
    for name, factor in penalties.items():
        if FAMILY_OF_TERM[name] in log_factor:
            log_factor[FAMILY_OF_TERM[name]] += math.log(factor)
    return math.sqrt(sum(fitted.band(f, log_factor[f]) ** 2 for f in families))


def _band(central_nats: float, half: float, flags: list[RangeFlag]
          ) -> tuple[float, float, float]:  # fmt: skip
    """(low, high, ranked): central · exp(∓half), each end widened by the flags."""
    hard = sum(f.hard for f in flags)
    widen = (
        hard * BAND_WIDENING_PER_HARD_FLAG_FRAC
        + (len(flags) - hard) * BAND_WIDENING_PER_SOFT_FLAG_FRAC
    )
    low = central_nats * (math.exp(-half) - widen)
    high = central_nats * (math.exp(half) + widen)
    return low, high, high if hard else central_nats


# ---- the model (objectives.accuracy_model) -----------------------------------------------------


def _loss_terms(shape: ShapeSummary, tokens: float, fmt: str, base_law: BaseLaw,
                fit: AccuracyCoefficients
                ) -> tuple[float, float, dict[str, float], float]:  # fmt: skip
    """(N_eff, L_base, terms, L_hat); L_hat = L_base · Π terms exactly."""
    return model.combine(model.parts(shape, tokens), tokens, fmt, base_law, fit)


def effective_params(shape: ShapeSummary, training_tokens: float,
                     fitted: AccuracyCoefficients = SHIPPED) -> float:  # fmt: skip
    """N_eff: the non-embedding size of a dense model of equal loss plus the embeddings' weight."""
    p = model.parts(shape, _check_tokens(training_tokens))
    return model.core_params(p, fitted) + fitted.embedding_weight * p.embeddings


def central_loss_nats(arch: Architecture, training_tokens: float, precision: str,
                      fitted: AccuracyCoefficients, law: str | BaseLaw = DEFAULT_LAW
                      ) -> tuple[float, float]:  # fmt: skip
    """(central L_hat, N_eff) of `arch` under the coefficients `fitted` (the fit's model)."""
    return shape_loss_nats(summarize_shape(arch), training_tokens, precision, fitted, law)


def shape_loss_nats(shape: ShapeSummary, training_tokens: float, precision: str,
                    fitted: AccuracyCoefficients, law: str | BaseLaw = DEFAULT_LAW
                    ) -> tuple[float, float]:  # fmt: skip
    """`central_loss_nats` of a summarized shape."""
    n_eff, _, _, loss = _loss_terms(shape, _check_tokens(training_tokens),
                                    _training_format(precision), _base_law(law), fitted)
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
