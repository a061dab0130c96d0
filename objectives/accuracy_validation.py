"""Score the accuracy proxy against published comparisons, each row by a fit that never saw its
source (the headline) and by the all-source fit (in sample, beside it): sign agreement, size within
2× and whether the band of the difference covers the published one.

Rows: the calibration set (`objectives/data/accuracy_calibration.csv`, magnitudes) and the
comparison set (`tests/data/accuracy/comparisons.csv`: accuracy points, ties, bounds and the base
law's scale checks, which no coefficient is fitted on). For a row of source s, the left-out
prediction uses the fit without s (`AccuracyFit.folds`; a source with no calibration row is
absent from every fit already) and the band of the row's family from the left-out residuals of
the other sources' rows.

- sign: metric `loss`/`ppl`/`params`: pred and published differences have the same sign (a
  published tie, a zero difference: |pred| <= 1%); `accuracy` (higher is better): the loss moves
  the other way; `tie` (published "comparable"): |pred| <= 1%.
- within 2×: pred/published in [1/2, 2] (magnitude rows with a nonzero published difference).
- covered: the band [pred − h, pred + h] (ln ratio, h the family's width) holds the published
  difference, holds a difference of the published sign (`accuracy`), or meets ±1% (`tie`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from objectives.accuracy_coefficients import BAND_FAMILIES, AccuracyCoefficients
from objectives.accuracy_fit import AccuracyFit, CalibrationRow, band_widths, predicted

TIE_FRAC = 0.01  # policy: "comparable" read as within 1% of loss
WITHIN_FACTOR = 2.0


@dataclass(frozen=True)
class RowScore:
    id: str
    family: str
    metric: str
    source_id: str
    pred_log: float  # ln(predicted b/a)
    published: float  # ln(published b/a) for magnitudes, b − a for accuracy, nan for ties
    band: float  # the half-width h used (nan: no band for this family)
    sign_agrees: bool
    within_2x: bool | None
    covered: bool | None


def score_row(row: CalibrationRow, fitted: AccuracyCoefficients,
              widths: Mapping[str, float]) -> RowScore:  # fmt: skip
    """`widths`: the families' band widths and `relative` (as `band_widths` returns them)."""
    pred = math.log(predicted(row, fitted))
    band = widths[row.family] + widths["relative"] * abs(pred) if row.family in widths \
        else math.nan  # fmt: skip
    if row.metric in ("loss", "ppl", "params"):
        published = math.log(row.published)
        tie = abs(published) < 1e-12
        sign = abs(pred) <= TIE_FRAC if tie else pred * published > 0
        within = None if tie else 1 / WITHIN_FACTOR <= pred / published <= WITHIN_FACTOR
        covered = abs(pred - published) <= band
    elif row.metric == "accuracy":
        published = row.value_b - row.value_a
        sign = abs(pred) <= TIE_FRAC if published == 0 else pred * published < 0
        within = None
        covered = (pred - band < 0) if published > 0 else (pred + band > 0) if published < 0 \
            else abs(pred) <= band + TIE_FRAC  # fmt: skip
    else:  # tie
        published, within = math.nan, None
        sign = abs(pred) <= TIE_FRAC
        covered = abs(pred) <= band + TIE_FRAC
    return RowScore(row.id, row.family, row.metric, row.source_id, pred, published, band, sign,
                    within, None if math.isnan(band) else covered)  # fmt: skip


def score_left_out(fit: AccuracyFit, calibration: Sequence[CalibrationRow],
                   comparisons: Sequence[CalibrationRow]) -> list[RowScore]:  # fmt: skip
    """Each row by the fit without its source, banded by the other sources' residuals."""
    scores = []
    for row in [*calibration, *comparisons]:
        fitted = fit.folds.get(row.source_id, fit.coefficients)
        others = [r for r in calibration if r.source_id != row.source_id]
        scores.append(score_row(row, fitted, band_widths(others, fit.left_out, fit.left_out_pred)))
    return scores


def score_in_sample(fit: AccuracyFit, calibration: Sequence[CalibrationRow],
                    comparisons: Sequence[CalibrationRow]) -> list[RowScore]:  # fmt: skip
    """Each row by the all-source fit and its shipped band widths."""
    c = fit.coefficients
    widths = {"relative": c.band_relative, **{f: c.band(f) for f in BAND_FAMILIES}}
    return [score_row(r, c, widths) for r in [*calibration, *comparisons]]


def summarize(scores: Sequence[RowScore]) -> dict[str, dict[str, int]]:
    """Per family and over all rows: counts of rows, sign agreements, sized rows within 2×,
    banded rows covered."""
    groups: Mapping[str, list[RowScore]] = defaultdict(list)
    for s in scores:
        groups[s.family].append(s)
        groups["all"].append(s)
    summary = {}
    for family in sorted(groups, key=lambda f: (f == "all", f)):
        rows = groups[family]
        sized = [s for s in rows if s.within_2x is not None]
        banded = [s for s in rows if s.covered is not None]
        summary[family] = {"rows": len(rows), "sign": sum(s.sign_agrees for s in rows),
                           "sized": len(sized), "within_2x": sum(s.within_2x for s in sized),
                           "banded": len(banded), "covered": sum(s.covered for s in banded)}
    return summary
