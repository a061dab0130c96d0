"""cost_model/README.md, the walk of one TPOT through the package, names only what exists: every
`cost_model/x.py` path is a file, every `module.name` (or `module.Class.attribute`) resolves in
that module of cost_model, every `Export.attribute` on that public name; and it names every
module of the package, so a new module cannot be left out of the walk."""

import importlib
import re
from pathlib import Path

import pytest

import cost_model

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "cost_model" / "README.md"
TEXT = README.read_text()
PATHS = sorted(set(re.findall(r"`(cost_model/[\w/]+\.py)`", TEXT)))
DOTTED = sorted(set(re.findall(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`", TEXT)))
MODULES = {str(p.relative_to(ROOT)) for p in (ROOT / "cost_model").rglob("*.py")
           if "data" not in p.relative_to(ROOT).parts}


def _module(dotted: list[str]) -> tuple[object, list[str]] | None:
    """The longest prefix of `dotted` that is a cost_model module, and the rest."""
    for cut in range(len(dotted) - 1, 0, -1):
        name = "cost_model." + ".".join(dotted[:cut])
        if (ROOT / Path(*name.split("."))).with_suffix(".py").is_file() or \
                (ROOT / Path(*name.split(".")) / "__init__.py").is_file():
            return importlib.import_module(name), dotted[cut:]
    return None


def _resolves(name: str) -> bool | None:
    """True/False for a name qualified by a module of cost_model or a public name; None for
    any other dotted text (a file name such as config.json)."""
    parts = name.split(".")
    found = _module(parts)
    if found is None:
        if parts[0] not in cost_model.__all__:
            return None
        found = (getattr(cost_model, parts[0]), parts[1:])
    obj, rest = found
    for attribute in rest:
        if not hasattr(obj, attribute):
            return False
        obj = getattr(obj, attribute)
    return True


@pytest.mark.parametrize("path", PATHS)
def test_every_named_module_exists(path):
    assert (ROOT / path).is_file(), f"README names {path}, which does not exist"


@pytest.mark.parametrize("name", DOTTED)
def test_every_named_function_exists(name):
    assert _resolves(name) is not False, f"README names `{name}`, which does not exist"


def test_the_walk_names_every_module():
    assert sorted(MODULES - set(PATHS)) == []


def test_the_walk_names_the_step_and_its_parts():
    """The check is not vacuous: the walk's checked names include the TPOT formula's owners."""
    checked = {name for name in DOTTED if _resolves(name)}
    assert {"serving_steps.serving_times", "step.stage_forward_load", "layers.layer_gemms",
            "gemm.gemm_time_s", "attention.decode_attention_s", "communication.all_reduce_s",
            "host.host_step_s", "benchmark_ttft.benchmark_ttft_s", "evaluate.evaluate_points",
            "frontier.frontier_area"} <= checked
    assert _resolves("step.stage_forward_loads") is False
    assert _resolves("Workload.mean_decode_context_token") is False
