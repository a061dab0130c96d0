"""cost_model's public API (issue 27 item 4): `cost_model/__init__.py` exports what the other
packages, their tests, the benchmark scripts and users call (`__all__`), loads none of its modules
until a name is read, and every importer outside cost_model and tests/cost_model imports only
those names, as `from cost_model import name` (read with `ast`, inside functions too)."""

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import cost_model

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "cost_model" / "__init__.py"
IMPORTERS = ("constraints", "objectives", "search", "tests")
OWN = ("cost_model", "tests/cost_model")
# Importers that still reach inside, each with its reason; every one must still do so (the list
# only shrinks). search/calibration/ and its tests are being rewritten by the `kernels2` branch,
# tests/benchmarks/serving/ by `serving2` (issue 27); each moves to the public names when it lands.
_CALIBRATION = "kernels2 rewrites search/calibration"
_SERVING = "serving2 rewrites tests/benchmarks/serving"
PENDING = {
    **{f"search/calibration/{name}.py": _CALIBRATION for name in (
        "attention", "comm", "files", "fitting", "gemm", "generic", "measured_lookup", "moe")},
    **{f"tests/search/calibration/test_{name}.py": _CALIBRATION
       for name in ("attention", "gemm", "moe", "outputs")},
    **{f"tests/benchmarks/serving/{name}.py": _SERVING
       for name in ("folds", "loso", "scenarios")},
    # fit the serving terms by substituting trial values inside a full serving evaluation (they
    # patch cost_model.host, .evaluate and .disaggregated)
    "tests/benchmarks/serving/fast.py": "substitutes the terms it fits",
    "tests/benchmarks/serving/terms.py": "substitutes the terms it fits",
    # fits cost_model/data/serving/host.toml by substituting a trial host coefficient for the
    # shipped one inside a full serving evaluation (cost_model.host.request_step_s)
    "tests/benchmarks/fit_host_overhead.py": "substitutes the coefficient it fits",
    # times the search with cold caches: clears cost_model.batch's per-architecture cache
    "tests/benchmarks/bench_search_speed.py": "clears a private cache to time cold runs",
    # records the step's GEMM table (cost_model.layers) and times the private duplicate-GEMM
    # step (cost_model.gemm_unique) against its baseline
    "tests/benchmarks/bench_gemm_unique.py": "times the private duplicate-GEMM step",
}


def _literal(name: str):
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"cost_model/__init__.py has no literal {name}")


def _type_checking_imports() -> dict[str, str]:
    """name → module of the `if TYPE_CHECKING:` imports of cost_model/__init__.py."""
    found = {}
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                found |= {alias.name: stmt.module for alias in stmt.names}
    return found


def test_the_three_lists_of_names_agree():
    """`__all__` (users), the TYPE_CHECKING imports (type checkers) and `_HOMES` (the lazy
    loader) name the same objects from the same modules."""
    exports = _literal("__all__")
    homes = {name: f"cost_model.{module}" for module, names in _literal("_HOMES").items()
             for name in names}
    assert exports == sorted(set(exports), key=str.lower)
    assert not [name for name in exports if name.startswith("_")]
    assert set(exports) == set(homes)
    assert _type_checking_imports() == homes


@pytest.mark.parametrize("name", cost_model.__all__)
def test_each_export_is_the_object_its_module_defines(name):
    module = _literal("_HOMES")
    home = next(m for m, names in module.items() if name in names)
    assert getattr(cost_model, name) is getattr(__import__(f"cost_model.{home}",
                                                           fromlist=[name]), name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'evaluate_pointz'"):
        _ = cost_model.evaluate_pointz


def test_importing_cost_model_loads_none_of_its_modules():
    code = ("import sys, cost_model\n"
            "print(sorted(m for m in sys.modules if m.startswith('cost_model.')))\n"
            "from cost_model import get_hardware\n"
            "print(sorted(m for m in sys.modules if m.startswith('cost_model.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert "'cost_model.hardware'" in out[1] and "'cost_model.evaluate'" not in out[1]


def _is_own(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == own or relative.startswith(own + "/") for own in OWN)


def _importers() -> list[Path]:
    return [path for top in IMPORTERS for path in sorted((ROOT / top).rglob("*.py"))
            if not _is_own(path)]


def _reaches(path: Path) -> Iterator[str]:
    """What `path` imports from cost_model past its `__all__`: a module of it, or a name it
    does not export (`import cost_model` then `cost_model.x` counts as importing x)."""
    exports = set(cost_model.__all__)
    tree = ast.parse(path.read_text(), filename=str(path))
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("cost_model."):
                yield f"{node.lineno}: from {node.module} import …"
            elif node.module == "cost_model":
                yield from (f"{node.lineno}: {a.name}" for a in node.names
                            if a.name not in exports)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cost_model."):
                    yield f"{node.lineno}: import {alias.name}"
                elif alias.name == "cost_model":
                    bound.add(alias.asname or "cost_model")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in bound and node.attr not in exports:
            yield f"{node.lineno}: cost_model.{node.attr}"


def test_importers_use_only_the_public_api():
    breaches = {path.relative_to(ROOT).as_posix(): list(_reaches(path)) for path in _importers()}
    reaching = {name for name, found in breaches.items() if found}
    unexplained = sorted(reaching - set(PENDING))
    assert unexplained == [], "\n".join(f"{name} {breaches[name]}" for name in unexplained)
    assert sorted(set(PENDING) - reaching) == [], "no longer reaching inside: drop from PENDING"


def test_every_export_is_imported_outside_cost_model():
    """The API is what others call: each name is imported by some module outside cost_model
    and its tests (by a `PENDING` one from its module, until it moves to the public names)."""
    used = set()
    for path in _importers():
        pending = path.relative_to(ROOT).as_posix() in PENDING
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module == "cost_model" or pending and module and module.startswith("cost_model"):
                used |= {alias.name for alias in node.names}
    assert sorted(set(cost_model.__all__) - used) == []


def test_the_check_sees_each_way_of_reaching_past_the_api(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import cost_model\nfrom cost_model import evaluate_points, _HOMES\n"
                       "from cost_model.step import stage_forward\n"
                       "def f():\n    import cost_model.host\n"
                       "    return cost_model.get_hardware, cost_model.batch\n")
    assert sorted(_reaches(planted)) == ["2: _HOMES", "3: from cost_model.step import …",
                                         "5: import cost_model.host", "6: cost_model.batch"]
