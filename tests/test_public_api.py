"""Each package's public API (issue 27 item 4): other packages, the CLI, benchmarks and the tests of
other packages import a package only through what its `__init__` exports (`__all__`); its
modules, underscored helpers and unexported names stay its own (and its own tests').

`PUBLIC_API_PACKAGES` lists the packages held to it; add one once its `__init__` has `__all__`
and its importers use it. Imports are read with `ast`, inside functions too; `import pkg` then
`pkg.name` counts as importing `name`."""

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_API_PACKAGES = ("constraints", "objectives")
SCANNED = ("cost_model", "constraints", "objectives", "search", "tests")  # every importer


def _exports(package: str) -> tuple[str, ...]:
    """`__all__` of the package's `__init__`, read without importing it."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def _is_own(path: Path, package: str) -> bool:
    """The package itself and its own tests (tests/<package>/) may reach inside."""
    parts = path.relative_to(ROOT).parts
    return parts[0] == package or parts[:2] == ("tests", package)


def _importers(package: str) -> list[Path]:
    return [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))
            if not _is_own(p, package)]


@cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(ast.parse(path.read_text(), filename=str(path))))


def _uses(path: Path, package: str) -> Iterator[tuple[int, str, str]]:
    """(line, what is imported, the name taken from the package or '' for a whole module)."""
    bound = set()  # names bound to the package by `import package`
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == package:
                yield from ((node.lineno, f"{package}.{a.name}", a.name) for a in node.names)
            elif node.module.startswith(f"{package}."):
                yield node.lineno, node.module, ""
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(f"{package}."):
                    yield node.lineno, alias.name, ""
                elif alias.name == package:
                    bound.add(alias.asname or package)
    for node in _nodes(path):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in bound:
            yield node.lineno, f"{package}.{node.attr}", node.attr


def _breaches(package: str) -> list[str]:
    exports = set(_exports(package))
    found = []
    for path in _importers(package):
        for line, what, name in _uses(path, package):
            if name not in exports:
                why = "a module of the package" if not name else "not in its `__all__`"
                found.append(f"{path.relative_to(ROOT)}:{line} imports {what} ({why})")
    return found


@pytest.mark.parametrize("package", PUBLIC_API_PACKAGES)
def test_other_packages_use_only_the_public_api(package):
    breaches = _breaches(package)
    assert not breaches, "\n".join(breaches)


@pytest.mark.parametrize("package", PUBLIC_API_PACKAGES)
def test_the_public_api_names_real_public_objects(package):
    """`__all__` is sorted, has no duplicate and no underscored name, and every name exists."""
    module = __import__(package)
    exports = _exports(package)
    assert exports, f"{package}/__init__.py has no __all__"
    assert list(exports) == sorted(set(exports))
    assert not [name for name in exports if name.startswith("_")]
    assert [name for name in exports if not hasattr(module, name)] == []


@pytest.mark.parametrize("package", PUBLIC_API_PACKAGES)
def test_every_export_is_used_outside_the_package(package):
    """The API is what others call: each exported name is imported by some module outside the
    package and its own tests (search, another package's tests, a benchmark)."""
    used = {name for path in _importers(package) for _, _, name in _uses(path, package)}
    assert sorted(set(_exports(package)) - used) == []


def test_the_check_sees_a_module_import_an_underscored_name_and_an_attribute(tmp_path):
    """The parser on a planted file: each way of reaching past `__all__` is one breach."""
    planted = tmp_path / "planted.py"
    planted.write_text("import objectives\nfrom objectives import _private, predict_loss\n"
                       "from objectives.accuracy import predict_loss as p\n"
                       "import constraints.sharding\n"
                       "def f():\n    from objectives import accuracy_terms\n"
                       "    return objectives.SHIPPED, objectives.predict_loss\n")
    uses = sorted(_uses(planted, "objectives"))
    assert uses == [(1 + 1, "objectives._private", "_private"),
                    (2, "objectives.predict_loss", "predict_loss"),
                    (3, "objectives.accuracy", ""),
                    (6, "objectives.accuracy_terms", "accuracy_terms"),
                    (7, "objectives.SHIPPED", "SHIPPED"),
                    (7, "objectives.predict_loss", "predict_loss")]
    assert list(_uses(planted, "constraints")) == [(4, "constraints.sharding", "")]
    exports = set(_exports("objectives"))
    assert [name for _, _, name in uses if name not in exports] == ["_private", "",
                                                                   "accuracy_terms", "SHIPPED"]
