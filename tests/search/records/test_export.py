"""`archscout export` (hf, json, vllm) through `main(argv)`, and the export helpers."""

import json
import os
import shlex
import stat
import threading
from pathlib import Path

import pytest

import search.records.export
from cost_model.hf_config import architecture_from_json_dict, load_architecture
from cost_model.params import count_params
from search.cli.main import main
from search.records.export import (
    RECORD_KEY, VLLM_MAX_NUM_SEQS_CAP, ExportError, vllm_document,
)  # fmt: skip
from search.study.space import build_candidate, complete_params
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage

from tests.search.cli.test_inspect import bad_input, make_study, pareto_items

VLLM_KEYS = {"model", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
             "enable_expert_parallel", "quantization", "kv_cache_dtype", "max_model_len",
             "max_num_seqs", "command", "notes", "decode_context_parallel_size",
             "speculative_config", "kv_transfer_config", "engine"}


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


# ---- vllm ---------------------------------------------------------------------------------------


def test_vllm_export(study, best, tmp_path, capsys):
    out = tmp_path / "vllm.json"
    _export(study, best["trial"], "vllm", out, capsys)
    doc = json.loads(out.read_text())
    spec, dep = load_spec(study), best["deployment"]
    assert doc.keys() == VLLM_KEYS
    assert doc["tensor_parallel_size"] == dep["tp"] and doc["data_parallel_size"] == dep["dp"]
    assert doc["max_model_len"] == spec.workload.isl_tokens + spec.workload.osl_tokens
    assert 1 <= doc["max_num_seqs"] <= VLLM_MAX_NUM_SEQS_CAP
    words = shlex.split(doc["command"])
    assert words[:3] == ["vllm", "serve", doc["model"]]
    flags = dict(zip(words[3::2], words[4::2]))
    assert flags["--tensor-parallel-size"] == str(dep["tp"])
    assert flags["--max-model-len"] == str(doc["max_model_len"])
    assert flags["--kv-cache-dtype"] == doc["kv_cache_dtype"]


def test_vllm_arguments_of_helix_and_speculative_decoding(study):
    """Helix kvp = 2 over tp = 2 maps to vLLM TP 4 with decode context parallelism 2; two MTP
    tokens to `--speculative-config {"method":"deepseek_mtp","num_speculative_tokens":2}`."""
    spec, cand = _candidate(study)
    dep = cand.deployment.model_copy(update={"tp": 2, "kvp": 2, "spec_tokens": 2})
    doc = vllm_document(spec, cand.__class__(**{**cand.__dict__, "deployment": dep}), 64)
    assert doc["tensor_parallel_size"] == 4 and doc["decode_context_parallel_size"] == 2
    assert json.loads(doc["speculative_config"]) == {"method": "deepseek_mtp",
                                                     "num_speculative_tokens": 2}
    words = shlex.split(doc["command"])
    assert words[words.index("--speculative-config") + 1] == doc["speculative_config"]
    assert any("decode context parallelism" in note for note in doc["notes"])


@pytest.mark.parametrize("precision, kv, quantization, kv_cache_dtype", [
    ("bf16", "bf16", None, "auto"),
    ("fp8", "fp8", "fp8", "fp8"),
    ("nvfp4", "fp8", "modelopt_fp4", "fp8"),
    ("mxfp4", "bf16", "mxfp4", "auto"),
], ids=["bf16", "fp8", "nvfp4", "mxfp4"])
def test_vllm_quantization_names(study, precision, kv, quantization, kv_cache_dtype):
    spec, cand = _candidate(study, precision=precision, kv_precision=kv)
    doc = vllm_document(spec, cand, max_concurrency=64)
    assert doc["quantization"] == quantization and doc["kv_cache_dtype"] == kv_cache_dtype
    assert ("--quantization" in doc["command"]) == (quantization is not None)


def test_vllm_max_num_seqs_is_per_dp_engine_and_capped(study):
    spec, cand = _candidate(study, tp=1)
    assert vllm_document(spec, cand, max_concurrency=300)["max_num_seqs"] == 300
    huge = vllm_document(spec, cand, max_concurrency=10 * VLLM_MAX_NUM_SEQS_CAP)
    assert huge["max_num_seqs"] == VLLM_MAX_NUM_SEQS_CAP


def test_vllm_moe_expert_parallel(study):
    moe = dict(num_experts=8, experts_per_token=2, moe_intermediate_size=1024, tp=2, dp=2)
    spec, cand = _candidate(study, **moe, ep=4)
    doc = vllm_document(spec, cand, max_concurrency=1000)
    assert doc["enable_expert_parallel"] and "--enable-expert-parallel" in doc["command"]
    assert doc["data_parallel_size"] == 2 and doc["max_num_seqs"] == 500  # per DP engine
    assert doc["notes"] == []
    spec, cand = _candidate(study, **moe, ep=2)  # vLLM's EP always spans TP·DP: said in a note
    assert "TP·DP = 4" in vllm_document(spec, cand, max_concurrency=1000)["notes"][0]


def test_vllm_fp4_kv_cache_is_refused(study):
    spec, cand = _candidate(study, precision="nvfp4", kv_precision="nvfp4")
    with pytest.raises(ExportError, match="`kv_precision` \\(nvfp4\\)"):
        vllm_document(spec, cand, max_concurrency=64)


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
