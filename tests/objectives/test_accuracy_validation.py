"""Scoring a published comparison (objectives/accuracy_validation.py): sign, within 2× and band
coverage for each metric, derived by hand on a row whose only difference is the training format
(so that the proxy's ln ratio is ln(precision_nvfp4) exactly)."""

import math

import pytest

from objectives.accuracy_coefficients import SHIPPED
from objectives.accuracy_fit import CalibrationRow
from objectives.accuracy_validation import RowScore, score_row, summarize

LLAMA = "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"
PRED = math.log(SHIPPED.precision_nvfp4)  # ln 1.01627 = 0.016138


def _row(metric: str, value_a: float, value_b: float) -> CalibrationRow:
    return CalibrationRow("r", "precision", metric, LLAMA, LLAMA, 1e12, 1e12, "bf16", "nvfp4",
                          value_a, value_b, "test", "0000.00000")  # fmt: skip


def test_loss_row_sign_size_and_band():
    """Published +2% (ln 1.02 = 0.019803): same sign; 0.016138/0.019803 = 0.815, within 2×; off by
    0.003665, so a 0.1% band misses it and a 0.5% one covers it."""
    row = _row("loss", 1.0, 1.02)
    narrow = score_row(row, SHIPPED, {"precision": 0.001, "relative": 0.0})
    wide = score_row(row, SHIPPED, {"precision": 0.005, "relative": 0.0})
    assert narrow.pred_log == pytest.approx(PRED, rel=1e-9)
    assert narrow.sign_agrees and narrow.within_2x and not narrow.covered and wide.covered
    # the relative part: 0.001 + 0.25·0.016138 = 0.005035 covers the 0.003665
    assert score_row(row, SHIPPED, {"precision": 0.001, "relative": 0.25}).covered


def test_loss_row_outside_2x_and_opposite_sign():
    assert not score_row(_row("loss", 1.0, 1.05), SHIPPED, {"precision": 0.0,
                                                              "relative": 0.0}).within_2x
    wrong = score_row(_row("loss", 1.0, 0.99), SHIPPED, {"precision": 0.0, "relative": 0.0})
    assert not wrong.sign_agrees and not wrong.within_2x


def test_accuracy_row_sign_and_band():
    """Accuracy down 1 point: the loss should rise (it does); accuracy up 1 point: the band must
    reach below 0, i.e. h > 0.016138."""
    down = score_row(_row("accuracy", 50.0, 49.0), SHIPPED, {"precision": 0.0, "relative": 0.0})
    assert down.sign_agrees and down.covered and down.within_2x is None
    up = _row("accuracy", 50.0, 51.0)
    assert not score_row(up, SHIPPED, {"precision": 0.016, "relative": 0.0}).covered
    assert score_row(up, SHIPPED, {"precision": 0.017, "relative": 0.0}).covered


def test_tie_row():
    """|pred| = 1.6% > the 1% tie; a band of 0.7% reaches it (1.6% <= 0.7% + 1%)."""
    tie = score_row(_row("tie", 0.0, 0.0), SHIPPED, {"precision": 0.007, "relative": 0.0})
    assert not tie.sign_agrees and tie.covered
    assert not score_row(_row("tie", 0.0, 0.0), SHIPPED, {"precision": 0.005,
                                                          "relative": 0.0}).covered


def test_a_family_without_a_band_is_not_banded():
    row = CalibrationRow("s", "scale", "loss", LLAMA, LLAMA, 1e12, 2e12, "bf16", "bf16", 2.0, 1.9,
                         "test", "0000.00000")  # fmt: skip
    assert score_row(row, SHIPPED, {"relative": 0.1}).covered is None


def test_summarize_counts():
    scores = [RowScore("a", "moe", "loss", "s1", 0.01, 0.012, 0.01, True, True, True),
              RowScore("b", "moe", "accuracy", "s2", 0.01, -1.0, 0.01, True, None, False),
              RowScore("c", "ffn", "tie", "s3", 0.02, math.nan, math.nan, False, None, None)]
    summary = summarize(scores)
    assert summary["moe"] == {"rows": 2, "sign": 2, "sized": 1, "within_2x": 1, "banded": 2,
                              "covered": 1}  # fmt: skip
    assert summary["all"]["rows"] == 3 and summary["all"]["banded"] == 2
    assert list(summary)[-1] == "all"
