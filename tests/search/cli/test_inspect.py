"""`archscout show`, `plot` and `pareto --parquet/--csv` through `main(argv)` on a tiny study."""

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from optuna.trial import TrialState, create_trial

from constraints import CONSTRAINT_NAMES
from search.records.documents import BREAKDOWN_PARTS
from search.records.arrow_export import CSV_SCHEMA, FLAGS_SEPARATOR, PARETO_SCHEMA, read_csv
from search.cli.main import main
from search.study.evaluation import hard_constraints
from search.study.report import pareto_document
from search.study.spec import load_spec
from search.cli.study import load_study, open_storage

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "studies" / "quickstart.toml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
INVALID_REASON = "`intermediate_size` (0) must be > 0 for a dense model (`num_experts` = 0)"
POINT_KEYS = {"concurrency", "tpot_ms", "ttft_ms", "tokens_per_s_per_user",
              "tokens_per_s_per_gpu", "fits_memory", "on_frontier"}


def make_study(folder: Path, trials: int = 64, batch_size: int = 32) -> Path:
    """The quick-start study, smaller, written into `folder` (its storage goes to folder/out/),
    searched, plus an infeasible trial (`out_of_budget_trial`) and a FAIL one (an invalid shape)
    appended as the runner records them."""
    text = QUICKSTART.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^trials = \d+", f"trials = {trials}", text)
    text = re.sub(r"(?m)^batch_size = \d+", f"batch_size = {batch_size}", text)
    path = folder / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["search", str(path), "--no-progress"]) == 0
    spec = load_spec(path)
    handle = open_storage(path, spec, None, shared=True)
    study = load_study(spec, handle)
    study.add_trial(out_of_budget_trial(spec))
    study.add_trial(create_trial(
        state=TrialState.FAIL, user_attrs={"details": {"invalid": INVALID_REASON}}))
    handle.close()
    return path


def out_of_budget_trial(spec):
    """The space's largest design (every dimension at its largest option: 5.42B parameters on
    the quickstart's 1.2B ± 25% budget), scored and recorded as the runner records a trial:
    COMPLETE and infeasible. A search never proposes it (search/study/proposals.py)."""
    from optuna.distributions import IntDistribution

    from search.study.evaluation import evaluate_batch, stored_attrs
    from search.study.proposals import sampled_distributions
    from search.study.space import build_candidate, complete_params

    space = sampled_distributions(spec)
    params = {n: d.high if isinstance(d, IntDistribution) else d.choices[-1]
              for n, d in space.items()}
    [outcome] = evaluate_batch(spec, [build_candidate(spec, complete_params(spec, params))])
    assert outcome.constraints["params_budget"].value > 0
    hard = hard_constraints(spec)
    return create_trial(params=params, distributions=space, values=outcome.values,
                        user_attrs=stored_attrs(outcome),
                        constraints={n: float(v.value) for n, v in outcome.constraints.items()
                                     if n in hard and v.value > 0})


def pareto_items(study: Path) -> list[dict]:
    """The study's Pareto items, read in-process (no capsys: usable in module fixtures)."""
    spec = load_spec(study)
    handle = open_storage(study, spec, None, shared=True)
    try:
        return pareto_document(spec, load_study(spec, handle))["pareto"]
    finally:
        handle.close()


def pareto_json(study: Path, capsys) -> dict:
    assert main(["pareto", str(study), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def bad_input(capsys, argv: list[str], *fragments: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err
    return err


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("inspect"))


@pytest.fixture(scope="module")
def best(study) -> dict:
    return pareto_items(study)[0]


def _show(study: Path, trial: int, capsys) -> dict:
    assert main(["show", str(study), str(trial), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---- show ---------------------------------------------------------------------------------------


def test_show_json_recomputes_what_the_trial_recorded(study, best, capsys):
    rec = _show(study, best["trial"], capsys)
    assert rec["trial"] == best["trial"] and rec["feasible"]
    assert rec["architecture"]["name"] == best["architecture"]["name"]
    assert rec["params"]["total"] == best["params_total"]
    assert rec["params"]["breakdown"]["total"] == best["params_total"]
    # score_valid is deterministic: the recomputed area is the one the trial stored (tolerance 0)
    assert rec["frontier_area"] == best["trial_frontier_area"]
    assert rec["objectives"] == best["values"]
    assert rec["deployment"]["tp"] == best["deployment"]["tp"]


def test_show_json_frontier_points(study, best, capsys):
    points = _show(study, best["trial"], capsys)["frontier"]
    assert all(POINT_KEYS == p.keys() for p in points)
    concurrency = [p["concurrency"] for p in points]
    assert concurrency[0] == 1 and concurrency == sorted(set(concurrency))
    front = [p for p in points if p["on_frontier"]]
    assert front and all(p["fits_memory"] for p in front)
    for p in points:  # interactivity is 1/TPOT
        assert p["tokens_per_s_per_user"] == pytest.approx(1e3 / p["tpot_ms"], rel=1e-12)


def test_show_json_time_breakdown(study, best, capsys):
    rec = _show(study, best["trial"], capsys)
    fitting = [p for p in rec["frontier"] if p["fits_memory"]]
    latency, throughput = rec["breakdown"]["latency_first"], rec["breakdown"]["throughput_first"]
    assert latency["concurrency"] == 1
    assert throughput["concurrency"] == fitting[-1]["concurrency"] == rec["max_concurrency"]
    for part in (latency, throughput):
        assert tuple(part["time_ms"]) == BREAKDOWN_PARTS
        assert part["time_ms"]["linear_attention"] == 0.0  # no linear layers in this space
        assert sum(part["share_frac"].values()) == pytest.approx(1.0, abs=1e-12)
        assert sum(part["time_ms"].values()) == pytest.approx(part["tpot_ms"], rel=1e-12)
    assert latency["tpot_ms"] == pytest.approx(rec["frontier"][0]["tpot_ms"], rel=1e-12)


def test_show_json_constraints_and_loss(study, best, capsys):
    rec = _show(study, best["trial"], capsys)
    hard = hard_constraints(load_spec(study))
    assert list(rec["constraints"]) == list(CONSTRAINT_NAMES)
    for name, c in rec["constraints"].items():
        assert c["hard"] == (name in hard)
        assert c["satisfied"] == (c["value"] <= 0) and c["message"]
    assert rec["loss"]["loss_proxy"] == best["loss_proxy"]
    assert rec["loss"]["loss_flags"] == best["flags"]


def test_show_names_no_uncalibrated_part_for_attention_only_models(study, best, capsys):
    assert _show(study, best["trial"], capsys)["uncalibrated"] == []
    assert main(["show", str(study), str(best["trial"])]) == 0
    assert "uncalibrated" not in capsys.readouterr().out


def test_show_table(study, best, capsys):
    assert main(["show", str(study), str(best["trial"])]) == 0
    out = capsys.readouterr().out
    for text in (best["architecture"]["name"], "latency_first", "throughput_first", "gemm_ms",
                 "memory_fit", "attention/q"):
        assert text in out
    # the quickstart sweeps its deployments: the architecture's envelope, then this deployment's
    assert "architecture frontier area" in out and "on its frontier" in out


def test_show_explains_the_pareto_flags_column(study, best, capsys):
    """`pareto`'s `flags` column is the number of the loss proxy's range flags; `show` prints
    that count with what a flag is, then each flag."""
    assert main(["show", str(study), str(best["trial"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    (head,) = [line for line in lines if "the `flags` column of `pareto`" in line]
    assert head.startswith(f"{len(best['flags'])} flag(s)") and "range flags" in head
    listed = [line.removeprefix("  flag: ") for line in lines if line.startswith("  flag: ")]
    assert listed == best["flags"]


def test_show_unknown_trial(study, capsys):
    bad_input(capsys, ["show", str(study), "99999"], "`TRIAL` (99999)", "not a trial")


def test_show_failed_trial(study, capsys):
    failed = 65  # the FAIL trial appended after the 64 searched ones and the infeasible one
    bad_input(capsys, ["show", str(study), str(failed)], f"`TRIAL` ({failed})", INVALID_REASON)


def test_show_trial_not_a_number(study, capsys):
    bad_input(capsys, ["show", str(study), "first"], "trial")


# ---- plot ---------------------------------------------------------------------------------------


def test_plot_writes_a_readable_png(study, tmp_path, capsys):
    import matplotlib.image

    out = tmp_path / "frontier.png"
    assert main(["plot", str(study), "-o", str(out), "--top", "1"]) == 0
    assert "top 1 of" in capsys.readouterr().out
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 20_000
    pixels = matplotlib.image.imread(out)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 500
    assert np.std(pixels[..., :3]) > 0.05  # not blank: lines, text, the shaded window
    assert [p.name for p in tmp_path.iterdir()] == ["frontier.png"]


@pytest.mark.parametrize("argv_tail, fragment", [
    (["-o", "{tmp}/frontier.xyz"], "'xyz' is not supported"),
    (["-o", "{tmp}/no/such/dir/frontier.png"], "`-o`"),
    (["-o", "{tmp}/frontier.png", "--top", "0"], "`--top` (0)"),
], ids=["bad-suffix", "missing-folder", "top-zero"])
def test_plot_bad_input_leaves_nothing(study, tmp_path, capsys, argv_tail, fragment):
    argv = ["plot", str(study)] + [a.format(tmp=tmp_path) for a in argv_tail]
    bad_input(capsys, argv, fragment)
    assert list(tmp_path.rglob("*")) == []


# ---- pareto files -------------------------------------------------------------------------------


def test_pareto_parquet_has_the_versioned_schema(study, tmp_path, capsys):
    doc = pareto_json(study, capsys)
    out = tmp_path / "pareto.parquet"
    assert main(["pareto", str(study), "--parquet", str(out)]) == 0
    table = pq.read_table(out)
    assert table.schema.equals(PARETO_SCHEMA, check_metadata=True)
    assert table.schema.metadata == {b"archscout_schema": b"pareto",
                                     b"archscout_schema_version": b"2"}
    assert table.num_rows == len(doc["pareto"])
    assert table.column("rank").to_pylist() == list(range(1, table.num_rows + 1))
    assert table.column("trial").to_pylist() == [i["trial"] for i in doc["pareto"]]
    assert table.column("frontier_area").to_pylist() == [i["frontier_area"] for i in doc["pareto"]]
    assert table.column("flags").to_pylist() == [i["flags"] for i in doc["pareto"]]
    assert table.column("hidden_size").to_pylist() == [
        i["architecture"]["hidden_size"] for i in doc["pareto"]]


def test_pareto_csv_round_trip(study, tmp_path, capsys):
    doc = pareto_json(study, capsys)
    out = tmp_path / "pareto.csv"
    assert main(["pareto", str(study), "--csv", str(out)]) == 0
    table = read_csv(out)
    assert table.schema.equals(CSV_SCHEMA)
    assert table.column("architecture").to_pylist() == [
        i["architecture"]["name"] for i in doc["pareto"]]
    assert table.column("flags").to_pylist() == [
        FLAGS_SEPARATOR.join(i["flags"]) for i in doc["pareto"]]
    assert table.column("params_total").to_pylist() == [i["params_total"] for i in doc["pareto"]]


def test_pareto_json_stays_one_document_with_files(study, tmp_path, capsys):
    out = tmp_path / "pareto.parquet"
    assert main(["pareto", str(study), "--json", "--parquet", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["pareto"]
    assert str(out) in captured.err and out.is_file()


def test_pareto_unwritable_path_leaves_nothing(study, tmp_path, capsys):
    out = tmp_path / "missing" / "pareto.parquet"
    bad_input(capsys, ["pareto", str(study), "--parquet", str(out)], "`--parquet`", str(out))
    assert list(tmp_path.rglob("*")) == []
