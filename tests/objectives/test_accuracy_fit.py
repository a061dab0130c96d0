"""The accuracy proxy's calibration fit (objectives/accuracy_fit.py): refitting the declared
calibration set reproduces the shipped coefficient file; the solver finds a known minimum; the
calibration and validation sets are disjoint and every row names its source."""

import csv
import math

import numpy as np
import pytest

from objectives import accuracy_coefficients as coef
from objectives.accuracy_fit import (
    fit_coefficients, least_squares, read_rows, residuals, shipped_calibration_set,
)  # fmt: skip
from tests.data_paths import TEST_DATA

CALIBRATION = shipped_calibration_set()
VALIDATION = TEST_DATA / "accuracy" / "validation.csv"
ROWS = read_rows(CALIBRATION)
FIT = fit_coefficients(ROWS)


@pytest.mark.parametrize("name", [n for n, r in coef.SHIPPED_RECORDS.items() if r.fitted])
def test_refit_reproduces_the_shipped_coefficients(name):
    """Deterministic fit: the same CSV gives the file's values (the file prints 6 digits)."""
    assert getattr(FIT.coefficients, name) == pytest.approx(getattr(coef.SHIPPED, name), rel=1e-5)


def test_policy_coefficients_are_kept():
    for name, record in coef.SHIPPED_RECORDS.items():
        if not record.fitted:
            assert getattr(FIT.coefficients, name) == record.value


def test_shipped_fit_error_matches_the_file_and_is_small():
    shipped = coef.calibration_set(coef.SHIPPED_DOCUMENT)
    assert shipped.rows == len(ROWS)
    for family, fit in FIT.families.items():
        assert fit.rms_log_error == pytest.approx(shipped.fit_rms_log_error[family], abs=1e-6)
        assert fit.max_abs_log_error < 0.025, family  # every calibration row within 2.5%


def test_every_fitted_coefficient_inside_its_bounds_and_listing_its_rows():
    for name, record in coef.SHIPPED_RECORDS.items():
        assert record.lower <= record.value <= record.upper, name
        if record.fitted:
            assert set(record.rows) == set(FIT.families[record.family].rows), name


def test_least_squares_finds_a_known_minimum():
    """r(x) = (x0 - 2, 10·(x1 - x0²)): the Rosenbrock valley, minimum at (2, 4); bounded."""
    def residual(x):
        return np.array([x[0] - 2.0, 10.0 * (x[1] - x[0] ** 2)])

    best = least_squares(residual, np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([5, 20]))
    np.testing.assert_allclose(best, [2.0, 4.0], atol=1e-6)
    clipped = least_squares(residual, np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([1, 1]))
    np.testing.assert_allclose(clipped, [1.0, 1.0], atol=1e-6)


def test_precision_fit_is_the_closed_form():
    """Three chained rows, three multipliers: FP8 = 1.00125 (DeepSeek-V3's < 0.25% read as its
    midpoint), NVFP4 = 1.015 · FP8 = 1.016269, MXFP4 = NVFP4 · 1.025/1.015 = 1.026281."""
    c = FIT.coefficients
    assert c.precision_fp8 == pytest.approx(1.00125, abs=1e-6)
    assert c.precision_nvfp4 == pytest.approx(1.015 * 1.00125, abs=1e-6)
    assert c.precision_mxfp4 == pytest.approx(1.015 * 1.00125 * 1.025 / 1.015, abs=1e-6)


def test_vocabulary_exponent_through_taos_two_optima():
    """gamma = ln(57K·4096 / (216K·8192)) / ln(N_7B / N_70B) with the exact non-vocabulary counts
    (Llama-2-7B 6,476,271,616; the 70B anchor 68.45e9): ≈ 0.859 (the notes' "implies 0.86")."""
    gamma = math.log(57_000 * 4096 / (216_000 * 8192)) / math.log(6_476_271_616 / 68.45e9)
    assert FIT.coefficients.tao_vocab_exponent == pytest.approx(gamma, rel=2e-3)


def test_residuals_vanish_only_at_the_published_values():
    row = next(r for r in ROWS if r.id == "fp8-vs-bf16")
    exact = coef.SHIPPED.with_values(precision_fp8=1.00125)
    assert abs(residuals([row], exact)[0]) < 1e-9
    assert residuals([row], exact.with_values(precision_fp8=1.0))[0] < -1e-3


def test_calibration_and_validation_sets_are_disjoint_and_sourced():
    with VALIDATION.open() as handle:
        validation = list(csv.DictReader(handle))
    calibration_ids = {r.id for r in ROWS}
    assert calibration_ids.isdisjoint({r["id"] for r in validation})
    assert len(calibration_ids) == len(ROWS)
    assert all(r.source for r in ROWS) and all(r["source"] for r in validation)
    assert {r.family for r in ROWS} >= {"moe", "depth_width", "attention", "precision",
                                        "vocabulary"}  # fmt: skip
