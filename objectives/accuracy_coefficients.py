"""The accuracy proxy's free coefficients, read from one data file,
`objectives/data/accuracy_coefficients.toml`, which `objectives.accuracy_fit` writes from the
declared calibration set (`objectives/data/accuracy_calibration.csv`, package data; refit with
`archscout calibrate --part accuracy` or `python tests/benchmarks/fit_accuracy.py --write`).

Each coefficient names its family, whether the calibration set identifies it (`fitted`), the rows
that fit or bound it, and its source. Coefficients no loss-unit row identifies are policy sizes
(`fitted = false`), kept at the value the file states; the validation set checks them.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_PACKAGE, _FILE = "objectives.data", "accuracy_coefficients.toml"
Family = Literal["moe", "depth_width", "attention", "precision", "vocabulary", "hybrid"]


class CoefficientRecord(BaseModel):
    """One coefficient as the data file states it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    family: Family
    fitted: bool
    lower: float  # the fit's bounds (policy values: the range the evidence allows)
    upper: float
    rows: tuple[str, ...] = ()  # calibration rows that fit it (fitted) or bound it (policy)
    source: str = Field(min_length=1)


class CalibrationSet(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: int = Field(ge=1)
    rows: int = Field(ge=0)
    fit_rms_log_error: dict[str, float]  # per family, over its loss-unit rows


class AccuracyCoefficients(BaseModel):
    """Values the proxy's terms read; `records` keeps what the file says about each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    depth_scale: float = Field(ge=0.0)  # exponent on the Gemstones depth ratio
    granularity_scale: float = Field(ge=0.0)  # exponent on Krajewski's granularity gain
    kv_width_coef: float = Field(ge=0.0)  # per halving of n_kv·d_h below H
    precision_fp8: float = Field(ge=1.0)  # training-format multipliers vs BF16 (central)
    precision_nvfp4: float = Field(ge=1.0)
    precision_mxfp4: float = Field(ge=1.0)
    tao_vocab_exponent: float = Field(gt=0.0)  # N_v,opt ∝ N_nv^γ (Tao et al. 2024)
    attention_width_kappa: float = Field(ge=0.0)
    head_dim_kappa: float = Field(ge=0.0)
    ffn_width_kappa: float = Field(ge=0.0)
    vocab_kappa: float = Field(ge=0.0)
    linear_attention_coef: float = Field(ge=0.0)  # at no full-attention layer (mixer_terms)
    sliding_window_coef: float = Field(ge=0.0)  # per squared window halving (mixer_terms)

    def with_values(self, **values: float) -> AccuracyCoefficients:
        return self.model_copy(update=values)


def load_document(text: str | None = None) -> dict:
    """The data file as a dict (`text` overrides the shipped file)."""
    if text is None:
        text = resources.files(_PACKAGE).joinpath(_FILE).read_text()
    return tomllib.loads(text)


def records(document: dict) -> dict[str, CoefficientRecord]:
    return {name: CoefficientRecord(**fields) for name, fields in document["coefficients"].items()}


def coefficients_from(document: dict) -> AccuracyCoefficients:
    return AccuracyCoefficients(**{name: rec.value for name, rec in records(document).items()})


def calibration_set(document: dict) -> CalibrationSet:
    return CalibrationSet(**document["calibration_set"])


SHIPPED_DOCUMENT = load_document()
SHIPPED = coefficients_from(SHIPPED_DOCUMENT)
SHIPPED_RECORDS = records(SHIPPED_DOCUMENT)
