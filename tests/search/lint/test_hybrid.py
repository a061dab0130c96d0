"""Lint findings for hybrid models and long contexts: KV-dominated serving where linear layers
would pay (guideline 7, `search/lint/hybrid.py`), and a layer pattern that does not split into
alike pipeline stages (guideline 6, `search/lint/parallel.py`)."""

import pytest

from cost_model import Architecture, get_hardware, make_deployment, make_workload
from search.lint.guidelines import LintContext, lint
from search.lint.hybrid import KV_DOMINATED_SHARE_FRAC, attention_shares
from search.lint.support import pattern_text

BASE = dict(name="base", vocab_size=32000, hidden_size=4096, num_layers=32,
            num_attention_heads=32, num_kv_heads=8, head_dim=128,
            max_position_embeddings=131072, intermediate_size=14336)
LINEAR = dict(linear_num_key_heads=16, linear_key_head_dim=128, linear_num_value_heads=32,
              linear_value_head_dim=128, linear_conv_kernel=4)
LONG = make_workload(isl_tokens=65536, osl_tokens=2048)
H200 = get_hardware("h200")


def _hybrid(period: int, layers: int = 32) -> Architecture:
    mixers = tuple("attention" if (i + 1) % period == 0 else "gated_deltanet"
                   for i in range(layers))
    return Architecture.model_validate({**BASE, **LINEAR, "num_layers": layers,
                                        "layer_mixers": mixers})


def _findings(arch, workload=LONG, code=None, **deployment):
    found = lint(LintContext(arch, make_deployment(**deployment), H200, workload))
    return [f for f in found if code is None or f.code == code]


# ---- KV-dominated long contexts (guideline 7) ---------------------------------------------------


def test_dense_gqa_at_64k_is_kv_dominated_and_a_linear_pattern_is_measured():
    """A Llama-3.1-8B-like model at 64k/2k on one H200: attention is over half of TPOT at the
    throughput end; the alternative keeps 1 full layer in 8 and raises tokens/s/GPU."""
    (finding,) = _findings(Architecture.model_validate(BASE), code="kv-dominated")
    assert finding.guideline == 7 and finding.severity == "info"
    assert finding.cost["attention_share_frac"] >= KV_DOMINATED_SHARE_FRAC
    assert finding.cost["fix_attention_share_frac"] < KV_DOMINATED_SHARE_FRAC
    assert finding.cost["fix"]["throughput_change_frac"] > 0
    assert "(7 gated_deltanet + 1 attention) × 4" in finding.alternative["summary"]
    assert "KV reads" in finding.message and "50%" in finding.message


def test_short_prompts_are_not_the_long_context_regime():
    """At 2k/2k the throughput end is attention-heavy too (a large batch amortizes the weights),
    but the finding is for long prompts (≥ 32k, the co-design post's long-context column)."""
    short = make_workload(isl_tokens=2048, osl_tokens=2048)
    ctx = LintContext(Architecture.model_validate(BASE), make_deployment(), H200, short)
    assert attention_shares(ctx, [(ctx.arch, ctx.dep)])[0][0] > KV_DOMINATED_SHARE_FRAC
    assert _findings(Architecture.model_validate(BASE), short, code="kv-dominated") == []
    long = make_workload(isl_tokens=32768, osl_tokens=1024)
    assert _findings(Architecture.model_validate(BASE), long, code="kv-dominated") != []


def test_hybrids_fire_until_their_kv_share_falls_below():
    """At 64k on one H200, 1 full layer in 4 (Qwen3-Next's ratio) still spends over half of
    TPOT in attention: the alternative is 1 in 8; 1 in 8 is below and silent."""
    (finding,) = _findings(_hybrid(4), code="kv-dominated")
    assert finding.cost["attention_share_frac"] >= KV_DOMINATED_SHARE_FRAC
    assert "(7 gated_deltanet + 1 attention) × 4" in finding.alternative["summary"]
    assert finding.alternative["params_delta"] > 0  # a GDN layer outweighs a kv-8 GQA layer
    ctx = LintContext(_hybrid(8), make_deployment(), H200, LONG)
    assert attention_shares(ctx, [(ctx.arch, ctx.dep)])[0][0] < KV_DOMINATED_SHARE_FRAC
    assert _findings(_hybrid(8), code="kv-dominated") == []


def test_the_alternative_keeps_a_unit_that_divides_the_stages():
    """PP 4 over 24 layers: 6 per stage, so period 4 or 8 would split unevenly; only 2 can."""
    arch = Architecture.model_validate({**BASE, "num_layers": 24})
    for finding in _findings(arch, code="kv-dominated", pp=4):
        assert "(1 gated_deltanet + 1 attention) × 12" in finding.alternative["summary"]


# ---- layer patterns and pipeline stages (guideline 6) ------------------------------------------


def test_pattern_whose_unit_exceeds_the_stage_is_imbalanced():
    """Period 8 over PP 8 (4 layers per stage): half the stages hold an attention layer, whose
    64k KV reads make them slower; the nearest splitting pattern (1 in 4) is measured."""
    (finding,) = _findings(_hybrid(8), code="pipeline-imbalance", pp=8)
    assert finding.severity == "warning" and "28 gated_deltanet + 4 attention" in finding.message
    assert finding.cost["imbalance_frac"][8] > 0.02
    assert "(3 gated_deltanet + 1 attention) × 8" in finding.alternative["summary"]


def test_same_layers_placed_as_a_unit_is_the_fix_of_an_irregular_pattern():
    """The 4 attention layers first: PP 4 puts them all on stage 0; the same 32 layers as
    (7 linear + 1 full) × 4 split into alike stages, same parameters."""
    mixers = ("attention",) * 4 + ("gated_deltanet",) * 28
    arch = Architecture.model_validate({**BASE, **LINEAR, "layer_mixers": mixers})
    (finding,) = _findings(arch, code="pipeline-imbalance", pp=4)
    alt = finding.alternative
    assert alt["params_delta"] == 0 and alt["imbalance_frac"][4] == pytest.approx(0.0, abs=1e-9)
    assert pattern_text(tuple(alt["architecture"]["layer_mixers"][1])) == \
        "(7 gated_deltanet + 1 attention) × 4"


@pytest.mark.parametrize("period, pp", [(4, 8), (8, 4), (4, 1)])
def test_patterns_that_divide_the_stages_are_silent(period, pp):
    assert _findings(_hybrid(period), code="pipeline-imbalance", pp=pp) == []
