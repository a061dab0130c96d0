"""Nothing a command writes can overwrite what a study is (issue 29, item 0): every output option
pointed at each of the study's own files, at the package's data or through a symbolic link out
of its folder is refused with one line naming the option (exit 2), and the study comes through
byte for byte (search.atomic.checked_target, search.cli.guard)."""

import contextlib
import hashlib
import io
import json
import re
from pathlib import Path

import pytest

from search.cli.main import main

from tests.data_paths import MODEL_CONFIGS
from tests.search.cli.test_inspect import QUICKSTART

REPO = Path(__file__).resolve().parents[3]
STUDY_OUT = Path("out") / "quickstart"
# each of the study's own files, as a path relative to the study's folder, and what the refusal
# calls it (search/cli/guard.py)
STUDY_FILES = {
    "study.toml": "the study file",
    f"{STUDY_OUT}/study.journal": "the study's journal",
    f"{STUDY_OUT}/study.journal.index": "the study's trial index",
    f"{STUDY_OUT}/study.journal.size": "the study's journal size record",
    f"{STUDY_OUT}/study.journal.owner": "the study's owner lock",
    # not made by the storage: any name beginning with the journal's is kept for it
    f"{STUDY_OUT}/study.journal.lock": "a file named after the study's journal",
    f"{STUDY_OUT}/study.pareto.json": "the study's cached Pareto document",
}
# every output option of a command that reads a study: (command argv before the path, option)
OUTPUT_OPTIONS = {
    "export-json": (["export", "{study}", "{trial}", "--format", "json", "-o"], "-o"),
    "export-hf": (["export", "{study}", "{trial}", "--format", "hf", "-o"], "-o"),
    "export-vllm": (["export", "{study}", "{trial}", "--format", "vllm", "-o"], "-o"),
    "pareto-csv": (["pareto", "{study}", "--csv"], "--csv"),
    "pareto-parquet": (["pareto", "{study}", "--parquet"], "--parquet"),
    "dashboard": (["dashboard", "{study}", "-o"], "-o"),
}


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, int]:
    """A tiny quick-start search (16 trials) in a folder of its own, and its top trial."""
    folder = tmp_path_factory.mktemp("guarded")
    text = re.sub(r"(?m)^trials = \d+", "trials = 16", QUICKSTART.read_text(encoding="utf-8"))
    text = re.sub(r"(?m)^batch_size = \d+", "batch_size = 16", text)
    (folder / "study.toml").write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["search", str(folder / "study.toml"), "--no-progress", "--json"]) == 0
    return folder, json.loads(out.getvalue())["pareto"][0]["trial"]


@pytest.fixture(scope="module")
def trial(searched) -> int:
    return searched[1]


def _argv(option: str, searched, trial: int, target: str) -> list[str]:
    folder, _ = searched
    argv, _ = OUTPUT_OPTIONS[option]
    return [a.format(study=folder / "study.toml", trial=trial) for a in argv] + [target]


def _refused(capsys, argv: list[str], *fragments: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.mark.parametrize("name", STUDY_FILES, ids=lambda n: Path(n).name)
@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_every_output_option_refuses_every_study_file(searched, trial, capsys, option, name):
    folder, _ = searched
    before = digests(folder)
    target = str(folder / name)
    _refused(capsys, _argv(option, searched, trial, target),
             f"`{OUTPUT_OPTIONS[option][1]}` ({target}) is {STUDY_FILES[name]}",
             "an output never overwrites it")
    assert digests(folder) == before  # the study, byte for byte


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_a_link_to_a_study_file_is_refused_too(searched, trial, tmp_path, capsys, option):
    """A symbolic link beside the journal, pointing at it (inside its folder: the link rule
    lets it through), still reaches the journal: refused."""
    folder, _ = searched
    link = folder / STUDY_OUT / f"{option}.png"
    link.symlink_to(folder / STUDY_OUT / "study.journal")
    before = digests(folder)
    try:
        _refused(capsys, _argv(option, searched, trial, str(link)), "the study's journal")
        assert digests(folder) == before
    finally:
        link.unlink()


def test_plot_refuses_the_journal_through_a_link(searched, trial, capsys):
    """`plot -o` needs an image suffix, which no study file has: a `.png` link to the journal."""
    folder, _ = searched
    link = folder / STUDY_OUT / "frontier.png"
    link.symlink_to(folder / STUDY_OUT / "study.journal")
    before = digests(folder)
    try:
        _refused(capsys, ["plot", str(folder / "study.toml"), "-o", str(link)],
                 f"`-o` ({link}) is the study's journal")
        assert digests(folder) == before
    finally:
        link.unlink()


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_a_link_out_of_its_folder_is_refused(searched, trial, tmp_path, capsys, option):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "outs").mkdir()
    link = tmp_path / "outs" / "out.json"
    link.symlink_to(victim)
    _refused(capsys, _argv(option, searched, trial, str(link)),
             f"({link}) is a symbolic link to {victim}, outside its folder")
    assert victim.read_text() == "keep me" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out.json", "outs", "victim.txt"]


@pytest.mark.parametrize("package", ["cost_model", "objectives"])
@pytest.mark.parametrize("option", ["export-json", "pareto-csv", "dashboard"])
def test_the_package_data_is_refused(searched, trial, capsys, option, package):
    target = REPO / package / "data" / "archscout-guard-test.json"
    _refused(capsys, _argv(option, searched, trial, str(target)),
             f"is the package's data ({package}/data)")
    assert not target.exists()


def test_evaluate_plot_refuses_the_package_data(capsys):
    target = REPO / "cost_model" / "data" / "hardware" / "frontier.png"
    _refused(capsys, ["evaluate", str(MODEL_CONFIGS / "Llama-3.1-8B.json"), "--hardware",
                      "h200", "--concurrency", "1", "--plot", str(target)],
             "`--plot`", "is the package's data (cost_model/data)")
    assert not target.exists()


def test_a_journal_storage_is_protected_as_the_default_one(searched, trial, capsys):
    """`--storage journal:PATH`: that journal and its files are the study's."""
    folder, _ = searched
    journal = folder / STUDY_OUT / "study.journal"
    before = digests(folder)
    _refused(capsys, ["pareto", str(folder / "study.toml"), "--storage", f"journal:{journal}",
                      "--csv", str(journal.with_name("study.journal.size"))],
             "`--csv`", "the study's journal size record")
    assert digests(folder) == before


def test_outputs_beside_the_study_are_still_written(searched, trial, capsys):
    """The guard refuses only what is the study: an export into its own out/ folder works."""
    folder, _ = searched
    target = folder / STUDY_OUT / "trial.json"
    assert main(_argv("export-json", searched, trial, str(target))) == 0
    assert target.is_file()
    target.unlink()


def test_the_write_itself_is_guarded_not_only_the_option(searched, trial, capsys):
    """`export --format hf -o FOLDER` writes FOLDER/config.json: the option names a harmless
    folder, the file it writes is a link to the journal (in that folder), refused at the
    write (search.atomic.write_atomic)."""
    folder, _ = searched
    link = folder / STUDY_OUT / "config.json"
    link.symlink_to(folder / STUDY_OUT / "study.journal")
    before = digests(folder)
    try:
        _refused(capsys, _argv("export-hf", searched, trial, str(folder / STUDY_OUT)),
                 f"`-o` ({link}) is the study's journal")
        assert digests(folder) == before
    finally:
        link.unlink()


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_a_name_past_the_file_system_limit_names_the_option(searched, trial, tmp_path, capsys,
                                                            option):
    target = tmp_path / ("n" * 300 + ".json")
    err = _refused(capsys, _argv(option, searched, trial, str(target)),
                   f"`{OUTPUT_OPTIONS[option][1]}` (", "cannot be written: File name too long")
    assert len(err) < 300 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", [False, True], ids=["calibrate", "write-package-data"])
def test_calibrate_is_guarded_unless_it_regenerates_the_package(flag):
    """Only `calibrate --write-package-data` may write the data folders (search/cli/guard.py):
    the folders are protected for calibrate without the flag, as for every other command."""
    from argparse import Namespace

    from search.cli.guard import package_data_folders, protected_for

    folders = protected_for(Namespace(command="calibrate", write_package_data=flag)).folders
    assert folders == ({} if flag else package_data_folders())
    assert flag or (REPO / "cost_model" / "data").resolve() in folders
