"""Layering inside `cost_model/` (cost_model/README.md, "Layers"): each module imports only
modules of its own tier or of tiers below it, in the order a TPOT is built bottom-up — the
base, the inputs (catalog, formats, configs), the kernels on given shapes, the candidates'
columns, the shapes a layer runs, the layers' costs, the step, serving, the operating points,
and the public API on top. Imports are read with `ast`, inside functions too
(tests/import_graph.py)."""

import pytest

from tests.import_graph import ROOT, import_graph, layer_breaks

TIERS = (
    ("base", {"errors", "units", "sourced", "order_statistics", "frontier", "data"}),
    ("inputs", {"precision", "host", "hardware", "architecture_parts", "architecture", "deployment",
                "efficiency", "serving_files"}),
    ("kernels", {"gemm", "gemm_unique", "communication"}),
    ("columns", {"batch", "moe_ep"}),
    ("shapes", {"sharded_gemms", "params", "step_load", "hf"}),
    ("layers", {"attention", "linear_attention", "layers", "memory"}),
    ("step", {"step"}),
    ("serving", {"serving_steps", "benchmark_ttft", "arrival_queue"}),
    ("points", {"operating_points", "disaggregated", "evaluate"}),
    ("api", {""}),  # cost_model/__init__.py
)
ORDER = [name for name, _ in TIERS]
MAY_IMPORT = {name: set(ORDER[:i]) for i, name in enumerate(ORDER)}
GRAPH = import_graph(ROOT, ["cost_model"])


def tier_of(module: str) -> str:
    """The tier of `cost_model.x` (or of any module of the sub-package `cost_model.x`)."""
    first = module.split(".")[1] if "." in module else ""
    return next(name for name, members in TIERS if first in members)


def test_every_module_has_one_tier():
    firsts = {module.split(".")[1] if "." in module else "" for module in GRAPH}
    members = [first for _, group in TIERS for first in group]
    assert sorted(members) == sorted(set(members)), "a module in two tiers"
    assert firsts == set(members)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down_the_tiers(module):
    assert layer_breaks({module: GRAPH[module]}, tier_of, MAY_IMPORT) == []


def test_the_tiers_are_not_vacuous():
    """Each tier above the base imports the tier right below it somewhere (the order is the one
    the code has, not a looser one), and the step imports no serving module."""
    for lower, upper in zip(ORDER, ORDER[1:]):
        if lower == "base":
            continue
        assert any(tier_of(m) == upper and any(tier_of(t) == lower for t in GRAPH[m])
                   for m in GRAPH), f"{upper} does not import {lower}"
    assert layer_breaks({"cost_model.step": {"cost_model.serving_steps"}}, tier_of, MAY_IMPORT)
