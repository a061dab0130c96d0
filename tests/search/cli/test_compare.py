"""`archscout compare`: published benchmark outputs read back and put beside the prediction."""

import json
import math

import pytest

from cost_model.deployment import make_deployment
from cost_model.hf_config import load_architecture
from search.cli.main import main
from search.records.benchmarks import read_benchmark_output
from search.records.comparison import finite_run_tokens_per_s, predicted_points
from tests.data_paths import HF_CONFIGS, TEST_DATA

OUTPUTS = TEST_DATA / "bench_outputs"
VLLM_DOCS = OUTPUTS / "vllm_docs_cli_hermes3_llama31_8b.txt"
SGLANG_COOKBOOK = OUTPUTS / "sglang_cookbook_gpt_oss_120b_b200_tp8.txt"
TRTLLM_DOCS = OUTPUTS / "trtllm_docs_bench_llama31_8b_fp8.txt"
LLAMA = "studies/models/Llama-3.1-8B.json"
GPT_OSS = str(HF_CONFIGS / "gpt-oss-120b.json")


def test_reads_the_vllm_docs_example_output():
    """source: vLLM docs/benchmarking/cli.md @ 069c00b0 (tests/data/SOURCES.md): 10 requests,
    1369 input and 2212 generated tokens, mean TTFT 71.54 ms, mean TPOT 7.91 ms, 382.89 output
    tokens/s; no concurrency limit, so concurrency = the 10 requests."""
    (row,) = read_benchmark_output(VLLM_DOCS)
    assert row["concurrency"] == 10 and row["completed"] == 10
    assert row["isl_tokens"] == pytest.approx(136.9) and row["osl_tokens"] == pytest.approx(221.2)
    assert (row["ttft_ms"], row["tpot_ms"], row["output_tokens_per_s"]) == (71.54, 7.91, 382.89)
    assert (row["ttft_stat"], row["tpot_stat"], row["duration_s"]) == ("mean", "mean", 5.78)
    assert row["engine"] is None and not row["concurrency_limited"]  # no "Backend:" line


def test_reads_the_sglang_cookbook_outputs():
    """source: sgl-project/sgl-cookbook docs/autoregressive/OpenAI/GPT-OSS.md @ 2c1242c5
    (tests/data/SOURCES.md): gpt-oss-120b on 8× B200, TP 8, ShareGPT; 100 prompts at
    concurrency 1 (33,178 input, 21,251 generated tokens, mean TTFT 33.71 ms, mean TPOT 2.31 ms,
    405.93 tok/s) and 1,000 at concurrency 100 (297,156 / 192,432, 102.94 / 14.31 ms,
    7,773.26 tok/s)."""
    low, high = read_benchmark_output(SGLANG_COOKBOOK)
    assert [r["engine"] for r in (low, high)] == ["sglang", "sglang"]
    assert (low["concurrency"], low["completed"], high["concurrency"], high["completed"]) == \
        (1, 100, 100, 1000)
    assert low["concurrency_limited"] and high["concurrency_limited"]
    assert low["isl_tokens"] == pytest.approx(331.78) and low["osl_tokens"] == pytest.approx(212.51)
    assert (high["ttft_ms"], high["tpot_ms"], high["output_tokens_per_s"]) == \
        (102.94, 14.31, 7773.26)
    assert high["duration_s"] == 24.76


def test_reads_the_trtllm_bench_docs_report():
    """source: NVIDIA/TensorRT-LLM docs/source/performance/perf-benchmarking.md @ 04276b44
    (tests/data/SOURCES.md): trtllm-bench throughput, Llama-3.1-8B FP8 (KV FP8), TP 1, 3,000
    requests of 128/128 queued at once under a batch cap of 4,096; 28,390.4265 output tok/s over
    13,525.6862 ms (3,000·128 / 13.5256862 s = 28,390.4); no --streaming, so no TTFT/TPOT."""
    (row,) = read_benchmark_output(TRTLLM_DOCS)
    assert (row["engine"], row["format"], row["gpus"]) == ("trtllm", "trtllm-bench text", 1)
    assert (row["completed"], row["concurrency"], row["concurrency_limited"]) == (3000, 3000, False)
    assert (row["isl_tokens"], row["osl_tokens"]) == (128, 128)
    assert row["output_tokens_per_s"] == pytest.approx(3000 * 128 / 13.5256862, rel=1e-6)
    assert row["duration_s"] == pytest.approx(13.5256862)
    assert math.isnan(row["ttft_ms"]) and row["ttft_stat"] is None


def test_reads_trtllm_bench_report_json(tmp_path):
    """`trtllm-bench --report_json` (reporting.py's `get_statistics_dict`): requests beyond the
    batch cap run in waves of the cap; streaming means become TTFT and TPOT."""
    doc = {"world_info": {"tp_size": 2, "pp_size": 2, "max_batch_size": 256},
           "request_info": {"num_requests": 1000, "avg_input_length": 1024.0,
                            "avg_output_length": 512.0},
           "performance": {"system_output_throughput_tok_s": 9000.0, "total_latency_ms": 56889.0},
           "streaming_metrics": {"avg_ttft_ms": 250.0, "avg_tpot_ms": 21.5}}
    (tmp_path / "report.json").write_text(json.dumps(doc))
    (row,) = read_benchmark_output(tmp_path / "report.json")
    assert (row["concurrency"], row["completed"], row["gpus"]) == (256, 1000, 4)
    assert (row["ttft_ms"], row["tpot_ms"], row["tpot_stat"]) == (250.0, 21.5, "mean")
    assert row["duration_s"] == pytest.approx(56.889)


def test_a_file_of_medians_says_so(tmp_path):
    """SGLang JSONL written without means (only `median_ttft_ms`, `median_tpot_ms`): the
    figures are read as medians and named so."""
    record = {"backend": "sglang", "completed": 8, "total_input_tokens": 8192,
              "total_output_tokens": 1024, "output_throughput": 500.0, "median_ttft_ms": 20.0,
              "median_tpot_ms": 5.0, "max_concurrency": None, "duration": 2.0}
    (tmp_path / "m.jsonl").write_text(json.dumps(record) + "\n")
    (row,) = read_benchmark_output(tmp_path / "m.jsonl")
    assert (row["ttft_ms"], row["ttft_stat"], row["tpot_stat"]) == (20.0, "median", "median")
    assert row["concurrency"] == 8 and row["engine"] == "sglang"


def test_finite_run_rate_golden():
    """N = 10 requests in waves of W = 4: two full waves at R(4) = 400 tok/s and a last wave
    of 2 at R(2) = 250 tok/s. Seconds per token: 2·4/400 + 2/250 = 0.02 + 0.008 = 0.028, so the
    run's rate is 10/0.028 = 357.142857; with no remainder (N = 8) it is R(4) = 400."""
    assert finite_run_tokens_per_s(10, 4, 400.0, 250.0) == pytest.approx(357.142857)
    assert finite_run_tokens_per_s(8, 4, 400.0, 123.0) == pytest.approx(400.0)


def test_reads_result_json_and_jsonl(tmp_path):
    """vLLM `--save-result` JSON and SGLang `--output-file` JSONL share these keys."""
    record = {"max_concurrency": 4, "completed": 8, "total_input_tokens": 8192,
              "total_output_tokens": 1024, "output_throughput": 500.0, "mean_ttft_ms": 20.0,
              "mean_tpot_ms": 5.0}
    (tmp_path / "r.json").write_text(json.dumps(record))
    (tmp_path / "r.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(
        {**record, "max_concurrency": 8}) + "\n")
    (row,) = read_benchmark_output(tmp_path / "r.json")
    assert (row["concurrency"], row["isl_tokens"], row["osl_tokens"]) == (4, 1024, 128)
    assert [r["concurrency"] for r in read_benchmark_output(tmp_path / "r.jsonl")] == [4, 8]


def test_compare_prints_measured_beside_predicted(capsys):
    assert main(["compare", LLAMA, str(VLLM_DOCS), "--hardware", "h100-sxm", "--precision",
                 "bf16", "--engine", "vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["rows"]
    assert row["tpot_ms"] == 7.91 and math.isfinite(row["predicted_tpot_ms"])
    assert row["tpot_error_frac"] == pytest.approx(row["predicted_tpot_ms"] / 7.91 - 1)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(382.89)


def test_compare_predicts_the_burst_as_a_finite_run(capsys):
    """vLLM's docs example sends its 10 requests at once: one wave of 10; the run lasted 5.78 s
    where one wave of equal lengths lasts ~1.5 s: at the measured TPOT (7.91 ms) its longest
    request ran (5.78 − 0.0715)/0.00791 ≈ 722 tokens against a mean of 221, which the output
    says, with the statistic of each measured figure."""
    assert main(["compare", LLAMA, str(VLLM_DOCS), "--hardware", "h100-sxm", "--precision",
                 "bf16", "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "TTFT is the mean, TPOT the mean over requests; 10 request(s) in 1 wave(s) of 10" in out
    assert "longest request ran ≈722 tokens vs a mean of 221" in out


def test_compare_sglang_cookbook_runs_in_waves(capsys):
    """1,000 requests at concurrency 100 are 10 waves of 100; the predicted tokens/s/GPU of the
    run is the finite-run rate of the predicted points at 100 (10 full waves: R(100))."""
    assert main(["compare", GPT_OSS, str(SGLANG_COOKBOOK), "--hardware", "b200", "--tp", "8",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engines"] == ["sglang"] and doc["gpus"] == 8
    low, high = doc["rows"]
    assert (high["waves"], high["concurrency"], low["waves"]) == (10, 100, 100)
    assert high["tokens_per_s_per_gpu"] == pytest.approx(7773.26 / 8)
    assert high["predicted_tokens_per_s_per_gpu"] == \
        pytest.approx(high["predicted_steady_tokens_per_s_per_gpu"])


def test_compare_a_run_with_a_last_partial_wave(tmp_path, capsys):
    """10 requests at concurrency 4: the prediction is `finite_run_tokens_per_s` of the cost
    model's points at 4 and at 2 (the last wave), below the steady rate at 4."""
    record = {"backend": "vllm", "max_concurrency": 4, "completed": 10,
              "total_input_tokens": 10240, "total_output_tokens": 1280,
              "output_throughput": 900.0, "mean_ttft_ms": 30.0, "mean_tpot_ms": 7.0}
    (tmp_path / "r.json").write_text(json.dumps(record))
    assert main(["compare", LLAMA, str(tmp_path / "r.json"), "--hardware", "h100-sxm",
                 "--precision", "bf16", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    at4, at2 = predicted_points(load_architecture(LLAMA), make_deployment(precision="bf16"),
                                "h100-sxm", 1024, 128, [4, 2], "vllm")
    expected = finite_run_tokens_per_s(10, 4, at4["tokens_per_s_per_gpu"],
                                       at2["tokens_per_s_per_gpu"])
    assert row["predicted_tokens_per_s_per_gpu"] == pytest.approx(expected)
    assert row["predicted_tokens_per_s_per_gpu"] < row["predicted_steady_tokens_per_s_per_gpu"]


def test_compare_trtllm_bench_report(capsys):
    """The TensorRT-LLM docs' report on one H200 (the GPU its build log's 132 GB KV estimate
    implies; tests/data/SOURCES.md): the engine is TensorRT-LLM's, TTFT and TPOT absent."""
    assert main(["compare", LLAMA, str(TRTLLM_DOCS), "--hardware", "h200", "--precision", "fp8",
                 "--kv-precision", "fp8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["rows"]
    assert doc["engines"] == ["trtllm"] and row["tpot_ms"] is None
    assert row["tokens_per_s_per_gpu"] == pytest.approx(28390.4265)
    assert math.isfinite(row["predicted_tokens_per_s_per_gpu"])


def test_a_file_without_results_is_one_line(tmp_path, capsys):
    bad = tmp_path / "empty.txt"
    bad.write_text("nothing here\n")
    assert main(["compare", LLAMA, str(bad), "--hardware", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "`RESULTS`" in err and len(err.strip().splitlines()) == 1
