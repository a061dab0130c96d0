"""The accuracy proxy's fit by source (objectives/accuracy_fit.py): refitting the declared
calibration set reproduces the shipped coefficient file; each left-out fold is the fit without its
source (a family without rows keeps its priors); the band widths are the left-out residuals'
quantiles; the solver finds a known minimum; Huber keeps an outlier from dominating."""

import csv
import io
import math

import numpy as np
import pytest

from cost_model.errors import ConfigError
from objectives import accuracy_coefficients as coef
from objectives.accuracy_fit import (
    BAND_FLOOR, BAND_QUANTILE, METRICS, SIGN_METRICS, band_widths, fit_coefficients, fit_terms,
    huber_residuals, least_squares, read_rows, residuals, shipped_calibration_set,
)  # fmt: skip
from tests.data_paths import TEST_DATA

CALIBRATION = shipped_calibration_set()
COMPARISONS = TEST_DATA / "accuracy" / "comparisons.csv"
ROWS = read_rows(CALIBRATION)
FIT = fit_coefficients(ROWS)


@pytest.mark.parametrize("name", list(coef.SHIPPED_RECORDS))
def test_refit_reproduces_the_shipped_coefficients(name):
    """Deterministic fit: the same CSV gives the file's values (the file prints 6 digits)."""
    assert getattr(FIT.coefficients, name) == pytest.approx(getattr(coef.SHIPPED, name),
                                                            rel=1e-5, abs=1e-9)  # fmt: skip


def test_policy_and_cited_coefficients_are_kept_in_every_fold():
    for name, record in coef.SHIPPED_RECORDS.items():
        if record.method in coef.KEPT_METHODS:
            assert getattr(FIT.coefficients, name) == record.value >= 0.0
            assert all(getattr(fold, name) == record.value for fold in FIT.folds.values()), name


def test_shipped_errors_match_the_file():
    shipped = coef.calibration_set(coef.SHIPPED_DOCUMENT)
    assert shipped.rows == len(ROWS) and shipped.sources == len({r.source_id for r in ROWS})
    for family, fit in FIT.families.items():
        assert fit.rms_log_error == pytest.approx(shipped.fit_rms_log_error[family], abs=1e-6)
        assert fit.left_out_rms_log_error == pytest.approx(
            shipped.left_out_rms_log_error[family], abs=1e-6)


def test_every_coefficient_inside_its_bounds_and_listing_its_rows():
    for name, record in coef.SHIPPED_RECORDS.items():
        assert record.lower <= record.value <= record.upper, name
        assert record.lower <= record.prior <= record.upper, name
        if record.fitted:  # a family without a verified row (attention) lists none
            family = FIT.families.get(record.family)
            assert set(record.rows) == set(family.rows if family else ()), name


def test_a_fold_is_the_fit_without_its_source():
    """Narang 2021 is the only source of the FFN-gating rows: without it the gating coefficient
    is its prior (no effect); the MoE fit moves only through the depth term it reads (families
    are fitted in name order)."""
    source = "2102.11972"
    fold = FIT.folds[source]
    assert fold == fit_terms([r for r in ROWS if r.source_id != source])
    assert fold.ffn_gate_coef == coef.SHIPPED_RECORDS["ffn_gate_coef"].prior == 0.0
    assert FIT.coefficients.ffn_gate_coef > 0.0
    assert fold.moe_scale == pytest.approx(FIT.coefficients.moe_scale, rel=1e-3)


def test_left_out_residuals_are_scored_by_the_fold():
    for row in ROWS:
        expected = residuals([row], FIT.folds[row.source_id])[0]
        assert FIT.left_out[row.id] == pytest.approx(expected, abs=1e-12)
        assert FIT.in_sample[row.id] == pytest.approx(residuals([row], FIT.coefficients)[0])


def test_band_widths_are_left_out_quantiles():
    """relative = the 0.9 quantile of |r|/|pred| (|pred| >= 0.5%); each family's width the 0.9
    quantile of (|r| − relative·|pred|)₊ over its rows (MoE: DeepSeekMoE and Engram); a family of
    one source (hybrid: Kimi Linear only) takes the quantile pooled over every row; floored."""
    widths = band_widths(ROWS, FIT.left_out, FIT.left_out_pred)
    ratios = [abs(FIT.left_out[r.id] / FIT.left_out_pred[r.id]) for r in ROWS
              if abs(FIT.left_out_pred[r.id]) >= 0.005]  # fmt: skip
    assert widths["relative"] == pytest.approx(np.quantile(ratios, BAND_QUANTILE), rel=1e-12)
    assert FIT.coefficients.band_relative == pytest.approx(widths["relative"], rel=1e-12)

    def excess(rows):
        return max(BAND_FLOOR, np.quantile([max(0.0, abs(FIT.left_out[r.id]) - widths["relative"]
                                                * abs(FIT.left_out_pred[r.id])) for r in rows],
                                           BAND_QUANTILE))  # fmt: skip

    assert widths["moe"] == pytest.approx(excess([r for r in ROWS if r.family == "moe"]))
    assert len({r.source_id for r in ROWS if r.family == "hybrid"}) == 1
    assert widths["hybrid"] == pytest.approx(excess(ROWS))
    assert all(width >= BAND_FLOOR for name, width in widths.items() if name != "relative")


def test_huber_residuals_golden():
    """δ = 0.01: r = 0.005 stays; r = 0.03: sqrt(0.01·(0.06 − 0.01)) = sqrt(5e-4) = 0.022361,
    so r'² = 2·Huber = 2·δ·(|r| − δ/2) = 5e-4."""
    got = huber_residuals(np.array([0.005, 0.03, -0.03]))
    np.testing.assert_allclose(got, [0.005, math.sqrt(5e-4), -math.sqrt(5e-4)], rtol=1e-12)


def test_least_squares_finds_a_known_minimum():
    """r(x) = (x0 - 2, 10·(x1 - x0²)): the Rosenbrock valley, minimum at (2, 4); bounded."""
    def residual(x):
        return np.array([x[0] - 2.0, 10.0 * (x[1] - x[0] ** 2)])

    best = least_squares(residual, np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([5, 20]))
    np.testing.assert_allclose(best, [2.0, 4.0], atol=1e-6)
    clipped = least_squares(residual, np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([1, 1]))
    np.testing.assert_allclose(clipped, [1.0, 1.0], atol=1e-6)


def test_a_coefficient_no_row_moves_stays_put():
    """r(x) = x0 − 3, x1 absent: the step leaves x1 where it started (a rank-deficient system)."""
    best = least_squares(lambda x: np.array([x[0] - 3.0]), np.array([0.0, 0.7]),
                         np.array([-5.0, 0.0]), np.array([5.0, 1.0]))  # fmt: skip
    np.testing.assert_allclose(best, [3.0, 0.7], atol=1e-6)


def test_precision_fit_is_the_closed_form():
    """Three chained rows, three multipliers: FP8 = 1.00125 (DeepSeek-V3's < 0.25% read as its
    midpoint), NVFP4 = 1.015 · FP8 = 1.016269, and MXFP4 trained on 1.36T tokens matching NVFP4 on
    1T at 8B (Llama-3-8B widths, V 131072: depth and vocabulary terms 1): N = 6.9796e9 + 1.0737e9
    · 96256/131072 = 7.7681e9, A/N^α = 482.01/7.7681e9^0.3478 = 0.17507, B/D^β = 2085.43/1e12^0.3658
    = 0.08503 and 2085.43/1.36e12^0.3658 = 0.07599, so L(1T)/L(1.36T) = 2.07730/2.06826 = 1.004374
    and MXFP4 = 1.016269 · 1.004374 = 1.020714."""
    c = FIT.coefficients
    assert c.precision_fp8 == pytest.approx(1.00125, abs=1e-6)
    assert c.precision_nvfp4 == pytest.approx(1.015 * 1.00125, abs=1e-6)
    assert c.precision_mxfp4 == pytest.approx(1.020714, abs=2e-6)


def test_ppl_rows_compare_log_perplexities():
    row = next(r for r in ROWS if r.id == "kimi-linear-ablation-3to1")
    assert row.published == pytest.approx(math.log(5.65) / math.log(5.77), rel=1e-12)


def test_calibration_and_comparison_sets_are_disjoint_and_sourced():
    comparisons = read_rows(COMPARISONS, METRICS + SIGN_METRICS, unverified=True)
    ids = [r.id for r in ROWS] + [r.id for r in comparisons]
    assert len(ids) == len(set(ids))
    assert all(r.source and r.source_id for r in [*ROWS, *comparisons])
    assert {r.family for r in ROWS} >= {"moe", "depth_width", "mix", "ffn", "hybrid",
                                        "precision"}  # fmt: skip
    assert {r.metric for r in comparisons} >= {"accuracy", "tie"}


def test_unverified_rows_are_kept_on_file_but_never_fitted():
    """`U` rows (recalled or transcribed values no stored copy confirmed) stay in the CSVs for the
    record; `read_rows` drops them unless asked, so no fit, fold or band sees them."""
    every = read_rows(CALIBRATION, unverified=True)
    unverified = {r.id for r in every if r.confidence == "U"}
    assert {"shazeer-wmt-mha-mqa", "xlstm-llama-mamba", "narang-depth-24l"} <= unverified
    assert unverified.isdisjoint(r.id for r in ROWS)
    assert len(ROWS) == len(every) - len(unverified)
    assert unverified.isdisjoint(FIT.left_out)


def test_a_bad_confidence_tag_is_one_line_naming_the_field(tmp_path):
    lines = CALIBRATION.read_text().splitlines()
    header = lines[0].split(",")
    first = next(csv.reader([lines[1]]))
    first[header.index("confidence")] = "R"
    path = tmp_path / "rows.csv"
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, first])
    path.write_text(buffer.getvalue())
    with pytest.raises(ConfigError, match=r"line 2: `confidence` must be one of V, V2, U; got 'R'"):
        read_rows(path)
