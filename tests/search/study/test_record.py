"""A study is its own record: `show`, `export`, `pareto` and `plot` rebuild candidates from the
spec stored with the study, not from the file on disk, and say in one line on stderr when the
file differs; `search` refuses to resume it, naming the changed fields."""

import json
import re
from pathlib import Path

import optuna
import pytest

from search.cli.main import main
from search.study.report import pareto_document
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage
from search.study.record import SPEC_ATTR
from search.study.record import describe_differences, recorded_spec, spec_differences

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "studies" / "quickstart.toml"
HEAD_DIM_LINE = re.compile(r"(?m)^head_dim = .*$")


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> tuple[Path, dict]:
    """A quickstart study run with head_dim fixed at 128 (Optuna does not store a fixed value),
    then its file edited to head_dim choices [64, 128]; and `pareto --json` before the edit."""
    folder = tmp_path_factory.mktemp("record")
    path = folder / "quickstart.toml"
    text = HEAD_DIM_LINE.sub("head_dim = { choices = [128] }", QUICKSTART.read_text())
    path.write_text(re.sub(r"(?m)^batch_size = \d+", "batch_size = 32", text))
    assert main(["search", str(path), "--trials", "64", "--no-progress"]) == 0
    before = _pareto(path)
    path.write_text(HEAD_DIM_LINE.sub("head_dim = { choices = [64, 128] }", path.read_text()))
    return path, before


def _pareto(path: Path) -> dict:
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=True)
    try:
        return pareto_document(spec, load_study(spec, handle))
    finally:
        handle.close()


def _one_note(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "space.head_dim" in lines[0] and "stored {choices=[128]}" in lines[0]
    assert "file {choices=[64, 128]}" in lines[0]
    return lines[0]


def test_show_reports_what_was_evaluated(edited, capsys):
    path, before = edited
    best = before["pareto"][0]
    assert main(["show", str(path), str(best["trial"]), "--json"]) == 0
    captured = capsys.readouterr()
    _one_note(captured.err)
    rec = json.loads(captured.out)
    assert rec["architecture"]["head_dim"] == 128
    assert rec["architecture"]["name"] == best["architecture"]["name"]
    assert rec["frontier_area"] == best["trial_frontier_area"]
    assert rec["params"]["total"] == best["params_total"]


def test_export_hf_writes_the_evaluated_head_dim(edited, tmp_path, capsys):
    path, before = edited
    out = tmp_path / "config.json"
    assert main(["export", str(path), str(before["pareto"][0]["trial"]), "--format", "hf",
                 "-o", str(out)]) == 0
    _one_note(capsys.readouterr().err)
    assert json.loads(out.read_text())["head_dim"] == 128


def test_pareto_and_plot_read_the_stored_spec(edited, tmp_path, capsys):
    path, before = edited
    assert main(["pareto", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    _one_note(captured.err)
    assert json.loads(captured.out)["pareto"] == json.loads(json.dumps(before["pareto"]))
    assert main(["plot", str(path), "-o", str(tmp_path / "f.png")]) == 0
    _one_note(capsys.readouterr().err)  # once, though the plot reads the Pareto set too


def test_resume_of_the_edited_study_is_refused_naming_the_field(edited, capsys):
    path, _ = edited
    assert main(["search", str(path), "--trials", "96", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different spec" in err
    assert "space.head_dim: stored {choices=[128]}, file {choices=[64, 128]}" in err


def test_an_unchanged_file_prints_no_note(tmp_path, capsys):
    path = tmp_path / "quickstart.toml"
    path.write_text(QUICKSTART.read_text())
    assert main(["search", str(path), "--trials", "64", "--no-progress"]) == 0
    capsys.readouterr()
    path.write_text(path.read_text().replace("trials = 384", "trials = 999"))  # resumable
    assert main(["pareto", str(path)]) == 0
    assert capsys.readouterr().err == ""


def test_differences_are_named_down_to_the_field():
    spec = load_spec(QUICKSTART)
    changed = spec.model_copy(update={
        "workload": spec.workload.model_copy(update={"osl_tokens": 2048}),
        "seed": 7, "trials": 5})  # seed and trials may change between runs
    stored = spec.model_dump(mode="json")
    assert spec_differences(stored, spec) == []
    diffs = spec_differences(stored, changed)
    assert diffs == [("workload.osl_tokens", 512, 2048)]
    assert describe_differences(diffs) == "workload.osl_tokens: stored 512, file 2048"


def test_a_study_without_a_usable_record_reads_the_file(capsys):
    spec = load_spec(QUICKSTART)
    study = optuna.create_study(directions=spec.objectives.directions)
    assert recorded_spec(study, spec) is spec and capsys.readouterr().err == ""  # none stored
    study.set_user_attr(SPEC_ATTR, {**spec.model_dump(mode="json"), "colour": "red"})
    assert recorded_spec(study, spec, "q.toml") is spec
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "`colour` is not a known key" in err and "q.toml" in err
