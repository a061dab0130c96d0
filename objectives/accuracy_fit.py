"""Refit the accuracy proxy's free coefficients on the declared calibration set
(`objectives/data/accuracy_calibration.csv`, one row per published measurement or published fit
point, each with its source) and write them to `objectives/data/accuracy_coefficients.toml`
(`archscout calibrate --part accuracy`; `tests/benchmarks/fit_accuracy.py` adds validation).

Model of a row: the proxy's central prediction of b against a, `pred = L(b)/L(a)` (metric
`loss`), `N_eff(b)/N_eff(a)` (`params`) or the optimal vocabulary of a (`optimal_vocab`),
against the published `value_b/value_a` (or `value_b`). Residual: `ln pred − ln published`.

Each family's fitted coefficients minimize the sum of squared residuals of that family's rows,
the other coefficients held at their current values; families are fitted in name order, each on
the coefficients the earlier ones left (every row varies mostly one term, but MoE rows also vary
depth, so a refit of depth moves the MoE fit after it). The solver is a bounded
Gauss–Newton/Levenberg–Marquardt step on numpy with a central-difference Jacobian (no scipy in
layer 1). Coefficients the data file marks `fitted = false` are policy: kept, and reported with
the error of their family's rows. Deterministic: the same CSV gives the same coefficients.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from cost_model.errors import ConfigError
from cost_model.params import count_params
from objectives import accuracy_coefficients as coef
from objectives import capacity_terms as cap
from objectives.accuracy import central_loss_nats
from objectives.accuracy_coefficients import AccuracyCoefficients, CoefficientRecord
from objectives.shapes import build

METRICS = ("loss", "params", "optimal_vocab")
ROW_COLUMNS = ("id", "family", "metric", "shape_a", "shape_b", "tokens_a", "tokens_b",
               "precision_a", "precision_b", "value_a", "value_b", "source")
_DATA_PACKAGE, CALIBRATION_SET_FILE = "objectives.data", "accuracy_calibration.csv"
CALIBRATION_SET_VERSION = 1
_STEP_FRAC = 1e-4  # central-difference step, relative to the coefficient (absolute floor below)
_STEP_FLOOR = 1e-6
_MAX_ITERATIONS = 100
_TOLERANCE = 1e-9  # stop when a step moves every coefficient by less than this, relative


@dataclass(frozen=True)
class CalibrationRow:
    """One published measurement: shapes (objectives.shapes strings), tokens, formats, values."""

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

    @property
    def published(self) -> float:
        return self.value_b if self.metric == "optimal_vocab" else self.value_b / self.value_a


def shipped_calibration_set() -> Path:
    """The declared calibration set, shipped as package data."""
    return Path(str(resources.files(_DATA_PACKAGE).joinpath(CALIBRATION_SET_FILE)))


def read_rows(path: Path | str) -> list[CalibrationRow]:
    """The rows of a calibration CSV (extra columns, e.g. `confidence` and `note`, ignored).
    A file that cannot be read, a missing column or a bad number is one `ConfigError` line
    naming the file, the line and the field."""
    try:
        with Path(path).open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ROW_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ConfigError(f"calibration set {path} needs columns {', '.join(missing)}")
            rows = [_row(fields, path, reader.line_num) for fields in reader]
    except OSError as exc:
        raise ConfigError(f"calibration set {path} cannot be read: {exc.strerror or exc}") from None
    unknown = sorted({r.metric for r in rows} - set(METRICS))
    if unknown:
        raise ConfigError(f"`metric` must be one of {', '.join(METRICS)}; got {unknown}")
    if not rows:
        raise ConfigError(f"calibration set {path} has no rows")
    return rows


def _row(f: Mapping[str, str], path: Path | str, line: int) -> CalibrationRow:
    def number(key: str) -> float:
        try:
            return float(f[key])
        except (TypeError, ValueError):
            raise ConfigError(f"calibration set {path} line {line}: `{key}` must be a number; "
                              f"got {f[key]!r}") from None

    return CalibrationRow(
        id=f["id"], family=f["family"], metric=f["metric"], shape_a=f["shape_a"],
        shape_b=f["shape_b"], tokens_a=number("tokens_a"), tokens_b=number("tokens_b"),
        precision_a=f["precision_a"] or "bf16", precision_b=f["precision_b"] or "bf16",
        value_a=number("value_a"), value_b=number("value_b"), source=f["source"],
    )  # fmt: skip


# ---- the model of one row ------------------------------------------------------------------------


def predicted(row: CalibrationRow, fitted: AccuracyCoefficients) -> float:
    """The proxy's value for the row's published quantity (a ratio, or a vocabulary size)."""
    if row.metric == "optimal_vocab":
        return _optimal_vocab(row.shape_a, fitted)
    a = central_loss_nats(build(row.shape_a), row.tokens_a, row.precision_a, fitted)
    b = central_loss_nats(build(row.shape_b), row.tokens_b, row.precision_b, fitted)
    index = 0 if row.metric == "loss" else 1
    return b[index] / a[index]


def _optimal_vocab(shape: str, fitted: AccuracyCoefficients) -> float:
    """Tao's optimal vocabulary at the non-embedding params of `shape` (exact count)."""
    arch = build(shape)
    counts = count_params(arch)
    non_vocab = counts.total_params - counts.embedding_params - counts.lm_head_params
    return cap.optimal_vocab_size(non_vocab, arch.hidden_size, fitted.tao_vocab_exponent)


def residuals(rows: Sequence[CalibrationRow], fitted: AccuracyCoefficients) -> np.ndarray:
    """ln(proxy / published) per row."""
    return np.array([math.log(predicted(r, fitted) / r.published) for r in rows])


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
        trial = np.clip(x - np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12),
                                            gradient), lower, upper)  # fmt: skip
        trial_cost = float(np.sum(residual(trial) ** 2))
        if trial_cost < cost:
            small_step = np.all(np.abs(trial - x) <= _TOLERANCE * (np.abs(x) + _STEP_FLOOR))
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
    coefficients: tuple[str, ...]  # fitted here (empty: policy only)
    rows: tuple[str, ...]
    rms_log_error: float  # over the family's rows, after the fit
    max_abs_log_error: float


@dataclass(frozen=True)
class AccuracyFit:
    coefficients: AccuracyCoefficients
    families: Mapping[str, FamilyFit]
    rows: int


def fit_coefficients(
    rows: Sequence[CalibrationRow],
    records: Mapping[str, CoefficientRecord] = coef.SHIPPED_RECORDS,
    start: AccuracyCoefficients = coef.SHIPPED,
) -> AccuracyFit:
    """Fit each family's `fitted = true` coefficients on that family's rows, in family order."""
    current, families = start, {}
    for family in sorted({r.family for r in rows}):
        subset = [r for r in rows if r.family == family]
        names = tuple(n for n, rec in records.items() if rec.family == family and rec.fitted)
        if names:
            current = _fit_family(subset, names, records, current)
        errors = residuals(subset, current)
        families[family] = FamilyFit(family, names, tuple(r.id for r in subset),
                                     float(np.sqrt(np.mean(errors**2))),
                                     float(np.max(np.abs(errors))))  # fmt: skip
    return AccuracyFit(current, families, len(rows))


def _fit_family(rows: Sequence[CalibrationRow], names: tuple[str, ...],
                records: Mapping[str, CoefficientRecord],
                current: AccuracyCoefficients) -> AccuracyCoefficients:  # fmt: skip
    lower = np.array([records[n].lower for n in names])
    upper = np.array([records[n].upper for n in names])

    def residual(x: np.ndarray) -> np.ndarray:
        return residuals(rows, current.with_values(**dict(zip(names, map(float, x), strict=True))))

    start = np.array([getattr(current, n) for n in names])
    best = least_squares(residual, start, lower, upper)
    return current.with_values(**dict(zip(names, map(float, best), strict=True)))


# ---- the data file -------------------------------------------------------------------------------


def coefficients_toml(fit: AccuracyFit, records: Mapping[str, CoefficientRecord],
                      set_name: str, version: int = CALIBRATION_SET_VERSION) -> str:  # fmt: skip
    """The data file's text: the calibration set, its fit error per family, every coefficient."""
    errors = ", ".join(f"{f} = {ff.rms_log_error:.6g}" for f, ff in fit.families.items())
    lines = ["# Written by objectives.accuracy_fit (python tests/benchmarks/fit_accuracy.py "
             "--write); do not edit by hand.", "", "[calibration_set]",
             f'name = "{set_name}"', f"version = {version}", f"rows = {fit.rows}",
             f"fit_rms_log_error = {{ {errors} }}"]  # fmt: skip
    for name, rec in records.items():
        rows = fit.families[rec.family].rows if rec.fitted and rec.family in fit.families else ()
        rec = rec.model_copy(update={"rows": rows}) if rows else rec
        value = getattr(fit.coefficients, name)
        lines += ["", f"[coefficients.{name}]", *_record_lines(rec, value)]
    return "\n".join(lines) + "\n"


def _record_lines(rec: CoefficientRecord, value: float) -> list[str]:
    """A fitted coefficient lists the rows that fit it; a policy one keeps the rows bounding it."""
    rows = ", ".join(f'"{r}"' for r in rec.rows)
    fitted = str(rec.fitted).lower()
    return [f"value = {value:.6g}", f'family = "{rec.family}"', f"fitted = {fitted}",
            f"lower = {rec.lower:.6g}", f"upper = {rec.upper:.6g}", f"rows = [{rows}]",
            f"source = {_quoted(rec.source)}"]  # fmt: skip


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
