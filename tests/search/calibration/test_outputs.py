"""Issue 29: `calibrate` never rewrites the shipped package data: it writes to `--output`, else
$ARCHSCOUT_CALIBRATION_DIR, else the user's data folder; the package's folder only with
`--write-package-data`; the cost model reads a user's folder through ARCHSCOUT_CALIBRATION_DIR."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import pytest

import search.cli.main as cli
from cost_model.efficiency import CALIBRATION_DIR_ENV, get_efficiency
from tests.search.calibration.test_gemm import _table

PACKAGE = Path(str(resources.files("cost_model.data.efficiency")))
OBJECTIVES = Path(str(resources.files("objectives.data")))


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*.toml"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


@pytest.fixture
def source(tmp_path) -> Path:
    return _table(tmp_path / "mine.parquet")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv(CALIBRATION_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def _one_line(capsys, argv, *fragments):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("output", [PACKAGE, PACKAGE / "generic", PACKAGE.parent],
                         ids=["efficiency", "inside", "data"])
def test_the_package_data_is_refused_as_output(capsys, source, output):
    """The output guard refuses it as for every command (calibrate has no exemption)."""
    before = _digest(PACKAGE)
    _one_line(capsys, ["calibrate", "--hardware", "h200", "--source", str(source), "--output",
                       str(output)], "`--output`", "is the package's data (cost_model/data)")
    assert _digest(PACKAGE) == before


def test_write_package_data_takes_no_other_folder(capsys, source, tmp_path):
    _one_line(capsys, ["calibrate", "--hardware", "h200", "--source", str(source),
                       "--write-package-data", "--output", str(tmp_path / "x")],
              "`--write-package-data`", "drop `--output`")


def test_default_output_is_the_users_folder_and_the_model_reads_it(capsys, source, tmp_path,
                                                                   monkeypatch):
    """Without `--output`: $XDG_DATA_HOME/archscout/calibration (the package unchanged); with
    ARCHSCOUT_CALIBRATION_DIR naming it, `get_efficiency` reads the refit there."""
    before = _digest(PACKAGE)
    assert cli.main(["calibrate", "--hardware", "h200", "--source", str(source)]) == 0
    folder = tmp_path / "xdg" / "archscout" / "calibration"
    assert (folder / "generic" / "h200.toml").is_file()
    assert f"{CALIBRATION_DIR_ENV}={folder}" in capsys.readouterr().out
    assert _digest(PACKAGE) == before
    shipped = get_efficiency("h200")
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(folder))
    mine = get_efficiency("h200")
    assert mine.origin == str(folder.resolve()) and mine.gemm["fp8"] != shipped.gemm["fp8"]
    assert mine.version == "calibrated: measured table mine.parquet"


def test_the_environment_folder_is_the_default_output(source, tmp_path, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(folder))
    assert cli.main(["calibrate", "--hardware", "h200", "--source", str(source)]) == 0
    assert (folder / "generic" / "h200.toml").is_file()


def test_the_accuracy_fit_never_rewrites_the_package_either(capsys, tmp_path):
    before = _digest(OBJECTIVES)
    _one_line(capsys, ["calibrate", "--part", "accuracy", "--output", str(OBJECTIVES)],
              "`--output`", "is the package's data (objectives/data)")
    assert cli.main(["calibrate", "--part", "accuracy", "--output", str(tmp_path / "acc")]) == 0
    assert (tmp_path / "acc" / "accuracy_coefficients.toml").is_file()
    assert _digest(OBJECTIVES) == before
