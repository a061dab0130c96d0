"""`archscout evaluate` with the serving modes: Helix (--kvp), speculative decoding (--mtp,
--acceptance), disaggregated pools (--serving disaggregated, --prefill-*, --ratio)."""

import json

import numpy as np
import pytest

from cost_model import (
    evaluate_points, get_hardware, load_architecture, make_deployment, make_workload,
)
from search.cli.main import main
from search.records.documents import BREAKDOWN_PARTS

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
DEEPSEEK = str(MODEL_CONFIGS / "DeepSeek-V3.json")
QWEN3_NEXT = str(HF_CONFIGS / "Qwen3-Next-80B-A3B-Instruct.json")  # 36 Gated DeltaNet + 12 full


def _doc(capsys, *argv):
    assert main(["evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_serving_mode_and_benchmark_ttft_in_the_json(capsys):
    doc = _doc(capsys, LLAMA, "--hardware", "h200", "--concurrency", "1", "16")
    assert doc["serving_mode"] == "aggregated"
    first, busy = doc["points"]
    assert first["benchmark_ttft_ms"] > first["ttft_ms"] > 0
    assert busy["benchmark_ttft_ms"] >= busy["ttft_ms"]


def test_mtp_flags_reach_the_deployment_and_speed_up_decode(capsys):
    plain = _doc(capsys, LLAMA, "--hardware", "h200", "--concurrency", "1")
    mtp = _doc(capsys, LLAMA, "--hardware", "h200", "--concurrency", "1", "--mtp", "2",
               "--acceptance", "0.8")
    assert mtp["deployment"]["spec_tokens"] == 2
    assert mtp["deployment"]["spec_acceptance_frac"] == 0.8
    assert mtp["points"][0]["tpot_ms"] < plain["points"][0]["tpot_ms"]


def test_helix_kvp_multiplies_the_gpus(capsys):
    doc = _doc(capsys, str(HF_CONFIGS / "serving_Llama-3.1-405B-Instruct.json"), "--hardware",
               "gb200", "--tp", "8", "--kvp", "4", "--isl", "200000", "--osl", "1024",
               "--concurrency", "1")
    assert doc["deployment"]["kvp"] == 4 and doc["deployment"]["gpus"] == 32


def test_disaggregated_points_name_their_ratio(capsys):
    doc = _doc(capsys, DEEPSEEK, "--hardware", "h200", "--tp", "8", "--ep", "8", "--precision",
               "fp8_block", "--isl", "8192", "--osl", "1024", "--serving", "disaggregated",
               "--prefill-tp", "1", "--prefill-dp", "8", "--concurrency", "16", "64")
    assert doc["serving_mode"] == "disaggregated"
    assert doc["prefill_deployment"]["dp"] == 8
    for point in doc["points"]:
        assert point["ratio"].endswith("D") and point["kv_transfer_ms"] > 0
    fixed = _doc(capsys, DEEPSEEK, "--hardware", "h200", "--tp", "8", "--ep", "8",
                 "--precision", "fp8_block", "--serving", "disaggregated", "--ratio", "2", "5",
                 "--concurrency", "32")
    assert fixed["points"][0]["ratio"] == "2P5D"


@pytest.mark.parametrize("argv, field", [
    (["--kvp", "0"], "`kvp`"), (["--mtp", "-1"], "`spec_tokens`"),
    (["--acceptance", "1.5"], "`spec_acceptance_frac`"),
])
def test_bad_mode_values_are_one_line(capsys, argv, field):
    assert main(["evaluate", LLAMA, "--hardware", "h200", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


# ---- linear attention as its own part; roofline-costed parts named --------------------------


def test_linear_attention_is_its_own_part_and_attention_keeps_the_rest(capsys):
    """Qwen3-Next on 8× H200 at 32k: attention_ms = attention_s − linear_attention_s of the cost
    model (which counts the linear layers' state updates inside attention_s), linear_attention_ms
    = linear_attention_s, and the five parts still sum to TPOT."""
    argv = (QWEN3_NEXT, "--hardware", "h200", "--tp", "8", "--isl", "32768", "--osl", "1024",
            "--concurrency", "1", "64")
    doc = _doc(capsys, *argv)
    points = evaluate_points([load_architecture(QWEN3_NEXT)], [make_deployment(tp=8)],
                             get_hardware("h200"), make_workload(isl_tokens=32768,
                                                                 osl_tokens=1024),
                             np.array([1.0, 64.0]))
    for j, row in enumerate(doc["points"]):
        parts = row["breakdown_ms"]
        assert tuple(parts) == BREAKDOWN_PARTS
        assert parts["linear_attention"] == pytest.approx(points.linear_attention_s[0, j] * 1e3)
        assert parts["linear_attention"] > 0
        assert parts["attention"] == pytest.approx(
            (points.attention_s[0, j] - points.linear_attention_s[0, j]) * 1e3)
        assert sum(parts.values()) == pytest.approx(row["tpot_ms"], rel=1e-12)


def test_a_model_without_linear_layers_shows_zero_linear_attention(capsys):
    doc = _doc(capsys, LLAMA, "--hardware", "h200")
    assert doc["uncalibrated"] == []
    assert all(r["breakdown_ms"]["linear_attention"] == 0.0 for r in doc["points"])
    for shares in doc["breakdown"].values():
        assert shares["linear_attention"] == 0.0 and sum(shares.values()) == pytest.approx(1.0)


def test_uncalibrated_parts_are_named_in_the_json_and_one_printed_line(capsys):
    assert _doc(capsys, QWEN3_NEXT, "--hardware", "h200", "--tp", "8",
                "--concurrency", "1")["uncalibrated"] == ["linear_attention"]
    assert main(["evaluate", QWEN3_NEXT, "--hardware", "h200", "--tp", "8"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("uncalibrated")]
    assert len(lines) == 1 and "linear_attention" in lines[0] and "roofline" in lines[0]
    assert main(["evaluate", LLAMA, "--hardware", "h200"]) == 0
    assert "uncalibrated" not in capsys.readouterr().out


def test_engine_flag_keys_the_benchmark_ttft_terms(capsys):
    """`--engine` reaches the Workload: the JSON names it, the benchmark TTFT at C = 1 uses
    that engine's per-request overhead (cost_model/data/serving/benchmark.toml) and the steps
    run on that engine's measured kernels (issue 23: `kernels` names them), so the steady TTFT
    and the TPOT change too."""
    argv = (LLAMA, "--hardware", "h200", "--concurrency", "1")
    generic, sglang = _doc(capsys, *argv), _doc(capsys, *argv, "--engine", "sglang")
    assert generic["workload"]["engine"] is None and sglang["workload"]["engine"] == "sglang"
    assert (generic["kernels"]["kernels"], sglang["kernels"]["kernels"]) == ("generic", "sglang")
    a, b = generic["points"][0], sglang["points"][0]
    assert a["ttft_ms"] != b["ttft_ms"] and a["tpot_ms"] != b["tpot_ms"]
    assert a["benchmark_ttft_ms"] != b["benchmark_ttft_ms"]


def test_arrivals_flag_sets_the_benchmark_clients_ttft(capsys):
    """`--arrivals poisson`: the workload says so, each point carries a p99 TTFT (≥ its median),
    the lone request's median TTFT is the closed loop's (an empty prompt queue) and TPOT does not
    change; the closed loop has no p99; an unknown client is refused (exit 2)."""
    argv = (LLAMA, "--hardware", "h200", "--concurrency", "1", "64")
    closed = _doc(capsys, *argv)
    poisson = _doc(capsys, *argv, "--arrivals", "poisson")
    assert poisson["workload"]["arrivals"] == "poisson"
    assert "benchmark_ttft_p99_ms" not in closed["points"][0]
    for point in poisson["points"]:
        assert point["benchmark_ttft_p99_ms"] >= point["benchmark_ttft_median_ms"]
    assert poisson["points"][0]["benchmark_ttft_median_ms"] == pytest.approx(
        closed["points"][0]["benchmark_ttft_median_ms"])
    assert [p["tpot_ms"] for p in poisson["points"]] == [p["tpot_ms"] for p in closed["points"]]
    assert main(["evaluate", *argv, "--arrivals", "bursty"]) == 2
    assert "`--arrivals`" in capsys.readouterr().err
