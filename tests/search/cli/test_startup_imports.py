"""Start-up (issue 14): `archscout gemm` and `archscout evaluate` import only their own command
module, never optuna, matplotlib, scipy or sqlalchemy (checked in a fresh interpreter, after
running the commands, so a new eager import anywhere on those paths fails here); `archscout
show` (issue 17) imports no matplotlib and, reading through the journal's trial index, not the
study commands' module either; and the command table of search/cli/main.py says exactly what
each command module registers."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from search.cli import main as cli

from tests.data_paths import MODEL_CONFIGS

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("optuna", "matplotlib", "scipy", "sqlalchemy")
LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
COMMAND_PATHS = {
    "gemm": ["gemm", "4096", "4096", "4096", "--hardware", "h200", "--dtype", "fp8"],
    "evaluate": ["evaluate", LLAMA, "--hardware", "h200", "--concurrency", "1"],
    "evaluate-sweep": ["evaluate", LLAMA, "--hardware", "h200", "--json"],
    "hardware": ["hardware", "h200"],
}


def _modules_after(argv: list[str]) -> dict:
    """Run `archscout ARGV` in a fresh interpreter; its exit code and which heavy packages and
    command modules were imported."""
    code = (
        "import io, json, sys, contextlib\n"
        "from search.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main({argv!r})\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "commands = sorted(m for m in sys.modules if m.startswith('search.'))\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy, 'search': commands}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", COMMAND_PATHS)
def test_cost_commands_do_not_import_heavy_packages(name):
    found = _modules_after(COMMAND_PATHS[name])
    assert found["rc"] == 0
    assert found["heavy"] == [], f"{name} imported {found['heavy']}"
    others = {f"search.cli.{m}" for m in cli.COMMAND_MODULES} - {"search.cli.cost",
                                                                 "search.cli.evaluate"}
    assert not others & set(found["search"]), found["search"]


def test_show_imports_no_plotting(tmp_path):
    study = tmp_path / "quickstart.toml"
    study.write_text((ROOT / "studies" / "quickstart.toml").read_text()
                     .replace("batch_size = 64", "batch_size = 16"))
    assert cli.main(["search", str(study), "--trials", "16", "--no-progress"]) == 0
    found = _modules_after(["show", str(study), "3", "--json"])
    assert found["rc"] == 0
    assert "matplotlib" not in found["heavy"], found["heavy"]
    assert "search.plots" not in found["search"], found["search"]
    assert "search.cli.study" not in found["search"]  # the index answered: no replay


def test_help_lists_every_command_without_importing_them():
    found = _modules_after(["--help"])
    assert found["rc"] == 0 and found["heavy"] == []
    # the entry point and the error bases it catches; no command module
    assert found["search"] == ["search.cli", "search.cli.errors", "search.cli.main",
                               "search.errors"]


@pytest.mark.parametrize("module", cli.COMMAND_MODULES)
def test_command_table_matches_what_each_module_registers(module):
    """The names and help lines of cli.COMMANDS are those the module's add_parser(s) gives."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = [name for name, owner, _ in cli.COMMANDS if owner == module]
    siblings = sub.choices[names[0]].siblings
    registrar = cli._Registrar(siblings)
    command_module = getattr(cli, module)
    (getattr(command_module, "add_parsers", None) or command_module.add_parser)(registrar)
    assert list(registrar.registered) == names
    helps = {name: text for name, _, text in cli.COMMANDS}
    for name, kwargs in registrar.registered.items():
        assert kwargs.get("help") == helps[name], name


def test_a_command_parser_loads_its_module_once(capsys):
    """`gemm --help` shows gemm's own arguments (its module registered them)."""
    assert cli.main(["gemm", "--help"]) == 0
    assert "--out-dtype" in capsys.readouterr().out
