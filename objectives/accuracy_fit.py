"""Fit the accuracy proxy's coefficients on the declared calibration set
(`objectives/data/accuracy_calibration.csv`: one row per published comparison, each naming its
source) by source: every coefficient is fitted on all rows, and again with each source left out;
the band widths come from the left-out residuals. Writes the coefficient file
`objectives/data/accuracy_coefficients.toml` (`archscout calibrate --part accuracy`;
`tests/benchmarks/fit_accuracy.py` prints the figures).

Model of a row: the proxy's central prediction of b against a, `pred = L(b)/L(a)` (metrics `loss`
and `ppl`) or `N_eff(b)/N_eff(a)` (`params`), against the published ratio (`value_b/value_a`; for
`ppl`, ln value_b / ln value_a, the ratio of the losses). Residual: `ln pred − ln published`.

Each family's `least_squares` coefficients minimize Σ 2·Huber_δ(residual) over that family's rows
(δ = 1% as the Joint MoE law's fit, arXiv 2502.05172 App. B: an outlying row pulls linearly), the
others held; families are fitted in name order, each from the coefficients the earlier ones left.
A family without rows (a left-out fold) keeps its coefficients' priors: the published law as is,
or no effect. The solver is a bounded Levenberg–Marquardt step on numpy with a central-difference
Jacobian (no scipy in layer 1). Deterministic: the same CSV gives the same file.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from cost_model.errors import ConfigError
from objectives import accuracy_coefficients as coef
from cost_model.precision import get_precision
from objectives import accuracy_model as model
from objectives.accuracy import BASE_LAWS, DEFAULT_LAW, shape_loss_nats, summarize_shape
from objectives.accuracy_coefficients import AccuracyCoefficients, CoefficientRecord
from objectives.shapes import build

METRICS = ("loss", "ppl", "params")  # magnitudes: what a fit can use
SIGN_METRICS = ("accuracy", "tie")  # comparison rows: sign or tie only
ROW_COLUMNS = ("id", "family", "metric", "shape_a", "shape_b", "tokens_a", "tokens_b",
               "precision_a", "precision_b", "value_a", "value_b", "source", "source_id",
               "confidence")
# `confidence`: V read in a stored copy of the source (`locus`/`note` say where), V2 two stored
# secondary copies agree (the primary text not stored), U unverified: kept for the record, never
# fitted or scored (`read_rows` drops it unless asked).
VERIFIED, UNVERIFIED = ("V", "V2"), "U"
_DATA_PACKAGE, CALIBRATION_SET_FILE = "objectives.data", "accuracy_calibration.csv"
CALIBRATION_SET_VERSION = 3
HUBER_DELTA = 0.01  # ln units; the Joint MoE law's fit (Ludziejewski 2025 App. B) used 0.01
BAND_QUANTILE = 0.9  # of a family's |left-out residual|: see `band_widths`
# The smallest family width: the seed-to-seed spread of one loss measurement (Narang et al. 2021,
# arXiv 2102.11972, Table 1: early-loss std over several runs, median ±0.005 of the 17 rows of its
# activation and normalization blocks on ~2.18 nats, 0.005/2.182 = 0.23%) [V: as pasted in CS336
# lecture 3, search-index file id 58152443951].
BAND_FLOOR = 0.0023
MIN_RELATIVE_PRED = 0.005  # ln units: smaller predictions say nothing of a relative error
MIN_BAND_ROWS = 3  # fewer left-out rows (or one source): the pooled quantile of every family
_STEP_FRAC = 1e-4  # central-difference step, relative to the coefficient (absolute floor below)
_STEP_FLOOR = 1e-6
_MAX_ITERATIONS = 100
_TOLERANCE = 1e-9  # stop when a step moves every coefficient by less than this, relative
_COST_TOLERANCE = 1e-12  # or lowers the cost by less than this, relative


@dataclass(frozen=True)
class CalibrationRow:
    """One published comparison: shapes (objectives.shapes strings), tokens, formats, values."""

    id: str
    family: str
    metric: str
    shape_a: str
    shape_b: str
    tokens_a: float
    tokens_b: float
    precision_a: str
    precision_b: str
    value_a: float
    value_b: float
    source: str
    source_id: str
    confidence: str = "V"

    @property
    def published(self) -> float:
        """The published ratio b/a (ppl: of the log-perplexities); NaN for sign-only rows."""
        if self.metric == "ppl":
            return math.log(self.value_b) / math.log(self.value_a)
        return self.value_b / self.value_a if self.metric in ("loss", "params") else math.nan


def shipped_calibration_set() -> Path:
    """The declared calibration set, shipped as package data."""
    return Path(str(resources.files(_DATA_PACKAGE).joinpath(CALIBRATION_SET_FILE)))


def read_rows(path: Path | str, metrics: Sequence[str] = METRICS,
              unverified: bool = False) -> list[CalibrationRow]:  # fmt: skip
    """The verified rows of a comparison CSV (`unverified`: the `U` rows too; extra columns, e.g.
    `locus` and `note`, ignored). A file that cannot be read, a missing column, a bad number,
    metric or confidence tag is one `ConfigError` line naming the file, the line and the field."""
    try:
        with Path(path).open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ROW_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ConfigError(f"calibration set {path} needs columns {', '.join(missing)}")
            rows = [_row(fields, path, reader.line_num) for fields in reader]
    except OSError as exc:
        raise ConfigError(f"calibration set {path} cannot be read: {exc.strerror or exc}") from None
    unknown = sorted({r.metric for r in rows} - set(metrics))
    if unknown:
        raise ConfigError(f"`metric` must be one of {', '.join(metrics)}; got {unknown}")
    rows = [r for r in rows if unverified or r.confidence in VERIFIED]
    if not rows:
        raise ConfigError(f"calibration set {path} has no verified rows")
    return rows


def _row(f: Mapping[str, str], path: Path | str, line: int) -> CalibrationRow:
    def number(key: str) -> float:
        try:
            return float(f[key])
        except (TypeError, ValueError):
            raise ConfigError(f"calibration set {path} line {line}: `{key}` must be a number; "
                              f"got {f[key]!r}") from None

    if not f["source_id"]:
        raise ConfigError(f"calibration set {path} line {line}: `source_id` must name the source")
    if f["confidence"] not in (*VERIFIED, UNVERIFIED):
        raise ConfigError(f"calibration set {path} line {line}: `confidence` must be one of "
                          f"{', '.join((*VERIFIED, UNVERIFIED))}; got {f['confidence']!r}")
    return CalibrationRow(
        id=f["id"], family=f["family"], metric=f["metric"], shape_a=f["shape_a"],
        shape_b=f["shape_b"], tokens_a=number("tokens_a"), tokens_b=number("tokens_b"),
        precision_a=f["precision_a"] or "bf16", precision_b=f["precision_b"] or "bf16",
        value_a=number("value_a"), value_b=number("value_b"), source=f["source"],
        source_id=f["source_id"], confidence=f["confidence"],
    )  # fmt: skip


# ---- the model of one row ------------------------------------------------------------------------


def predicted(row: CalibrationRow, fitted: AccuracyCoefficients) -> float:
    """The proxy's ratio b/a for the row's quantity (N_eff for `params`, else the loss)."""
    (a, fmt_a), (b, fmt_b) = _parts(row.shape_a, row.tokens_a, row.precision_a), _parts(
        row.shape_b, row.tokens_b, row.precision_b)
    law, index = BASE_LAWS[DEFAULT_LAW], 0 if row.metric == "params" else 3
    return (model.combine(b, row.tokens_b, fmt_b, law, fitted)[index]
            / model.combine(a, row.tokens_a, fmt_a, law, fitted)[index])  # fmt: skip


@lru_cache(maxsize=1024)
def _parts(shape: str, tokens: float, precision: str) -> tuple[model.Parts, str]:
    """The coefficient-free parts of a row's shape (checked once: `shape_loss_nats`)."""
    summary = summarize_shape(build(shape))
    shape_loss_nats(summary, tokens, precision, coef.SHIPPED)  # validates tokens and format
    return model.parts(summary, tokens), get_precision(precision).name


def residuals(rows: Sequence[CalibrationRow], fitted: AccuracyCoefficients) -> np.ndarray:
    """ln(proxy / published) per row."""
    return np.array([math.log(predicted(r, fitted) / r.published) for r in rows])


def huber_residuals(raw: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    """r' with r'² = 2·Huber_δ(r): r inside ±δ, sign(r)·sqrt(δ·(2|r| − δ)) beyond."""
    size = np.abs(raw)
    beyond = np.sign(raw) * np.sqrt(delta * np.maximum(2 * size - delta, 0.0))
    return np.where(size <= delta, raw, beyond)


# ---- the solver ----------------------------------------------------------------------------------


def least_squares(residual: Callable[[np.ndarray], np.ndarray], start: np.ndarray,
                  lower: np.ndarray, upper: np.ndarray) -> np.ndarray:  # fmt: skip
    """argmin ||residual(x)||² inside [lower, upper]: Levenberg–Marquardt steps with a central-
    difference Jacobian, each step clipped to the bounds."""
    x, damping = np.clip(np.asarray(start, float), lower, upper), 1e-3
    cost = float(np.sum(residual(x) ** 2))
    for _ in range(_MAX_ITERATIONS):
        jac, r = _jacobian(residual, x, lower, upper), residual(x)
        normal, gradient = jac.T @ jac, jac.T @ r
        damped = normal + damping * np.diag(np.diag(normal) + 1e-12)
        step = np.linalg.lstsq(damped, gradient, rcond=None)[0]  # a coefficient no row moves: 0
        trial = np.clip(x - step, lower, upper)
        trial_cost = float(np.sum(residual(trial) ** 2))
        if trial_cost < cost:
            small_step = np.all(np.abs(trial - x) <= _TOLERANCE * (np.abs(x) + _STEP_FLOOR))
            small_step |= cost - trial_cost <= _COST_TOLERANCE * cost
            x, cost, damping = trial, trial_cost, damping / 10.0
            if small_step:
                break
        else:
            damping *= 10.0
            if damping > 1e8:
                break
    return x


def _jacobian(residual: Callable[[np.ndarray], np.ndarray], x: np.ndarray, lower: np.ndarray,
              upper: np.ndarray) -> np.ndarray:  # fmt: skip
    columns = []
    for i in range(x.size):
        step = max(abs(x[i]) * _STEP_FRAC, _STEP_FLOOR)
        hi, lo = x.copy(), x.copy()
        hi[i], lo[i] = min(x[i] + step, upper[i]), max(x[i] - step, lower[i])
        columns.append((residual(hi) - residual(lo)) / (hi[i] - lo[i]))
    return np.stack(columns, axis=1)


# ---- the fit -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyFit:
    family: str
    coefficients: tuple[str, ...]  # fitted here (empty: none)
    rows: tuple[str, ...]
    rms_log_error: float  # over the family's rows, all sources fitted
    max_abs_log_error: float
    left_out_rms_log_error: float = math.nan  # each source scored by the fit without it


@dataclass(frozen=True)
class AccuracyFit:
    coefficients: AccuracyCoefficients  # the all-source fit, band widths included
    families: Mapping[str, FamilyFit]
    rows: int
    folds: Mapping[str, AccuracyCoefficients] = field(default_factory=dict)  # source left out
    left_out: Mapping[str, float] = field(default_factory=dict)  # row id: left-out residual
    in_sample: Mapping[str, float] = field(default_factory=dict)  # row id: all-source residual
    left_out_pred: Mapping[str, float] = field(default_factory=dict)  # row id: ln predicted b/a

    @property
    def sources(self) -> int:
        return len(self.folds)


def fit_terms(rows: Sequence[CalibrationRow],
              records: Mapping[str, CoefficientRecord] = coef.SHIPPED_RECORDS
              ) -> AccuracyCoefficients:  # fmt: skip
    """Each family's least-squares coefficients on that family's rows, from the priors."""
    current = coef.priors(dict(records))
    for family in sorted({r.family for r in rows}):
        names = tuple(n for n, rec in records.items() if rec.family == family and rec.fitted)
        if names:
            current = _fit_family([r for r in rows if r.family == family], names, records, current)
    return current


def fit_by_source(rows: Sequence[CalibrationRow],
                  records: Mapping[str, CoefficientRecord] = coef.SHIPPED_RECORDS
                  ) -> dict[str, AccuracyCoefficients]:  # fmt: skip
    """The fit without each source's rows, by source id."""
    return {source: fit_terms([r for r in rows if r.source_id != source], records)
            for source in sorted({r.source_id for r in rows})}  # fmt: skip


def fit_coefficients(
    rows: Sequence[CalibrationRow],
    records: Mapping[str, CoefficientRecord] = coef.SHIPPED_RECORDS,
) -> AccuracyFit:
    """Fit on every source, and with each left out; band widths from the left-out residuals."""
    full, folds = fit_terms(rows, records), fit_by_source(rows, records)
    in_sample = dict(zip((r.id for r in rows), residuals(rows, full).tolist(), strict=True))
    pred = {r.id: math.log(predicted(r, folds[r.source_id])) for r in rows}
    left_out = {r.id: pred[r.id] - math.log(r.published) for r in rows}
    bands = band_widths(rows, left_out, pred)
    full = full.with_values(**{f"band_{family}": width for family, width in bands.items()})
    return AccuracyFit(full, _family_fits(rows, records, in_sample, left_out), len(rows), folds,
                       left_out, in_sample, pred)  # fmt: skip


def band_widths(rows: Sequence[CalibrationRow], left_out: Mapping[str, float],
                pred: Mapping[str, float]) -> dict[str, float]:  # fmt: skip
    """The band h = width_f + relative·|predicted ln ratio| from left-out residuals r: `relative`
    is the `BAND_QUANTILE` quantile of |r|/|pred| over every row predicting a difference of at
    least `MIN_RELATIVE_PRED`; width_f that of (|r| − relative·|pred|)₊ over family f's rows. A
    family with fewer than `MIN_BAND_ROWS` rows or one source takes the quantile pooled over every
    family (a single source cannot say how far another lab's result falls); no width is below
    `BAND_FLOOR`."""
    rows = [r for r in rows if r.id in left_out]
    relative = _quantile([abs(left_out[r.id] / pred[r.id]) for r in rows
                          if abs(pred[r.id]) >= MIN_RELATIVE_PRED])  # fmt: skip

    def excess(subset: Sequence[CalibrationRow]) -> float:
        return max(BAND_FLOOR, _quantile([max(0.0, abs(left_out[r.id]) - relative
                                              * abs(pred[r.id])) for r in subset]))  # fmt: skip

    pooled, widths = excess(rows), {"relative": relative}
    for family in coef.BAND_FAMILIES:
        own = [r for r in rows if r.family == family]
        enough = len(own) >= MIN_BAND_ROWS and len({r.source_id for r in own}) > 1
        widths[family] = excess(own) if enough else pooled
    return widths


def _quantile(values: Sequence[float]) -> float:
    return float(np.quantile(values, BAND_QUANTILE)) if values else 0.0


def _family_fits(rows: Sequence[CalibrationRow], records: Mapping[str, CoefficientRecord],
                 in_sample: Mapping[str, float], left_out: Mapping[str, float]
                 ) -> dict[str, FamilyFit]:  # fmt: skip
    fits = {}
    for family in sorted({r.family for r in rows}):
        ids = tuple(r.id for r in rows if r.family == family)
        errors, out = np.array([in_sample[i] for i in ids]), np.array([left_out[i] for i in ids])
        names = tuple(n for n, rec in records.items() if rec.family == family and rec.fitted)
        fits[family] = FamilyFit(family, names, ids, float(np.sqrt(np.mean(errors**2))),
                                 float(np.max(np.abs(errors))),
                                 float(np.sqrt(np.mean(out**2))))  # fmt: skip
    return fits


def _fit_family(rows: Sequence[CalibrationRow], names: tuple[str, ...],
                records: Mapping[str, CoefficientRecord],
                current: AccuracyCoefficients) -> AccuracyCoefficients:  # fmt: skip
    lower = np.array([records[n].lower for n in names])
    upper = np.array([records[n].upper for n in names])

    def residual(x: np.ndarray) -> np.ndarray:
        trial = current.with_values(**dict(zip(names, map(float, x), strict=True)))
        return huber_residuals(residuals(rows, trial))

    start = np.array([getattr(current, n) for n in names])
    best = least_squares(residual, start, lower, upper)
    return current.with_values(**dict(zip(names, map(float, best), strict=True)))


# ---- the data file -------------------------------------------------------------------------------


def coefficients_toml(fit: AccuracyFit, records: Mapping[str, CoefficientRecord],
                      set_name: str, version: int = CALIBRATION_SET_VERSION) -> str:  # fmt: skip
    """The data file's text: the calibration set, its errors per family, every coefficient."""
    def errors(attr: str) -> str:
        return ", ".join(f"{f} = {getattr(ff, attr):.6g}" for f, ff in fit.families.items())

    lines = ["# Written by objectives.accuracy_fit (python tests/benchmarks/fit_accuracy.py "
             "--write); do not edit by hand.", "", "[calibration_set]",
             f'name = "{set_name}"', f"version = {version}", f"rows = {fit.rows}",
             f"sources = {fit.sources}", f"fit_rms_log_error = {{ {errors('rms_log_error')} }}",
             f"left_out_rms_log_error = {{ {errors('left_out_rms_log_error')} }}"]  # fmt: skip
    for name, rec in records.items():
        family = fit.families.get(rec.family)
        rows = rec.rows if rec.method in coef.KEPT_METHODS else family.rows if family else ()
        lines += ["", f"[coefficients.{name}]",
                  *_record_lines(rec.model_copy(update={"rows": rows}),
                                 getattr(fit.coefficients, name))]  # fmt: skip
    return "\n".join(lines) + "\n"


def _record_lines(rec: CoefficientRecord, value: float) -> list[str]:
    rows = ", ".join(f'"{r}"' for r in rec.rows)
    return [f"value = {value:.6g}", f'family = "{rec.family}"', f'method = "{rec.method}"',
            f"prior = {rec.prior:.6g}", f"lower = {rec.lower:.6g}", f"upper = {rec.upper:.6g}",
            f"rows = [{rows}]", f"source = {_quoted(rec.source)}"]  # fmt: skip


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
