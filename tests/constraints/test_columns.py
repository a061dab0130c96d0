"""`constraints.columns`: every constraint of one architecture under many deployments at once
equals `check_candidate`'s value for each (every shipped study's space and deployment grid,
every engine), and the GEMM dimensions on columns are `gemm_dims`' after its dedupe."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constraints import check_candidate
from constraints.columns import DeploymentColumns, constraint_values, gemm_dim_columns
from constraints.shapes import gemm_dims
from cost_model import ConfigError, Deployment, make_architecture
from search.study.evaluation import constraint_rules
from search.study.space import (
    DEPLOYMENT_PARAMS, build_candidate, build_deployment, complete_params, deployment_grid,
    searched_dimensions,
)  # fmt: skip
from search.study.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted((REPO / "studies").glob("*.toml"))


def _grid(spec, params, is_moe) -> list[Deployment]:
    deps = []
    for combo in deployment_grid(spec.space):
        try:
            deps.append(build_deployment({**params, **combo}, is_moe))
        except ConfigError:
            continue
    return list(dict.fromkeys(deps))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_equal_check_candidate(path, data):
    spec = load_spec(path)
    dims = {n: d for n, d in searched_dimensions(spec.space).items() if n not in DEPLOYMENT_PARAMS}
    params = complete_params(spec, {n: data.draw(st.sampled_from(list(d.options)), label=n)
                                    for n, d in dims.items()})
    cand = build_candidate(spec, params)
    if not cand.valid:
        return
    deps = _grid(spec, params, cand.arch.ffn.is_moe)
    limit = np.arange(len(deps), dtype=float)  # 0 (nothing fits) … : memory_fit both ways
    rules = constraint_rules(spec)
    values = constraint_values(cand.arch, DeploymentColumns.of(deps), rules, limit)
    for j, dep in enumerate(deps):
        expected = check_candidate(cand.arch, dep, rules, limit[j])
        assert {n: float(v[j]) for n, v in values.items()} == \
            {n: v.value for n, v in expected.items()}, dep


def test_distinct_dims_follow_gemm_dims():
    """A GQA model whose output projection K (heads·head_dim/TP) and q_proj N share a label: one
    dim; with Helix (kvp 2) the output projection is over TP·KVP, a dim of its own label; with
    TP beyond the KV heads, ⌈n_kv/TP⌉·head_dim. Sizes and order as `gemm_dims`."""
    arch = make_architecture(name="t", vocab_size=1000, hidden_size=1024, num_layers=2,
                             num_attention_heads=8, num_kv_heads=2, head_dim=128,
                             intermediate_size=2816, max_position_embeddings=4096)
    deps = [Deployment(tp=1), Deployment(tp=4), Deployment(tp=2, kvp=2), Deployment(tp=8)]
    dims = gemm_dim_columns(arch, DeploymentColumns.of(deps))
    for j, dep in enumerate(deps):
        expected = gemm_dims(arch, dep)
        kept = np.flatnonzero(dims.first[:, j])
        assert [float(dims.size[i, j]) for i in kept] == [d.size for d in expected]
        assert [bool(dims.reduction[i, j]) for i in kept] == [d.reduction for d in expected]
        # each alone, after the others (TP 4 and TP 2 · KVP 2 shard the same entries: only
        # Helix tells their labels apart, and the kept flags must too)
        alone = gemm_dim_columns(arch, DeploymentColumns.of([dep]))
        assert [float(s) for s in alone.size[alone.first[:, 0], 0]] == [d.size for d in expected]
    # tp 8 > 2 KV heads: ⌈2/8⌉·128 = 128 per GPU; H′/8 = 352; heads·d_h/8 = 128
    assert sorted({float(s) for s in dims.size[dims.first[:, 3], 3]}) == [128.0, 352.0, 1024.0]


def test_taken_deployments_are_the_tuple_hashed_once():
    """`take` keeps the deployments picked, in order, as a tuple equal to (and hashed as) the
    plain tuple of them, so the caches keyed by a sweep's deployments find it either way."""
    from constraints.columns import Deployments, static_values

    deps = [Deployment(tp=1), Deployment(tp=2), Deployment(tp=4), Deployment(tp=8)]
    taken = DeploymentColumns.of(deps).take([3, 1])
    assert isinstance(taken.deployments, Deployments)
    assert taken.deployments == (deps[3], deps[1]) and list(taken.tp) == [8, 2]
    assert hash(taken.deployments) == hash((deps[3], deps[1])) == hash(taken.deployments)
    assert {taken.deployments: 1}[(deps[3], deps[1])] == 1
    arch = make_architecture(name="t", vocab_size=1000, hidden_size=1024, num_layers=2,
                             num_attention_heads=8, num_kv_heads=2, head_dim=128,
                             intermediate_size=2816, max_position_embeddings=4096)
    rules = constraint_rules(load_spec(REPO / "studies" / "quickstart.toml"))
    fresh = DeploymentColumns(tuple(taken.deployments), *(getattr(taken, f) for f in (
        "tp", "ep", "pp", "dp", "kvp", "ffn_tp", "moe_tp", "gpus", "block")))
    assert static_values(arch, taken, rules) is static_values(arch, fresh, rules)


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_kept_dedupe_flags_follow_gemm_dims_for_every_design(path):
    """The dedupe's flags are kept per (labels, unsharded entries, Helix deployments) and shared
    between architectures: over designs of each shipped study (scored one after the other, the
    flags kept from the ones before), every deployment's distinct dims are `gemm_dims`'."""
    from constraints.columns import _FLAGS

    spec = load_spec(path)
    dims = {n: d for n, d in searched_dimensions(spec.space).items() if n not in DEPLOYMENT_PARAMS}
    _FLAGS.clear()
    checked = 0
    for i in range(12):
        params = complete_params(spec, {n: list(d.options)[(i * 7 + j) % len(list(d.options))]
                                        for j, (n, d) in enumerate(dims.items())})
        cand = build_candidate(spec, params)
        if not cand.valid:
            continue
        deps = _grid(spec, params, cand.arch.ffn.is_moe)
        found = gemm_dim_columns(cand.arch, DeploymentColumns.of(deps))
        for j, dep in enumerate(deps):
            expected = gemm_dims(cand.arch, dep)
            kept = np.flatnonzero(found.first[:, j])
            assert [float(found.size[k, j]) for k in kept] == [d.size for d in expected]
            assert [bool(found.reduction[k, j]) for k in kept] == [d.reduction for d in expected]
        checked += 1
    assert 0 < len(_FLAGS) < checked  # shared: fewer kept than designs checked
