"""docs/DESIGN.md "Layout": imports point down only (search → objectives, constraints → cost_model);
objectives and constraints never import each other; only search imports optuna and pyarrow;
cost_model needs nothing but numpy and pydantic."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cost_model", "constraints", "objectives", "search")
THIRD_PARTY_ALLOWED = {
    "cost_model": {"numpy", "pydantic"},
    "constraints": {"numpy", "pydantic"},
    "objectives": {"numpy", "pydantic"},
    "search": None,  # layer 2 may use any dependency
}
PROJECT_ALLOWED = {
    "cost_model": {"cost_model"},
    "constraints": {"cost_model", "constraints"},
    "objectives": {"cost_model", "objectives"},
    "search": set(PACKAGES),
}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_down_only(package):
    for path in _modules(package):
        roots = _imported_roots(path)
        project = roots & set(PACKAGES)
        assert project <= PROJECT_ALLOWED[package], f"{path.relative_to(ROOT)} imports {project}"
        allowed = THIRD_PARTY_ALLOWED[package]
        if allowed is not None:
            foreign = roots - set(PACKAGES) - set(sys.stdlib_module_names) - allowed
            assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


def test_every_package_has_modules():
    for package in PACKAGES:
        assert (ROOT / package / "__init__.py").is_file()
