"""Layering inside `search/` (search/README.md): cli → {lint, calibration, plots} → records →
study → the package's base (search/errors.py, search/atomic.py); packages of one tier never
import each other; and no import cycle among search's modules, counting imports made inside
functions too (a lazy import still ties two modules together)."""

import ast
from pathlib import Path

import pytest

SEARCH = Path(__file__).resolve().parents[2] / "search"
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(SEARCH.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else BASE


def _imports(path: Path) -> set[str]:
    """The search modules `path` imports, anywhere in the file (`from search.x import y` counts
    as search.x.y when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "search"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "search":
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found - {"search"}


MODULES = {_module_name(p): p for p in sorted(SEARCH.rglob("*.py"))}
GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def test_every_module_belongs_to_a_known_package():
    assert {_package(m) for m in MODULES} == set(MAY_IMPORT)
    for folder in SEARCH.iterdir():
        if folder.is_dir() and folder.name != "__pycache__":
            assert folder.name in MAY_IMPORT, f"search/{folder.name}/ is not in the layering"
            assert (folder / "README.md").is_file(), f"search/{folder.name}/ has no README.md"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_tiers(module):
    package = _package(module)
    for target in GRAPH[module]:
        other = _package(target)
        assert other == package or other in MAY_IMPORT[package], (
            f"{module} ({package}) imports {target} ({other}); {package} may import "
            f"{sorted(MAY_IMPORT[package])}")


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in MODULES:
                continue
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])


def test_the_check_sees_a_planted_cycle_and_a_layer_break():
    """The rules above are not vacuous: the real graph has edges in both directions of the tier
    order's checks (cli imports study; study must not import cli)."""
    assert any(_package(t) == "study" for t in GRAPH["search.cli.study"])
    assert _package("search.cli.main") == "cli" and "cli" not in MAY_IMPORT["study"]
