"""`[sla]` and the GPU budget in a study: the frontier counts only points that meet the limits,
the report says which limit binds on the top design; `gpus` fixes the instance size and
`total_gpus` caps it; spec errors name the field."""

import tomllib

import numpy as np
import optuna
import pytest

from search.study.errors import SpecError
from search.study.evaluation import score_valid, service_level
from search.study.exhaustive import run_exhaustive
from search.study.report import pareto_document
from search.study.runner import open_study
from search.study.space import build_candidate, complete_params, swept_candidates
from search.study.spec import spec_from_dict
from search.study.storage import StorageHandle
from tests.search.study.test_exhaustive import TINY


def _spec(**sections):
    doc = tomllib.loads(TINY)
    for name, value in sections.items():
        doc[name] = {**doc.get(name, {}), **value}
    return spec_from_dict(doc)


@pytest.mark.parametrize(("sla", "message"), [
    ({"tpot_max_ms": 20.0, "interactivity_min": 50.0},
     "study: `sla`: give `tpot_max_ms` or `interactivity_min`, not both"),
    ({}, "study: `sla`: `[sla]` needs `ttft_max_ms`, `tpot_max_ms` or `interactivity_min`"),
    ({"ttft_max_ms": -1.0}, "study: `sla.ttft_max_ms` (-1.0): Input should be greater than 0"),
    ({"percentile": 99}, "study: `sla.percentile` is not a known key"),
])
def test_sla_errors_name_the_field(sla, message):
    with pytest.raises(SpecError) as raised:
        _spec(sla=sla)
    assert str(raised.value).startswith(message)


def test_gpu_budget_fields():
    """`gpus` alone sets `max_gpus`; `gpus` above `max_gpus` or a fleet smaller than one
    instance are errors naming the fields."""
    spec = _spec(hardware={"gpus": 2})
    assert (spec.hardware.gpus, spec.hardware.max_gpus) == (2, 2)
    with pytest.raises(SpecError, match=r"`gpus` \(4\) must be <= `max_gpus` \(2\)"):
        _spec(hardware={"gpus": 4})
    with pytest.raises(SpecError, match=r"`total_gpus` \(1\) must be >= `gpus` \(2\)"):
        _spec(hardware={"gpus": 2, "total_gpus": 1})


def test_interactivity_min_is_a_tpot_limit():
    """interactivity ≥ 50 tokens/s/user is TPOT ≤ 1000/50 = 20 ms."""
    level = service_level(_spec(sla={"interactivity_min": 50.0, "ttft_max_ms": 500.0}))
    assert (level.tpot_max_s, level.ttft_max_s) == (0.02, 0.5)


def _cand(spec):
    return build_candidate(spec, complete_params(spec, {"hidden_size": 2048, "num_layers": 16,
                                                        "num_kv_heads": 8,
                                                        "intermediate_size": 6144}))


def test_exact_gpus_and_fleet_shape_the_sweep():
    """tp 1|2 on at most 2 GPUs: `gpus = 2` keeps the tp2 deployments only; a fleet of 3 GPUs
    (`total_gpus`) keeps both, and the tp2 instance leaves one GPU over: its throughput per
    fleet GPU is 2/3 of the instance's."""
    free, exact = _spec(), _spec(hardware={"gpus": 2})
    assert {c.deployment.tp for c in swept_candidates(free, _cand(free))} == {1, 2}
    assert {c.deployment.tp for c in swept_candidates(exact, _cand(exact))} == {2}
    fleet = _spec(hardware={"total_gpus": 3})
    cands = [c for c in swept_candidates(fleet, _cand(fleet)) if c.deployment.tp == 2][:1]
    packed, alone = score_valid(fleet, cands).points, score_valid(free, cands).points
    fits = alone.fits_memory
    assert np.allclose(packed.tokens_per_s_per_gpu[fits], alone.tokens_per_s_per_gpu[fits] * 2 / 3,
                       rtol=1e-15)


def _exact_doc(spec):
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", shared=False)
    study = open_study(spec, handle, 0)
    run_exhaustive(spec, study, show_progress=False)
    return pareto_document(spec, study)


def test_the_report_names_the_binding_limit():
    """A TPOT limit under what the top design reaches at its throughput end binds (lifting it
    grows the top design's frontier); a TTFT limit of a minute does not."""
    free = _exact_doc(_spec())
    top = free["pareto"][0]
    slowest_ms = 1000.0 / min(p["tokens_per_s_per_user"] for p in top["frontier"])
    spec = _spec(sla={"tpot_max_ms": slowest_ms / 2, "ttft_max_ms": 60_000.0})
    doc = _exact_doc(spec)
    limits = {b["limit"]: b for b in doc["sla"]["binding"]}
    assert limits["tpot_max_ms"]["binds"] and not limits["ttft_max_ms"]["binds"]
    assert limits["tpot_max_ms"]["area_without"] > doc["sla"]["area"]
    for item in doc["pareto"]:  # every frontier point meets the limit
        assert all(1000.0 / p["tokens_per_s_per_user"] <= slowest_ms / 2 * (1 + 1e-12)
                   for p in item["frontier"])


def test_export_reaches_every_point_of_a_sampled_design_row(tmp_path, capsys):
    """Deployments sampled: one design under tp1 bf16 and tp2 fp8 (two trials, recorded as the
    runner records them); its Pareto row is the envelope of both, and `export --interactivity`
    at each envelope point writes the deployment of the trial that realizes it, whichever
    trial the row names."""
    import json

    from search.cli.main import main
    from search.cli.study import open_storage
    from search.study.evaluation import evaluate_batch, stored_attrs
    from search.study.proposals import sampled_distributions
    from search.study.spec import load_spec

    path = tmp_path / "sampled.toml"
    path.write_text(TINY.replace('sampler = "exhaustive"', 'sampler = "random"\n'
                                 'deployments = "sampled"'))
    spec = load_spec(path)
    shape = {"hidden_size": 2048, "num_layers": 16, "num_kv_heads": 8,
             "intermediate_size": 6144}
    space = sampled_distributions(spec)
    handle = open_storage(path, spec, None, shared=False)
    study = open_study(spec, handle, 0)
    for tp, fmt in ((1, "bf16"), (2, "fp8")):
        params = {**shape, "tp": tp, "precision": fmt}
        [outcome] = evaluate_batch(spec, [build_candidate(spec, complete_params(spec, params))])
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions={n: space[n] for n in params}, values=outcome.values,
            user_attrs=stored_attrs(outcome)))
    handle.close()
    assert main(["pareto", str(path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["pareto"]
    tps = {p["trial"]: p["deployment"].split()[0] for p in row["frontier"]}
    assert set(tps.values()) == {"tp1", "tp2"}  # both deployments are on the envelope
    for point in row["frontier"]:
        out = tmp_path / f"vllm-{point['concurrency']}-{point['trial']}.json"
        assert main(["export", str(path), str(row["trial"]), "--format", "vllm", "-o", str(out),
                     "--interactivity", repr(point["tokens_per_s_per_user"])]) == 0
        written = json.loads(out.read_text())
        assert written["operating_point"]["tokens_per_s_per_user"] >= \
            point["tokens_per_s_per_user"]
        best = max((p for p in row["frontier"] if p["tokens_per_s_per_user"] >=
                    point["tokens_per_s_per_user"]), key=lambda p: p["tokens_per_s_per_gpu"])
        [command] = written["instances"][0]["commands"]
        tp = command.split("--tensor-parallel-size ")[1].split()[0]
        assert f"tp{tp}" == tps[best["trial"]]
