"""The search space's attention kinds and layer patterns (search/study/space.py `_attention_fields`,
`_pattern_fields`, `pattern_stage_violations`): what each option builds, that sampled hybrids export
to Hugging Face configs transformers builds with exactly our parameter count, and that
deployments keep linear heads whole per TP rank and pipeline stages alike."""

import json
import tomllib
from pathlib import Path

import optuna
import pytest

from constraints import pattern_stage_violations
from cost_model import ConfigError, architecture_to_hf_config, count_params, make_deployment
from search.study.errors import SpecError
from search.study.evaluation import score_batch
from search.study.space import (
    build_architecture,
    build_candidate,
    complete_params,
    suggest_params,
    swept_candidates,
    used_values,
)
from search.study.spec import Space, load_spec, spec_from_dict
from tests.cost_model.transformers_meta import meta_model, transformers_config

REPO = Path(__file__).resolve().parents[3]
HYBRID_STUDY = REPO / "studies" / "long-context-hybrid-h200.toml"
CONTEXT_TOKENS = 65536 + 2048
# one parameter set of every space dimension (the Space defaults), shapes of a ~8B model
BASE = {**{name: field.default.options[0] for name, field in Space.model_fields.items()
           if field.is_required() is False},
        "hidden_size": 4096, "num_layers": 32, "intermediate_size": 14336}


def _arch(**changes):
    return build_architecture({**BASE, **changes}, CONTEXT_TOKENS)


# ---- what each option builds -------------------------------------------------------------------


def test_defaults_build_the_homogeneous_gqa_model():
    arch = _arch()
    att = arch.attention
    assert att.attention_kind == "gqa" and att.layer_types is None
    assert arch.mixer.layer_mixers is None
    assert (att.num_attention_heads, att.num_kv_heads, att.head_dim) == (32, 8, 128)


def test_mla_takes_deepseek_v3s_form():
    """MLA heads: head_dim 128 becomes the non-RoPE part and the value width; with the 64-wide
    RoPE key each query/key head is 192 wide (DeepSeek-V3: 128 + 64, v 128, latent 512)."""
    arch = _arch(attention_kind="mla")
    att = arch.attention
    assert (att.head_dim, att.qk_nope_head_dim, att.qk_rope_head_dim, att.v_head_dim) == \
        (192, 128, 64, 128)
    assert att.num_kv_heads == att.num_attention_heads == 32 and att.kv_lora_rank == 512
    assert arch.name.endswith("-R512q0r64")


@pytest.mark.parametrize("mixer", ["gated_deltanet", "mamba2"])
def test_linear_hybrid_keeps_every_period_th_layer_full(mixer):
    """Period 4 on 32 layers: layers 3, 7, …, 31 attend (Qwen3-Next's full_attention_interval 4),
    the other 24 are the linear mixer with the space's heads and widths."""
    arch = _arch(full_attention_period=4, linear_mixer=mixer)
    assert [i for i, m in enumerate(arch.mixer.layer_mixers) if m == "attention"] == \
        list(range(3, 32, 4))
    assert arch.mixer.num_linear_attention_layers == 24 and arch.mixer.linear_mixer_kind == mixer
    assert (arch.mixer.linear_num_value_heads, arch.mixer.linear_num_key_heads) == (32, 16)
    gated = arch.attention.qk_norm and arch.attention.attention_output_gate
    assert gated == (mixer == "gated_deltanet")
    assert f"-{'G' if mixer == 'gated_deltanet' else 'M'}3A1-" in arch.name


def test_sliding_pattern_and_window():
    """No linear mixer, a window: Gemma 3's 5 sliding (1,024) per global layer at period 6."""
    arch = _arch(num_layers=36, full_attention_period=6, sliding_window=1024)
    assert arch.num_sliding_layers == 30 and arch.attention.sliding_window == 1024
    kinds = arch.attention.layer_types
    assert kinds[5] == "full_attention" and kinds[4] == "sliding_attention"
    assert arch.name.endswith("-W1024p6") and arch.attention.qk_norm
    # 28 layers at period 8: full at 7, 15, 23, named by the period, not by 28 / 3
    assert _arch(num_layers=28, full_attention_period=8, sliding_window=1024).name.endswith("p8")


def test_every_option_combination_is_a_model():
    """Each attention kind × linear mixer × window at a period that fits builds."""
    for kind in ("gqa", "mla"):
        for mixer in ("none", "gated_deltanet", "mamba2"):
            for window in (0, 1024):
                arch = _arch(attention_kind=kind, linear_mixer=mixer, sliding_window=window,
                             full_attention_period=4)
                assert arch.attention.attention_kind == kind
                assert arch.num_sliding_layers == (24 if mixer == "none" and window else 0)


def test_unused_pattern_dimensions_give_one_design():
    """Period 1, or no linear mixer and no window: every layer full, whatever the rest says."""
    plain = _arch()
    for twin in (_arch(full_attention_period=4), _arch(linear_mixer="mamba2"),
                 _arch(sliding_window=4096), _arch(linear_num_value_heads=16)):
        assert twin.design_key == plain.design_key and twin.name == plain.name


def test_a_period_beyond_the_layers_is_not_a_model():
    with pytest.raises(ConfigError, match="`full_attention_period` \\(8\\) must be <= "
                                          "`num_layers` \\(4\\)"):
        _arch(num_layers=4, full_attention_period=8, linear_mixer="gated_deltanet")


def test_used_values_name_every_dimension_and_none_where_unused():
    spec = load_spec(HYBRID_STUDY)
    hybrid = build_candidate(spec, {**BASE, "full_attention_period": 4,
                                    "linear_mixer": "gated_deltanet"})
    values = used_values(hybrid)
    assert set(values) == set(Space.model_fields)
    assert values["full_attention_period"] == 4 and values["linear_mixer"] == "gated_deltanet"
    assert values["kv_lora_rank"] is None and values["sliding_window"] is None
    plain = used_values(build_candidate(spec, BASE))
    assert plain["linear_num_value_heads"] is None and plain["full_attention_period"] is None


def test_unknown_mixer_is_one_error_naming_the_field():
    doc = tomllib.loads(HYBRID_STUDY.read_text(encoding="utf-8"))
    doc["space"]["linear_mixer"] = {"choices": ["none", "rwkv"]}
    with pytest.raises(SpecError, match="`space.linear_mixer`: options must be .*; got \"rwkv\""):
        spec_from_dict(doc)


# ---- sampled hybrids export exactly ------------------------------------------------------------


def _sampled(kind: str, count: int = 400) -> list:
    """Valid architectures the shipped study's space samples (random sampler), of one kind."""
    spec = load_spec(HYBRID_STUDY)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    kinds = {"gated_deltanet": lambda a: a.mixer.linear_mixer_kind == "gated_deltanet"
             and a.attention.attention_kind == "gqa", "sliding": lambda a: a.num_sliding_layers > 0,
             "mla": lambda a: a.attention.attention_kind == "mla" and not a.is_heterogeneous,
             "mamba2": lambda a: a.mixer.linear_mixer_kind == "mamba2"}
    archs = (build_candidate(spec, suggest_params(study.ask(), spec.space, spec)).arch
             for _ in range(count))
    return [a for a in archs if a is not None and kinds[kind](a)]


@pytest.mark.parametrize("kind, model_type", [("gated_deltanet", "qwen3_5_text"),
                                              ("sliding", "qwen3"), ("mla", "deepseek_v3"),
                                              ("mamba2", "nemotron_h")])
def test_sampled_designs_export_with_transformers_exact_count(kind, model_type, tmp_path):
    """Each kind the shipped study samples, exported as config.json: transformers 5.x builds a
    model (meta device) of exactly `count_params` parameters. Gated DeltaNet hybrids with GQA
    export as Qwen3.5 (MLA ones have no family: Qwen3.5/Qwen3-Next attention is GQA); GQA
    sliding patterns (with QK norms) as Qwen3 with `layer_types`; MLA as DeepSeek-V3 whose MoE
    is off (first_k_dense_replace = every layer)."""
    arch = next(a for a in _sampled(kind)
                if kind != "sliding" or a.attention.attention_kind == "gqa")
    exported = architecture_to_hf_config(arch)
    assert exported["model_type"] == model_type
    (tmp_path / "config.json").write_text(json.dumps(exported), encoding="utf-8")
    model = meta_model(transformers_config(tmp_path))
    # source: transformers 5.24 meta-device model of the exported config; tolerance 0
    assert sum(p.numel() for p in model.parameters()) == count_params(arch).total_params


def test_mamba2_hybrids_take_nemotron_h_s_ffn():
    """Mamba-2 hybrids are built with Nemotron-H's ungated squared-ReLU FFN, the form nemotron_h
    expresses (a layer's mixer and FFN become two of its blocks)."""
    arch = _sampled("mamba2")[0]
    assert (arch.ffn.gated_mlp, arch.ffn.hidden_act) == (False, "relu2")


@pytest.mark.parametrize("mixer", ["gated_deltanet", "mamba2"])
def test_designs_no_hf_family_expresses_are_not_candidates(mixer):
    """MLA beside Gated DeltaNet or Mamba-2 layers has no transformers model_type (MLA sits beside
    linear layers only in Kimi Delta Attention families): the space refuses it with the reason,
    so every design a search returns exports."""
    spec = load_spec(HYBRID_STUDY)
    params = {**complete_params(spec, {}), **BASE, "attention_kind": "mla",
              "full_attention_period": 4, "linear_mixer": mixer}
    cand = build_candidate(spec, params)
    assert cand.arch is None and cand.invalid_reason.startswith("no Hugging Face model_type: ")
    assert "`attention_kind` 'mla'" in cand.invalid_reason


# ---- deployments: linear heads per TP rank, alike pipeline stages ------------------------------


@pytest.mark.parametrize("period, pp, splits", [(4, 8, True), (8, 8, False), (8, 4, True),
                                                (4, 1, True)])
def test_pattern_divides_the_layers_per_stage(period, pp, splits):
    """32 layers: a period-4 unit splits into 8 stages of 4 (one unit each); a period-8 unit over
    8 stages puts its attention layer in every other stage only."""
    arch = _arch(full_attention_period=period, linear_mixer="gated_deltanet")
    broken = pattern_stage_violations(arch, make_deployment(pp=pp))
    assert (broken == []) == splits
    if not splits:
        assert "`pp` (8)" in broken[0] and "4 layers per stage" in broken[0]


def test_sliding_patterns_split_by_the_same_rule():
    arch = _arch(num_layers=36, full_attention_period=6, sliding_window=1024)
    assert pattern_stage_violations(arch, make_deployment(pp=2)) == []  # 18 = 3 units of 6
    assert pattern_stage_violations(arch, make_deployment(pp=4)) != []  # 9 layers per stage


def test_the_sweep_skips_deployments_that_split_linear_heads_or_the_pattern():
    """Key heads 4 cannot shard over TP 8 (vLLM's qwen3_next.py: num_k_heads // tp_size);
    a period-8 unit over 32 layers cannot split into 8 stages (PP 8 is not in the space, so
    period 16 over PP 4: 8 layers per stage, an attention layer every other stage)."""
    spec = load_spec(HYBRID_STUDY)
    params = {**BASE, "full_attention_period": 16, "linear_mixer": "gated_deltanet",
              "linear_num_key_heads": 4}
    deps = [c.deployment for c in swept_candidates(spec, build_candidate(spec, params))]
    assert deps and all(d.tp <= 4 and d.pp <= 2 for d in deps)
    assert any(d.tp == 4 for d in deps) and any(d.pp == 2 for d in deps)


def test_a_sampled_deployment_that_splits_the_pattern_is_infeasible():
    """With deployments sampled, the rule is a `divisibility` violation (a hard constraint)."""
    doc = tomllib.loads(HYBRID_STUDY.read_text(encoding="utf-8"))
    doc["deployments"] = "sampled"
    spec = spec_from_dict(doc)
    params = {**BASE, "full_attention_period": 16, "linear_mixer": "gated_deltanet",
              "tp": 1, "pp": 4, "dp": 1}
    (outcome,) = score_batch(spec, [build_candidate(spec, params)])
    value, message = outcome.attrs["constraints"]["divisibility"]
    assert value == 1 and "splits the layer pattern" in message
    assert outcome.attrs["feasible"] is False
