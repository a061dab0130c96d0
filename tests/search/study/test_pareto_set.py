"""The Pareto set is one: one entry per distinct design (`Architecture.design_key`: fields the
model does not use make no twins), no entry dominated by another in the values it reports, and
exactly the designs no other design dominates. Checked on every shipped study
(`check_pareto_set`, called by test_search's run of each) and on trials placed by hand."""

import json
import math
import shutil
from pathlib import Path

import moocore
import numpy as np
import optuna
import pytest

import search.study.evaluation as evaluation
from cost_model.architecture import Architecture, make_architecture
from search.cli.main import main
from search.study.convergence import bounds_reached
from search.plots.kinds import hypervolume_history
from search.study.report import design_items, group_designs, load_records, pareto_document
from search.study.evaluation import hard_constraints
from search.study.runner import RunSummary, run_batch
from search.study.space import build_candidate, complete_params, design_identity
from search.study.spec import StudySpec, load_spec
from search.cli.study import load_study, open_storage

REPO = Path(__file__).resolve().parents[3]
MOE = REPO / "studies" / "moe-400b-gb300-nvl72.toml"
QUICKSTART = REPO / "studies" / "quickstart.toml"
# rank 1 of moe-400b-gb300-nvl72 after 2,000 trials (seed 0): no dense layers, so its stored
# intermediate_size is a field the model does not use
MOE_WINNER = {"hidden_size": 4608, "num_layers": 32, "num_kv_heads": 8, "q_per_kv": 16,
              "intermediate_size": 18432, "num_experts": 256, "experts_per_token": 6,
              "moe_intermediate_size": 3072, "num_shared_experts": 1, "first_dense_layers": 0,
              "ep": 32, "dp": 32, "precision": "nvfp4"}


def _candidate(spec: StudySpec, **params):
    return build_candidate(spec, complete_params(spec, {**MOE_WINNER, **params}))


def _minimized(spec: StudySpec, values: np.ndarray) -> np.ndarray:
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in spec.objectives.directions])
    return values * sign


def _dominated_rows(spec: StudySpec, items: list[dict]) -> list[int]:
    """Ranks of entries another entry dominates, in the values the entries report."""
    v = _minimized(spec, np.array([[i["design_values"][n] for n in spec.objectives.names]
                                   for i in items], dtype=float))
    return [items[a]["rank"] for a in range(len(items)) for b in range(len(items))
            if a != b and np.all(v[b] <= v[a]) and np.any(v[b] < v[a])]


def check_pareto_set(spec: StudySpec, study: optuna.Study) -> dict:
    """Every property of the Pareto set of `study`; returns its `pareto --json` document."""
    doc = pareto_document(spec, study)
    items = doc["pareto"]
    records = {r.trial.number: r for r in load_records(spec, study)}
    keys = [records[i["trial"]].arch_key for i in items]
    assert len(set(keys)) == len(keys), "two entries share a design"
    names = [i["architecture"]["name"] for i in items]
    assert len(set(names)) == len(names), "two designs share a name"
    assert _dominated_rows(spec, items) == []
    for item in items:
        assert item["frontier_area"] == item["design_values"].get("frontier_area",
                                                                  item["frontier_area"])
        assert item["frontier_area"] >= item["trial_frontier_area"] * (1 - 1e-12)
    # exactly the non-dominated designs: every design rescored, none pruned
    designs = group_designs(list(records.values()))
    every = design_items(spec, designs)
    exact = _minimized(spec, np.array([[i["design_values"][n] for n in spec.objectives.names]
                                       for i in every], dtype=float))
    keep = moocore.is_nondominated(exact, keep_weakly=True)
    front = {d.records[0].arch_key for d, k in zip(designs, keep) if k}
    assert set(keys) == front
    return doc


# ---- the canonical design ----------------------------------------------------------------------


def test_unused_dense_width_makes_no_twin():
    spec = load_spec(MOE)
    a, b = _candidate(spec), _candidate(spec, intermediate_size=12288)
    assert a.params != b.params
    assert a.arch.design_key == b.arch.design_key and a.arch.name == b.arch.name
    assert a.arch.name == "H4608-L32-A128x128kv8-E256k6x3072s1"  # no unused -F18432
    dense = _candidate(spec, first_dense_layers=3), _candidate(spec, first_dense_layers=1)
    assert dense[0].arch.name.endswith("-F3x18432") and dense[1].arch.name.endswith("-F1x18432")
    assert len({a.arch.design_key, *(d.arch.design_key for d in dense)}) == 3
    wider = _candidate(spec, first_dense_layers=3, intermediate_size=12288)
    assert wider.arch.design_key != dense[0].arch.design_key
    assert wider.arch.name.endswith("-F3x12288")


def test_dense_model_ignores_expert_fields_and_names_a_searched_vocab():
    spec = load_spec(QUICKSTART)
    base = {"hidden_size": 2048, "num_layers": 16, "head_dim": 128, "num_kv_heads": 8,
            "q_per_kv": 4, "intermediate_size": 8192}
    a = build_candidate(spec, complete_params(spec, base))
    b = build_candidate(spec, complete_params(spec, {**base, "experts_per_token": 8,
                                                     "moe_intermediate_size": 512,
                                                     "num_shared_experts": 1,
                                                     "first_dense_layers": 2}))
    assert a.arch.design_key == b.arch.design_key
    assert a.arch.name == b.arch.name == "H2048-L16-A32x128kv8-F8192"
    searched = spec.model_copy(update={"space": spec.space.model_copy(update={
        "vocab_size": spec.space.vocab_size.model_copy(update={"value": None,
                                                              "choices": [32768, 128256]})})})
    small = build_candidate(searched, complete_params(searched, {**base, "vocab_size": 32768}))
    assert small.arch.name == "H2048-L16-A32x128kv8-F8192-V32768"
    assert small.arch.design_key != a.arch.design_key


def test_the_memo_scores_twins_once(monkeypatch):
    spec = load_spec(MOE)
    twins = [_candidate(spec, intermediate_size=w) for w in (12288, 18432, 24576)]
    evaluation._memo.clear()
    scored = []
    fresh = evaluation.score_batch
    monkeypatch.setattr(evaluation, "score_batch",
                        lambda s, c: scored.append(len(c)) or fresh(s, c))
    outcomes = evaluation.evaluate_batch(spec, twins)
    assert scored == [1]
    assert len({(tuple(o.values), o.attrs["architecture"]) for o in outcomes}) == 1


# ---- trials placed by hand ---------------------------------------------------------------------


def _study_of(spec: StudySpec, params: list[dict]) -> optuna.Study:
    """An in-memory study whose trials are `params`, in order, recorded as the runner records
    them (`run_batch`: ask, score the batch, tell; the enqueued parameters are what is asked)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=spec.objectives.directions)
    for p in params:
        study.enqueue_trial(p)
    run_batch(study, spec, len(params), hard_constraints(spec), RunSummary())
    return study


def test_twins_and_deployments_of_one_design_are_one_entry():
    """Sampled deployments (the study's own deployment dimensions): trials of one design under
    two deployments are one entry over both."""
    spec = load_spec(MOE).model_copy(update={"batch_size": 8, "deployments": "sampled"})
    other_deployment = {"dp": 16, "ep": 16}
    study = _study_of(spec, [MOE_WINNER, {**MOE_WINNER, "intermediate_size": 12288},
                             {**MOE_WINNER, **other_deployment}])
    assert all(t.user_attrs["feasible"] for t in study.trials)
    doc = check_pareto_set(spec, study)
    [entry] = doc["pareto"]
    assert entry["design_trials"] == 3
    assert entry["architecture"]["intermediate_size"] == 0
    assert len(entry["deployments_evaluated"]) == 2
    trial_areas = [t.user_attrs["frontier_area"] for t in study.trials]
    assert entry["frontier_area"] >= max(trial_areas)  # the envelope of both deployments


# ---- every shipped study (run by test_search.test_every_shipped_study_runs) ---------------------


def test_moe_study_after_enough_trials_to_repeat_designs(tmp_path):
    """384 trials of the MoE study (deployments swept per architecture, NSGA-II children that
    are twins of a tried design redrawn: `search/study/distinct_children.py`): the Pareto set holds
    every property, one entry per design and at most one per design tried."""
    target = tmp_path / MOE.name
    shutil.copy(MOE, target)
    assert main(["search", str(target), "--trials", "384", "--no-progress"]) == 0
    spec = load_spec(target)
    study = load_study(spec, open_storage(target, spec, None, shared=True))
    doc = check_pareto_set(spec, study)
    params_of: dict[tuple, set] = {}
    for r in load_records(spec, study):
        if r.feasible and r.candidate.valid:
            params_of.setdefault(r.arch_key, set()).add(tuple(sorted(r.trial.params.items())))
    assert doc["pareto"] and len(doc["pareto"]) <= len(params_of)
    repeated = sum(len(p) - 1 for p in params_of.values())
    assert repeated <= len(params_of) // 10  # twins are redrawn (a few survive 8 redraws)


# ---- bounds -------------------------------------------------------------------------------------


def test_bounds_name_only_edges_the_design_uses():
    spec = load_spec(MOE)
    # num_layers 32 and hidden 4096 are the space's minimum; intermediate_size 12288 is its
    # minimum too, but unused without dense layers; ep 8 / dp 8 the deployment's minimum
    cand = _candidate(spec, hidden_size=4096, intermediate_size=12288, ep=8, dp=8)
    hits = {(h["dimension"], h["bound"]): h for h in bounds_reached(spec, [(1, [cand])])}
    assert {("hidden_size", "min"), ("num_layers", "min"), ("q_per_kv", "max"),
            ("moe_intermediate_size", "max"), ("ep", "min"), ("dp", "min")} <= set(hits)
    assert not any(name == "intermediate_size" for name, _ in hits)
    unshared = _candidate(spec, num_shared_experts=0)
    both = {(h["dimension"], h["bound"]) for h in bounds_reached(spec, [(1, [cand]),
                                                                        (2, [unshared])])}
    assert ("num_shared_experts", "max") in hits  # two options: an edge every entry takes
    assert ("num_shared_experts", "max") not in both and ("num_shared_experts", "min") not in both
    assert hits[("num_layers", "min")] == {"dimension": "num_layers", "bound": "min",
                                           "value": 32, "entries": 1, "ranks": [1]}
    dense = _candidate(spec, hidden_size=4096, intermediate_size=12288, first_dense_layers=3)
    hits = {(h["dimension"], h["bound"]) for h in bounds_reached(spec, [(1, [dense])])}
    assert {("intermediate_size", "min"), ("first_dense_layers", "max")} <= hits


def test_natural_edges_are_not_bounds():
    spec = load_spec(MOE)
    wide = spec.model_copy(update={"space": spec.space.model_copy(update={
        "dp": spec.space.dp.model_copy(update={"choices": [8, 16, 32, 64]}),
        "num_kv_heads": spec.space.num_kv_heads.model_copy(update={"choices": [1, 4, 8]})})})
    cand = build_candidate(wide, complete_params(wide, {**MOE_WINNER, "dp": 64, "ep": 64,
                                                         "num_kv_heads": 1, "q_per_kv": 16}))
    hits = {(h["dimension"], h["bound"]) for h in bounds_reached(wide, [(1, [cand])])}
    assert ("dp", "max") not in hits and ("ep", "max") not in hits  # 128 > max_gpus 72
    assert ("num_kv_heads", "min") not in hits  # nothing below one KV head


# ---- convergence --------------------------------------------------------------------------------


def test_convergence_is_the_hypervolume_of_the_last_fifth(tmp_path, capsys):
    target = tmp_path / QUICKSTART.name
    shutil.copy(QUICKSTART, target)
    assert main(["search", str(target), "--trials", "192", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "\nconvergence: the front " in out and "\nbounds: " in out
    assert main(["pareto", str(target), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    c = doc["convergence"]
    assert c["trials"] == 192 and c["early_trials"] == math.ceil(192 * 0.8)
    spec = load_spec(target)
    history = hypervolume_history(spec, load_study(spec, open_storage(target, spec, None, True)))
    assert c["hypervolume"] == pytest.approx(history.hypervolume[-1], rel=1e-12)
    assert c["relative_change_frac"] == pytest.approx(
        (c["hypervolume"] - c["hypervolume_early"]) / c["hypervolume"], rel=1e-12)
    assert c["still_moving"] == (c["relative_change_frac"] > c["moving_threshold_frac"])
    assert isinstance(doc["bounds"], list)
    for key in ("study", "trials", "feasible", "objectives", "pareto"):  # the schema stays
        assert key in doc


def test_design_identity_is_equal_for_twins_only():
    spec = load_spec(MOE)
    assert design_identity(spec, MOE_WINNER) == design_identity(
        spec, {**MOE_WINNER, "intermediate_size": 12288})
    assert design_identity(spec, MOE_WINNER) != design_identity(spec, {**MOE_WINNER, "dp": 16})
    assert design_identity(spec, {**MOE_WINNER, "num_experts": 0, "intermediate_size": 0}) is None


def _llama_like(**fields) -> Architecture:
    base = dict(name="a", vocab_size=32000, hidden_size=1024, num_layers=4,
                num_attention_heads=8, num_kv_heads=8, head_dim=128, intermediate_size=4096,
                max_position_embeddings=4096)
    return make_architecture(**{**base, **fields})


def test_design_key_sets_labels_and_uniform_patterns_aside():
    plain = _llama_like()
    assert _llama_like(name="b", family="llama").design_key == plain.design_key
    sliding = _llama_like(sliding_window=512)
    listed = _llama_like(sliding_window=512, layer_types=("sliding_attention",) * 4)
    assert listed.design_key == sliding.design_key != plain.design_key
    mixed = _llama_like(sliding_window=512, layer_types=("sliding_attention", "full_attention") * 2)
    assert mixed.design_key != sliding.design_key
    # per-layer patterns: a pattern that is the same on every layer is not a second spelling of
    # the plain model (the architecture refuses it), a varying one is another design
    from cost_model.errors import ConfigError

    for uniform in ({"layer_mixers": ("attention",) * 4}, {"layer_ffn_widths": (4096,) * 4}):
        with pytest.raises(ConfigError, match="must be None"):
            _llama_like(**uniform)
    assert _llama_like(layer_ffn_widths=(4096, 0, 4096, 2048)).design_key != plain.design_key
