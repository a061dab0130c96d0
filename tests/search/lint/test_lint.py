"""`archscout lint`: each of the seven guidelines of NVIDIA, AI Model Co-Design (2026) fires on an
architecture built to break it and stays silent on one built to satisfy it; the command on the real
validation configs."""

import argparse
import json

import pytest

import search.cli.main as cli
from cost_model import (
    Architecture, architecture_to_json_dict, get_hardware, make_deployment, make_workload,
)
from search.cli import lint as lint_command
from search.lint.guidelines import Finding, LintContext, default_precision, lint

from tests.data_paths import MODEL_CONFIGS

REAL_CONFIGS = sorted(MODEL_CONFIGS.glob("*.json"))
FINDING_KEYS = {"guideline", "code", "severity", "message", "cost", "alternative"}
BASE = dict(name="base", vocab_size=32000, hidden_size=4096, num_layers=32,
            num_attention_heads=32, num_kv_heads=8, head_dim=128, max_position_embeddings=4096,
            intermediate_size=14336)
MOE = dict(num_experts=8, experts_per_token=2, moe_intermediate_size=4096, intermediate_size=0,
           hidden_size=2048, num_attention_heads=16, num_kv_heads=4, num_layers=8)


def _arch(**changes) -> Architecture:
    return Architecture.model_validate({**BASE, **changes})


def _lint(arch: Architecture, hardware: str = "h200", **deployment) -> list[Finding]:
    hw = get_hardware(hardware)
    dep = make_deployment(**{"precision": default_precision(hw), **deployment})
    return lint(LintContext(arch, dep, hw, make_workload()))


def _of(findings: list[Finding], guideline: int) -> list[Finding]:
    return [f for f in findings if f.guideline == guideline]


# ---- guideline 1: near-square GEMMs ------------------------------------------------------------


def test_g1_small_intermediate_cannot_saturate_nvfp4_on_gb300():
    """The co-design post's Table 2 case: H′ = 512, H = 8192 in NVFP4 sits at or below GB300's ridge
    (15 PFLOP/s / 8 TB/s = 1,875 FLOP/B); with NVFP4's 4.5 bits/value b = 0.5625 B."""
    arch = _arch(hidden_size=8192, num_attention_heads=64, intermediate_size=512)
    (finding,) = _of(_lint(arch, "gb300"), 1)
    assert finding.severity == "warning" and "cannot saturate nvfp4 on gb300" in finding.message
    cap = 2 / 0.5625 * 8192 * 512 / (8192 + 512)  # (2/b)·NK/(N+K)
    assert finding.cost["intensity_cap_flop_per_byte"] == pytest.approx(cap)
    assert finding.cost["ridge_flop_per_byte"] == pytest.approx(15e15 / 8e12)
    # the nearest wider H′ (640: I∞ = (2/0.5625)·8192·640/8832 = 2,110 ≥ 1,875) is within the
    # parameter budget (+0.1B of 7.5B) but lowers the frontier area: reported, not offered
    (withheld,) = finding.cost["withheld_fixes"]
    assert withheld["architecture"]["intermediate_size"] == [512, 640]
    assert withheld["reason"] == "no larger frontier area"
    assert withheld["measured"]["frontier_area_change_frac"] <= 0
    assert finding.alternative is None and ". No fix offered: `intermediate_size` 512 → 640" in \
        finding.message


def test_g1_silent_on_wide_intermediate():
    arch = _arch(hidden_size=8192, num_attention_heads=64, intermediate_size=2048)
    assert _of(_lint(arch, "gb300"), 1) == []


# ---- guideline 2: alignment after sharding -----------------------------------------------------


def test_g2_misaligned_dim_is_an_error_with_the_nearest_aligned_width():
    (finding,) = _of(_lint(_arch(intermediate_size=14000)), 2)
    assert finding.severity == "error" and finding.code == "misaligned"
    assert "14000" in finding.message and finding.cost["tile_efficiency"] < 1
    assert finding.alternative["architecture"]["intermediate_size"] == [14000, 13952]  # 109·128


def test_g2_alignment_is_checked_after_sharding():
    """Guideline 2 after sharding: 768 is aligned, 768/8 = 96 under TP=8 is not; EP avoids the
    split."""
    arch = _arch(**{**MOE, "moe_intermediate_size": 768})
    assert _of(_lint(arch, tp=1), 2) == []
    (finding,) = [f for f in _of(_lint(arch, tp=8), 2) if f.severity == "error"]
    assert "768/8 = 96" in finding.message
    assert finding.alternative["deployment"]["ep"] == [1, 4]  # 768/(8/4) = 384 = 3·128
    # 768 → 1024 would align it on the same GPUs, but adds 25% to every expert: the active
    # parameters grow by far more than the 5% budget
    (withheld,) = finding.cost["withheld_fixes"]
    assert withheld["architecture"]["moe_intermediate_size"] == [768, 1024]
    assert "over the ±5% budget" in withheld["reason"]


def test_g2_prefers_512_on_blackwell():
    """The issue's example: expert H′ 1408 → 1536 on GB300 (512 = the CGA tile's N)."""
    arch = _arch(**{**MOE, "moe_intermediate_size": 1408, "hidden_size": 4096,
                    "num_attention_heads": 32})
    (finding,) = _of(_lint(arch, "gb300"), 2)
    assert finding.severity == "info" and finding.code == "not-512"
    # 1408 → 1536 adds 128/1408 = 9.1% to the experts: 6% of this small model's parameters,
    # over the 5% budget; reported with its cost, not offered
    up = finding.cost["withheld_fixes"][0]
    assert up["architecture"]["moe_intermediate_size"] == [1408, 1536]
    assert up["params_delta"] > 0 and "over the ±5% budget" in up["reason"]
    assert finding.alternative is None and "No fix offered" in finding.message


def test_g2_silent_when_every_dim_is_a_multiple_of_the_widest_tile():
    assert _of(_lint(_arch(), "h200", tp=8), 2) == []
    assert _of(_lint(_arch(), "gb300"), 2) == []


# ---- guideline 3: width vs depth ---------------------------------------------------------------


def test_g3_deep_narrow_model_pays_per_layer_overhead():
    arch = _arch(hidden_size=2048, num_layers=64, num_attention_heads=16, intermediate_size=8192)
    (finding,) = _of(_lint(arch, tp=8), 3)
    assert finding.cost["serial_share_frac"] >= 0.25
    fix = finding.alternative["architecture"]
    assert fix["num_layers"] == [64, 48] and fix["intermediate_size"][1] > 8192
    granule_params = 48 * 3 * 2048 * 128 * 8  # one 128·TP step of H′ over the 48 layers
    assert abs(finding.alternative["params_delta"]) <= granule_params / 2  # same total params
    assert finding.cost["fix"]["tpot_change_frac"] < 0  # fewer layers in series: faster


def test_g3_silent_on_wide_shallow_model():
    arch = _arch(hidden_size=8192, num_layers=8, num_attention_heads=64, intermediate_size=28672)
    assert _of(_lint(arch, tp=1), 3) == []


# ---- guideline 4: quantization readiness -------------------------------------------------------


def test_g4_nvfp4_needs_k_in_blocks_of_16():
    arch = _arch(intermediate_size=14008)  # 875.5 blocks of 16
    (error,) = _of(_lint(arch, "gb300"), 4)
    assert error.severity == "error" and error.code == "block-k"
    assert error.alternative["architecture"]["intermediate_size"][1] % 16 == 0
    (warning,) = _of(_lint(arch, "h200"), 4)  # FP8 on Hopper: not an error, but not NVFP4-ready
    assert warning.severity == "warning" and warning.code == "not-nvfp4-ready"


def test_g4_bf16_lm_head_and_higher_precision_are_info():
    findings = _of(_lint(_arch(vocab_size=256000), "gb300", precision="fp8"), 4)
    assert {f.code for f in findings} == {"bf16-lm-head", "higher-precision"}
    assert all(f.severity == "info" for f in findings)
    fp8 = next(f for f in findings if f.code == "higher-precision")
    assert fp8.alternative["deployment"]["precision"] == ["fp8", "nvfp4"]
    # NVFP4 raises throughput (compute-bound end); at concurrency 1 the calibrated NVFP4 kernel
    # (no split-K in TensorRT-LLM's tables) may be slower than FP8, so only the sign of the
    # throughput gain is pinned.
    assert fp8.cost["fix"]["throughput_change_frac"] > 0


def test_g4_no_bf16_lm_head_finding_when_the_layers_are_bf16():
    """With the linear layers in BF16 (gpt-oss's attention) the LM head is no slower than they
    are: nothing to report (it read "437 µs instead of 437 µs")."""
    findings = _of(_lint(_arch(vocab_size=256000), "gb300", precision="bf16"), 4)
    assert "bf16-lm-head" not in {f.code for f in findings}


def test_g4_silent_on_block_aligned_model_in_the_lowest_format():
    assert _of(_lint(_arch(), "h200"), 4) == []


# ---- guideline 5: MoE sizing -------------------------------------------------------------------


def test_g5_many_small_experts_need_more_concurrency_than_memory_holds():
    """The co-design post, "Large expert parallelism": C ≥ M*·E/k; with E = 256, k = 8 a single H200
    never gets there."""
    arch = _arch(**{**MOE, "num_experts": 256, "experts_per_token": 8,
                    "moe_intermediate_size": 512})
    (finding,) = _of(_lint(arch, "h200"), 5)
    h200 = get_hardware("h200")
    ridge = h200.peak_flop_per_s["fp8"] / h200.hbm_bytes_per_s  # ≈ 1979 TFLOP/s / 4.8 TB/s
    n, k = 2048, 512  # the down projection: N = H, K = H′
    m_star = ridge * n * k / (2 * n * k - ridge * (n + k))  # I(M*) = I*, b = 1 byte
    assert finding.cost["m_star_tokens"] == pytest.approx(m_star, rel=1e-6)
    assert finding.cost["concurrency_needed"] == pytest.approx(m_star * 256 / 8, rel=1e-6)
    assert finding.cost["m_expert_tokens"] < finding.cost["m_star_tokens"]
    assert "imbalance_frontier_area_change_frac" in finding.cost


def test_g5_silent_when_few_experts_fill_at_moderate_concurrency():
    assert _of(_lint(_arch(**MOE), "h200"), 5) == []
    assert _of(_lint(_arch(), "h200"), 5) == []  # dense: nothing to size


# ---- guideline 6: pipeline balance -------------------------------------------------------------


def test_g6_uneven_stages_by_layer_count():
    """62 alike layers over PP 4 split 16/16/15/15: +3.2% over the mean (16/15.5). 60 layers
    (−3.2% of the parameters) split evenly and raise the frontier area; 63 (16/16/16/15, +1.6%,
    under the 2% limit) adds layers the slowest stage already runs: no larger area."""
    (finding,) = _of(_lint(_arch(num_layers=62), pp=4), 6)
    assert finding.severity == "warning" and finding.cost["layers_per_stage"] == [16, 16, 15, 15]
    assert finding.cost["imbalance_frac"][4] == pytest.approx(16 / 15.5 - 1, rel=0.05)
    assert finding.alternative["architecture"]["num_layers"] == [62, 60]
    assert finding.cost["fix"]["frontier_area_change_frac"] > 0
    (withheld,) = finding.cost["withheld_fixes"]
    assert withheld["architecture"]["num_layers"] == [62, 63]


def test_g6_fix_over_the_parameter_budget_is_reported_not_offered():
    """30 layers over PP 4: 32 and 28 split evenly but change the parameters by 2/30 ≈ 6.7% of
    the layers' (6.4% of all), over the 5% budget; with a 10% budget 28 is offered."""
    (finding,) = _of(_lint(_arch(num_layers=30), pp=4), 6)
    assert finding.alternative is None and "No fix offered" in finding.message
    assert [w["architecture"]["num_layers"][1] for w in finding.cost["withheld_fixes"]] == [32, 28]
    hw = get_hardware("h200")
    ctx = LintContext(_arch(num_layers=30), make_deployment(pp=4, precision="fp8"), hw,
                      make_workload(), max_param_change_frac=0.10)
    (wide,) = _of(lint(ctx), 6)
    assert wide.alternative["architecture"]["num_layers"] == [30, 28]


def test_g6_is_silent_without_pp():
    """A pipeline split nobody asked for is not linted: 30 layers split unevenly over PP 4, but
    a PP 1 deployment has no stages."""
    assert _of(_lint(_arch(num_layers=30)), 6) == []


def test_g6_uneven_stages_from_mixed_layer_types():
    """Two dense layers first, MoE after: an even split by count is uneven by time."""
    arch = _arch(**{**MOE, "num_layers": 32, "first_dense_layers": 2, "intermediate_size": 1024})
    (finding,) = _of(_lint(arch, pp=2), 6)
    assert "2 dense + 30 MoE" in finding.message and "bubble" in finding.message


def test_g6_silent_on_regular_pattern():
    assert _of(_lint(_arch(), pp=4), 6) == []


# ---- guideline 7: attention vs FFN parallelism -------------------------------------------------


def test_g7_tp_beyond_kv_heads_replicates_the_cache():
    (finding,) = _of(_lint(_arch(num_kv_heads=2), tp=8), 7)
    assert finding.cost["extra_kv_copies"] == 3  # 8 ranks hold 2 heads: 4× over
    assert finding.alternative["deployment"] == {"tp": [8, 2], "dp": [1, 4]}
    assert finding.cost["fix"]["max_concurrency"][1] > finding.cost["fix"]["max_concurrency"][0]


def test_g7_silent_when_tp_fits_the_kv_heads():
    assert _of(_lint(_arch(num_kv_heads=8), tp=8), 7) == []


def test_finding_rejects_unknown_guideline_and_severity():
    with pytest.raises(ValueError):
        Finding(8, "x", "warning", "m", {}, None)
    with pytest.raises(ValueError):
        Finding(1, "x", "fatal", "m", {}, None)


# ---- the command -------------------------------------------------------------------------------


@pytest.fixture
def main(monkeypatch):
    """`search.cli.main.main` with `lint` wired in (a no-op once cli.py wires it itself)."""
    original = cli.build_parser

    def build():
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "lint" not in sub.choices:
            lint_command.add_parser(sub)
        return parser
    monkeypatch.setattr(cli, "build_parser", build)
    return cli.main


@pytest.mark.parametrize("config", REAL_CONFIGS, ids=lambda p: p.stem)
def test_lint_real_configs_on_8_h200(main, capsys, config):
    code = main(["lint", str(config), "--hardware", "h200", "--tp", "8", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert {"model", "hardware", "deployment", "findings", "errors"} <= doc.keys()
    assert code == (1 if doc["errors"] else 0)
    for finding in doc["findings"]:
        assert FINDING_KEYS <= finding.keys() and 1 <= finding["guideline"] <= 7
        assert finding["alternative"] is None or finding["alternative"]["summary"]


def test_lint_qwen3_moe_tp8_fails_ci(main, capsys):
    """Qwen3-30B-A3B's 768-wide experts split 8 ways are 96 wide: an alignment error (exit 1)."""
    code = main(["lint", str(MODEL_CONFIGS / "Qwen3-30B-A3B.json"), "--hardware", "h200", "--tp",
                 "8"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert any(line.startswith("G2 error") and "768/8 = 96" in line for line in out)
    assert any(line.startswith("G7 warning") for line in out)
    assert out[-1].startswith("1 error(s)")


def test_lint_real_config_on_gb300_text(main, capsys):
    code = main(["lint", str(MODEL_CONFIGS / "gemma-2-9b.json"), "--hardware", "gb300"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and "nvfp4" in out[0]
    assert out[1].startswith("kernels: ") and "no --engine" in out[1]
    assert all(line.startswith("G") for line in out[2:-1])  # one finding per line


def test_lint_clean_model_exits_0(main, capsys, tmp_path):
    config = tmp_path / "clean.json"
    config.write_text(json.dumps(architecture_to_json_dict(_arch(name="clean"))))
    assert main(["lint", str(config), "--hardware", "h200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["errors"] == 0 and doc["model"] == "clean"


def test_lint_error_finding_exits_1(main, capsys, tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps(architecture_to_json_dict(_arch(intermediate_size=14000))))
    assert main(["lint", str(config), "--hardware", "h200"]) == 1
    assert "G2 error" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["--hardware", "h300"], "`hardware`"),
    (["--hardware", "h200", "--tp", "6"], "`tp` (6)"),
    (["--hardware", "h200", "--precision", "nvfp4"], "nvfp4"),
    (["--hardware", "h200", "--pp", "0"], "`pp`"),
], ids=["hardware", "tp", "precision", "pp"])
def test_lint_bad_input_is_one_line_exit_2(main, capsys, argv, fragment):
    assert main(["lint", str(MODEL_CONFIGS / "Llama-3.1-8B.json"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err


def test_lint_missing_config_exit_2(main, capsys):
    assert main(["lint", "no-such-config.json", "--hardware", "h200"]) == 2
    assert "no-such-config.json" in capsys.readouterr().err


def test_g7_measures_helix_as_an_alternative():
    """TP 16 of an 8-KV-head model replicates the KV cache: lint proposes attention DP and
    Helix (tp 8, kvp 2 over the same 16 GPUs), each measured."""
    from cost_model import load_architecture
    from tests.data_paths import HF_CONFIGS

    arch = load_architecture(HF_CONFIGS / "serving_Llama-3.1-405B-Instruct.json")
    g7 = _of(_lint(arch, "gb200", tp=16), 7)[0]
    fixes = [g7.alternative, *g7.alternative["others"], *g7.cost.get("withheld_fixes", [])]
    assert any(f["deployment"] == {"tp": [16, 8], "kvp": [1, 2]} for f in fixes)
    assert all("frontier_area_change_frac" in f["measured"] for f in fixes)


def test_g6_measures_disaggregation_at_long_prompts():
    """Llama-3.3-70B on 8x H200 at 32k/1k: every decode step also prefills 32 prompt tokens per
    generated token, and separate prefill/decode pools raise the frontier area by more than the
    10% the finding needs; at 1k/1k (+5%) there is no finding."""
    from cost_model import load_architecture
    from tests.data_paths import HF_CONFIGS

    arch = load_architecture(HF_CONFIGS / "serving_Llama-3.3-70B-Instruct.json")
    hw = get_hardware("h200")

    def findings(isl):
        dep = make_deployment(tp=8, precision="fp8")
        ctx = LintContext(arch, dep, hw, make_workload(isl_tokens=isl, osl_tokens=1024))
        return [f for f in lint(ctx) if f.code == "disaggregation"]

    [long] = findings(32768)
    assert long.guideline == 6 and long.cost["frontier_area_change_frac"] > 0.10
    assert long.alternative["deployment"] == {"serving": ["aggregated", "disaggregated"]}
    assert findings(1024) == []


def test_lint_times_on_the_engines_kernels(main, capsys):
    """`--engine` selects the kernels lint times its findings on (issue 23: everywhere a time is
    computed): Qwen3-30B-A3B at TP 8 on H200 prices its baseline TPOT and its G1 probe GEMM
    differently on vLLM's and TensorRT-LLM's fitted kernels; the workload names the engine and
    the attention-DP balancer's timeout."""
    docs = {}
    for engine in ("trtllm", "vllm"):
        assert main(["lint", str(MODEL_CONFIGS / "Qwen3-30B-A3B.json"), "--hardware", "h200",
                     "--tp", "8", "--engine", engine, "--adp-balance-timeout", "4",
                     "--json"]) == 1
        docs[engine] = json.loads(capsys.readouterr().out)
    assert docs["vllm"]["baseline"] != docs["trtllm"]["baseline"]
    g1 = {e: next(f for f in d["findings"] if f["guideline"] == 1) for e, d in docs.items()}
    assert g1["vllm"]["cost"]["peak_frac_at_probe_tokens"] \
        != g1["trtllm"]["cost"]["peak_frac_at_probe_tokens"]
    assert docs["vllm"]["workload"]["engine"] == "vllm"
    assert docs["vllm"]["workload"]["adp_balance_timeout_steps"] == 4
