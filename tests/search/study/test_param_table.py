"""`param_table`: exact parameter counts and shape rules of many parameter sets at once, from
their params alone (no `Architecture` built), equal to `count_params` of the built design."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_model import count_params
from search.study.param_table import column, param_counts, shapes, within_rules
from search.study.space import build_candidate, complete_params, searched_dimensions
from search.study.spec import Space, load_spec, spec_from_dict

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    return {name: column([r[name] for r in rows], name) for name in Space.model_fields}


def _tiny_spec(space: dict) -> object:
    return spec_from_dict({
        "name": "tiny", "trials": 1,
        "budget": {"total_params": 1e6, "training_tokens": 1e9},
        "hardware": {"gpu": "h200"}, "workload": {"isl_tokens": 128, "osl_tokens": 128},
        "space": {name: {"value": value} for name, value in space.items()}})


GQA_DENSE = {"vocab_size": 128256, "hidden_size": 2048, "num_layers": 16, "head_dim": 64,
             "num_kv_heads": 4, "q_per_kv": 4, "intermediate_size": 8192}
SMALL = {"vocab_size": 1000, "hidden_size": 256, "head_dim": 32, "num_kv_heads": 2,
         "q_per_kv": 2, "intermediate_size": 512}
MOE = {**SMALL, "num_layers": 4, "num_experts": 8, "experts_per_token": 2,
       "moe_intermediate_size": 64, "num_shared_experts": 1, "first_dense_layers": 1}
DELTANET = {**SMALL, "num_layers": 4, "full_attention_period": 2,
            "linear_mixer": "gated_deltanet", "linear_num_value_heads": 4,
            "linear_value_head_dim": 32, "linear_num_key_heads": 2, "linear_key_head_dim": 32,
            "linear_conv_kernel": 4}
MLA = {**SMALL, "num_layers": 2, "attention_kind": "mla", "qk_rope_head_dim": 16,
       "kv_lora_rank": 64, "q_lora_rank": 48}


@pytest.mark.parametrize(("space", "total", "active"), [
    # 2·V·H = 525,336,576; norms (2L+1)·H = 67,584; attention L·(2·16 + 2·4)·64·H = 83,886,080;
    # FFN L·3·H·H′ = 805,306,368
    (GQA_DENSE, 1_414_596_608, 1_414_596_608),
    # 2·V·H = 512,000; norms 9·H = 2,304; attention 4·12·32·H = 393,216; one dense FFN
    # 3·H·512 = 393,216; 3 MoE layers of router 8·H, experts 8·3·H·64, shared 3·H·64:
    # 3·444,416 = 1,333,248; active less 3·(8 − 2)·3·H·64 = 884,736
    (MOE, 2_633_984, 1_749_248),
    # attention layers (periods of 2: 2 of 4) 98,304 + output gate 4·32·H + QK norms 2·32
    # = 131,136 each; linear layers in_proj_qkvz (2·64 + 2·128)·H + in_proj_ba 8·H +
    # out_proj H·128 + conv (2·64 + 128)·4 + 2·4 + 32 = 134,184 each; 4 FFNs 1,572,864
    (DELTANET, 2_617_808, 2_617_808),
    # MLA per layer: kv_a (64 + 16)·H + kv_b 4·(32 + 32)·64 + q_a 48·H + q_b 4·(32 + 16)·48
    # + o H·4·32 + norms 48 + 64 = 91,248; 2 layers, norms 5·H, 2 FFNs 786,432
    (MLA, 1_482_208, 1_482_208),
], ids=["gqa-dense", "moe-shared-first-dense", "gated-deltanet-hybrid", "mla-q-lora"])
def test_golden_counts(space, total, active):
    spec = _tiny_spec(space)
    params = complete_params(spec, {})
    counted = param_counts(_columns([params]))
    assert (int(counted[0][0]), int(counted[1][0])) == (total, active)
    built = count_params(build_candidate(spec, params).arch)  # the table's own count agrees
    assert (built.total_params, built.active_params) == (total, active)


def _params_of(spec):
    """Hypothesis strategy: complete params of the study's space (deployments left fixed)."""
    dims = searched_dimensions(spec.space)
    return st.fixed_dictionaries({n: st.sampled_from(list(d.options)) for n, d in dims.items()}
                                 ).map(lambda p: complete_params(spec, p))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_counts_and_models_equal_the_built_designs(path, data):
    """Over every shipped study's space: the columns call a set of params a model exactly when
    `build_candidate` does, and count what `count_params` counts."""
    spec = load_spec(path)
    rows = [data.draw(_params_of(spec)) for _ in range(8)]
    cols = _columns(rows)
    model, (total, active) = shapes(cols).model, param_counts(cols)
    for i, params in enumerate(rows):
        cand = build_candidate(spec, params)
        assert bool(model[i]) == cand.valid, (params, cand.invalid_reason)
        if cand.valid:
            counts = count_params(cand.arch)
            assert (int(total[i]), int(active[i])) == (counts.total_params, counts.active_params)


def test_budget_rule_is_the_params_budget_constraint():
    """`within_rules` keeps a design exactly when |total/target − 1| ≤ tolerance (and the aspect
    band holds): the 1.414596608B design against a 1.2B ± 25% target is 17.9% over: kept; the
    same design with 24 layers (1.885B, 57% over) is not; an aspect ratio of 2048/16 = 128 is
    inside [32, 256], 2048/80 = 25.6 is not."""
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    rows = [complete_params(spec, GQA_DENSE), complete_params(spec, {**GQA_DENSE,
                                                                     "num_layers": 24})]
    assert within_rules(spec, _columns(rows)).tolist() == [True, False]
    low = complete_params(spec, {**GQA_DENSE, "num_layers": 80, "intermediate_size": 2048,
                                 "vocab_size": 1000})
    assert not within_rules(spec, _columns([low]))[0]


def test_a_misaligned_hidden_size_fails_alignment_under_every_deployment():
    """The rule `within_rules` applies for alignment: quickstart's hidden sizes step by 64, so
    every other one (1,088 here) is no multiple of its alignment 128, and no deployment of its
    space aligns such a design (`hidden_size` is never sharded)."""
    from constraints import check_candidate
    from search.study.evaluation import constraint_rules
    from search.study.space import swept_candidates

    spec = load_spec(REPO / "studies" / "quickstart.toml")
    params = complete_params(spec, {**GQA_DENSE, "hidden_size": 1088})
    assert not within_rules(spec, _columns([params]))[0]
    cands = swept_candidates(spec, build_candidate(spec, params))
    assert cands and all(check_candidate(c.arch, c.deployment, constraint_rules(spec), 1.0)
                         ["alignment"].value > 0 for c in cands)
