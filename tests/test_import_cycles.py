"""No import cycles in any package (docs/DESIGN.md "Layout": "a test enforces … that there are no
import cycles"): cost_model, constraints, objectives, search and the tests themselves, each
module's imports read with `ast` inside functions too (tests/import_graph.py), so a cycle hidden
by a lazy import is still one. The checker is shown to find a cycle planted in a package of
files written for the purpose."""

import pytest

from tests.import_graph import PACKAGES, cycles, import_graph

GRAPH = import_graph()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package):
    found = [cycle for cycle in cycles(GRAPH) if cycle[0].split(".")[0] == package]
    assert found == [], "import cycles: " + "; ".join(" → ".join(c) for c in found)


def test_every_package_is_in_the_graph():
    assert {name.split(".")[0] for name in GRAPH} == set(PACKAGES)


def test_a_module_importing_its_own_package_root_would_be_a_cycle():
    """cost_model/__init__.py names every module it exports from (its `TYPE_CHECKING` imports),
    so a cost_model module importing `cost_model` itself closes a cycle the test above sees."""
    exporters = GRAPH["cost_model"]
    assert {"cost_model.evaluate", "cost_model.step", "cost_model.hf"} <= exporters


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_planted_cycle_hidden_in_a_function(tmp_path):
    """pkg.a imports pkg.b at the top; pkg.b imports pkg.a inside a function, and pkg.c imports
    pkg.b only: one cycle, a → b → a (c is not on it); a relative import closes a second one,
    pkg.sub.x → pkg.sub.y (`from . import y`) → pkg.sub.x (inside a method)."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def late():\n    from pkg.a import thing\n    return thing\n",
        "pkg/c.py": "import pkg.b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/x.py": "from . import y\n",
        "pkg/sub/y.py": "class K:\n    def m(self):\n        from .x import z\n",
    })
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.b"] == {"pkg.a"} and graph["pkg.sub.x"] == {"pkg.sub.y"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.sub.x", "pkg.sub.y", "pkg.sub.x"]]
    del graph["pkg.b"]  # without the lazy import's module there is none left there
    assert cycles(graph) == [["pkg.sub.x", "pkg.sub.y", "pkg.sub.x"]]
