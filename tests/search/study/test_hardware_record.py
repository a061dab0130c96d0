"""A hardware file a study names by path is part of its record (issue 29, item 0): its relative
path is read against the study file, the hardware it held is stored when the study is created,
a later edit is said by `show`, `pareto` and `export` and refused by a resume; an edit that
changes no number (a source, the description) is neither."""

import json
import re
import shutil
from pathlib import Path

import pytest

from search.cli.main import main
from search.cli.study import load_study, open_for_reading
from search.study.record import HARDWARE_ATTR
from search.study.spec import load_spec

from tests.search.cli.test_inspect import QUICKSTART

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "cost_model" / "data" / "hardware" / "h200.toml"
HBM_LINE = re.compile(r"(?m)^hbm_tb_per_s = \{ value = [0-9.]+,")


def _study(folder: Path) -> Path:
    """The quick-start study (16 trials) on a copy of h200.toml at hw/mine.toml, written as a
    path relative to the study file."""
    (folder / "hw").mkdir()
    shutil.copy(H200, folder / "hw" / "mine.toml")
    text = QUICKSTART.read_text(encoding="utf-8").replace('gpu = "h200"', 'gpu = "hw/mine.toml"')
    text = re.sub(r"(?m)^trials = \d+", "trials = 16", text)
    text = re.sub(r"(?m)^batch_size = \d+", "batch_size = 16", text)
    (folder / "study.toml").write_text(text, encoding="utf-8")
    return folder / "study.toml"


def _edit_hbm(study: Path, tb_per_s: str = "9.6") -> None:
    hardware = study.parent / "hw" / "mine.toml"
    text, count = HBM_LINE.subn(f"hbm_tb_per_s = {{ value = {tb_per_s},", hardware.read_text())
    assert count == 1
    hardware.write_text(text)


@pytest.fixture
def searched(tmp_path, monkeypatch, capsys) -> Path:
    """Searched from another working directory: the relative path is the study file's."""
    (tmp_path / "project").mkdir()
    study = _study(tmp_path / "project")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["search", str(study), "--no-progress"]) == 0
    capsys.readouterr()
    return study


def _top_trial(study: Path, capsys) -> int:
    assert main(["pareto", str(study), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["pareto"][0]["trial"]


def test_the_record_holds_the_file_s_hardware(searched):
    spec = load_spec(searched)
    handle = open_for_reading(searched, spec, None)
    try:
        record = load_study(spec, handle).user_attrs[HARDWARE_ATTR]
    finally:
        handle.close()
    assert record["path"] == str(searched.parent / "hw" / "mine.toml")
    # 4.8 TB/s in the file, SI in the record (the catalog's convention: TB = 1e12 bytes)
    assert record["spec"]["hbm_bytes_per_s"] == 4.8e12
    assert "sources" not in record["spec"]


@pytest.mark.parametrize("command", ["show", "pareto", "export"])
def test_an_edited_file_is_said_by_the_readers(searched, tmp_path, capsys, command):
    trial = _top_trial(searched, capsys)
    _edit_hbm(searched)
    argv = {"show": ["show", str(searched), str(trial)],
            "pareto": ["pareto", str(searched)],
            "export": ["export", str(searched), str(trial), "--format", "json", "-o",
                       str(tmp_path / "t.json")]}[command]
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "hardware file" in line]
    assert len(notes) == 1, notes
    assert f"hardware file {searched.parent / 'hw' / 'mine.toml'}" in notes[0]
    assert "hbm_bytes_per_s: stored 4.8e+12, file 9.6e+12" in notes[0]


def _trials(study: Path) -> int:
    spec = load_spec(study)
    handle = open_for_reading(study, spec, None)
    try:
        return len(load_study(spec, handle).get_trials(deepcopy=False))
    finally:
        handle.close()


def test_a_resume_on_an_edited_file_is_refused(searched, capsys):
    _edit_hbm(searched)
    assert main(["search", str(searched), "--trials", "32", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "changed since the study ran (changed: hbm_bytes_per_s: stored 4.8e+12, file " \
           "9.6e+12); restore it, or give the study another `name`" in err
    assert _trials(searched) == 16  # no trial run on the other GPU
    _edit_hbm(searched, "4.8")  # restored: the resume runs
    assert main(["search", str(searched), "--trials", "32", "--no-progress"]) == 0


def test_a_changed_source_or_description_changes_nothing(searched, capsys):
    hardware = searched.parent / "hw" / "mine.toml"
    text = hardware.read_text().replace("NVIDIA H200 datasheet: 4.8 TB/s HBM3e", "re-measured")
    hardware.write_text(text.replace('description = "', 'description = "edited: '))
    assert main(["pareto", str(searched)]) == 0
    assert "hardware file" not in capsys.readouterr().err
    assert main(["search", str(searched), "--trials", "24", "--no-progress"]) == 0
