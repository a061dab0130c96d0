"""Count the uses of Optuna's private internals in a checkout's search/ package (issue 27):
accesses `x._name` where `_name` is a private name Optuna defines (a def, a class or instance
attribute) and archscout does not, imports of private Optuna modules or names, and overrides of
Optuna's private methods in subclasses of Optuna's classes; per file, with the names. A
heuristic (a private name archscout defines too is not counted): read the names it prints.
Run: python tests/benchmarks/count_optuna_private.py [CHECKOUT]   (default: this one)
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

import optuna

DEFINED = re.compile(r"(?:def |self\.|^\s*)(_[a-z][A-Za-z0-9_]*)\s*(?:\(|=|:)", re.M)


def private_names(files) -> set[str]:
    return {name for f in files for name in DEFINED.findall(f.read_text())}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def uses(tree: ast.AST, optunas: set[str], ours: set[str]) -> list[str]:
    """The private Optuna names, imports and overrides one module's syntax tree holds."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) \
                and node.attr in optunas - ours:
            found.append(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna") \
                and (any(is_private(p) for p in node.module.split("."))
                     or any(is_private(a.name) for a in node.names)):
            found.append(f"import {node.module}")
        elif isinstance(node, ast.ClassDef) and "optuna" in ast.unparse(node.bases):
            found += [f"override {f.name}" for f in node.body if isinstance(f, ast.FunctionDef)
                      and is_private(f.name) and f.name in optunas]
    return found


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    files = sorted((root / "search").rglob("*.py"))
    optunas = private_names(Path(optuna.__file__).parent.rglob("*.py"))
    ours = private_names(files)
    per_file = {}
    for f in files:
        text = f.read_text()
        if "optuna" in text:
            found = uses(ast.parse(text), optunas, ours)
            if found:
                per_file[f.relative_to(root)] = Counter(found)
    print(f"Optuna {optuna.__version__}; {root}: "
          f"{sum(sum(c.values()) for c in per_file.values())} private uses")
    for path, found in sorted(per_file.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"  {sum(found.values()):3d} {path}: {', '.join(sorted(found))}")


if __name__ == "__main__":
    main()
