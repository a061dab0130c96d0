"""The architecture's frontier as the objective: a study that sweeps deployments scores every
sampled architecture under every deployment its space allows and takes the envelope (issue:
"Rank architectures by their own frontier")."""

from pathlib import Path

import numpy as np
import pytest

from cost_model import frontier_area
from search.study.evaluation import hard_constraints, score_valid, trial_candidate, window
from search.study.report import load_records, pareto_document
from search.study.runner import run_study
from search.study.space import (
    SWEEP_MAX_DEPLOYMENTS, build_candidate, complete_params, deployment_combinations,
    deployment_grid, runnable, runnable_columns, swept_candidates, sweeps_deployments,
)
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage

from constraints import check_candidate
from search.study.evaluation import constraint_rules

REPO = Path(__file__).resolve().parents[3]
MOE = REPO / "studies" / "moe-400b-gb300-nvl72.toml"
STUDIES = sorted((REPO / "studies").glob("*.toml"))


def _copy(tmp_path: Path, source: Path, **replace: str) -> Path:
    text = source.read_text()
    for old, new in replace.items():
        text = text.replace(old, new)
    target = tmp_path / source.name
    target.write_text(text)
    return target


def _run(path: Path, trials: int):
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=False)
    try:
        run_study(spec, handle, trials, spec.seed, show_progress=False)
    finally:
        handle.close()
    return spec, load_study(spec, open_storage(path, spec, None, shared=True))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_shipped_study_sweeps_its_deployments(path):
    """Each shipped study's deployment space is small enough to enumerate per architecture."""
    spec = load_spec(path)
    assert deployment_combinations(spec.space) <= SWEEP_MAX_DEPLOYMENTS
    assert sweeps_deployments(spec)


def test_grid_is_the_product_of_the_deployment_dimensions():
    """moe-400b-gb300-nvl72: ep × dp × precision choices, every other deployment field fixed."""
    spec = load_spec(MOE)
    grid = deployment_grid(spec.space)
    assert len(grid) == deployment_combinations(spec.space)
    assert len({tuple(sorted(g.items())) for g in grid}) == len(grid)


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_runnable_columns_are_the_runnable_deployments(path):
    """The columns kept with `runnable` are its grid's columns at its positions, in order: the
    deployments `swept_candidates` scores (every shipped study, a design of its space)."""
    spec = load_spec(path)
    params = complete_params(spec, {})
    cand = build_candidate(spec, params)
    if not cand.valid:
        pytest.skip(f"the space's first design is no model: {cand.invalid_reason}")
    grid, kept = runnable(spec, cand.arch)
    cols = runnable_columns(spec, cand.arch)
    assert cols.deployments == tuple(grid.columns.deployments[i] for i in kept)
    assert list(cols.deployments) == [c.deployment for c in swept_candidates(spec, cand)]
    assert all(list(getattr(cols, f)) == list(getattr(grid.columns, f)[kept])
               for f in ("tp", "ep", "pp", "dp", "kvp", "ffn_tp", "moe_tp", "gpus", "block"))
    assert runnable_columns(spec, cand.arch) is cols


def _true_envelope(spec, cand) -> float:
    """By hand: every valid deployment of the space under `max_gpus`, kept when it passes every
    hard constraint, their operating points pooled, the area of the pooled frontier."""
    swept = swept_candidates(spec, cand)
    scores = score_valid(spec, swept)
    rules, hard = constraint_rules(spec), hard_constraints(spec)
    keep = [i for i, c in enumerate(swept)
            if all(v.value <= 0 for n, v in check_candidate(
                c.arch, c.deployment, rules, float(scores.max_concurrency[i])).items()
                if n in hard)]
    p, w = scores.points, window(spec)
    x = p.tokens_per_s_per_user[keep].reshape(1, -1)
    y = np.where(p.fits_memory[keep], p.tokens_per_s_per_gpu[keep], np.nan).reshape(1, -1)
    return float(frontier_area(x, y, w.x_lo, w.x_hi, w.log_x)[0])


@pytest.fixture(scope="module")
def moe_study(tmp_path_factory):
    """The shipped MoE rack study, 256 trials (seed 0): a dozen feasible designs; and its file."""
    path = _copy(tmp_path_factory.mktemp("moe"), MOE)
    return (*_run(path, 256), path)


def test_reported_frontier_area_is_the_true_envelope(moe_study):
    """moe-400b-gb300-nvl72 (32 deployment combinations): each Pareto entry's frontier area, its
    trial's stored objective and the envelope recomputed by hand over the study's deployments
    are one number; the entry names the deployment and concurrency of each frontier point."""
    spec, study, _ = moe_study
    doc = pareto_document(spec, study)
    assert doc["pareto"]
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    for item in doc["pareto"][:4]:
        trial = trials[item["trial"]]
        cand = trial_candidate(spec, trial.params, trial.user_attrs)
        truth = _true_envelope(spec, cand)
        assert item["frontier_area"] == pytest.approx(truth, rel=1e-6)
        assert trial.values[spec.objectives.names.index("frontier_area")] == \
            pytest.approx(truth, rel=1e-6)
        for point in item["frontier"]:
            assert point["deployment"].startswith("tp") and point["concurrency"] >= 1


def test_optuna_samples_shapes_only(moe_study):
    """Deployment dimensions are not Optuna parameters of a sweeping study; each trial stores
    the deployment its sweep chose, and show/export rebuild that one."""
    spec, study, _ = moe_study
    for t in study.get_trials(deepcopy=False):
        assert not {"ep", "dp", "precision"} & set(t.params)
    done = [r for r in load_records(spec, study) if r.feasible]
    assert done
    chosen = done[0].trial.user_attrs["details"]["deployment_params"]
    assert done[0].candidate.deployment.dp == chosen["dp"]
    assert done[0].candidate.deployment.precision == chosen["precision"]


def test_sampled_mode_keeps_deployments_as_dimensions(tmp_path):
    path = _copy(tmp_path, MOE, **{
        "batch_size = 128": "batch_size = 16",
        'sampler = "nsga2"': 'sampler = "nsga2"\ndeployments = "sampled"'})
    spec, study = _run(path, 16)
    assert not sweeps_deployments(spec)
    assert any({"ep", "dp", "precision"} & set(t.params) for t in study.get_trials())


def test_serving_modes_are_swept_like_any_deployment(tmp_path):
    """moe-serving-modes-gb300 sweeps Helix (kvp), MTP (spec_tokens) and disaggregation
    (serving) with DP × EP: every feasible trial records which mode its chosen deployment
    uses, and the envelope points name them (`kvp2`, `mtp2`, `disagg` in the labels)."""
    path = _copy(tmp_path, REPO / "studies" / "moe-serving-modes-gb300.toml")
    spec, study = _run(path, 256)
    assert sweeps_deployments(spec) and deployment_combinations(spec.space) == 48
    labels = {point[0] for t in study.get_trials(deepcopy=False)
              if t.user_attrs.get("feasible")
              for point in t.user_attrs["details"].get("frontier_deployments", [])}
    assert labels and any("disagg" in label for label in labels)
    assert any("disagg" not in label for label in labels)


def test_export_the_deployment_of_a_frontier_point(moe_study, capsys):
    """`export --format vllm --interactivity X`: the frontier point of most tokens/s/GPU at X
    tokens/s/user or more names the deployment exported, and its concurrency (capped by the
    engine's batch limit) is max_num_seqs; beyond the frontier it is one line, exit 2."""
    import json
    import shlex

    from search.cli.main import main

    spec, study, path = moe_study
    best = pareto_document(spec, study)["pareto"][0]
    out = path.parent / "serve.json"
    argv = ["export", str(path), str(best["trial"]), "--format", "vllm", "-o", str(out)]
    assert main([*argv, "--interactivity", "10"]) == 0
    doc = json.loads(out.read_text())
    point = doc["operating_point"]
    assert point["tokens_per_s_per_user"] >= 10
    command = shlex.split(doc["instances"][0]["commands"][0])
    value = lambda flag: int(command[command.index(flag) + 1]) if flag in command else 1  # noqa: E731
    dp = value("--data-parallel-size")  # absent for DP 1
    assert value("--max-num-seqs") <= -(-point["concurrency"] // dp)  # ⌈c / DP⌉ per DP rank
    assert f" dp{dp} " in f" {point['deployment']} "
    capsys.readouterr()
    assert main([*argv, "--interactivity", "1e9"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "beyond" in err


def test_expert_precision_is_a_deployment_dimension(tmp_path):
    """`moe_precision = { choices = ["same", "nvfp4"] }` sweeps FP8 experts beside NVFP4 ones
    under FP8 attention (as DeepSeek-R1-NVFP4 ships); a format the GPU cannot run is refused
    at load."""
    from search.study.spec import SpecError

    path = _copy(tmp_path, MOE, **{'precision = { choices = ["nvfp4", "fp8"] }':
                                   'precision = { value = "fp8" }\n'
                                   'moe_precision = { choices = ["same", "nvfp4"] }'})
    spec = load_spec(path)
    assert deployment_combinations(spec.space) == 32
    cand = next(c for c in (build_candidate(spec, complete_params(spec, {})),) if c.valid)
    formats = {(c.deployment.precision, c.deployment.expert_precision)
               for c in swept_candidates(spec, cand)}
    assert formats == {("fp8", "fp8"), ("fp8", "nvfp4")}
    hopper = _copy(tmp_path / "h", MOE, **{'gpu = "gb300"': 'gpu = "h200"'}) \
        if (tmp_path / "h").mkdir() is None else None
    with pytest.raises(SpecError, match="does not run on h200"):
        load_spec(hopper)


def test_a_deployment_space_beyond_the_sweep_limit_is_an_error(tmp_path, capsys):
    """96 combinations (dp 4 × ep 4 × precision 2 × kvp 3) > 64: never a silent switch to
    sampled deployments; one line naming the limit and the dimensions, exit 2, nothing
    written; `deployments = "sampled"` runs it."""
    from search.cli.main import main
    from search.study.errors import SpecError

    path = _copy(tmp_path, MOE, **{'tp = { value = 1 }': 'tp = { value = 1 }\n'
                                   'kvp = { choices = [1, 2, 4] }'})
    spec = load_spec(path)
    assert deployment_combinations(spec.space) == 96
    with pytest.raises(SpecError) as raised:
        sweeps_deployments(spec)
    assert str(raised.value) == (
        "`deployments`: the space's deployment dimensions make 96 combinations (ep 4 × dp 4 × "
        "precision 2 × kvp 3), above the sweep limit 64; narrow them, or set `deployments = "
        "\"sampled\"` to sample them as dimensions of each trial")
    assert main(["search", str(path), "--trials", "4", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep limit 64" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "out").exists()
    sampled = spec.model_copy(update={"deployments": "sampled"})
    assert not sweeps_deployments(sampled)
