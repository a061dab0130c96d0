"""`archscout search --json` ends with the document `pareto --json` prints (and nothing else on
stdout), and the installed console script answers `--version` with the package's version."""

import importlib.metadata
import json
import shutil
import subprocess

import pytest

from search.cli.main import main

from tests.search.cli.test_main import _study


def test_search_json_is_the_pareto_json_document(tmp_path, capsys):
    path = _study(tmp_path, trials=64, batch_size=32)
    assert main(["search", str(path), "--json"]) == 0
    searched = capsys.readouterr()
    doc = json.loads(searched.out)  # stdout holds the one document (the bar is on stderr)
    assert doc["trials"] == 64 and doc["pareto"]
    assert main(["pareto", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


def test_search_json_resumed_prints_the_document_too(tmp_path, capsys):
    path = _study(tmp_path, trials=32, batch_size=32)
    assert main(["search", str(path), "--no-progress"]) == 0
    assert not capsys.readouterr().out.lstrip().startswith("{")  # the table, without --json
    assert main(["search", str(path), "--trials", "64", "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 64


@pytest.mark.skipif(shutil.which("archscout") is None, reason="the package is not installed")
def test_console_script_prints_the_version():
    done = subprocess.run(["archscout", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"archscout {importlib.metadata.version('archscout')}"
