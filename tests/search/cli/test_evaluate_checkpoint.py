"""`evaluate`, `lint` and `evaluate --batch` default to the checkpoint's format, say so, and let
flags override it (issue 23): gpt-oss-120b fits one H100 in its MXFP4 checkpoint, DeepSeek-V3
runs its block FP8."""

import csv
import io
import json

import pytest

from search.cli.main import main
from search.errors import EXIT_INFEASIBLE

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

GPT_OSS = str(HF_CONFIGS / "gpt-oss-120b.json")
DEEPSEEK = str(MODEL_CONFIGS / "DeepSeek-V3.json")
DEEPSEEK_NVFP4 = str(HF_CONFIGS / "checkpoints" / "DeepSeek-V3.1-NVFP4")
LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")


def _doc(capsys, *argv) -> dict:
    assert main(["evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gpt_oss_120b_fits_one_h100_in_its_mxfp4_checkpoint_format(capsys):
    """No flags: BF16 attention, MXFP4 experts as w4a16 (no FP4 on Hopper), BF16 KV — the same
    numbers as those flags given; the old default (FP8 everywhere, 8 bits per expert weight)
    does not fit 80 GB."""
    doc = _doc(capsys, GPT_OSS, "--hardware", "h100-sxm", "--concurrency", "1", "64")
    dep = doc["deployment"]
    assert (dep["precision"], dep["moe_precision"], dep["kv_precision"]) == \
        ("bf16", "w4a16", "bf16")
    assert doc["fits_memory"] and doc["memory"]["max_concurrency"] > 64
    assert doc["checkpoint_formats"]["from_checkpoint"] == {
        "precision": "bf16", "moe_precision": "w4a16", "kv_precision": "bf16"}
    flags = _doc(capsys, GPT_OSS, "--hardware", "h100-sxm", "--concurrency", "1", "64",
                 "--precision", "bf16", "--moe-precision", "w4a16", "--kv-precision", "bf16")
    assert flags["points"] == doc["points"] and flags["memory"] == doc["memory"]
    assert flags["checkpoint_formats"] == {"from_checkpoint": {}, "note": None}
    assert main(["evaluate", GPT_OSS, "--hardware", "h100-sxm", "--precision", "fp8"]) == \
        EXIT_INFEASIBLE
    assert "does not fit 1× h100-sxm" in capsys.readouterr().err


def test_gpt_oss_text_output_says_where_the_precision_came_from(capsys):
    assert main(["evaluate", GPT_OSS, "--hardware", "h100-sxm", "--concurrency", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "precision from the checkpoint's quantization_config (quant_method mxfp4): attention "
        "and dense layers bf16, routed experts w4a16, KV cache bf16 (not quantized by the "
        "checkpoint); mxfp4 weights run as w4a16 on h100-sxm, which has no fp4 tensor cores")


def test_gpt_oss_on_blackwell_runs_native_mxfp4_experts(capsys):
    dep = _doc(capsys, GPT_OSS, "--hardware", "b200", "--concurrency", "1")["deployment"]
    assert (dep["precision"], dep["moe_precision"]) == ("bf16", "mxfp4")


def test_deepseek_v3_defaults_to_block_fp8_not_per_tensor(capsys):
    """Its config says `weight_block_size` [128, 128]: fp8_block everywhere (KV BF16, not
    quantized by the checkpoint) — the same as those flags, and slower than per-tensor FP8
    (block scales and their kernels), which the old default priced."""
    base = [DEEPSEEK, "--hardware", "h200", "--tp", "8", "--concurrency", "1"]
    doc = _doc(capsys, *base)
    assert (doc["deployment"]["precision"], doc["deployment"]["moe_precision"]) == \
        ("fp8_block", "fp8_block")
    flags = _doc(capsys, *base, "--precision", "fp8_block", "--kv-precision", "bf16")
    per_tensor = _doc(capsys, *base, "--precision", "fp8")
    assert doc["points"] == flags["points"]
    assert doc["points"][0]["tpot_ms"] > per_tensor["points"][0]["tpot_ms"]
    assert "weight_block_size [128, 128]" in doc["notes"][0]


def test_modelopt_hf_quant_config_beside_config_json_is_read(capsys):
    doc = _doc(capsys, DEEPSEEK_NVFP4, "--hardware", "b200", "--tp", "8", "--concurrency", "1")
    dep = doc["deployment"]
    assert (dep["precision"], dep["moe_precision"], dep["kv_precision"]) == \
        ("bf16", "nvfp4", "fp8")
    assert "hf_quant_config.json (ModelOpt NVFP4)" in doc["checkpoint_formats"]["note"]


def test_a_model_without_quantization_config_keeps_the_fp8_default_and_no_note(capsys):
    doc = _doc(capsys, LLAMA, "--hardware", "h200", "--concurrency", "1")
    assert doc["deployment"]["precision"] == "fp8" and doc["notes"] == []


def test_lint_defaults_to_the_checkpoint_and_notes_it_on_stderr(capsys):
    main(["lint", GPT_OSS, "--hardware", "h100-sxm", "--json"])
    captured = capsys.readouterr()
    dep = json.loads(captured.out)["deployment"]
    assert (dep["precision"], dep["moe_precision"], dep["kv_precision"]) == \
        ("bf16", "w4a16", "bf16")
    assert captured.err.startswith("archscout: note: precision from the checkpoint's "
                                   "quantization_config (quant_method mxfp4)")
    main(["lint", GPT_OSS, "--hardware", "h100-sxm", "--precision", "fp8", "--json"])
    captured = capsys.readouterr()
    assert json.loads(captured.out)["deployment"]["moe_precision"] == "fp8"
    assert captured.err == ""


def test_batch_rows_take_the_checkpoint_format_and_say_it_once(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text(f"model,hardware,concurrency,precision\n{GPT_OSS},h100-sxm,1,\n"
                    f"{GPT_OSS},h100-sxm,8,\n{GPT_OSS},h100-sxm,8,fp8\n", encoding="utf-8")
    assert main(["evaluate", "--batch", str(rows)]) == 0
    captured = capsys.readouterr()
    out = list(csv.DictReader(io.StringIO(captured.out)))
    assert [(r["precision"], r["moe_precision"], r["kv_precision"]) for r in out] == \
        [("bf16", "w4a16", "bf16")] * 2 + [("fp8", "fp8", "fp8")]
    notes = captured.err.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith(f"archscout: note: {GPT_OSS}: precision from")


@pytest.mark.parametrize("flag", ["--precision", "--moe-precision"])
def test_a_format_flag_the_gpu_cannot_run_is_still_refused(capsys, flag):
    assert main(["evaluate", DEEPSEEK, "--hardware", "h200", "--tp", "8", flag, "nvfp4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nvfp4 is not supported on h200" in err
