"""tests/benchmarks/serving/ (validate_serving.py): the benchmark-run formulas its comparison
applies."""

import pytest

from tests.benchmarks.serving.ranking import pair_kind, pair_kinds  # noqa: E402
from tests.benchmarks.serving.config import PERF_OVERVIEW
from tests.benchmarks.serving.scenarios import (
    benchmark_drain_factor,
    offline_requests,
    offline_run_tokens_per_s,
)


def test_offline_run_over_full_and_last_waves_by_hand():
    """3,000 requests, 2,048 at a time: one full wave at 10,000 tok/s and a last one of
    3,000 − 2,048 = 952 at 6,000 tok/s take 2,048/10,000 + 952/6,000 = 0.2048 + 0.1586667
    = 0.3634667 s per output token of each request, so the run serves 3,000/0.3634667
    = 8,253.85 tok/s. Whole waves only (4,096 = 2 × 2,048): the wave's rate, 10,000."""
    assert offline_run_tokens_per_s(3000, 2048, 10_000.0, 6_000.0) == pytest.approx(8253.85,
                                                                                  rel=1e-6)
    assert offline_run_tokens_per_s(4096, 2048, 10_000.0, 0.0) == pytest.approx(10_000.0)


def test_offline_requests_come_from_the_performance_overview_only():
    """The performance overview's 128/4096 runs had 1,500 requests; other sources state none."""
    row = {"source_kind": PERF_OVERVIEW, "isl": "128.0", "osl": "4096.0"}
    assert offline_requests(row) == 1500
    assert offline_requests({**row, "source_kind": "inferencex"}) is None
    assert offline_requests({**row, "osl": "777"}) is None


def test_inferencex_drain_factor_by_hand():
    """C = 4: CV = (1 − 0.8)/√12 / 0.9 = 0.0641500, over √10 prompts per slot 0.0202860;
    z_4 = Φ⁻¹(3.625/4.25) = Φ⁻¹(0.852941) = 1.049131, so 1 + 0.0202860 · 1.049131 = 1.021283.
    One slot: no slower slot to wait for, 1."""
    assert benchmark_drain_factor(4) == pytest.approx(1.021283, rel=1e-6)
    assert benchmark_drain_factor(1) == 1.0


# ---- the grown development set: readers and scorers (tests/data/serving/) ------------------


import numpy as np  # noqa: E402

from collections import Counter  # noqa: E402

from tests.benchmarks.serving.config import DEFAULT_DATA_DIR  # noqa: E402
from tests.benchmarks.serving.metrics import model_cap  # noqa: E402
from tests.benchmarks.serving.pairs import format_pair_ratio_errors, pair_groups  # noqa: E402
from tests.benchmarks.serving.rows import (  # noqa: E402
    Result,
    Skip,
    _run_settings,
    _statistic,
    engine_of,
    little_concurrency,
)
from tests.benchmarks.serving.scenarios import (  # noqa: E402
    evaluate_row,
    offline_requests as _offline_requests,
    sla_best_index,
)
from tests.benchmarks.serving.sources import scored_totals, source_table  # noqa: E402
from tests.data_paths import serving_script  # noqa: E402




def test_little_concurrency_by_hand():
    """2 req/s, mean TTFT 62 ms, mean TPOT 21 ms, 256 output tokens: each request lasts
    0.062 + 255 × 0.021 = 5.417 s, so 2 × 5.417 = 10.834 are in flight."""
    assert little_concurrency(2.0, 0.062, 0.021, 256) == pytest.approx(10.834)


def test_sla_picks_the_largest_throughput_within_both_limits():
    """Limits TTFT 2 s, TPOT 80 ms: points 0-2 meet both (the 4th has TTFT 3 s and TPOT 90 ms);
    the largest of their tokens/s (100, 200, 300) is point 2; with point 2 not allowed (memory),
    point 1; with a 10 ms TPOT limit none qualifies."""
    tokens = np.array([100.0, 200.0, 300.0, 400.0])
    ttft, tpot = np.array([0.1, 0.5, 1.5, 3.0]), np.array([0.02, 0.04, 0.06, 0.09])
    allowed = np.ones(4, dtype=bool)
    assert sla_best_index(tokens, ttft, tpot, allowed, 2.0, 0.08) == 2
    assert sla_best_index(tokens, ttft, tpot, allowed & (np.arange(4) != 2), 2.0, 0.08) == 1
    assert sla_best_index(tokens, ttft, tpot, allowed, 2.0, 0.01) is None


def test_model_cap_by_hand():
    """Counts 674, 100, 100, 100 at 25%: K = 100 holds (100 ≤ 0.25 × (100 + 300) = 100),
    K = 101 does not (0.25 × (101 + 300) = 100.25); four equal models need no cut (K = 10)."""
    assert model_cap([674, 100, 100, 100], 0.25) == 100
    assert model_cap([10, 10, 10, 10], 0.25) == 10


def test_format_pair_figures_by_hand():
    """Measured 0.7, 0.9, 1.02, 1.2: three outside ±3%; the model's 0.8 and 1.01 pick the same
    faster format as 0.7 and 1.2, its 1.1 not 0.9's: 2/3. |errors| 0.1, 0.2, 0.07, 0.19:
    median (0.1 + 0.19)/2 = 0.145."""
    out = format_pair_ratio_errors(np.array([0.8, 1.1, 0.95, 1.01]),
                                   np.array([0.7, 0.9, 1.02, 1.2]))
    assert out["decided"] == 3
    assert out["faster_agree_frac"] == pytest.approx(2 / 3)
    assert out["median_abs_ratio_error"] == pytest.approx(0.145)


def test_statistic_from_columns_or_derived_fields():
    inferencex = {"derived_fields": "tpot_ms=median_tpot*1000; ttft_ms=median_ttft*1000"}
    assert _statistic(inferencex) == {"tpot": "median", "ttft": "median"}
    assert _statistic({**inferencex, "tpot_stat": "mean"})["tpot"] == "mean"
    assert _statistic({}) == {"tpot": "unstated", "ttft": "unstated"}


def _row(**fields) -> dict[str, str]:
    schema = serving_script("schema")
    return {**schema.blank_row(), "model": "Llama-3.1-8B-Instruct", "gpu": "H200",
            "num_gpus": "1", "total_gpus": "1", "tp": "1", "framework": "TensorRT-LLM",
            "precision": "fp8", "isl": "467", "osl": "256", **fields}


def test_poisson_rate_row_is_scored_at_its_little_law_concurrency():
    """The v0.14 online table's Llama-3.1-8B H200 TP1 row at QPS 2 (2 req/s, OSL 256): scored at
    the concurrency L whose modelled completion rate is 2 req/s (Little's law's fixed point), so
    the predicted output tokens/s/GPU there is 2 × 256 = 512 (to the interpolation between the
    sweep's points), which is why the measured one (the rate × OSL) is not scored; its mean
    TTFT is the Poisson client's (cost_model.arrival_queue) and is scored."""
    row = _row(scenario="poisson_rate", request_rate_per_s="2", ttft_ms="21", tpot_ms="6",
               ttft_stat="mean", tpot_stat="mean", output_tokens_per_s_per_gpu="504",
               source_kind="trtllm_online_serving_v0_14")
    result = evaluate_row(row, DEFAULT_DATA_DIR, {})
    assert result.regime == "rate"
    assert result.predicted["tokens_per_s_per_gpu"] == pytest.approx(512.0, rel=0.02)
    assert 1.0 < result.concurrency < 8.0
    assert result.error_frac["tokens_per_s_per_gpu"] is None
    assert result.error_frac["ttft"] is not None and result.error_frac["tpot"] is not None
    assert result.predicted["ttft_p99"] >= result.predicted["ttft"] * 0.99
    assert result.statistic == {"tpot": "mean", "ttft": "mean"}
    with pytest.raises(Skip, match="above the model's capacity"):
        evaluate_row({**row, "request_rate_per_s": "1000000"}, DEFAULT_DATA_DIR, {})


def test_offline_row_runs_its_stated_requests():
    row = _row(scenario="offline", requests="500", output_tokens_per_s_per_gpu="9189")
    assert _offline_requests(row) == 500
    assert _offline_requests({**row, "scenario": "concurrency"}) is None


def test_sla_row_meets_its_limits_and_a_row_without_isl_is_left_out():
    """An MLPerf-style server row scored at a synthetic ISL: the chosen point's TPOT and TTFT
    are within the limits; a row without ISL (MLPerf's gpt-oss-120b: no published mean input
    length) is skipped, saying why."""
    row = _row(scenario="server", ttft_limit_ms="2000", tpot_limit_ms="100",
               output_tokens_per_s_per_gpu="5000")
    result = evaluate_row(row, DEFAULT_DATA_DIR, {})
    assert result.regime == "sla"
    assert result.predicted["tpot"] <= 0.100
    row = {**row, "request_rate_per_s": "5", "ttft_ms": "50", "ttft_stat": "mean"}
    result = evaluate_row(row, DEFAULT_DATA_DIR, {})
    assert result.error_frac["ttft"] is not None  # the mean TTFT at the row's rate, scored
    with pytest.raises(Skip, match="mean input length"):
        evaluate_row({**row, "isl": ""}, DEFAULT_DATA_DIR, {})


def test_perf_overview_reader_by_hand(tmp_path):
    """One throughput row and two online rows (a rate and an INF one) of the v0.17 page's
    layout: H200 TP2 FP8 6,823.01 tok/s at 128/128 is 3,411.505 per GPU over the page's 30,000
    requests; the online QPS 4 row at 3.5 req/s is a poisson_rate row, the INF row an offline run
    of the table's 500 requests."""
    page = tmp_path / "page.md"
    page.write_text(
        "| Throughput (tokens / sec) | | GPU | H200 141GB HBM3 | L40S |\n"
        "|:--|:--|:--|:--|:--|\n"
        "| | Precision | | FP8 | FP8 |\n"
        "| Model | Tensor Model Parallel Size | Runtime Input/Output Lengths | | |\n"
        "| LLaMA v3.1 70B | 2 | 128, 128 | 6823.01 | 99 |\n\n"
        "| **Model** | **GPU** | **TP** | **Input Length** | **Output Length** | **QPS** | "
        "**Tput(req/s)** | **Mean TTFT(ms)** | **Mean ITL(ms)** | **Total Token Tput (tok/s)** | "
        "**Output Tput (tok/s)** |\n"
        "|LLaMA 3.1 8B|H100 80GB HBM3|1|467|256|4|3.5|24|9|2624|929|\n"
        "||||||INF|37|3335|39|26614|9420|\n", encoding="utf-8")
    module = serving_script("extract_trtllm_perf_overview")
    lines = page.read_text(encoding="utf-8").splitlines()
    (offline,) = module.throughput_rows(lines)
    assert offline["output_tokens_per_s_per_gpu"] == "3411.505"
    assert offline["requests"] == "30000" and offline["kv_precision"] == "fp8"
    rate, inf = module.online_rows(lines)
    assert (rate["scenario"], rate["request_rate_per_s"], rate["tpot_ms"]) == \
        ("poisson_rate", "3.5", "9")
    assert (inf["scenario"], inf["requests"], inf["gpu"]) == ("offline", "500", "H100-SXM")


def test_grown_row_without_parallelism_is_left_out():
    """An MLPerf result whose submission has no launch config states no TP: not scored at TP1."""
    with pytest.raises(Skip, match="parallelism not stated"):
        evaluate_row(_row(scenario="offline", tp="", num_gpus="",
                          output_tokens_per_s_per_gpu="5000"), DEFAULT_DATA_DIR, {})


@pytest.mark.parametrize(("framework", "engine"), [
    ("LLM-D v0.5.0 ,OpenShift 4.21, RHEL 9.6 (MLPerf)", "vllm"),
    ("TensorRT-LLM (MLPerf NVIDIA harness)", "trtllm"), ("dynamo-sglang", "sglang"),
    ("dynamo-trt", "trtllm"), ("vLLM", "vllm")],
    ids=["llm-d", "mlperf-trtllm", "dynamo-sglang", "dynamo-trt", "vllm"])
def test_engine_of_framework(framework, engine):
    assert engine_of({"framework": framework}) == engine


def test_inferencex_trtllm_balancer_timeout_by_model():
    """InferenceX's DeepSeek-R1 script sets timeout_iters 60; gpt-oss-120b's leaves TensorRT-LLM's
    default, 50; without attention DP no balancer."""
    row = {"source_kind": "inferencex", "gpu": "B200", "attention_dp": "True",
           "concurrency": "64", "model": "DeepSeek-R1-0528"}
    assert _run_settings(row, "trtllm") == {"adp_balance_timeout_steps": 60}
    assert _run_settings({**row, "model": "gpt-oss-120b"}, "trtllm") == \
        {"adp_balance_timeout_steps": 50}
    assert _run_settings({**row, "attention_dp": "False"}, "trtllm") == {}


def test_source_table_counts_scored_and_skipped_rows_per_source():
    """Two rows of source s (one scored on B200, one skipped for a missing ISL) and one of t:
    s has 2 rows, 1 scored (Llama-3, trtllm, B200), 1 skipped with its reason; t none skipped."""
    rows = [{"source_kind": "s", "model": "Llama-3.1-8B", "framework": "trt", "gpu": "B200"},
            {"source_kind": "s", "model": "Llama-3.1-8B", "framework": "trt", "gpu": "H200"},
            {"source_kind": "t", "model": "gpt-oss-120b", "framework": "vLLM", "gpu": "H100"}]
    scored = [Result("trtllm", "Llama-3.1-8B", "B200", "fixed", False, "tp1", 1, 1, 1.0, {}, {},
                     source_kind="s")]
    table = source_table(rows, scored, Counter({("s", "no ISL"): 1}))
    assert (table["s"]["rows"], table["s"]["scored"], table["s"]["skipped"]) == \
        (2, 1, {"no ISL": 1})
    assert table["s"]["scored_by"]["gpu"] == {"B200": 1}
    assert table["s"]["scored_by"]["family"] == {"Llama-3": 1}
    assert table["t"]["skipped"] == {}


def test_scored_totals_largest_share_by_hand():
    """Models A (3 rows) and B, C, D (1 each): A holds 3/6 = 50%. The 25% cap: K = 1 holds
    (1 ≤ 0.25 × 4 = 1), K = 2 does not (2 > 0.25 × (2 + 3) = 1.25), so every model keeps one row
    and A holds 1/4."""
    def res(model):
        return Result(None, model, "B200", "fixed", False, "tp1", 1, 1, 1.0, {"m": model}, {},
                      source_kind="s")
    totals = scored_totals([res("A"), res("A"), res("A"), res("B"), res("C"), res("D")])
    assert totals["largest_model_share"] == pytest.approx(3 / 6)
    assert totals["largest_model_share_capped"] == pytest.approx(1 / 4)


def test_pair_groups_split_the_figures_by_source_and_formats():
    """Group g1 has two tokens/s pairs (model 1.5 vs measured 2.0, 1.2 vs 1.1): both favour a,
    |errors| 0.5 and 0.1, median 0.3; group g2 one TPOT pair (0.9 vs 0.8) and no tokens/s pair."""
    lines = [{"group": "g1", "tokens_per_s_per_gpu": (1.5, 2.0)},
             {"group": "g1", "tokens_per_s_per_gpu": (1.2, 1.1)},
             {"group": "g2", "tpot": (0.9, 0.8)}]
    groups = pair_groups(lines)
    g1 = groups["g1"]["tokens_per_s_per_gpu"]
    assert (g1["pairs"], g1["faster_agree_frac"]) == (2, 1.0)
    assert g1["median_abs_ratio_error"] == pytest.approx(0.3)
    assert groups["g1"]["tpot"]["pairs"] == 0
    assert groups["g2"]["tpot"]["median_abs_ratio_error"] == pytest.approx(0.1)


def test_pair_kinds_by_hand():
    """A (trtllm TP1) measured 1, predicted 2; B (trtllm TP2) measured 2, predicted 1; C (vLLM
    TP1) measured 1.0, predicted 1.01. A–B: TP differs, ordered wrong with a 2× predicted gap
    (beyond ±3%); A–C: measured within ±3% (left out); B–C: engine and TP differ, ordered wrong
    but the model's gap 1.01/1 is within ±3%."""
    a, b = ("trtllm", "tp1 ep1 pp1 dp1 fp8"), ("trtllm", "tp2 ep1 pp1 dp1 fp8")
    c = ("vllm", "tp1 ep1 pp1 dp1 fp8")
    out = pair_kinds({"g": {a: (2.0, 1.0), b: (1.0, 2.0), c: (1.01, 1.0)}})
    assert out == {"TP": {"pairs": 1, "wrong": 1, "wrong_band": 1},
                   "engine+TP": {"pairs": 1, "wrong": 1, "wrong_band": 0}}
    assert pair_kind(("sglang", "tp1 ep8 pp1 dp8 fp8_block moe-nvfp4"),
                     ("sglang", "tp1 ep8 pp1 dp8 fp8_block")) == "format"
    assert pair_kind(("trtllm", "tp8 ep8 pp1 dp1 fp8_block"),
                     ("trtllm", "1P tp8 ep8 pp1 dp1 fp8_block + 2D tp8 ep8 pp1 dp1 fp8_block")
                     ) == "pools"


@pytest.mark.parametrize("name, expected", [("fp8_block", "fp8_block"), ("fp8", "fp8"),
                                            ("bf16", "bf16")], ids=str)
def test_a_row_naming_block_fp8_keeps_it(name, expected):
    """A Qwen3 MoE row (not DeepSeek, whose `fp8` means its block-scaled checkpoint) that names
    `fp8_block` is priced as block FP8 (Qwen's `-FP8` checkpoints, ML.ENERGY's pairs); a bare
    `fp8` stays per-tensor; BF16 passes through."""
    from cost_model import load_model
    from tests.benchmarks.serving.rows import _formats
    arch = load_model("tests/data/hf_configs/serving_Qwen3-235B-A22B.json").arch
    assert _formats({"precision": name}, arch)["precision"] == expected
