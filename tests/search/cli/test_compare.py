"""`archscout compare`: published benchmark outputs read back and put beside the prediction."""

import json
import math

import pytest

from search.cli.main import main
from search.records.benchmarks import read_benchmark_output
from tests.data_paths import TEST_DATA

VLLM_DOCS = TEST_DATA / "bench_outputs" / "vllm_docs_cli_hermes3_llama31_8b.txt"
LLAMA = "studies/models/Llama-3.1-8B.json"


def test_reads_the_vllm_docs_example_output():
    """source: vLLM docs/benchmarking/cli.md @ 069c00b0 (tests/data/SOURCES.md): 10 requests,
    1369 input and 2212 generated tokens, mean TTFT 71.54 ms, mean TPOT 7.91 ms, 382.89 output
    tokens/s; no concurrency limit, so concurrency = the 10 requests."""
    (row,) = read_benchmark_output(VLLM_DOCS)
    assert row["concurrency"] == 10 and row["completed"] == 10
    assert row["isl_tokens"] == pytest.approx(136.9) and row["osl_tokens"] == pytest.approx(221.2)
    assert (row["ttft_ms"], row["tpot_ms"], row["output_tokens_per_s"]) == (71.54, 7.91, 382.89)


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


def test_a_file_without_results_is_one_line(tmp_path, capsys):
    bad = tmp_path / "empty.txt"
    bad.write_text("nothing here\n")
    assert main(["compare", LLAMA, str(bad), "--hardware", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "`RESULTS`" in err and len(err.strip().splitlines()) == 1
