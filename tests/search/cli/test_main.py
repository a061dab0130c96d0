"""`main(argv)` itself: `--version`, Ctrl-C, options every command shares, and every package's
error base reported as one line with exit code 2 (search/cli/main.py's docstring)."""

import importlib.metadata
import json
import re
from pathlib import Path

import pytest

import search.study.runner
from constraints import ConstraintError
from cost_model.errors import ConfigError
from search.cli import main as cli
from search.cli.main import EXIT_INTERRUPTED, main
from search.calibration.errors import CalibrationError
from search.cli.errors import CommandError, NoFitError
from search.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, SearchError
from search.lint.errors import LintError
from search.plots.errors import PlotError
from search.records.errors import RecordError
from search.study.errors import NoFeasibleError, StudyError
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage

from tests.data_paths import MODEL_CONFIGS
from tests.search.cli.test_inspect import QUICKSTART


def _study(folder: Path, trials: int = 64, batch_size: int = 16) -> Path:
    text = QUICKSTART.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^trials = \d+", f"trials = {trials}", text)
    text = re.sub(r"(?m)^batch_size = \d+", f"batch_size = {batch_size}", text)
    path = folder / "small.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def _trial_numbers(path: Path) -> list[int]:
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=True)
    try:
        return [t.number for t in load_study(spec, handle).get_trials(deepcopy=False)]
    finally:
        handle.close()


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == \
        f"archscout {importlib.metadata.version('archscout')}"


def test_help_returns_instead_of_exiting(capsys):
    assert main(["--help"]) == 0
    assert "usage: archscout" in capsys.readouterr().out


@pytest.mark.parametrize("seed", ["-1", str(2**40), "seven"])
def test_search_seed_out_of_range_is_one_line(tmp_path, capsys, seed):
    path = _study(tmp_path)
    assert main(["search", str(path), "--seed", seed, "--no-progress"]) == EXIT_BAD_INPUT
    assert "--seed" in _one_line(capsys)
    assert not (tmp_path / "out").exists()  # nothing written


def test_ctrl_c_is_one_line_exit_130_and_the_run_resumes(tmp_path, capsys, monkeypatch):
    """Interrupted in its third batch, the search keeps the two finished ones (16 trials
    each); the same command then completes the study with no trial lost or repeated."""
    path = _study(tmp_path)
    real, calls = search.study.runner.evaluate_batch, []

    def interrupted_third_batch(spec, cands):
        calls.append(len(cands))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(spec, cands)

    monkeypatch.setattr(search.study.runner, "evaluate_batch", interrupted_third_batch)
    assert main(["search", str(path), "--no-progress"]) == EXIT_INTERRUPTED
    assert "interrupted" in _one_line(capsys)
    assert len(_trial_numbers(path)) == 32
    monkeypatch.undo()
    assert main(["search", str(path), "--no-progress"]) == 0
    assert _trial_numbers(path) == list(range(64))


ERROR_BASES = {"constraints": ConstraintError, "cost_model": ConfigError, "study": StudyError,
               "records": RecordError, "plots": PlotError, "lint": LintError,
               "calibration": CalibrationError, "cli": CommandError}


@pytest.mark.parametrize("error", ERROR_BASES.values(), ids=ERROR_BASES.keys())
def test_every_package_error_base_is_one_line_exit_2(capsys, monkeypatch, error):
    def fails(args):
        raise error("`field` (3) must be even")

    monkeypatch.setattr(cli.cost, "run_hardware", fails)
    assert main(["hardware"]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == "archscout: error: `field` (3) must be even"


@pytest.mark.parametrize("error", [NoFeasibleError, NoFitError], ids=["study", "cli"])
def test_infeasible_errors_exit_1(capsys, monkeypatch, error):
    def fails(args):
        raise error("nothing fits")

    monkeypatch.setattr(cli.cost, "run_hardware", fails)
    assert main(["hardware"]) == EXIT_INFEASIBLE
    assert _one_line(capsys) == "archscout: nothing fits"


def test_every_search_package_has_one_error_base():
    """Each sub-package of search/ defines its errors in errors.py under one base, and that base
    derives from SearchError (so the CLI catches it)."""
    import importlib

    root = Path(search.study.runner.__file__).resolve().parents[1]
    for folder in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        module = importlib.import_module(f"search.{folder.name}.errors")
        classes = [c for c in vars(module).values() if isinstance(c, type)
                   and issubclass(c, Exception) and c.__module__ == module.__name__]
        bases = [c for c in classes if not any(issubclass(c, o) for o in classes if o is not c)]
        assert len(bases) == 1 and issubclass(bases[0], SearchError), (folder.name, bases)
        assert ERROR_BASES[folder.name] is bases[0]


def test_a_model_that_does_not_fit_says_its_size(capsys):
    """Exit 1 (a valid request with no answer), one line with the parameter counts and memory."""
    deepseek = str(MODEL_CONFIGS / "DeepSeek-V3.json")
    assert main(["evaluate", deepseek, "--hardware", "h200"]) == EXIT_INFEASIBLE
    err = _one_line(capsys)
    # source: tests/data/model_params.csv (transformers' exact counts); tolerance 0
    assert "671,026,404,352 params, 37,552,282,624 active" in err
    assert "GiB of weights per GPU" in err and "GiB usable" in err


def test_loss_is_a_command(capsys):
    """`archscout loss` (search/cli/loss.py) is registered: one document, or one line."""
    llama = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
    assert main(["loss", llama, "--training-tokens", "15T", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["training_tokens"] == 15e12
    assert main(["loss", llama, "--training-tokens", "many"]) == EXIT_BAD_INPUT
    assert "`--training-tokens` must be a number" in _one_line(capsys)


# ---- issue 26's smaller items and issue 29's paths -------------------------------------------


def test_argparse_errors_name_the_command_once_and_the_option_in_backticks(tmp_path, capsys):
    """Was `archscout: error: archscout search: argument --trials: …`."""
    path = _study(tmp_path)
    assert main(["search", str(path), "--trials", "0"]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == "archscout: error: search: `--trials`: must be >= 1; got 0"
    assert main(["export", str(path), "1", "--format", "hf", "-o"]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == "archscout: error: export: `-o`: expected one argument"
    assert main([]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == ("archscout: error: the following arguments are required: "
                                 "command")


def test_search_on_a_folder_says_it_is_a_folder(tmp_path, capsys):
    assert main(["search", str(tmp_path)]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == (f"archscout: error: study file {str(tmp_path)!r} is a "
                                 "directory, not a study file (a .toml file)")


def test_a_study_path_past_the_file_system_limit_is_one_line(tmp_path, capsys):
    path = tmp_path / ("s" * 300 + ".toml")
    assert main(["search", str(path)]) == EXIT_BAD_INPUT
    err = _one_line(capsys)
    assert "cannot be read: File name too long" in err and len(err) < 300


def test_an_os_error_no_command_caught_is_one_line_naming_the_path(capsys, monkeypatch):
    def fails(args):
        raise OSError(36, "File name too long", "/x/" + "n" * 5000)

    monkeypatch.setattr(cli.cost, "run_hardware", fails)
    assert main(["hardware"]) == EXIT_BAD_INPUT
    err = _one_line(capsys)
    assert err.startswith("archscout: error: '/x/nnn") and err.endswith(
        "…' cannot be used: File name too long") and len(err) < 250


def test_control_characters_in_an_error_stay_on_one_line(capsys, monkeypatch):
    """A user's value with a newline or an escape in it (a path, a key) is shown escaped."""
    def fails(args):
        raise CommandError("`-o` ('a\nb\x1b[31m') cannot be written")

    monkeypatch.setattr(cli.cost, "run_hardware", fails)
    assert main(["hardware"]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == r"archscout: error: `-o` ('a\nb\x1b[31m') cannot be written"
