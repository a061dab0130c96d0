"""The scheduler's host time per scheduled sequence per step (cost_model/host.py): the shipped
terms, the catalog's host CPU kinds, and where the step model pays it."""

import tomllib
from importlib import resources

import numpy as np
import pytest

from cost_model import host
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment
from cost_model.errors import ConfigError
from cost_model.hardware import catalog_names, get_hardware, spec_from_toml
from cost_model.step import StageLayers, stage_other_s, stage_forward
from cost_model.step_load import StepLoad

H200 = get_hardware("h200")


def _host_doc() -> dict:
    """cost_model/data/serving/host.toml, read here without the package's loader."""
    return tomllib.loads(resources.files("cost_model.data.serving").joinpath("host.toml")
                         .read_text())


def _shipped_us() -> dict[str, float]:
    """The fitted values as the data file writes them."""
    doc = _host_doc()
    return {cpu: float(doc[cpu]["request_step_us"]["value"]) for cpu in host.HOST_CPUS}


def test_every_kind_has_a_sourced_fitted_value():
    """Each value is the fit on every source's rows, and says so: the command that reproduces
    it and the rows it used."""
    doc = _host_doc()
    for cpu in host.HOST_CPUS:
        entry = doc[cpu]["request_step_us"]
        assert entry["value"] >= 0
        assert "python tests/benchmarks/fit_host_overhead.py --write" in entry["source"]
        assert f"rows on {cpu} hosts of every source" in entry["source"]


H_US = {"x86": 5.0, "grace": 9.0}  # set by the tests below: they price any h, not the shipped


@pytest.fixture
def known_host(monkeypatch):
    """h = `H_US` per kind, whatever the shipped fit is (it may be 0 for a kind)."""
    monkeypatch.setattr(host, "request_step_s", lambda cpu: H_US[cpu] * 1e-6)
    return H_US


def test_host_step_is_h_times_sequences(known_host):
    """t_host = h · n: 64 sequences on an x86 host at h = 5 µs take 320 µs."""
    assert float(host.host_step_s(64.0, "x86")) == pytest.approx(320e-6, rel=1e-12)
    assert float(host.host_step_s(0.0, "grace")) == 0.0


def test_shipped_h_is_read_from_the_data_file():
    """`request_step_s` returns the file's µs in seconds for every kind."""
    for cpu, value_us in _shipped_us().items():
        assert host.request_step_s(cpu) == pytest.approx(value_us * 1e-6, rel=1e-12)


def test_unknown_host_cpu_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"`host_cpu` must be one of x86, grace; got 'arm'"):
        host.request_step_s("arm")


@pytest.mark.parametrize("name", catalog_names())
def test_every_catalog_gpu_names_its_host_cpu_with_a_source(name):
    spec = get_hardware(name)
    assert spec.host_cpu in host.HOST_CPUS
    assert spec.sources["system.host_cpu"]
    assert spec.host_cpu == ("grace" if name.startswith("gb") else "x86")


def _h200_doc() -> dict:
    text = resources.files("cost_model.data.hardware").joinpath("h200.toml").read_text()
    return tomllib.loads(text)


def test_user_file_without_host_cpu_is_x86():
    doc = _h200_doc()
    doc.pop("system")
    assert spec_from_toml(doc).host_cpu == host.DEFAULT_HOST_CPU == "x86"


def test_user_file_with_unknown_host_cpu_names_the_key():
    doc = _h200_doc()
    doc["system"]["host_cpu"]["value"] = "power9"
    with pytest.raises(ConfigError, match=r"`system\.host_cpu` must be one of x86, grace; "
                                          r"got 'power9'"):
        spec_from_toml(doc)


def _arrays(arch, dep):
    return ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])


def test_other_time_pays_the_busiest_ranks_sequences(load_model, known_host):
    """A step of 48 decoding sequences and a 512-token chunk of one request: the scheduler's
    host time is h_x86 · (48 + 1) = 49 × 5 µs on top of the kernels (the same call with host
    off)."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment())
    env = Env.create(H200, "fp8", "fp8")
    load = StepLoad.single_group(560.0, decode_seqs=48.0)
    stage = StageLayers.of(a, d)
    with_host = stage_other_s(a, d, env, load, stage)
    without = stage_other_s(a, d, env, load, stage, host=False)
    expected = 49 * 5.0e-6
    assert float(np.ravel(with_host - without)[0]) == pytest.approx(expected, rel=1e-9)


def test_attention_dp_ranks_each_schedule_their_own(load_model, known_host):
    """With attention DP 4 the busiest rank schedules ⌈10/4⌉ = 3 of 10 decoding sequences: the
    step pays h · 3 = 15 µs at h = 5 µs, not h · 10 (each rank runs its own scheduler)."""
    arch = load_model("Qwen3-30B-A3B")
    a, d = _arrays(arch, Deployment(dp=4, ep=4))
    env = Env.create(H200, "fp8", "fp8")
    on = stage_forward(a, d, env, 10.0, 1024.0, 0.0, 0.0).other_s
    off = stage_forward(a, d, env, 10.0, 1024.0, 0.0, 0.0, host=False).other_s
    assert float(np.ravel(on - off)[0]) == pytest.approx(3 * 5.0e-6, rel=1e-9)


def test_pipeline_stage_pays_its_micro_batch_in_full(load_model, known_host):
    """The first stage waits for the host before each micro-batch: a stage time carries h · n for
    its micro-batch's n sequences, undivided by PP (the per-step kernels are divided), so a TPOT
    of PP stage times pays it for every sequence: 32 × 9 µs on a Grace host at h = 9 µs."""
    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment(pp=2))
    env = Env.create(get_hardware("gb200"), "fp8", "fp8")
    load = StepLoad.single_group(32.0)
    stage = StageLayers.of(a, d)
    diff = stage_other_s(a, d, env, load, stage) - stage_other_s(a, d, env, load, stage, host=False)
    assert float(np.ravel(diff)[0]) == pytest.approx(32 * 9.0e-6, rel=1e-9)


def test_draft_passes_do_not_pay_the_host_again(load_model, monkeypatch):
    """A speculative step's draft passes run inside the step the scheduler already paid for:
    their time is the same whatever h is (the verify step pays h · n once)."""
    from cost_model.step import draft_pass

    a, d = _arrays(load_model("Llama-3.1-8B"), Deployment(spec_tokens=2))
    env = Env.create(H200, "fp8", "fp8")
    shipped = draft_pass(a, d, env, 64.0, 1024.0).other_s
    monkeypatch.setattr(host, "request_step_s", lambda cpu: 1e-3)
    assert np.array_equal(draft_pass(a, d, env, 64.0, 1024.0).other_s, shipped)
    step_with_more_host = stage_forward(a, d, env, 64.0, 1024.0, 0.0, 0.0).other_s
    monkeypatch.setattr(host, "request_step_s", lambda cpu: 0.0)
    assert float(np.ravel(step_with_more_host - stage_forward(a, d, env, 64.0, 1024.0, 0.0,
                                                                0.0).other_s)[0]) == \
        pytest.approx(64 * 1e-3, rel=1e-9)
