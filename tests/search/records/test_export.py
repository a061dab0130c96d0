"""`archscout export` (hf, json, vllm, sglang, trtllm, bundle) through `main(argv)`."""

import json
import os
import shlex
import stat
import threading
from pathlib import Path

import pytest

import search.records.export
from cost_model import (
    architecture_from_json_dict, count_params, load_architecture, quantization_config_for,
)
from search.cli.main import main
from search.records.export import RECORD_KEY, ExportError, hf_document, serving_document
from search.study.space import build_candidate, complete_params
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage

from tests.search.cli.test_inspect import bad_input, make_study, pareto_items
from tests.search.records.engine_flags import command_problems, document_problems

@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def best(study) -> dict:
    return pareto_items(study)[0]


def _export(study: Path, trial: int, fmt: str, out: Path, capsys) -> None:
    assert main(["export", str(study), str(trial), "--format", fmt, "-o", str(out)]) == 0
    assert str(out.name if out.suffix else "config.json") in capsys.readouterr().out


def _candidate(study: Path, **params):
    spec = load_spec(study)
    base = {"hidden_size": 2048, "num_layers": 16, "head_dim": 128, "num_kv_heads": 8,
            "q_per_kv": 4, "intermediate_size": 8192}
    return spec, build_candidate(spec, complete_params(spec, {**base, **params}))


# ---- hf -----------------------------------------------------------------------------------------


def test_hf_export_loads_in_transformers_with_the_exact_count(study, best, tmp_path, capsys):
    """source: transformers 5.24 meta-device model of the exported config; tolerance 0."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    _export(study, best["trial"], "hf", tmp_path, capsys)  # a folder: writes folder/config.json
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    built = sum(p.numel() for p in model.parameters())
    arch = load_architecture(tmp_path)
    assert built == count_params(arch).total_params == best["params_total"]
    assert config.hidden_size == best["architecture"]["hidden_size"]


# ---- json ---------------------------------------------------------------------------------------


def test_json_export_is_the_full_record(study, best, tmp_path, capsys):
    out = tmp_path / "record.json"
    _export(study, best["trial"], "json", out, capsys)
    doc = json.loads(out.read_text())
    assert doc[RECORD_KEY] == 1 and doc["trial"] == best["trial"]
    for key in ("architecture", "deployment", "workload", "objectives", "constraints", "frontier",
                "breakdown", "params", "loss"):
        assert key in doc
    spec = load_spec(study)
    cand = build_candidate(spec, complete_params(spec, _trial_params(study, best["trial"])))
    assert architecture_from_json_dict(doc["architecture"]) == cand.arch
    assert doc["workload"]["isl_tokens"] == spec.workload.isl_tokens


def test_json_export_reads_back_with_load_architecture(study, best, tmp_path, capsys):
    out = tmp_path / "record.json"
    _export(study, best["trial"], "json", out, capsys)
    spec = load_spec(study)
    cand = build_candidate(spec, complete_params(spec, _trial_params(study, best["trial"])))
    assert load_architecture(out) == cand.arch


def _trial_params(study: Path, number: int) -> dict:
    spec = load_spec(study)
    handle = open_storage(study, spec, None, shared=True)
    params = load_study(spec, handle).get_trials(deepcopy=False)[number].params
    handle.close()
    return params


# ---- serving engines ----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_engine_export(study, best, tmp_path, capsys, engine):
    out = tmp_path / f"{engine}.json"
    _export(study, best["trial"], engine, out, capsys)
    doc = json.loads(out.read_text())
    assert doc["engine"] == engine and document_problems(doc) == []
    dep = best["deployment"]
    words = shlex.split(doc["instances"][0]["commands"][0])
    flag = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "trtllm": "--tp_size"}
    assert words[words.index(flag[engine]) + 1] == str(dep["tp"] * dep["dp"] if
                                                        engine != "vllm" else dep["tp"])
    spec = load_spec(study)
    length = str(spec.workload.isl_tokens + spec.workload.osl_tokens)
    assert length in words


def test_speculative_decoding_with_mtp_needs_draft_layers(study):
    """A dense llama export has no MTP layers: the export runs without speculation and says
    why; the predicted figures assume it."""
    spec, cand = _candidate(study)
    dep = cand.deployment.model_copy(update={"spec_tokens": 2})
    doc = serving_document(spec, cand.__class__(**{**cand.__dict__, "deployment": dep}), "vllm",
                           64)
    assert doc["speculative_tokens"] == 0 and any("MTP dropped" in n for n in doc["notes"])


def test_engine_named_by_the_study_is_the_only_one(study):
    spec, cand = _candidate(study)
    other = spec.model_copy(update={"engine": "trtllm"})
    with pytest.raises(ExportError, match="names engine TensorRT-LLM"):
        serving_document(other, cand, "vllm", 64)
    assert serving_document(other, cand, "trtllm", 64)["engine"] == "trtllm"


def test_mtp_draft_layers_are_in_the_hf_config_and_change_no_parameter_count(tmp_path):
    """source: transformers 5 builds DeepSeek-V3 on the meta device without its MTP module;
    the config names one (`num_nextn_predict_layers` = 1, what vLLM's deepseek_mtp reads) when
    the deployment speculates with MTP; tolerance 0 on the parameter count."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from search.study.space import Candidate
    from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS
    from cost_model import make_deployment

    small = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json").with_fields(**{
        "num_layers": 4, "first_dense_layers": 1, "num_experts": 8, "hidden_size": 256,
        "intermediate_size": 512, "moe_intermediate_size": 128, "vocab_size": 1024,
        "num_attention_heads": 4, "num_kv_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 64,
        "shared_expert_intermediate_size": 128})
    assert HF_CONFIGS.exists()
    spec = load_spec("studies/quickstart.toml")
    cand = Candidate({}, small, make_deployment(tp=1, spec_tokens=2))
    config = hf_document(spec, cand)
    assert config["model_type"] == "deepseek_v3" and config["num_nextn_predict_layers"] == 1
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = transformers.AutoConfig.from_pretrained(tmp_path)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(loaded)
    assert sum(p.numel() for p in model.parameters()) == count_params(small).total_params
    plain = Candidate({}, small, make_deployment(tp=1))
    assert "num_nextn_predict_layers" not in hf_document(spec, plain)


# ---- bundle -------------------------------------------------------------------------------------


def test_bundle_boots_with_random_weights(study, best, tmp_path, capsys):
    """config.json loads in transformers with the exact count; each engine gets a dummy-weight
    serve command whose flags are its own and a benchmark command at the point's ISL, OSL and
    concurrency; the README names the predictions."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "bundle"
    assert main(["export", str(study), str(best["trial"]), "--format", "bundle", "-o",
                 str(out)]) == 0
    capsys.readouterr()
    config = transformers.AutoConfig.from_pretrained(out)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == best["params_total"]
    spec = load_spec(study)
    # the checkpoint's quantization_config is the one quantization_config_for writes for the
    # deployment's weight formats; the serve commands leave the method to config.json
    d = best["deployment"]
    written = json.loads((out / "config.json").read_text()).get("quantization_config")
    assert written == quantization_config_for(d["precision"], d.get("moe_precision"))
    for engine in ("vllm", "sglang", "trtllm"):
        serve = (out / f"serve_{engine}.sh").read_text().splitlines()[2]
        assert command_problems(engine, serve) == []
        assert "dummy" in serve or engine == "trtllm"
        assert "--quantization" not in serve
        bench = shlex.split((out / f"bench_{engine}.sh").read_text().splitlines()[1])
        assert bench[bench.index("--random-input-len") + 1] == str(spec.workload.isl_tokens)
        assert bench[bench.index("--random-output-len") + 1] == str(spec.workload.osl_tokens)
    assert "load_format: \"dummy\"" in (out / "extra_llm_api_options.yaml").read_text()
    readme = (out / "README.md").read_text()
    assert "TPOT ms" in readme and "tokens/s/GPU" in readme


# ---- infeasible trials --------------------------------------------------------------------------


def test_an_infeasible_trial_needs_force_and_names_the_broken_constraint(study, tmp_path, capsys):
    spec = load_spec(study)
    handle = open_storage(study, spec, None, shared=True)
    trials = load_study(spec, handle).get_trials(deepcopy=False)
    handle.close()
    broken = next(t for t in trials if t.state.name == "COMPLETE" and
                  not t.user_attrs.get("feasible", True))
    out = tmp_path / "v.json"
    bad_input(capsys, ["export", str(study), str(broken.number), "--format", "vllm", "-o",
                       str(out)], "infeasible", "--force")
    assert not out.exists()
    assert main(["export", str(study), str(broken.number), "--format", "vllm", "-o", str(out),
                 "--force"]) == 0
    assert "note: infeasible" in capsys.readouterr().err
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("infeasible in study") and "`" in n for n in notes)


# ---- bad input and atomic writes ----------------------------------------------------------------


def test_unknown_format(study, best, tmp_path, capsys):
    out = tmp_path / "x.json"
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", "onnx", "-o",
                       str(out)], "--format", "onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["hf", "json", "vllm"])
def test_unwritable_output_leaves_nothing(study, best, tmp_path, capsys, fmt):
    (tmp_path / "taken").write_text("a file, not a folder")
    out = tmp_path / "taken" / "out.json"
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", fmt, "-o", str(out)],
              "`-o`", str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


@pytest.mark.parametrize("fmt", ["hf", "json", "vllm"])
def test_missing_folders_of_a_file_path_are_created(study, best, tmp_path, capsys, fmt):
    """`-o newdir/config.json` creates newdir/ (as `save_pretrained` does; issue 13)."""
    out = tmp_path / "new" / "dir" / "config.json"
    assert main(["export", str(study), str(best["trial"]), "--format", fmt, "-o", str(out)]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text()) and [p.name for p in out.parent.iterdir()] == [out.name]


def test_unknown_trial_writes_nothing(study, tmp_path, capsys):
    out = tmp_path / "config.json"
    bad_input(capsys, ["export", str(study), "4242", "--format", "hf", "-o", str(out)],
              "`TRIAL` (4242)")
    assert list(tmp_path.iterdir()) == []


def test_directory_is_only_for_hf(study, best, tmp_path, capsys):
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", "vllm", "-o",
                       str(tmp_path)], "`-o`", "directory")
    assert list(tmp_path.iterdir()) == []


def test_hf_export_to_a_new_folder(study, best, tmp_path, capsys):
    """`-o out/` (as the README shows) names a folder: it is created and holds config.json."""
    out = f"{tmp_path / 'out'}/"
    assert main(["export", str(study), str(best["trial"]), "--format", "hf", "-o", out]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"]


def test_new_folder_is_not_made_when_the_export_fails(study, tmp_path, capsys):
    bad_input(capsys, ["export", str(study), "4242", "--format", "hf", "-o",
                       f"{tmp_path / 'out'}/"], "`TRIAL` (4242)")
    bad_input(capsys, ["export", str(study), "0", "--format", "vllm", "-o",
                       f"{tmp_path / 'out'}/"], "`-o`", "directory")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["/proc/archscout-newdir/", "/proc/archscout-newdir/sub/"])
def test_uncreatable_new_folder_is_one_line(study, best, capsys, folder):
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", "hf", "-o", folder],
              "`-o`", folder, "cannot be created")
    assert not Path(folder).exists()


def test_new_folders_are_removed_when_the_write_fails(study, best, tmp_path, capsys,
                                                      monkeypatch):
    def full_disk(path, document):
        raise ExportError(f"`-o` ({path}) cannot be written: No space left on device")

    monkeypatch.setattr(search.records.export, "write_json", full_disk)
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", "hf", "-o",
                       f"{tmp_path / 'a' / 'b'}/"], "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_empty_output_is_refused(study, best, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Path("") is ".": it used to write ./config.json
    bad_input(capsys, ["export", str(study), str(best["trial"]), "--format", "hf", "-o", ""],
              "`-o` ('') must name a file or a folder")
    assert list(tmp_path.iterdir()) == []


def test_a_pipe_is_written_not_replaced(study, best, tmp_path, capsys):
    """`-o /dev/stdout`, a FIFO or a device is written in place: renaming a temporary file onto
    it would replace the device node (as root, `-o /dev/full` used to)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    assert main(["export", str(study), str(best["trial"]), "--format", "json", "-o",
                 str(fifo)]) == 0
    reader.join(timeout=60)
    capsys.readouterr()
    assert json.loads(received[0])["trial"] == best["trial"]
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_a_symlink_keeps_pointing_at_the_new_file(study, best, tmp_path, capsys):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    _export(study, best["trial"], "json", link, capsys)
    assert link.is_symlink() and json.loads(real.read_text())["trial"] == best["trial"]
