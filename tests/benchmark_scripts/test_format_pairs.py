"""tests/benchmarks/format_pairs.py: the format pairs scored alone, per group and per model."""

import csv
import json

import pytest

from tests.benchmarks.format_pairs import main, measured_ratios, model_groups
from tests.benchmarks.serving.config import FORMAT_PAIRS_CSV


def test_model_groups_split_the_figures_by_model_by_hand():
    """Model m1 has two TPOT pairs (model 0.7 vs measured 0.8, 1.1 vs 0.9): the first agrees on
    the faster format (both < 1), the second does not (1.1 > 1 > 0.9), so 50 %; |errors| 0.1
    and 0.2, median 0.15. Model m2 one pair (0.9 vs 0.95): agrees, |error| 0.05."""
    lines = [{"pair": "m1 B200 sglang tp8 1024/1024 c4 fp4/fp8", "tpot": (0.7, 0.8)},
             {"pair": "m1 B200 sglang tp8 1024/1024 c8 fp4/fp8", "tpot": (1.1, 0.9)},
             {"pair": "m2 H100 vllm tp1 1024/1024 c8 fp8/bf16", "tpot": (0.9, 0.95)}]
    out = model_groups(lines)
    assert sorted(out) == ["m1", "m2"]
    assert out["m1"]["tpot"]["faster_agree_frac"] == pytest.approx(0.5)
    assert out["m1"]["tpot"]["median_abs_ratio_error"] == pytest.approx(0.15)
    assert out["m2"]["tpot"]["median_abs_ratio_error"] == pytest.approx(0.05)
    assert out["m2"]["tokens_per_s_per_gpu"]["pairs"] == 0


def test_one_real_pair_is_scored_and_grouped(tmp_path, capsys):
    """The first row of format_pairs.csv (an InferenceX DeepSeek-R1-0528 NVFP4/FP8 pair on
    B200) alone: one TPOT pair and one tokens/s pair, in its source's group and its model's."""
    with FORMAT_PAIRS_CSV.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        first = next(reader)
    path = tmp_path / "one.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(first))
        writer.writeheader()
        writer.writerow(first)
    assert main(["--csv", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["all"]["tpot"]["pairs"] == 1
    assert list(doc["models"]) == [first["model"]]
    assert list(doc["groups"]) == [f"{first['source_kind']} precision fp4/fp8"]


def test_missing_csv_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--csv", str(tmp_path / "absent.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`--csv`" in err[0]


def test_measured_ratios_keep_unscored_pairs_by_hand():
    """Two pairs of one group, one without tokens/s: TPOT ratios 30/40 = 0.75 and 22/20 = 1.1;
    tokens/s 12/10 = 1.2 from the first only. No ISL needed: nothing is priced."""
    pairs = [{"source_kind": "s", "field": "precision", "format_a": "fp8", "format_b": "bf16",
              "tpot_ms_a": "30", "tpot_ms_b": "40", "output_tokens_per_s_per_gpu_a": "12",
              "output_tokens_per_s_per_gpu_b": "10"},
             {"source_kind": "s", "field": "precision", "format_a": "fp8", "format_b": "bf16",
              "tpot_ms_a": "22", "tpot_ms_b": "20", "output_tokens_per_s_per_gpu_a": "",
              "output_tokens_per_s_per_gpu_b": ""}]
    out = measured_ratios(pairs)["s precision fp8/bf16"]
    assert out["tpot"] == pytest.approx([0.75, 1.1])
    assert out["tokens_per_s_per_gpu"] == pytest.approx([1.2])
