"""The accuracy proxy's free coefficients, read from one data file,
`objectives/data/accuracy_coefficients.toml`, which `objectives.accuracy_fit` writes from the
declared calibration set (`objectives/data/accuracy_calibration.csv`, package data; refit with
`archscout calibrate --part accuracy` or `python tests/benchmarks/fit_accuracy.py --write`).

Each coefficient names its family, how the data determine it (`method`): `least_squares` on its
family's calibration rows, `left_out_quantile` (a band width: a quantile of the family's
leave-one-source-out residuals), `cited` (a published law's value, kept in every fold: fitting it
on one source made the other folds worse) or `policy` (a penalty-only size no loss-unit row
identifies),
the rows that fit or bound it, its `prior` (the value when no row of its family is available, e.g.
in a leave-one-source-out fold: the law as published, or no effect) and its source.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_PACKAGE, _FILE = "objectives.data", "accuracy_coefficients.toml"
Family = Literal["moe", "depth_width", "mix", "attention", "ffn", "hybrid", "vocabulary",
                 "precision", "scale", "pooled"]  # fmt: skip
Method = Literal["least_squares", "left_out_quantile", "cited", "policy"]
KEPT_METHODS = ("cited", "policy")  # not fitted: the file's value in every fold
BAND_FAMILIES = ("attention", "depth_width", "ffn", "hybrid", "mix", "moe", "precision",
                 "vocabulary")


class CoefficientRecord(BaseModel):
    """One coefficient as the data file states it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    family: Family
    method: Method
    prior: float  # the value without rows of its family (leave-one-source-out folds)
    lower: float  # the fit's bounds (policy values: the range the evidence allows)
    upper: float
    rows: tuple[str, ...] = ()  # calibration rows that fit it (fitted) or bound it (policy)
    source: str = Field(min_length=1)

    @property
    def fitted(self) -> bool:
        return self.method == "least_squares"


class CalibrationSet(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: int = Field(ge=1)
    rows: int = Field(ge=0)
    sources: int = Field(ge=0)
    fit_rms_log_error: dict[str, float]  # per family, in sample
    left_out_rms_log_error: dict[str, float]  # per family, each source scored by the others' fit


class AccuracyCoefficients(BaseModel):
    """Values the proxy's terms read; `records` keeps what the file says about each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    embedding_weight: float = Field(ge=0.0, le=1.0)  # embeddings' weight in N_eff
    depth_scale: float = Field(ge=0.0)  # exponent on the Gemstones depth ratio
    mix_scale: float = Field(ge=0.0)  # exponent on Bian 2025b's MLP/attention factor
    moe_scale: float = Field(ge=0.0)  # exponent on the Joint MoE law's expert multiplier
    granularity_scale: float = Field(ge=0.0)  # exponent on Krajewski's granularity gain
    kv_width_coef: float = Field(ge=0.0)  # per halving of n_kv·d_h below H
    ffn_gate_coef: float = Field(ge=0.0)  # non-gated FFN against a gated one of equal params
    hybrid_coef: float  # ln factor of a hybrid keeping 1/8–1/2 of its mixers as attention
    linear_only_coef: float  # ln factor with no attention layer
    precision_fp8: float = Field(ge=1.0)  # training-format multipliers vs BF16 (central)
    precision_nvfp4: float = Field(ge=1.0)
    precision_mxfp4: float = Field(ge=1.0)
    attention_width_kappa: float = Field(ge=0.0)  # policy penalties below the published shapes
    head_dim_kappa: float = Field(ge=0.0)
    ffn_width_kappa: float = Field(ge=0.0)
    sliding_window_coef: float = Field(ge=0.0)
    band_attention: float = Field(ge=0.0)  # band half-widths (ln loss) per family of difference
    band_depth_width: float = Field(ge=0.0)
    band_ffn: float = Field(ge=0.0)
    band_hybrid: float = Field(ge=0.0)
    band_mix: float = Field(ge=0.0)
    band_moe: float = Field(ge=0.0)
    band_precision: float = Field(ge=0.0)
    band_vocabulary: float = Field(ge=0.0)
    band_relative: float = Field(ge=0.0)  # band widening per unit |ln factor| of the family


    def with_values(self, **values: float) -> AccuracyCoefficients:
        return self.model_copy(update=values)

    def band(self, family: str, log_factor: float = 0.0) -> float:
        """Half-width (ln loss) of a difference of `family` whose terms move by `log_factor`."""
        return getattr(self, f"band_{family}") + self.band_relative * abs(log_factor)


def load_document(text: str | None = None) -> dict:
    """The data file as a dict (`text` overrides the shipped file)."""
    if text is None:
        text = resources.files(_PACKAGE).joinpath(_FILE).read_text()
    return tomllib.loads(text)


def records(document: dict) -> dict[str, CoefficientRecord]:
    return {name: CoefficientRecord(**fields) for name, fields in document["coefficients"].items()}


def coefficients_from(document: dict) -> AccuracyCoefficients:
    return AccuracyCoefficients(**{name: rec.value for name, rec in records(document).items()})


def priors(recs: dict[str, CoefficientRecord]) -> AccuracyCoefficients:
    """Every coefficient at its prior (cited and policy ones at their value)."""
    return AccuracyCoefficients(**{n: (r.value if r.method in KEPT_METHODS else r.prior)
                                   for n, r in recs.items()})  # fmt: skip


def calibration_set(document: dict) -> CalibrationSet:
    return CalibrationSet(**document["calibration_set"])


SHIPPED_DOCUMENT = load_document()
SHIPPED = coefficients_from(SHIPPED_DOCUMENT)
SHIPPED_RECORDS = records(SHIPPED_DOCUMENT)
