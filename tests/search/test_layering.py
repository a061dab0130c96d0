"""Layering inside `search/` (search/README.md): cli → {lint, calibration, plots} → records →
study → the package's base (search/errors.py, search/atomic.py); packages of one tier never
import each other. Imports are read with `ast`, inside functions too (tests/import_graph.py);
import cycles in every package are tests/test_import_cycles.py's."""

import pytest

from tests.import_graph import ROOT, import_graph, layer_breaks

SEARCH = ROOT / "search"
BASE = "base"  # search/errors.py, search/atomic.py, search/__init__.py
# what each package may import under search/ (besides itself)
MAY_IMPORT = {
    BASE: {BASE},
    "study": {BASE},
    "records": {BASE, "study"},
    "plots": {BASE, "study", "records"},
    "lint": {BASE, "study", "records"},
    "calibration": {BASE, "study", "records"},
    "cli": {BASE, "study", "records", "plots", "lint", "calibration"},
}
GRAPH = import_graph(ROOT, ["search"])  # search's modules only: between packages, see
# tests/test_import_layers.py


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else BASE


def test_every_module_belongs_to_a_known_package():
    assert {_package(m) for m in GRAPH} == set(MAY_IMPORT)
    for folder in SEARCH.iterdir():
        if folder.is_dir() and folder.name != "__pycache__":
            assert folder.name in MAY_IMPORT, f"search/{folder.name}/ is not in the layering"
            assert (folder / "README.md").is_file(), f"search/{folder.name}/ has no README.md"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down_the_tiers(module):
    assert layer_breaks({module: GRAPH[module]}, _package, MAY_IMPORT) == []


def test_the_check_sees_a_layer_break_planted_in_a_function(tmp_path):
    """A planted search/ tree: study imports records inside a function (upward: a break),
    records imports study at the top and cli imports lint (both downward: allowed)."""
    for name, text in {
        "search/__init__.py": "",
        "search/study/__init__.py": "",
        "search/study/runner.py": "def f():\n    from search.records import table\n",
        "search/records/__init__.py": "",
        "search/records/table.py": "from search.study import runner\n",
        "search/lint/__init__.py": "",
        "search/lint/rules.py": "",
        "search/cli/__init__.py": "",
        "search/cli/main.py": "import search.lint.rules\n",
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(tmp_path, ["search"])
    assert layer_breaks(graph, _package, MAY_IMPORT) == [
        "search.study.runner (study) imports search.records.table (records); study may import "
        "['base']"]
