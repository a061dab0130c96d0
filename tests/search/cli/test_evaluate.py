"""`archscout evaluate` with the serving modes: Helix (--kvp), speculative decoding (--mtp,
--acceptance), disaggregated pools (--serving disaggregated, --prefill-*, --ratio)."""

import json

import pytest

from search.cli.main import main

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
DEEPSEEK = str(MODEL_CONFIGS / "DeepSeek-V3.json")


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
