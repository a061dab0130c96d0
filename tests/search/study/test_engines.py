"""A study's `engine`: deployments it cannot run are neither swept nor sampled, and format options
it never runs are refused when the study file loads."""

import tomllib
from pathlib import Path

import pytest

from constraints import ENGINE_NAMES, engine_violations
from search.study.errors import SpecError
from search.study.space import build_candidate, complete_params, swept_candidates
from search.study.spec import spec_from_dict

STUDIES = Path(__file__).resolve().parents[3] / "studies"
MOE_SHAPE = {"hidden_size": 6144, "num_layers": 48, "num_kv_heads": 8, "q_per_kv": 8,
             "num_experts": 256, "experts_per_token": 8, "moe_intermediate_size": 2048,
             "num_shared_experts": 0, "first_dense_layers": 0}


def _doc(stem: str, **changes) -> dict:
    doc = tomllib.loads((STUDIES / f"{stem}.toml").read_text())
    return {**doc, **changes}


def _space(doc: dict, **dims) -> dict:
    return {**doc, "space": {**doc["space"], **dims}}


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_sweep_keeps_exactly_the_deployments_the_engine_runs(engine):
    """moe-400b-gb300-nvl72 (tp 1, dp × ep 8…64, nvfp4|fp8): the engine's sweep is the open
    sweep less the deployments its rules refuse; on vLLM that leaves EP = DP only."""
    free = spec_from_dict(_doc("moe-400b-gb300-nvl72"))
    bound = spec_from_dict(_doc("moe-400b-gb300-nvl72", engine=engine))
    every = swept_candidates(free, build_candidate(free, complete_params(free, MOE_SHAPE)))
    kept = swept_candidates(bound, build_candidate(bound, complete_params(bound, MOE_SHAPE)))
    runs = [c.deployment for c in every if not engine_violations(engine, c.arch, c.deployment)]
    assert [c.deployment for c in kept] == runs and runs
    if engine == "vllm":
        assert {(d.dp, d.ep) for d in runs} == {(8, 8), (16, 16), (32, 32), (64, 64)}
        assert len(every) > len(runs)


def test_sampled_deployment_the_engine_cannot_run_is_no_candidate():
    doc = _space(_doc("moe-400b-gb300-nvl72", engine="vllm", deployments="sampled"))
    spec = spec_from_dict(doc)
    cand = build_candidate(spec, complete_params(spec, {**MOE_SHAPE, "dp": 16, "ep": 8}))
    assert not cand.valid
    assert cand.invalid_reason.startswith("vLLM's expert parallelism spans TP·DP = 16 GPUs")
    assert build_candidate(spec, complete_params(spec, {**MOE_SHAPE, "dp": 16, "ep": 16})).valid


def test_sweep_placeholder_becomes_a_runnable_deployment():
    """A sweeping study's placeholder deployment (each dimension's first option: here dp 8 with
    ep 16, not a vLLM mapping) is replaced by the first deployment the engine runs."""
    doc = _space(_doc("moe-400b-gb300-nvl72", engine="vllm"), ep={"choices": [16, 8]})
    spec = spec_from_dict(doc)
    cand = build_candidate(spec, complete_params(spec, MOE_SHAPE))
    assert cand.valid and (cand.deployment.dp, cand.deployment.ep) == (8, 8)


def test_no_runnable_deployment_is_said():
    doc = _space(_doc("moe-400b-gb300-nvl72", engine="trtllm"), tp={"value": 2},
                 dp={"value": 8}, ep={"value": 16})
    spec = spec_from_dict({**doc, "hardware": {"gpu": "gb300", "max_gpus": 72}})
    cand = build_candidate(spec, complete_params(spec, MOE_SHAPE))
    assert not cand.valid
    assert cand.invalid_reason.startswith("no deployment of the space runs on TensorRT-LLM: ")


@pytest.mark.parametrize("stem, engine, space, message", [
    ("long-context-latency-b200", "vllm", {"precision": {"choices": ["nvfp4", "mxfp4"]}},
     "`space.precision` option 'mxfp4' does not run on vLLM (its formats for this component: "
     "bf16, fp16, fp8, fp8_block, nvfp4, w4a16, w8a16)"),
    ("long-context-latency-b200", "vllm", {}, None),  # NVFP4 KV: vLLM 0.33's CacheDType nvfp4
    ("quickstart", "vllm", {}, None), ("long-context-latency-b200", "trtllm", {}, None),
])  # fmt: skip
def test_format_options_are_checked_at_load(stem, engine, space, message):
    doc = _space(_doc(stem, engine=engine), **space)
    if message is None:
        assert spec_from_dict(doc).engine == engine
        return
    with pytest.raises(SpecError) as err:
        spec_from_dict(doc)
    assert str(err.value) == f"study: {message}"


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_sampled_deployments_never_break_the_engines_rules(engine):
    """Deployments sampled as dimensions (`deployments = "sampled"`): no trial is asked with a
    deployment the engine refuses (issue 25: 39 of 400 broke vLLM's expert-parallel rule), so
    none fails for it and every scored one runs on the engine."""
    import optuna

    from search.study.runner import run_study
    from search.study.storage import StorageHandle

    spec = spec_from_dict(_doc("moe-400b-gb300-nvl72", engine=engine, deployments="sampled",
                               batch_size=16))
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=False)
    run_study(spec, handle, 32, 0, show_progress=False)
    trials = optuna.load_study(study_name=spec.name, storage=handle.storage).get_trials()
    assert len(trials) == 32 and all(t.state.name == "COMPLETE" for t in trials)
    for t in trials:
        cand = build_candidate(spec, complete_params(spec, t.params))
        assert not engine_violations(engine, cand.arch, cand.deployment)
