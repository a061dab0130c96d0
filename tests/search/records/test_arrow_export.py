"""`pareto --parquet/--csv` rows (search/records/arrow_export.py): the serving figures people
compare (TPOT and TTFT of one request, the peak tokens/s/GPU with its concurrency and
deployment) and the loss band, checked against what `show --json` and the search recorded."""

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from search.cli.main import main
from search.records.arrow_export import (
    CSV_SCHEMA,
    PARETO_SCHEMA,
    SERVING_COLUMNS,
    read_csv,
)  # fmt: skip
from search.cli.study import load_study, open_storage
from search.study.evaluation import trial_details
from search.study.spec import load_spec

from tests.search.cli.test_inspect import make_study, pareto_json

# Floats that went through JSON (`show --json`) or two equal computations: equal to rounding.
REL_TOL = 1e-12


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("arrow_export"))


@pytest.fixture(scope="module")
def rows(study, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("parquet") / "pareto.parquet"
    assert main(["pareto", str(study), "--parquet", str(out)]) == 0
    table = pq.read_table(out)
    assert table.schema.equals(PARETO_SCHEMA, check_metadata=True)
    return table.to_pylist()


@pytest.fixture(scope="module")
def trials(study) -> dict:
    """The study's trials by number, as the search stored them."""
    spec = load_spec(study)
    handle = open_storage(study, spec, None, shared=True)
    try:
        return {t.number: t for t in load_study(spec, handle).get_trials(deepcopy=False)}
    finally:
        handle.close()


@pytest.fixture()
def doc(study, capsys) -> dict:
    return pareto_json(study, capsys)


def _show(study: Path, trial: int, capsys) -> dict:
    assert main(["show", str(study), str(trial), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_schema_version_2_names_the_serving_columns():
    assert PARETO_SCHEMA.metadata[b"archscout_schema_version"] == b"2"
    assert set(SERVING_COLUMNS) <= set(PARETO_SCHEMA.names)
    assert CSV_SCHEMA.names == PARETO_SCHEMA.names


def test_one_request_figures_are_shows_concurrency_1_point(study, rows, capsys):
    """TPOT@1 and TTFT@1 are `show`'s operating point at concurrency 1 of the row's trial (the
    quick-start study samples deployments: the trial's deployment is the row's), and
    interactivity there is 1 / TPOT (docs/DESIGN.md, Vocabulary: x = 1/TPOT)."""
    assert rows
    for row in rows:
        record = _show(study, row["trial"], capsys)
        one = next(p for p in record["frontier"] if p["concurrency"] == 1)
        assert one["fits_memory"]
        assert math.isclose(row["tpot_at_1_ms"], one["tpot_ms"], rel_tol=REL_TOL)
        assert math.isclose(row["ttft_at_1_ms"], one["ttft_ms"], rel_tol=REL_TOL)
        assert math.isclose(row["tpot_at_1_ms"] / 1e3 * one["tokens_per_s_per_user"], 1.0,
                            rel_tol=REL_TOL)


def test_peak_is_the_frontiers_highest_point(rows, doc):
    """The peak names the frontier point of most tokens/s/GPU, its concurrency and deployment;
    no point of the design's frontier is higher."""
    for row, item in zip(rows, doc["pareto"]):
        assert row["trial"] == item["trial"]
        heights = [p["tokens_per_s_per_gpu"] for p in item["frontier"]]
        assert row["peak_tokens_per_s_per_gpu"] == max(heights)
        peak = item["frontier"][heights.index(max(heights))]
        assert (row["peak_concurrency"], row["peak_deployment"]) == \
            (peak["concurrency"], peak["deployment"])
        assert row["peak_concurrency"] >= 1


def test_peak_is_at_least_the_rows_own_sweep(study, rows, capsys):
    """The envelope over the design's deployments is at least as high as the row's own
    deployment at every concurrency that fits."""
    for row in rows:
        own = [p["tokens_per_s_per_gpu"] for p in _show(study, row["trial"], capsys)["frontier"]
               if p["fits_memory"]]
        assert row["peak_tokens_per_s_per_gpu"] >= max(own) * (1 - REL_TOL)


def test_row_deployment_is_the_one_the_trial_recorded(rows, trials):
    for row in rows:
        assert row["deployment"] == trials[row["trial"]].user_attrs["deployment"]
        assert row["deployment"].startswith(f"tp{row['tp']} ep{row['ep']} pp{row['pp']} "
                                            f"dp{row['dp']} {row['precision']} "
                                            f"kv-{row['kv_precision']}")


def test_loss_band_holds_what_the_search_recorded(rows, trials):
    """The central loss is the one the search stored with the trial (`details.loss_central`);
    low <= central <= high; the ranked loss is the central one or the band's high end
    (objectives/accuracy.py: "the ranked loss is the central loss, or the high end when a
    hard flag fires")."""
    for row in rows:
        stored = trial_details(trials[row["trial"]].user_attrs)["loss_central"]
        assert math.isclose(row["loss_central"], stored, rel_tol=REL_TOL)
        assert row["loss_low"] < row["loss_central"] < row["loss_high"]
        assert any(math.isclose(row["loss_proxy"], row[k], rel_tol=REL_TOL)
                   for k in ("loss_central", "loss_high"))


def test_csv_carries_the_same_figures(study, rows, tmp_path):
    out = tmp_path / "pareto.csv"
    assert main(["pareto", str(study), "--csv", str(out)]) == 0
    table = read_csv(out)
    for name in SERVING_COLUMNS:
        written, read = [r[name] for r in rows], table.column(name).to_pylist()
        for a, b in zip(written, read):
            assert a == b or math.isclose(a, b, rel_tol=REL_TOL), name
