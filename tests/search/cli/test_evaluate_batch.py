"""`archscout evaluate` as deployed: `--batch ROWS.csv` (many rows, bad ones skipped with their
line), `--moe-precision`, and a deployment that does not fit (parameter counts and memory still
reported, exit 1)."""

import csv
import io
import json
from pathlib import Path

import pytest

from search.cli.main import main
from search.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE
from search.cli.evaluate_batch import OUTPUT_COLUMNS

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA = MODEL_CONFIGS / "Llama-3.1-8B.json"
DEEPSEEK = MODEL_CONFIGS / "DeepSeek-V3.json"
GPT_OSS = HF_CONFIGS / "gpt-oss-120b.json"
HEADER = "model,hardware,tp,ep,pp,dp,precision,kv_precision,moe_precision,isl,osl,concurrency"


def _write(folder: Path, lines: list[str], header: str = HEADER) -> Path:
    path = folder / "rows.csv"
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return path


def _csv(out: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(out)))


def _single(capsys, *argv) -> dict:
    assert main(["evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---- --batch ------------------------------------------------------------------------------------


def test_batch_rows_equal_single_evaluations(tmp_path, capsys):
    """Each row's numbers are those `evaluate MODEL … --concurrency C` prints for it alone
    (rows of different GPUs and formats are evaluated in groups, each at its own concurrency)."""
    path = _write(tmp_path, [
        f"{LLAMA},h200,2,1,1,1,fp8,,,1024,256,16",
        f"{DEEPSEEK},b200,8,8,1,1,fp8,,nvfp4,1024,1024,64",
        f"{GPT_OSS},h200,8,8,1,1,bf16,,w4a16,1024,1024,1",
        f"{LLAMA},h200,1,1,1,1,w4a16,,,1024,256,4",
    ])
    assert main(["evaluate", "--batch", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    rows = _csv(captured.out)
    assert [int(r["line"]) for r in rows] == [2, 3, 4, 5]
    assert list(rows[0]) == list(OUTPUT_COLUMNS)
    singles = [
        (LLAMA, "h200", "2", "1", "fp8", None, "256", "16"),
        (DEEPSEEK, "b200", "8", "8", "fp8", "nvfp4", "1024", "64"),
        (GPT_OSS, "h200", "8", "8", "bf16", "w4a16", "1024", "1"),
        (LLAMA, "h200", "1", "1", "w4a16", None, "256", "4"),
    ]
    for row, (model, hw, tp, ep, prec, moe, osl, c) in zip(rows, singles):
        flags = ["--moe-precision", moe] if moe else []
        doc = _single(capsys, str(model), "--hardware", hw, "--tp", tp, "--ep", ep,
                      "--precision", prec, *flags, "--osl", osl, "--concurrency", c)
        point = doc["points"][0]
        # same cost model, same inputs: equal to the CSV's 6 significant digits
        assert float(row["tpot_ms"]) == pytest.approx(point["tpot_ms"], rel=1e-5)
        assert float(row["tokens_per_s_per_gpu"]) == pytest.approx(point["tokens_per_s_per_gpu"],
                                                                   rel=1e-5)
        assert float(row["weights_gib_per_gpu"]) == pytest.approx(
            doc["memory"]["weights_gib_per_gpu"], rel=1e-5)
        assert int(row["max_concurrency"]) == doc["memory"]["max_concurrency"]
        assert int(row["params_total"]) == doc["params"]["total"]
        assert row["moe_precision"] == doc["deployment"]["moe_precision"]


def test_batch_breakdown_splits_linear_attention_like_evaluate(tmp_path, capsys):
    """The breakdown columns are `evaluate`'s parts: a hybrid's linear layers in
    `linear_attention_ms` (a transformer's is 0), and the parts sum to TPOT."""
    hybrid = HF_CONFIGS / "Qwen3.5-27B.json"
    path = _write(tmp_path, [f"{hybrid},h200,1,1,1,1,fp8,,,8192,1024,8",
                             f"{LLAMA},h200,1,1,1,1,fp8,,,8192,1024,8"])
    assert main(["evaluate", "--batch", str(path)]) == 0
    rows = _csv(capsys.readouterr().out)
    parts = ("gemm_ms", "attention_ms", "linear_attention_ms", "communication_ms", "other_ms")
    for row in rows:
        assert sum(float(row[p]) for p in parts) == pytest.approx(float(row["tpot_ms"]), rel=1e-4)
    assert float(rows[0]["linear_attention_ms"]) > 0 and float(rows[1]["linear_attention_ms"]) == 0
    single = _single(capsys, str(hybrid), "--hardware", "h200", "--isl", "8192", "--osl", "1024",
                     "--concurrency", "8")["points"][0]["breakdown_ms"]
    for part in ("attention", "linear_attention"):
        assert float(rows[0][f"{part}_ms"]) == pytest.approx(single[part], rel=1e-5)


def test_bad_rows_are_reported_with_their_line_and_skipped(tmp_path, capsys):
    path = _write(tmp_path, [
        f"{LLAMA},h200,1,1,1,1,fp8,,,1024,1024,1",
        f"{LLAMA},h200,3,1,1,1,fp8,,,1024,1024,1",  # line 3: tp does not divide the heads
        f"{DEEPSEEK},h200,8,8,1,1,fp8,,nvfp4,1024,1024,8",  # line 4: no FP4 on Hopper
        "missing.json,h200,1,1,1,1,fp8,,,1024,1024,1",  # line 5
        f"{LLAMA},h200,1,1,1,1,fp8,,,1024,1024,zero",  # line 6
        f"{LLAMA},tpu9,1,1,1,1,fp8,,,1024,1024,1",  # line 7
        f"{LLAMA},h200,1,1,1,1,fp8,,,1024,1024,2",
    ])
    assert main(["evaluate", "--batch", str(path)]) == 0
    captured = capsys.readouterr()
    assert [int(r["line"]) for r in _csv(captured.out)] == [2, 8]
    errors = captured.err.strip().splitlines()
    assert [e.split(":")[1].strip() for e in errors] == [f"line {n}" for n in (3, 4, 5, 6, 7)]
    assert "`tp` (3) must divide `num_attention_heads`" in errors[0]
    assert "`moe_precision` nvfp4 is not supported on h200" in errors[1]
    assert "`concurrency` ('zero'): Input should be a valid integer" in errors[3]
    assert all(e.endswith("skipped") and "Traceback" not in e for e in errors)


def test_no_good_row_is_exit_2(tmp_path, capsys):
    path = _write(tmp_path, [f"{LLAMA},h200,3,1,1,1,fp8,,,1024,1024,1"])
    assert main(["evaluate", "--batch", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("archscout: line 2:")
    assert "no row could be evaluated" in err[-1]


@pytest.mark.parametrize(("content", "message"), [
    ("hardware,tp\nh200,1\n", "needs a `model` column"),
    (HEADER + "\n", "has no rows"),
], ids=["no-model-column", "empty"])
def test_unusable_file_is_one_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "rows.csv"
    path.write_text(content, encoding="utf-8")
    assert main(["evaluate", "--batch", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_flags_fill_absent_columns_and_json_lines(tmp_path, capsys):
    """Only `model` given: --hardware, --precision, --osl and --concurrency fill the rest;
    --json prints one object per line with the CSV's keys."""
    path = _write(tmp_path, [str(LLAMA), "Llama-3.1-8B.json"], header="model")
    (tmp_path / "Llama-3.1-8B.json").write_text(LLAMA.read_text())  # relative: the CSV's folder
    assert main(["evaluate", "--batch", str(path), "--hardware", "b200", "--precision", "nvfp4",
                 "--osl", "128", "--concurrency", "8", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 and set(records[0]) == set(OUTPUT_COLUMNS)
    for rec in records:
        assert (rec["hardware"], rec["precision"], rec["osl"], rec["concurrency"]) == \
            ("b200", "nvfp4", 128, 8)
    assert records[0]["tpot_ms"] == records[1]["tpot_ms"]


def test_blank_concurrency_is_the_most_that_fit(tmp_path, capsys):
    path = _write(tmp_path, [f"{LLAMA},h200,1,1,1,1,fp8,,,1024,1024,"])
    assert main(["evaluate", "--batch", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    # tests/cost_model/test_golden_memory_step.py: 942 sequences of 2,048 tokens fit
    assert rec["concurrency"] == rec["max_concurrency"] == 942 and rec["fits_memory"]


@pytest.mark.parametrize("extra", [["MODEL.json"], ["--serving", "disaggregated"],
                                   ["--concurrency", "1", "2"]],
                         ids=["model-and-batch", "disaggregated", "two-concurrencies"])
def test_flags_batch_cannot_honour_are_refused(tmp_path, capsys, extra):
    path = _write(tmp_path, [f"{LLAMA},h200,1,1,1,1,fp8,,,1024,1024,1"])
    assert main(["evaluate", "--batch", str(path), *extra]) == EXIT_BAD_INPUT
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_evaluate_without_model_or_hardware_names_the_field(capsys):
    assert main(["evaluate", "--hardware", "h200"]) == EXIT_BAD_INPUT
    assert "`evaluate` needs MODEL" in capsys.readouterr().err
    assert main(["evaluate", str(LLAMA)]) == EXIT_BAD_INPUT
    assert "`--hardware` is required" in capsys.readouterr().err


# ---- --moe-precision ----------------------------------------------------------------------------


def test_moe_precision_flag_sets_the_experts_format(capsys):
    """DeepSeek-V3 at tp 8 ep 8 on B200: NVFP4 experts with FP8 attention hold the weights of
    tests/cost_model/test_formats.py (49,356,800,000 bytes per GPU), so more requests fit than
    all-FP8, and the expert GEMMs (not the rest) change the step time."""
    base = [str(DEEPSEEK), "--hardware", "b200", "--tp", "8", "--ep", "8", "--concurrency", "1"]
    mixed = _single(capsys, *base, "--precision", "fp8", "--moe-precision", "nvfp4")
    fp8 = _single(capsys, *base, "--precision", "fp8")
    assert mixed["deployment"]["moe_precision"] == "nvfp4"
    assert mixed["deployment"]["precision"] == fp8["deployment"]["moe_precision"] == "fp8"
    assert mixed["memory"]["weights_gib_per_gpu"] * 2**30 == pytest.approx(49_356_800_000)
    assert mixed["memory"]["max_concurrency"] > fp8["memory"]["max_concurrency"]
    shares = lambda doc: doc["points"][0]["breakdown_ms"]  # noqa: E731
    assert shares(mixed)["gemm"] != shares(fp8)["gemm"]
    assert shares(mixed)["attention"] == pytest.approx(shares(fp8)["attention"])


def test_nvfp4_experts_on_hopper_is_one_line_naming_the_field(capsys):
    assert main(["evaluate", str(DEEPSEEK), "--hardware", "h200", "--tp", "8", "--ep", "8",
                 "--moe-precision", "nvfp4"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "`moe_precision` nvfp4 is not supported on h200" in err


# ---- a deployment that does not fit -------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [None, ["--concurrency", "1", "8"]],
                         ids=["sweep", "points"])
def test_no_fit_json_has_the_same_keys_with_fits_memory_false(capsys, concurrency):
    """DeepSeek-V3 on one H200 (exit 1): the same document as a deployment that fits — params,
    memory (what one request needs), no points, `fits_memory` false — and the one line."""
    extra = concurrency or []
    assert main(["evaluate", str(DEEPSEEK), "--hardware", "h200", *extra, "--json"]) == \
        EXIT_INFEASIBLE
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    fits = _single(capsys, str(DEEPSEEK), "--hardware", "h200", "--tp", "8", "--ep", "8",
                   *extra)
    assert set(doc) == set(fits) and set(doc["memory"]) == set(fits["memory"])
    assert doc["fits_memory"] is False and fits["fits_memory"] is True
    assert doc["points"] == [] and doc["memory"]["max_concurrency"] == 0
    # source: tests/data/model_params.csv (transformers' exact counts); tolerance 0
    assert (doc["params"]["total"], doc["params"]["active"]) == (671_026_404_352, 37_552_282_624)
    memory = doc["memory"]
    assert memory["needed_gib_one_request"] == pytest.approx(
        memory["weights_gib_per_gpu"] + memory["workspace_gib_per_gpu"]
        + memory["kv_gib_per_request"])
    assert memory["needed_gib_one_request"] > memory["usable_gib_per_gpu"]
    if concurrency is None:
        assert doc["frontier_area"] == 0.0 and doc["frontier_concurrencies"] == []
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "does not fit" in err
    assert "GiB with the workspace and one request's KV" in err


def test_engine_column_and_flag_key_the_benchmark_ttft(tmp_path, capsys):
    """A row's `engine` (blank: the `--engine` flag, else generic) reaches its Workload: each row
    equals `evaluate … --engine E` alone, and the column is echoed in the output."""
    header = HEADER + ",engine"
    path = _write(tmp_path, [f"{LLAMA},h200,1,1,1,1,fp8,,,1024,256,4,sglang",
                             f"{LLAMA},h200,1,1,1,1,fp8,,,1024,256,4,"], header)
    assert main(["evaluate", "--batch", str(path), "--engine", "trtllm"]) == 0
    rows = _csv(capsys.readouterr().out)
    assert [r["engine"] for r in rows] == ["sglang", "trtllm"]
    for row in rows:
        single = _single(capsys, str(LLAMA), "--hardware", "h200", "--osl", "256",
                         "--concurrency", "4", "--engine", row["engine"])["points"][0]
        assert float(row["benchmark_ttft_ms"]) == pytest.approx(single["benchmark_ttft_ms"],
                                                                rel=1e-5)
    assert rows[0]["benchmark_ttft_ms"] != rows[1]["benchmark_ttft_ms"]
