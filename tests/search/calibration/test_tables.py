"""Measured tables: found per engine at one engine version, a user's CSV checked field by field
(one line naming the column, line, rule and value; exit 2 through the CLI), too little or
degenerate data refused naming the count, and the held-out test set (aiconfigurator-core's
systems/silicon_sample.csv) never opened by any calibration."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import search.cli.main as cli
from search.calibration import tables
from search.calibration.errors import CalibrationError
from search.calibration.fitting import MIN_EXTRA_ROWS, check_fit_rows

HAS_AIC = importlib.util.find_spec(tables.AIC_PACKAGE) is not None


def _bad(capsys, argv, *fragments):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


def _calibrate_file(tmp_path, text: str | bytes) -> list[str]:
    path = tmp_path / "mine.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["calibrate", "--hardware", "h200", "--source", str(path), "--output",
            str(tmp_path / "out")]


HEADER = "gemm_dtype,m,n,k,latency\n"


@pytest.mark.parametrize("body, fragments", [
    ("bfloat16,1,8,x,0.01\n", ("`k` on line 2", "must be a whole number", "'x'")),
    ("bfloat16,1,8,99999999999999999999999,0.01\n", ("`k` on line 2", "within [1, 2.14748e+09]",
                                                    "99999999999999999999999")),
    ("bfloat16,1,8,8,nan\n", ("`latency` on line 2", "within", "'nan'")),
    ("bfloat16,1,8,8,-1\n", ("`latency` on line 2", "within", "'-1'")),
    ("bfloat16,1,8,8," + "1" * 80 + "\n", ("`latency` on line 2", "at most 64 characters")),
    ("bf16,1.5,8,8,0.01\n", ("`m` on line 2", "whole number", "'1.5'")),
], ids=["non-numeric", "past-int64", "nan", "negative", "over-long", "fractional"])
def test_a_bad_field_of_a_source_csv_is_one_line(capsys, tmp_path, body, fragments):
    _bad(capsys, _calibrate_file(tmp_path, HEADER + body), *fragments)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_nul_bytes_and_non_text_are_one_line(capsys, tmp_path):
    _bad(capsys, _calibrate_file(tmp_path, HEADER.encode() + b"bf16,1,8\x00,8,0.01\n"),
         "line 2 holds a NUL byte")
    _bad(capsys, _calibrate_file(tmp_path, HEADER.encode() + b"bf16,1,8,8,\xff\xfe\n"),
         "is not UTF-8 text")


def test_missing_columns_are_named(capsys, tmp_path):
    _bad(capsys, _calibrate_file(tmp_path, "m,n,k\n1,2,3\n"), "needs columns m, n, k, latency",
         "missing latency")


def test_a_three_row_table_is_refused_naming_the_count(capsys, tmp_path):
    """Issue 29: three rows cannot fit a GEMM's eight coefficients (the package is not
    touched: the command writes to a user folder in any case)."""
    rows = "".join(f"bfloat16,{m},4096,4096,0.0{m}\n" for m in (1, 2, 3))
    _bad(capsys, _calibrate_file(tmp_path, HEADER + rows),
         "bf16 GEMMs has 3 rows; a fit of 8 coefficients needs at least 28")


def test_constant_rows_are_refused(capsys, tmp_path):
    rows = "".join(f"bfloat16,{m},4096,4096,0.01\n" for m in range(1, 41))
    _bad(capsys, _calibrate_file(tmp_path, HEADER + rows), "40 rows all measured at 1e-05 s")
    repeated = "bfloat16,1,4096,4096,0.01\n" * 40  # one shape measured 40 times: one point
    _bad(capsys, _calibrate_file(tmp_path, HEADER + repeated),
         "bf16 GEMMs has 1 rows; a fit of 8 coefficients needs at least 28")


def test_check_fit_rows_states_its_margin():
    times = np.linspace(1.0, 2.0, 5 + MIN_EXTRA_ROWS)
    check_fit_rows("t", times, [times], 5)  # exactly enough
    with pytest.raises(CalibrationError, match=r"t has 24 rows; a fit of 5 coefficients needs "
                                               r"at least 25 \(coefficients \+ 20\)"):
        check_fit_rows("t", times[:-1], [times[:-1]], 5)
    with pytest.raises(CalibrationError, match=r"t has 25 rows but 1 distinct measured points"):
        check_fit_rows("t", times, [np.ones(25)], 5)


def test_the_held_out_test_set_is_refused_by_name(tmp_path):
    path = tmp_path / tables.HELD_OUT_NAME
    path.write_text("anything")
    with pytest.raises(CalibrationError, match="held-out test set"):
        tables.table_path(path)
    with pytest.raises(CalibrationError, match="held-out test set"):
        tables.read_parquet(path)


@pytest.mark.skipif(not HAS_AIC, reason="needs aiconfigurator-core's measured tables")
def test_engine_tables_are_read_at_the_engines_version():
    """vLLM's B200 tables: the GEMM table's version (0.24.0) for the MoE table too, though a
    larger 0.22.0 table sits beside it; an op without that version takes its newest."""
    assert tables.engine_version("b200", "vllm") == "0.24.0"
    path, version = tables.aiconfigurator_table("b200", "moe", "vllm", "moe_perf.parquet")
    assert version == "0.24.0" and path.parent.name == "0.24.0"
    with pytest.raises(CalibrationError, match=r"`engine` must be one of .*; got 'tgi'"):
        tables.engine_version("b200", "tgi")


@pytest.mark.skipif(not HAS_AIC, reason="needs aiconfigurator-core's measured tables")
def test_a_calibration_never_opens_the_held_out_test_set(tmp_path, monkeypatch, capsys):
    """Every file a calibration of every part opens — Python's opens (audit events) and
    pyarrow's Parquet reads — is recorded: silicon_sample.csv is not among them, the engines'
    tables are."""
    opened: list[str] = []
    recording = [True]  # an audit hook cannot be removed: it stops recording after the test

    def audit(event, args):
        if recording[0] and event == "open" and args and isinstance(args[0], (str, bytes)):
            opened.append(str(args[0]))

    read_table = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda path, *a, **k: (
        opened.append(str(path)), read_table(path, *a, **k))[1])
    sys.addaudithook(audit)
    try:
        assert cli.main(["calibrate", "--engine", "trtllm", "--hardware", "h200", "--sample",
                         "100", "--output", str(tmp_path / "out")]) == 0
    finally:
        recording[0] = False
    assert any(p.endswith("moe_perf.parquet") for p in opened)
    assert any(p.endswith("gemm_perf.parquet") for p in opened)
    assert not [p for p in opened if tables.HELD_OUT_NAME in p]
    assert "wrote" in capsys.readouterr().out
