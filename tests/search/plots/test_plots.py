"""`archscout plot --kind frontier|breakdown|roofline|history` and `evaluate --plot` through
`main(argv)` on a tiny study: every kind writes a PNG that is a real, non-blank image, and the
numbers drawn are the cost model's."""

import json
from pathlib import Path

import matplotlib.image
import moocore
import numpy as np
import pytest

from cost_model import get_hardware, get_precision
from search.cli.main import main
from search.cli.inspect import PLOT_KINDS, find_trial
from search.plots.kinds import (
    HV_REFERENCE,
    LONG_CONTEXT_ISL_TOKENS,
    breakdown_regimes,
    hypervolume_history,
    roofline_points,
)
from search.study.report import load_records, pareto_records
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage
from tests.search.cli.test_inspect import PNG_SIGNATURE, bad_input, make_study, pareto_items

REPO = Path(__file__).resolve().parents[3]
QWEN = str(REPO / "tests" / "data" / "hf_configs" / "Qwen3-0.6B.json")
MIN_PNG_BYTES = 10_000  # a titled, labeled 1200×600 chart; an empty canvas is ~5 KB
FAILED_TRIAL = 48  # make_study appends one FAIL trial after the searched ones


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("plots"), trials=48, batch_size=24)


@pytest.fixture(scope="module")
def items(study) -> list[dict]:
    return pareto_items(study)


@pytest.fixture(scope="module")
def opened(study):
    spec = load_spec(study)
    handle = open_storage(study, spec, None, shared=True)
    yield spec, load_study(spec, handle)
    handle.close()


def assert_readable_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > MIN_PNG_BYTES
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 500
    assert np.std(pixels[..., :3]) > 0.05  # not blank: bars, lines, markers, text


# ---- every kind ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PLOT_KINDS)
def test_each_kind_writes_a_readable_png(study, items, tmp_path, capsys, kind):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(study), "--kind", kind, "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: ") and len(said.splitlines()) == 1
    assert_readable_png(out)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


@pytest.mark.parametrize("kind", ["breakdown", "roofline"])
def test_candidate_kinds_default_to_the_top_ranked_architecture(study, items, tmp_path, capsys,
                                                                kind):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(study), "--kind", kind, "-o", str(out)]) == 0
    assert f"of trial {items[0]['trial']} ({items[0]['architecture']['name']})" in \
        capsys.readouterr().out


@pytest.mark.parametrize("kind", ["breakdown", "roofline"])
def test_candidate_kinds_take_any_valid_trial(study, items, tmp_path, capsys, kind):
    trial = items[-1]["trial"]
    out = tmp_path / f"{kind}.svg"  # the format follows the suffix
    assert main(["plot", str(study), "--kind", kind, "--trial", str(trial), "-o", str(out)]) == 0
    assert f"of trial {trial} " in capsys.readouterr().out
    assert out.read_text(encoding="utf-8").lstrip().startswith("<?xml")


# ---- bad input: exit 2, one line, nothing written -----------------------------------------------


@pytest.mark.parametrize("argv_tail, fragments", [
    (["--kind", "pie"], ("--kind", "invalid choice: 'pie'")),
    (["--kind", "roofline", "--trial", "99999"], ("`TRIAL` (99999)", "not a trial")),
    (["--kind", "breakdown", "--trial", str(FAILED_TRIAL)], (f"`TRIAL` ({FAILED_TRIAL}) failed",)),
    (["--kind", "history", "--trial", "0"], ("`--trial` (0)", "breakdown | roofline")),
    (["--kind", "breakdown", "--trial", "first"], ("--trial", "invalid int value")),
], ids=["unknown-kind", "unknown-trial", "failed-trial", "trial-for-history", "trial-not-int"])
def test_plot_bad_input(study, tmp_path, capsys, argv_tail, fragments):
    bad_input(capsys, ["plot", str(study), "-o", str(tmp_path / "x.png")] + argv_tail,
              *fragments)
    assert list(tmp_path.iterdir()) == []


def test_bad_suffix_fails_before_drawing(study, tmp_path, capsys):
    bad_input(capsys, ["plot", str(study), "--kind", "roofline", "-o", str(tmp_path / "r.xyz")],
              "`-o`", "'xyz' is not supported")
    assert list(tmp_path.iterdir()) == []


def test_breakdown_of_a_candidate_that_holds_no_request(study, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("search.plots.kinds.breakdown_regimes", lambda spec, cand: [])
    bad_input(capsys, ["plot", str(study), "--kind", "breakdown", "--trial", "0", "-o",
                       str(tmp_path / "b.png")], "`--trial` (0)", "holds no request in memory")
    assert list(tmp_path.iterdir()) == []


# ---- what is drawn ------------------------------------------------------------------------------


def test_breakdown_regimes_are_the_trials_recorded_breakdown(study, items, opened, capsys):
    spec, optuna_study = opened
    _, cand = find_trial(spec, optuna_study, items[0]["trial"])
    regimes = breakdown_regimes(spec, cand)
    assert main(["show", str(study), str(items[0]["trial"]), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["breakdown"]
    # the study's own workload first (the same numbers `show` prints), then the long context
    for regime, key in zip(regimes, ("latency_first", "throughput_first")):
        assert regime.time_ms == shown[key]["time_ms"]
        assert f"concurrency {shown[key]['concurrency']:,}" in regime.label
    assert len(regimes) == 4 and f"ISL {LONG_CONTEXT_ISL_TOKENS:,}" in regimes[2].label
    # a longer context makes attention a larger share at the same concurrency (NVIDIA, AI Model
    # Co-Design (2026), Figure 2)
    share = lambda r: r.time_ms["attention"] / r.tpot_ms  # noqa: E731
    assert share(regimes[2]) > share(regimes[0])


def test_roofline_points_lie_under_the_roofline(items, opened):
    spec, optuna_study = opened
    _, cand = find_trial(spec, optuna_study, items[0]["trial"])
    hw = get_hardware(spec.hardware.gpu)
    cases = roofline_points(spec, cand)
    assert [len(case) > 0 for case in cases] == [True] * len(cases) and len(cases) == 3
    names = {p.name for p in cases[0]}
    assert {"attention/qkv", "attention/o", "mlp/up", "mlp/down", "lm_head"} <= names
    for p in (p for case in cases for p in case):
        prec = get_precision("bf16" if p.high else cand.deployment.precision)
        roof = min(hw.peak_for(prec), hw.hbm_bytes_per_s * p.intensity_flop_per_byte)
        assert 0 < p.achieved_flop_per_s <= roof * (1 + 1e-12), p
    # decode at c = 1 is memory-bound (left of the ridge), a prefill chunk's FFN is not
    ridge = hw.ridge_flop_per_byte(get_precision(cand.deployment.precision))
    assert all(p.intensity_flop_per_byte < ridge for p in cases[0])
    up = next(p for p in cases[2] if p.name == "mlp/up")
    assert up.intensity_flop_per_byte > ridge


def test_hypervolume_history(opened, study, capsys):
    spec, optuna_study = opened
    history = hypervolume_history(spec, optuna_study)
    assert np.all(np.diff(history.hypervolume) >= 0)  # a running front never loses volume
    assert np.all(np.diff(history.checkpoints) > 0)
    assert main(["pareto", str(study), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert history.feasible_cumulative[-1] == doc["feasible"]
    assert len(history.finished_trials) == doc["trials"]
    # the final value is the report's Pareto front's, every objective scaled to [0, 1] over the
    # feasible set (0 = best) against the reference point 1.1
    records = load_records(spec, optuna_study)
    feasible = np.array([r.trial.values for r in records if r.feasible])
    front = np.array([r.trial.values for r in pareto_records(spec, records)])
    lo, hi = feasible.min(axis=0), feasible.max(axis=0)
    maximize = np.array([d == "maximize" for d in spec.objectives.directions])
    z = np.where(maximize, (hi - front) / (hi - lo), (front - lo) / (hi - lo))
    expected = moocore.hypervolume(z, ref=HV_REFERENCE)
    assert history.hypervolume[-1] == pytest.approx(expected, rel=1e-12)
    assert 0 < expected < HV_REFERENCE ** len(spec.objectives.names)


# ---- evaluate --plot ----------------------------------------------------------------------------


def test_evaluate_plot(tmp_path, capsys):
    out = tmp_path / "qwen.png"
    assert main(["evaluate", QWEN, "--hardware", "h200", "--plot", str(out)]) == 0
    assert f"wrote {out}: operating points and frontier of Qwen3-0.6B" in capsys.readouterr().out
    assert_readable_png(out)


def test_evaluate_plot_with_json_keeps_stdout_json(tmp_path, capsys):
    out = tmp_path / "qwen.png"
    argv = ["evaluate", QWEN, "--hardware", "h200", "--concurrency", "1", "64", "100000",
            "--json", "--plot", str(out)]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)  # nothing but the document on stdout
    assert not doc["points"][-1]["fits_memory"]  # drawn hollow, beyond the memory limit
    assert_readable_png(out)


def test_evaluate_plot_bad_suffix(tmp_path, capsys):
    bad_input(capsys, ["evaluate", QWEN, "--hardware", "h200", "--plot",
                       str(tmp_path / "qwen.xyz")], "`--plot`", "'xyz' is not supported")
    assert list(tmp_path.iterdir()) == []
