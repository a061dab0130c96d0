"""tests/data/serving/extract_mlperf.py, extract_inferencex_runs.py and extract_format_pairs.py:
their readers on hand-built inputs, each expected value derived by hand."""

import csv

import pytest

from tests.data_paths import serving_script

MLPERF = serving_script("extract_mlperf")
RUNS = serving_script("extract_inferencex_runs")
PAIRS = serving_script("extract_format_pairs")


# ---- MLPerf ------------------------------------------------------------------------------------


def test_dataset_mean_input_tokens_by_hand():
    """A summary of three samples with 100, 250 and 1,000 input tokens: (100 + 250 + 1,000)/3 =
    450 tokens over 3 samples (the output column does not enter)."""
    text = "input_length,output_length\n100,7\n250,9\n1000,11\n"
    assert MLPERF.mean_input_tokens(text) == (pytest.approx(450.0), 3)


@pytest.mark.parametrize(("location", "folder"), [
    ("closed/Dell/results/X_TRT/deepseek-r1/Offline",
     "closed/Dell/results/X_TRT/deepseek-r1/Offline/performance/run_1"),
    ("./closed/AMD/results/Y/llama2-70b-99/Server/performance/run_1",
     "closed/AMD/results/Y/llama2-70b-99/Server/performance/run_1"),
], ids=["v5.1-scenario-folder", "v6.0-run-folder"])
def test_run_folder_of_both_rounds(location, folder):
    assert MLPERF.run_folder(location) == folder


@pytest.mark.parametrize(("accelerator", "gpu"), [
    ("NVIDIA GB300", "GB300"), ("NVIDIA B300-SXM-270GB", "B300"),
    ("NVIDIA B200-SXM-180GB", "B200"), ("NVIDIA H200-NVL-141GB", None),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server"),
], ids=["gb300-holds-b300", "b300", "b200", "h200-nvl-not-catalog", "rtx-pro-6000"])
def test_accelerator_names_map_to_catalog_gpus(accelerator, gpu):
    assert MLPERF.gpu_of(accelerator) == gpu


def test_config_fields_read_parallelism_formats_and_speculation():
    """An NVIDIA-harness config excerpt: TP 8, EP 8, attention DP, batch 128, FP4 weights, FP8
    KV and an MTP draft head; without the draft block, no speculation."""
    text = ("    'enable_attention_dp': True,\n    'kv_cache_dtype': 'fp8',\n"
            "    'speculative_decoding': {'decoding_type': 'MTP'},\n"
            "    model_fields.precision: 'fp4',\n"
            "    model_fields.gpu_batch_size: {'deepseek-r1': 128},\n"
            "    llm_fields.tensor_parallelism: 8,\n    llm_fields.pipeline_parallelism: 1,\n"
            "    llm_fields.moe_expert_parallelism: 8,\n")
    cfg = MLPERF.config_fields(text)
    assert (cfg["tp"], cfg["pp"], cfg["ep"], cfg["max_batch"]) == ("8", "1", "8", "128")
    assert (cfg["precision"], cfg["kv"], cfg["adp"], cfg["spec"]) == ("fp4", "fp8", "True", "yes")
    plain = MLPERF.config_fields(text.replace("    'speculative_decoding': {'decoding_type': "
                                              "'MTP'},\n", ""))
    assert plain["spec"] == ""


def test_speculation_by_rule_only_for_v6_deepseek_interactive():
    assert MLPERF._speculative({}, "6.0", "DeepSeek-R1", "Interactive") == \
        "speculative (MLPerf rule)"
    assert MLPERF._speculative({}, "5.1", "DeepSeek-R1", "Interactive") == "none"
    assert MLPERF._speculative({}, "6.0", "DeepSeek-R1", "Server") == "none"
    assert MLPERF._speculative({"spec": "yes"}, "5.1", "Llama-2-70B", "Server") == \
        "speculative (config)"


def test_server_summary_fields_of_both_rounds_by_hand():
    """v6.0 names the mean TPOT 'Mean Time per Output Token', v5.1 'Mean Time to Output Token':
    45,722,314 ns is 45.722 ms; the 3 s / 80 ms limits read 3000 / 80 ms; 76.66 samples/s."""
    text = ("Mean First Token latency (ns)               : 165236054\n"
            "99.00 percentile first token latency (ns)   : 337691935\n"
            "Mean Time per Output Token (ns)               : 45722314\n"
            "99.00 percentile time to output token (ns)   : 52707923\n"
            "ttft_latency (ns): 3000000000\ntpot_latency (ns): 80000000\n")
    row = {}
    MLPERF._fill_scenario(row, "Server", MLPERF.summary_fields(text), 76.66)
    assert (row["tpot_ms"], row["ttft_ms"], row["tpot_p99_ms"]) == ("45.722", "165.236", "52.708")
    assert (row["ttft_limit_ms"], row["tpot_limit_ms"], row["request_rate_per_s"]) == \
        ("3000", "80", "76.66")
    old = MLPERF.summary_fields(text.replace("Mean Time per Output", "Mean Time to Output"))
    row_v51 = {}
    MLPERF._fill_scenario(row_v51, "Server", old, 76.66)
    assert row_v51["tpot_ms"] == "45.722"


# ---- InferenceX run artifacts ------------------------------------------------------------------


def _record(**fields) -> dict:
    base = {"hw": "h100", "conc": 16, "image": "vllm/vllm-openai:v0.13.0",
            "model": "openai/gpt-oss-120b", "framework": "vllm", "precision": "fp4",
            "spec_decoding": "none", "disagg": False, "isl": 1024, "osl": 8192, "tp": 2,
            "ep": 1, "dp_attention": "false", "output_tput_per_gpu": 1234.5678,
            "median_intvty": 80.0, "mean_tpot": 0.0125, "median_tpot": 0.012,
            "p99_tpot": 0.02, "mean_ttft": 0.25, "median_ttft": 0.2, "p99_ttft": 1.5}
    return {**base, **fields}


def test_gpt_oss_hopper_row_by_hand():
    """H100 vLLM, TP2, concurrency 16: 160 requests; mean TPOT 0.0125 s = 12.5000 ms, mean TTFT
    0.25 s = 250.00 ms; 1,234.5678 tok/s per TP GPU × 2 = 2,469.1 tok/s in all; MXFP4 experts as
    Marlin W4A16 with BF16 attention and KV (Hopper)."""
    row = RUNS.row_of(_record(), "123", "abc")
    assert (row["model"], row["gpu"], row["framework"], row["framework_version"]) == \
        ("gpt-oss-120b", "H100-SXM", "vLLM", "v0.13.0")
    assert (row["requests"], row["tpot_ms"], row["ttft_ms"]) == ("160", "12.5000", "250.00")
    assert (row["tpot_stat"], row["ttft_stat"], row["num_gpus"]) == ("mean", "mean", "2")
    assert row["total_output_tokens_per_s"] == "2469.1"
    assert (row["precision"], row["moe_precision"], row["kv_precision"]) == \
        ("bf16", "w4a16", "bf16")
    assert "actions/runs/123" in row["source_url"]


def test_gpt_oss_blackwell_formats_and_deepseek_names():
    row = RUNS.row_of(_record(hw="b200-trt", framework="trt"), "1", "c")
    assert (row["gpu"], row["framework"], row["moe_precision"], row["kv_precision"]) == \
        ("B200", "TensorRT-LLM", "mxfp4", "fp8")
    assert RUNS.model_of("nvidia/DeepSeek-R1-0528-FP4-V2") == "DeepSeek-R1-0528"
    assert RUNS.model_of("deepseek-ai/DeepSeek-R1") == "DeepSeek-R1"
    assert RUNS.model_of("amd/DeepSeek-R1-0528-MXFP4-Preview") is None
    assert RUNS.row_of(_record(hw="mi355x"), "1", "c") is None
    assert RUNS.row_of(_record(spec_decoding="mtp"), "1", "c") is None


def test_disaggregated_row_pools_by_hand():
    """1 prefill worker at TP4 (EP4, attention DP) and 2 decode workers at TP8 (EP8, no DP):
    1 × 4 + 2 × 8 = 20 GPUs; the row's tp/ep are the decode workers'."""
    record = _record(hw="gb200", framework="dynamo-trt", disagg=True, prefill_num_workers=1,
                     prefill_tp=4, prefill_ep=4, prefill_dp_attention=True,
                     decode_num_workers=2, decode_tp=8, decode_ep=8,
                     decode_dp_attention=False, num_prefill_gpu=4, num_decode_gpu=16)
    row = RUNS.row_of(record, "9", "c")
    assert (row["mode"], row["num_gpus"], row["tp"], row["ep"]) == ("disagg", "20", "8", "8")
    assert row["prefill_config"] == "1x(tp4,ep4,dp_attn=True)"
    assert row["decode_config"] == "2x(tp8,ep8,dp_attn=False)"


def test_disaggregated_record_with_placeholder_pools_is_dropped():
    """dynamo-sglang records say TP 1 for 2 prefill workers on 16 GPUs: 2 × 1 ≠ 16, so the pools
    are not stated and the record gives no row."""
    record = _record(hw="gb200", framework="dynamo-sglang", model="deepseek-ai/DeepSeek-R1",
                     precision="fp8", disagg=True, prefill_num_workers=2, prefill_tp=1,
                     prefill_ep=1, prefill_dp_attention="true", decode_num_workers=1,
                     decode_tp=1, decode_ep=1, decode_dp_attention="true",
                     num_prefill_gpu=16, num_decode_gpu=32)
    assert not RUNS.pools_stated(record)
    assert RUNS.row_of(record, "9", "c") is None


def test_existing_runs_are_read_from_source_urls(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("source_url\nhttps://github.com/SemiAnalysisAI/InferenceX/actions/runs/42/"
                    "attempts/1\nhttps://x/actions/runs/7 (record)\n", encoding="utf-8")
    assert RUNS.existing_runs((path,)) == {"42", "7"}


# ---- format pairs ------------------------------------------------------------------------------


def test_inferencex_pairs_join_engine_names_across_files(tmp_path, monkeypatch):
    """An fp4 run named `sglang` in one file and two fp8 runs named `SGLang` in another are one
    configuration: the fp8 side is the median of TPOT 20 and 30 ms, 25.0000 over 2 runs."""
    schema = serving_script("schema")
    def row(**fields):
        return {**schema.blank_row(), "model": "DeepSeek-R1-0528", "gpu": "B200", "tp": "8",
                "ep": "8", "isl": "1024", "osl": "1024", "concurrency": "4", "num_gpus": "8",
                "source_kind": "inferencex", "ttft_ms": "100", "output_tokens_per_s_per_gpu":
                "50", **fields}
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    for path, rows in ((old, [row(framework="sglang", precision="fp4", tpot_ms="15")]),
                       (new, [row(framework="SGLang", precision="fp8", tpot_ms="20"),
                              row(framework="SGLang", precision="fp8", tpot_ms="30")])):
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=schema.COLUMNS)
            w.writeheader()
            w.writerows(rows)
    monkeypatch.setattr(PAIRS, "SOURCES", (old, new))
    (pair,) = PAIRS.inferencex_pairs()
    assert (pair["framework"], pair["tpot_ms_a"], pair["tpot_ms_b"], pair["runs_b"]) == \
        ("sglang", "15.0000", "25.0000", "2")


# ---- TensorRT-LLM performance overview v0.14 -----------------------------------------------------

V0_14_PAGE = """\
| | | **GPU** | **H200 141GB HBM3** | **H100 80GB HBM3** | **H100 80GB HBM3** | **L40S** |
| | | **Precision** | **FP8** | **FP8** | **FP16** | **FP8** |
| **Model** | **Input/Output Lengths** | **TP Size** | | | | |
| LLaMA v3.1 70B | 1000/1000 | 2 | 4600.9616 | 4116.4444 | 785.4931 | |
| | | 4 | 7607.5304 | 6932.8808 | 3774.676 | 1161.4814 |
| LLaMA v3.1 8B | 128/128 | 1 | 27778.8885 | | 15571.6549 | 8639.7933 |

*TP stands for Tensor Parallelism*
"""


def test_perf_overview_v0_14_reader_by_hand():
    """Catalog columns only (L40S left out), the model and ISL/OSL carried down: 3 + 3 + 2 = 8
    rows; Llama-3.1-70B H100 FP16 at TP4 is 3,774.676 / 4 = 943.669 tok/s per GPU over the page's
    3,000 requests at 1000/1000, with an FP16 KV cache."""
    module = serving_script("extract_trtllm_perf_overview_v0_14")
    rows = module.throughput_rows(V0_14_PAGE.splitlines())
    assert len(rows) == 8
    (fp16_tp4,) = [r for r in rows if r["precision"] == "fp16" and r["tp"] == "4"]
    assert (fp16_tp4["model"], fp16_tp4["gpu"], fp16_tp4["isl"], fp16_tp4["osl"]) == \
        ("Llama-3.1-70B", "H100-SXM", "1000", "1000")
    assert (fp16_tp4["output_tokens_per_s_per_gpu"], fp16_tp4["requests"],
            fp16_tp4["kv_precision"]) == ("943.669", "3000", "fp16")
    assert {r["model"] for r in rows if r["isl"] == "128"} == {"Llama-3.1-8B-Instruct"}


def test_fp8_fp16_pairs_by_hand(tmp_path):
    """From the page above: H100 has both formats at Llama-3.1-70B TP2 and TP4 (8B's H100 FP8
    cell is empty): 2 pairs, FP8 side a; TP2's tokens/s/GPU 4,116.4444/2 = 2,058.2222 vs
    785.4931/2 = 392.7466 (the rows keep 3 decimals, 2,058.222 and 392.747; a pair side's median
    writes 4)."""
    module = serving_script("extract_trtllm_perf_overview_v0_14")
    schema = serving_script("schema")
    path = tmp_path / "v0_14.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=schema.COLUMNS)
        w.writeheader()
        w.writerows(module.throughput_rows(V0_14_PAGE.splitlines()))
    pairs = PAIRS.perf_overview_pairs(path)
    assert [p["tp"] for p in pairs] == ["2", "4"]
    tp2 = pairs[0]
    assert (tp2["format_a"], tp2["format_b"], tp2["field"], tp2["requests"]) == \
        ("fp8", "fp16", "precision", "3000")
    assert (tp2["output_tokens_per_s_per_gpu_a"], tp2["output_tokens_per_s_per_gpu_b"]) == \
        ("2058.2220", "392.7470")


def test_every_extractor_writes_the_schemas_columns(tmp_path, capsys):
    """`schema.write_rows`, which every extractor of the grown set ends with: the header is
    `COLUMNS` in order, each row under it, and one line names the count and the file."""
    schema = serving_script("schema")
    row = {**schema.blank_row(), "model": "Llama-3.1-8B", "tpot_ms": "7.5"}
    path = tmp_path / "rows.csv"
    schema.write_rows(path, [row, row])
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == schema.COLUMNS
        assert list(reader) == [row, row]
    assert capsys.readouterr().out == f"2 rows -> {path}\n"


# ---- ML.ENERGY Leaderboard v3 (FP8 vs BF16 pairs) ------------------------------------------------

ML_ENERGY = serving_script("extract_ml_energy")


def _ml_energy_doc(model_id: str, precision: str, configs: list[tuple]) -> dict:
    return {"model_id": model_id, "task": "gpqa", "weight_precision": precision,
            "configurations": [
                {"gpu_model": gpu, "num_gpus": gpus, "max_num_seqs": seqs,
                 "parallelization": {"tensor_parallel": 1, "expert_parallel": gpus,
                                     "data_parallel": 1},
                 "avg_batch_size": seqs - 0.01, "avg_output_len": out, "median_itl_ms": itl,
                 "p90_itl_ms": itl, "p95_itl_ms": itl, "p99_itl_ms": itl,
                 "output_throughput_tokens_per_sec": tps}
                for gpu, gpus, seqs, itl, tps, out in configs]}


def test_ml_energy_pairs_by_hand(tmp_path):
    """FP8 on H100 ×8 at 8 and 16 sequences and B200 ×2 at 8; BF16 on H100 ×8 at 8 and B200 ×4
    at 8: only H100 ×8 at 8 is in both, 1 pair. FP8 side a: TPOT 25.5 ms, 40 tok/s over 8 GPUs =
    5 per GPU; BF16 20 ms, 48/8 = 6. The leaderboard's `EP 8` is vLLM's TP 8 with expert
    parallelism: tp = ep = 8; no ISL, the batch cap 8 in `max_batch` and `concurrency`."""
    fp8 = ML_ENERGY.records(_ml_energy_doc("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8", "fp8", [
        ("H100", 8, 8, 25.5, 40.0, 9000.0), ("H100", 8, 16, 27.0, 70.0, 9100.0),
        ("B200", 2, 8, 30.0, 30.0, 9050.0)]), "fp8.json")
    bf16 = ML_ENERGY.records(_ml_energy_doc("Qwen/Qwen3-235B-A22B-Thinking-2507", "bfloat16", [
        ("H100", 8, 8, 20.0, 48.0, 8900.0), ("B200", 4, 8, 18.0, 50.0, 8800.0)]), "bf16.json")
    assert [(r["gpu"], r["tp"], r["ep"]) for r in bf16] == [("B200", "4", "4"),
                                                            ("H100-SXM", "8", "8")]
    path = tmp_path / "ml_energy.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=ML_ENERGY.COLUMNS)
        w.writeheader()
        w.writerows(fp8 + bf16)
    (pair,) = PAIRS.ml_energy_pairs(path)
    assert (pair["model"], pair["gpu"], pair["tp"], pair["ep"], pair["concurrency"],
            pair["max_batch"], pair["isl"], pair["kv_precision"]) == \
        ("Qwen3-235B-A22B", "H100-SXM", "8", "8", "8", "8", "", "bf16")
    assert (pair["format_a"], pair["tpot_ms_a"], pair["output_tokens_per_s_per_gpu_a"]) == \
        ("fp8_block", "25.5000", "5.0000")  # Qwen's -FP8 checkpoint is block-scaled
    assert (pair["format_b"], pair["tpot_ms_b"], pair["output_tokens_per_s_per_gpu_b"]) == \
        ("bf16", "20.0000", "6.0000")


def test_ml_energy_bad_git_dir_is_one_line_and_exit_2(tmp_path, capsys):
    """A folder that is no snapshot of the leaderboard: one line naming `GIT_DIR`, exit 2, no
    file written."""
    out = tmp_path / "out.csv"
    assert ML_ENERGY.main([str(tmp_path), str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`GIT_DIR`" in err[0]
    assert not out.exists()
