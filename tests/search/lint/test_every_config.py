"""`archscout lint` on every config the repository ships (`tests/data/hf_configs`,
`tests/data/model_configs`), each at its checkpoint's formats on one B200 (the lint default
deployment: TP 1): no offered fix lowers the frontier area (unless it fixes an error, a hard rule)
and none leaves the parameter budget. And the three cases of issue 26 at their own deployments."""

import json
import math

import pytest

import search.cli.main as cli
from cost_model import count_params, load_architecture
from search.lint.support import MAX_PARAM_CHANGE_FRAC
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json")) + sorted(MODEL_CONFIGS.glob("*.json"))


def _lint(capsys, config, *argv) -> tuple[int, dict]:
    code = cli.main(["lint", str(config), "--hardware", "b200", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _offered(finding: dict) -> list[dict]:
    alt = finding["alternative"]
    return [] if alt is None else [alt, *alt.get("others", [])]


def _param_change_frac(config, fix: dict) -> float:
    """|Δ| of the total and the active parameters over the model's (the fix's deltas are
    whole-model counts; the model's counts come from `count_params`)."""
    params = count_params(load_architecture(config))
    return max(abs(fix["params_delta"]) / params.total_params,
               abs(fix["active_params_delta"]) / params.active_params)


def _raises(measured: dict) -> bool:
    before, after = measured["frontier_area"]
    after *= measured.get("frontier_factor", 1.0)
    return after > before if math.isfinite(before) and before > 0 else after > 0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_offered_fix_lowers_the_frontier_or_breaks_the_budget(capsys, config):
    code, doc = _lint(capsys, config)
    assert code == (1 if doc["errors"] else 0)
    for finding in doc["findings"]:
        for fix in _offered(finding):
            assert _param_change_frac(config, fix) <= MAX_PARAM_CHANGE_FRAC, fix["summary"]
            if "measured" in fix and finding["severity"] != "error":
                assert _raises(fix["measured"]), (finding["code"], fix["summary"])
        for withheld in finding["cost"].get("withheld_fixes", []):
            assert withheld["reason"] and withheld["summary"] in finding["message"]


def test_qwen35_moe_tp2_offers_no_32b_fix(capsys):
    """Issue 26: Qwen3.5-35B-A3B at TP 2 on B200 was offered `moe_intermediate_size` 512 → 1024
    (+32.2B parameters, frontier area −12%). Its experts' I∞ stays below the ridge for any width
    within the budget. EP 2 (same parameters) is measured and withheld: with EP = 1 priced on its
    own fused-MoE entry (`[moe.<format>.ep1]`) TP 2 at EP 1 has the larger frontier (EP 2 was the
    fix while one joint fit, mostly of EP > 1 rows, over-priced EP = 1)."""
    _, doc = _lint(capsys, HF_CONFIGS / "Qwen3.5-35B-A3B.json", "--tp", "2")
    g1 = next(f for f in doc["findings"] if f["cost"].get("gemm") == "moe/experts_down")
    ep2 = next(w for w in g1["cost"]["withheld_fixes"] if w["deployment"] == {"ep": [1, 2]})
    assert ep2["reason"] == "no larger frontier area"
    assert ep2["measured"]["frontier_area_change_frac"] < 0
    assert all(abs(f["params_delta"]) < 1e9 for d in doc["findings"] for f in _offered(d))


def test_gpt_oss_120b_tp4_errors_have_fixes(capsys):
    """gpt-oss-120b at TP 4: `hidden_size` 2880 = 22.5·128 is misaligned on any deployment:
    2944 or 2816 (±64, ±2.2% of the parameters) align it; the experts' 2880/4 = 720 needs
    3072 (+6.5% of the parameters, over the budget) or 2560 (−10.9%) on the same split, while
    EP 2 (2880 → 1440 a GPU) with 2816 (1408 = 11·128) is within it: the fix that exists."""
    code, doc = _lint(capsys, HF_CONFIGS / "gpt-oss-120b.json", "--tp", "4")
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert code == 1 and len(errors) == 2 and all(f["alternative"] for f in errors)
    hidden = next(f for f in errors if f["cost"]["dim"] == "`hidden_size`")
    assert [f["architecture"]["hidden_size"][1] for f in _offered(hidden)] == [2944, 2816]
    experts = next(f for f in errors if "moe_intermediate_size" in f["cost"]["dim"])
    assert experts["alternative"]["architecture"]["moe_intermediate_size"] == [2880, 2816]
    assert experts["alternative"]["deployment"] == {"ep": [1, 2]}
    assert [w["architecture"]["moe_intermediate_size"][1]
            for w in experts["cost"]["withheld_fixes"]] == [3072, 2560]
    assert not any(f["code"] == "bf16-lm-head" for f in doc["findings"])  # BF16 layers


def test_deepseek_v3_has_no_pipeline_finding_without_pp(capsys):
    """DeepSeek-V3 at TP 8, PP 1 was told to add 4 layers (+46B) for a PP 8 split nobody asked
    for; at PP 1 there are no stages to balance."""
    _, doc = _lint(capsys, MODEL_CONFIGS / "DeepSeek-V3.json", "--tp", "8")
    assert not [f for f in doc["findings"] if f["guideline"] == 6 and
                f["code"] == "pipeline-imbalance"]
    assert all(_param_change_frac(MODEL_CONFIGS / "DeepSeek-V3.json", fix) <= 0.05
               for f in doc["findings"] for fix in _offered(f))


def test_max_param_change_out_of_range_is_exit_2(capsys):
    assert cli.main(["lint", str(MODEL_CONFIGS / "Llama-3.1-8B.json"), "--hardware", "b200",
                     "--max-param-change", "1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "`max_param_change` (1.5)" in err
