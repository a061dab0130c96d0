"""The attention-DP balancer and the benchmark-TTFT statistics as users set and read them:
`evaluate --adp-balance-timeout`, the `--batch` column `adp_balance_timeout_steps`, the study
workload's `adp_balance_timeout_steps`, and `benchmark_ttft_ms` (mean) beside
`benchmark_ttft_median_ms` in `evaluate --json` and `--batch`."""

import csv
import io
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from cost_model.deployment import make_deployment, make_workload
from cost_model.evaluate import evaluate_points
from cost_model.hardware import get_hardware
from cost_model.hf_config import load_architecture
from search.cli.main import main
from search.study.errors import SpecError
from search.study.spec import spec_from_dict

from tests.data_paths import MODEL_CONFIGS

QWEN_MOE = MODEL_CONFIGS / "Qwen3-30B-A3B.json"
STUDIES = Path(__file__).resolve().parents[3] / "studies"
DEP8 = ("--tp", "1", "--dp", "8", "--ep", "8")


def _doc(capsys, *argv) -> dict:
    assert main(["evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _tpot_ms(balance: int, concurrency: float = 256.0) -> float:
    """The cost model's own TPOT for Qwen3-30B-A3B DEP8 on H200 at 8k/1k."""
    p = evaluate_points([load_architecture(QWEN_MOE)], [make_deployment(tp=1, dp=8, ep=8)],
                        get_hardware("h200"),
                        make_workload(isl_tokens=8192, osl_tokens=1024,
                                      adp_balance_timeout_steps=balance),
                        np.array([concurrency]))
    return float(p.tpot_s[0, 0]) * 1e3


def test_the_balancer_flag_reaches_the_workload(capsys):
    """`--adp-balance-timeout 60` is the workload's timeout (in the JSON) and prices the steps
    as the balanced schedule: the groups' chunks land in the same steps."""
    args = (str(QWEN_MOE), "--hardware", "h200", *DEP8, "--isl", "8192", "--osl", "1024",
            "--concurrency", "256")
    off, on = _doc(capsys, *args), _doc(capsys, *args, "--adp-balance-timeout", "60")
    assert off["workload"]["adp_balance_timeout_steps"] == 0
    assert on["workload"]["adp_balance_timeout_steps"] == 60
    assert off["points"][0]["tpot_ms"] == pytest.approx(_tpot_ms(0), rel=1e-9)
    assert on["points"][0]["tpot_ms"] == pytest.approx(_tpot_ms(60), rel=1e-9)
    assert on["points"][0]["tpot_ms"] < off["points"][0]["tpot_ms"]


def test_a_negative_timeout_is_bad_input(capsys):
    code = main(["evaluate", str(QWEN_MOE), "--hardware", "h200", "--adp-balance-timeout", "-1"])
    assert code == 2
    assert "`adp_balance_timeout_steps`" in capsys.readouterr().err


def test_json_points_carry_the_mean_and_the_median_benchmark_ttft(capsys):
    doc = _doc(capsys, str(QWEN_MOE), "--hardware", "h200", "--concurrency", "1", "64")
    for point in doc["points"]:
        assert point["benchmark_ttft_ms"] >= point["benchmark_ttft_median_ms"] > 0


def test_batch_column_sets_the_balancer(tmp_path, capsys):
    """Two rows differing only in `adp_balance_timeout_steps` price as the single evaluations;
    a blank cell takes the flag's value (0), a negative one is reported and skipped."""
    path = tmp_path / "rows.csv"
    path.write_text("model,hardware,tp,ep,dp,isl,osl,concurrency,adp_balance_timeout_steps\n"
                    f"{QWEN_MOE},h200,1,8,8,8192,1024,256,60\n"
                    f"{QWEN_MOE},h200,1,8,8,8192,1024,256,\n"
                    f"{QWEN_MOE},h200,1,8,8,8192,1024,256,-5\n", encoding="utf-8")
    assert main(["evaluate", "--batch", str(path)]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [r["adp_balance_timeout_steps"] for r in rows] == ["60", "0"]
    assert float(rows[0]["tpot_ms"]) == pytest.approx(_tpot_ms(60), rel=1e-5)
    assert float(rows[1]["tpot_ms"]) == pytest.approx(_tpot_ms(0), rel=1e-5)
    assert float(rows[0]["benchmark_ttft_ms"]) >= float(rows[0]["benchmark_ttft_median_ms"])
    assert "line 4" in captured.err and "`adp_balance_timeout_steps`" in captured.err


def test_study_workload_takes_the_balancer():
    """The study spec's workload section (studies/moe-serving-modes-gb300.toml): 0 by default,
    a whole number of steps ≥ 0, refused below."""
    doc = tomllib.loads((STUDIES / "moe-serving-modes-gb300.toml").read_text())
    assert spec_from_dict(doc).workload.adp_balance_timeout_steps == 0
    doc["workload"]["adp_balance_timeout_steps"] = 60
    assert spec_from_dict(doc).workload.adp_balance_timeout_steps == 60
    doc["workload"]["adp_balance_timeout_steps"] = -1
    with pytest.raises(SpecError, match="adp_balance_timeout_steps"):
        spec_from_dict(doc)
