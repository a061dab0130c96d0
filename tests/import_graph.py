"""The import graph of the repository's packages, read with `ast` from the source: every import
statement counts, at the top of a module or inside a function, a method or an `if TYPE_CHECKING:`
block (a lazy import still ties two modules together). What the cycle and layering tests check
(tests/test_import_cycles.py, tests/search/test_layering.py, tests/cost_model/test_layering.py).

`from pkg.mod import name` is an edge to `pkg.mod.name` when that is a module of the graph, else
to `pkg.mod`; relative imports are resolved against the importing module's package."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cost_model", "constraints", "objectives", "search", "tests")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of `packages` under `root`: dotted name → file."""
    return {module_name(path, root): path for package in packages
            for path in sorted((root / package).rglob("*.py"))}


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module an ImportFrom names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, importer: str, modules: dict[str, Path]) -> set[str]:
    """The modules of the graph that `path` (module `importer`) imports, anywhere in the file."""
    roots = {name.split(".")[0] for name in modules}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] in roots}
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, importer, path.name == "__init__.py")
            if module.split(".")[0] not in roots:
                continue
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                found.add(candidate if candidate in modules else module)
    return {name for name in found if name in modules} - {importer}


def import_graph(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module → the modules of `packages` it imports."""
    modules = package_modules(root, packages)
    return {name: imports_of(path, name, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a → b → … → a) through each strongly connected group of modules that import
    one another, sorted; [] for an acyclic graph (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(_cycle_in(graph, group) for group in groups)


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the group's first module (breadth-first inside the group)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    return paths[node] + [start]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group has one


def layer_breaks(graph: dict[str, set[str]], tier_of: Callable[[str], str],
                 may_import: dict[str, set[str]]) -> list[str]:
    """Every edge from a module of tier t to a module of another tier that t may not import."""
    breaks = []
    for module in sorted(graph):
        tier = tier_of(module)
        for target in sorted(graph[module]):
            other = tier_of(target)
            if other != tier and other not in may_import[tier]:
                breaks.append(f"{module} ({tier}) imports {target} ({other}); {tier} may import "
                              f"{sorted(may_import[tier])}")
    return breaks
