"""`archscout calibrate --source RESULTS…`: the engines' published benchmark outputs
(tests/data/bench_outputs, sources in tests/data/SOURCES.md) refit the serving terms into a
calibration folder, which `evaluate` and `compare` then read and name."""

import json
import tomllib

import pytest

from cost_model import CALIBRATION_DIR_ENV
from search.calibration.serving_runs import Target, measured_runs, predict
from search.cli.main import main
from search.records.benchmarks import read_benchmark_output
from tests.data_paths import HF_CONFIGS, TEST_DATA

OUTPUTS = TEST_DATA / "bench_outputs"
SHIPPED_SERVING = TEST_DATA.parents[1] / "cost_model" / "data" / "serving"
VLLM_DOCS = str(OUTPUTS / "vllm_docs_cli_hermes3_llama31_8b.txt")
SGLANG_COOKBOOK = str(OUTPUTS / "sglang_cookbook_gpt_oss_120b_b200_tp8.txt")
TRTLLM_DOCS = str(OUTPUTS / "trtllm_docs_bench_llama31_8b_fp8.txt")
LLAMA = "studies/models/Llama-3.1-8B.json"
GPT_OSS = str(HF_CONFIGS / "gpt-oss-120b.json")
SGLANG_TARGET = ["--model", GPT_OSS, "--hardware", "b200", "--tp", "8"]
VLLM_TARGET = ["--model", LLAMA, "--hardware", "h100-sxm", "--precision", "bf16",
               "--engine", "vllm"]


def _calibrate(capsys, out, source, target) -> dict:
    assert main(["calibrate", "--source", source, *target, "--output", str(out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _compare(capsys, source, target) -> dict:
    flags = [f for f in target if f != "--model" and f not in (GPT_OSS, LLAMA)]
    model = GPT_OSS if GPT_OSS in target else LLAMA
    assert main(["compare", model, source, *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def sglang_fit(tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("cal")
    return out, _calibrate(capsys, out, SGLANG_COOKBOOK, SGLANG_TARGET)


def test_sglang_cookbook_refits_host_time_and_ttft(sglang_fit):
    """Two runs (concurrency 1 and 100, both with TTFT and TPOT): h of B200's x86 host and the
    sglang table's t_request and q are fitted, each recorded with its file and point count, and
    the fitted TTFT terms match the two runs (median |log error| below 5%, from ~0.98)."""
    out, doc = sglang_fit
    terms = {(t["table"], t["term"]): t for t in doc["terms"]}
    assert doc["written"] == ["serving/benchmark.toml", "serving/host.toml"]
    assert all(terms[k]["fitted"] for k in [("x86", "request_step_us"),
                                            ("sglang", "request_overhead_ms"),
                                            ("sglang", "queue_share_frac")])
    assert terms[("sglang", "request_overhead_ms")]["error_after"] < 0.05 < \
        terms[("sglang", "request_overhead_ms")]["error_before"]
    host = tomllib.loads((out / "serving" / "host.toml").read_text())
    assert host["x86"]["fit"] == {"files": ["sglang_cookbook_gpt_oss_120b_b200_tp8.txt"],
                                  "points": 4, "concurrencies": [1, 100]}
    assert host["grace"]["request_step_us"]["value"] == 0.0  # not refitted: kept as shipped
    bench = tomllib.loads((out / "serving" / "benchmark.toml").read_text())
    assert bench["sglang"]["fit"]["points"] == 2 and "vllm" in bench
    assert "mean_request_overhead_ms" not in bench["sglang"]  # 2 mean runs: the median's


def test_evaluate_and_compare_read_the_calibrated_files(sglang_fit, capsys, monkeypatch):
    """With ARCHSCOUT_CALIBRATION_DIR set, evaluate names both files and its benchmark TTFT
    changes; compare's TTFT error on the runs fitted drops below 5%."""
    out, _ = sglang_fit
    args = ["evaluate", GPT_OSS, "--hardware", "b200", "--tp", "8", "--engine", "sglang",
            "--concurrency", "100"]
    assert main(args) == 0
    shipped = capsys.readouterr().out
    before = _compare(capsys, SGLANG_COOKBOOK, SGLANG_TARGET)
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(out))
    assert main(args) == 0
    calibrated = capsys.readouterr().out
    assert "serving terms" not in shipped
    assert (f"serving terms: host.toml from {out.resolve()}/serving/host.toml; benchmark.toml "
            f"from {out.resolve()}/serving/benchmark.toml") in calibrated
    assert calibrated.splitlines()[-1] != shipped.splitlines()[-1]
    after = _compare(capsys, SGLANG_COOKBOOK, SGLANG_TARGET)
    assert after["serving_terms"]["host.toml"].endswith("serving/host.toml")
    assert after["median_abs_error_frac"]["ttft"] < 0.05 < before["median_abs_error_frac"]["ttft"]


def test_vllm_docs_run_refits_t_request_only(tmp_path, capsys, monkeypatch):
    """One run of 10 requests at once: h needs two concurrencies and q two queue lengths, so
    both keep their values (said in one line each); t_request is fitted on its one TTFT and the
    prediction then meets the measured 71.54 ms mean TTFT."""
    assert main(["calibrate", "--source", VLLM_DOCS, *VLLM_TARGET, "--output",
                 str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "kept x86.request_step_us = 0: 1 measured TPOT or tokens/s at 1 concurrency" in text
    assert "kept vllm.queue_share_frac = 0.1: 1 run(s) with a TTFT at 1 prompt-queue length" \
        in text
    assert not (tmp_path / "serving" / "host.toml").exists()
    monkeypatch.setenv(CALIBRATION_DIR_ENV, str(tmp_path))
    (row,) = _compare(capsys, VLLM_DOCS, VLLM_TARGET)["rows"]
    assert row["predicted_ttft_ms"] == pytest.approx(71.54, rel=0.02)


def test_trtllm_bench_report_fits_nothing_and_writes_nothing(tmp_path, capsys):
    """trtllm-bench without streaming: one throughput figure, no TTFT: every term keeps its
    value and no file is written."""
    out = tmp_path / "cal"
    assert main(["calibrate", "--source", TRTLLM_DOCS, "--model", LLAMA, "--hardware", "h200",
                 "--precision", "fp8", "--kv-precision", "fp8", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    shipped = tomllib.loads((SHIPPED_SERVING / "benchmark.toml").read_text())
    kept_ms = shipped["trtllm"]["request_overhead_ms"]["value"]
    assert f"kept trtllm.request_overhead_ms = {kept_ms:g}: no run with a measured TTFT" in text
    assert "wrote 0 file(s)" in text and not out.exists()


def test_predicted_parts_add_up_to_the_cost_models_benchmark_ttft():
    """The fit's inputs rebuild the cost model's benchmark TTFT with the shipped sglang terms:
    t̄ + fixed + q̄ · queue + w · round (mean runs; sglang ships t̄ 132 ms, q̄ 0.18, w 0)."""
    from cost_model import load_model, make_deployment

    model = load_model(GPT_OSS)
    dep = make_deployment(tp=8, precision="bf16", moe_precision="mxfp4", kv_precision="bf16")
    target = Target(model.arch, dep, "b200", None)
    for run in measured_runs(read_benchmark_output(SGLANG_COOKBOOK), target):
        p = predict(run, target)
        rebuilt = 0.132 + p["fixed_s"] + 0.18 * p["queue_s"] + 0.0 * p["round_s"]
        assert rebuilt == pytest.approx(p["benchmark_ttft_s"], rel=1e-9)


@pytest.mark.parametrize("content,needle", [
    ("nothing here\n", "holds neither a GEMM table"),
    (json.dumps({"backend": "vllm", "mean_ttft_ms": 30.0, "mean_tpot_ms": 7.0}),
     "without its concurrency, ISL or OSL"),
], ids=["wrong-kind", "missing-fields"])
def test_bad_source_is_one_line_exit_2_nothing_written(tmp_path, capsys, content, needle):
    bad, out = tmp_path / "bad.txt", tmp_path / "cal"
    bad.write_text(content)
    assert main(["calibrate", "--source", str(bad), *VLLM_TARGET, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "bad.txt" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_benchmark_outputs_need_the_deployment(tmp_path, capsys):
    assert main(["calibrate", "--source", VLLM_DOCS, "--output", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "`--study STUDY.toml --trial N`, or `--model CONFIG" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def test_a_gemm_table_and_a_benchmark_output_do_not_mix(tmp_path, capsys):
    gemms = tmp_path / "g.csv"
    gemms.write_text("gemm_dtype,m,n,k,latency\nfloat16,16,4096,4096,0.01\n")
    assert main(["calibrate", "--source", str(gemms), VLLM_DOCS, "--hardware", "h100-sxm",
                 "--output", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "`--source` mixes a GEMM table" in err and len(err.strip().splitlines()) == 1
