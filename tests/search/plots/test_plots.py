"""`archscout plot --kind frontier|breakdown|roofline|history` and `evaluate --plot` through
`main(argv)` on a tiny study: every kind writes a PNG that is a real, non-blank image, and the
numbers drawn are the cost model's."""

import json
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import moocore
import numpy as np
import pytest

from cost_model import get_hardware, get_precision
from search.cli.main import main
from search.cli.inspect import PLOT_KINDS, find_trial
from search.plots.frontier import model_frontier_figure
from search.plots.kinds import (
    HV_REFERENCE,
    LONG_CONTEXT_ISL_TOKENS,
    breakdown_figure,
    breakdown_regimes,
    history_figure,
    hypervolume_history,
    roofline_figure,
    roofline_points,
)
from search.study.report import load_records, pareto_records
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage
from tests.search.cli.test_inspect import PNG_SIGNATURE, bad_input, make_study, pareto_items

REPO = Path(__file__).resolve().parents[3]
QWEN = str(REPO / "tests" / "data" / "hf_configs" / "Qwen3-0.6B.json")
MIN_PNG_BYTES = 10_000  # a titled, labeled 1200×600 chart; an empty canvas is ~5 KB
FAILED_TRIAL = 49  # make_study appends an infeasible and a FAIL trial after the searched ones


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


# ---- nothing written over anything --------------------------------------------------------------


def _texts(fig) -> list:
    """Every text drawn in the figure but tick labels: titles, axis labels, names, captions,
    and each legend as one box."""
    found = [t for t in fig.texts if t.get_text()]
    for ax in fig.axes:
        found += [t for t in ax.texts if t.get_text()]
        found += [a for a in (ax.title, ax.xaxis.label, ax.yaxis.label) if a.get_text()]
        found += [ax.get_legend()] if ax.get_legend() else []
    return found


def _boxes(fig, artists):
    renderer = fig.canvas.get_renderer()
    return [(a, a.get_window_extent(renderer)) for a in artists]


def _curve_points(line) -> np.ndarray:
    """A drawn line's display points, 1 px apart (the test's own sampling; a step line through
    its corners: steps-pre rises first, steps-post last)."""
    xy = np.asarray(line.get_xydata(), dtype=float)
    style = line.get_drawstyle()
    if style in ("steps", "steps-pre", "steps-post") and len(xy) > 1:
        path = [xy[0]]
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            path += [(x0, y1) if style != "steps-post" else (x1, y0), (x1, y1)]
        xy = np.array(path)
    xy = line.get_transform().transform(xy)
    out = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:]):
        n = max(int(np.hypot(*(b - a))), 1)
        out.append(a + (b - a) * np.linspace(0, 1, n + 1)[1:, None])
    return np.concatenate(out)


def _marker_centers(fig) -> np.ndarray:
    lines = [ln for ax in fig.axes for ln in ax.lines
             if ln.get_marker() not in ("None", "", " ", None) and len(ln.get_xydata())]
    return np.concatenate([ln.get_transform().transform(ln.get_xydata()) for ln in lines]) \
        if lines else np.zeros((0, 2))


def assert_no_overlaps(fig, names=()) -> None:
    """No two texts overlap; no name (`names`: point annotations) covers a marker's center or
    a drawn line."""
    fig.canvas.draw()
    boxes = _boxes(fig, _texts(fig))
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            assert not box_a.overlaps(box_b), (str(a), str(b))
    centers = _marker_centers(fig)
    curves = [_curve_points(ln) for ax in fig.axes for ln in ax.lines
              if ln.get_linestyle() not in ("None", "", " ") and len(ln.get_xydata()) > 1]
    for note, box in _boxes(fig, names):
        for points in (centers, *curves):
            inside = (points[:, 0] > box.x0) & (points[:, 0] < box.x1) & \
                (points[:, 1] > box.y0) & (points[:, 1] < box.y1)
            assert not inside.any(), note.get_text()


@pytest.fixture
def candidate(items, opened):
    spec, optuna_study = opened
    trial, cand = find_trial(spec, optuna_study, items[0]["trial"])
    return spec, trial.number, cand


def test_roofline_names_cover_no_marker_line_or_text(candidate):
    fig = roofline_figure(*candidate)
    names = [t for t in fig.axes[0].texts if not t.get_text().startswith("ridge point")]
    assert len(names) >= 5  # qkv, o, up, down, lm_head at least once each
    assert len({(t.get_text(), t.xy) for t in names}) == len(names)  # one name per point
    assert_no_overlaps(fig, names)
    plt.close(fig)


def test_breakdown_caption_explains_the_long_context_rows(candidate):
    """The ISL 32,768 rows are the same design at the co-design post's 32K prompt (Figure 2):
    the caption under the bars says so and overlaps neither the legend nor the axis label."""
    spec = candidate[0]
    fig = breakdown_figure(*candidate)
    (caption,) = fig.texts
    text = caption.get_text()
    assert f"ISL {spec.workload.isl_tokens:,} / OSL {spec.workload.osl_tokens:,}" in text
    assert f"ISL {LONG_CONTEXT_ISL_TOKENS:,} rows" in text and "Figure 2" in text
    assert_no_overlaps(fig)
    plt.close(fig)


def test_history_final_value_is_in_the_legend_off_the_curve(opened):
    spec, optuna_study = opened
    history = hypervolume_history(spec, optuna_study)
    fig = history_figure(spec, history)
    top = fig.axes[0]
    assert f"final {history.hypervolume[-1]:.3f}" in top.get_legend().get_texts()[0].get_text()
    assert_no_overlaps(fig, [top.get_legend()])
    plt.close(fig)


def test_evaluate_plot_concurrency_names_do_not_overlap(capsys):
    """Qwen3-0.6B on one H200: c = 1,024 and the dominated c = 1,152 sit within a few pixels;
    each name goes where it covers no other name, marker or the staircase."""
    sweep = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1152]
    assert main(["evaluate", QWEN, "--hardware", "h200", "--concurrency", *map(str, sweep),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    fig = model_frontier_figure(doc, (10.0, 1000.0))
    names = [t for t in fig.axes[0].texts if t.get_text().startswith("c=")]
    assert len(names) >= 10
    assert_no_overlaps(fig, names)
    plt.close(fig)
