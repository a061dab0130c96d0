"""tests/benchmarks/serving/: leave-one-source-out, its fast path, its fits and the ranking."""


import numpy as np
import pytest
from scipy import stats

from cost_model import GENERIC, BenchmarkTerms
from tests.benchmarks.serving import fast, terms
from tests.benchmarks.serving.config import DEFAULT_DATA_DIR
from tests.data_paths import serving_script
from tests.benchmarks.serving.folds import (
    VARIANTS, FitConfig, Table, _host_errors, fit_host_and_moe, fit_terms, left_out_host_loss,
    shrunk_host_us, ttft_grid_search, ttft_grids,
)
from tests.benchmarks.serving.loso import perturbed
from tests.benchmarks.serving.ranking import _summary, kendall_tau_b
from tests.benchmarks.serving.rows import prepare_row, source_of
from tests.benchmarks.serving.scenarios import COST_MODEL, predict_prepared



def _row(**fields) -> dict[str, str]:
    """A grown-set row (tests/data/serving/schema.py) of Llama-3.1-8B FP8 on one H200."""
    schema = serving_script("schema")
    return {**schema.blank_row(), "model": "Llama-3.1-8B-Instruct", "gpu": "H200",
            "num_gpus": "1", "total_gpus": "1", "tp": "1", "framework": "TensorRT-LLM",
            "precision": "fp8", "isl": "467", "osl": "256", **fields}


# ---- sources -------------------------------------------------------------------------------


@pytest.mark.parametrize(("row", "source"), [
    ({"source_kind": "inferencex"}, "inferencex"),
    ({"source_kind": "nvidia_blog"}, "nvidia_blogs"),
    ({"source_kind": "trtllm_tech_blog"}, "nvidia_blogs"),
    ({"source_kind": "mlperf", "framework": "TensorRT-LLM (MLPerf Inference v5.1 closed)"},
     "mlperf_v5_1"),
    ({"source_kind": "mlperf", "framework": "TensorRT-LLM (MLPerf Inference v6.0 closed)"},
     "mlperf_v6_0"),
    ({"source_kind": "trtllm_perf_overview_v0_14"}, "trtllm_perf_overview_v0_14"),
    ({}, "?")], ids=["inferencex", "nvidia-blog", "trtllm-tech-blog", "mlperf-5.1", "mlperf-6.0",
                     "perf-overview-0.14", "none"])
def test_source_of_row(row, source):
    assert source_of(row) == source


# ---- ranking -------------------------------------------------------------------------------


def test_kendall_tau_b_by_hand():
    """x = 1, 2, 3, 4 and y = 1, 3, 2, 4: of the 6 pairs only (2, 3) is discordant, so
    τ = (5 − 1)/6 = 2/3. With a tie in y (1, 2, 2, 4): pair (2, 3) is tied in y, the other 5
    concordant: τ-b = 5/√(6 · 5) = 0.912871. A constant side has none."""
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 2, 4]) == pytest.approx(0.912871, rel=1e-6)
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) is None


def test_kendall_tau_b_agrees_with_scipy():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 5, 12), rng.integers(0, 5, 12)
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


def test_pooled_pairs_by_hand():
    """One group of three deployments, predicted 10, 20, 30 against measured 10, 31, 30:
    pairs (a, b) and (a, c) ordered right, (b, c) wrong: 2/3 right, τ = (2 − 1)/3. (b, c) differ
    by 31/30 − 1 = 3.3%, just outside the ±3% band: all three pairs count there too."""
    groups = {("s",): {"a": (10.0, 10.0), "b": (20.0, 31.0), "c": (30.0, 30.0)}}
    out = _summary(groups)
    assert out["pairs_all"]["agree_frac"] == pytest.approx(2 / 3)
    assert out["pairs_all"]["tau_pooled"] == pytest.approx(1 / 3)
    assert out["pairs_band"]["pairs"] == 3
    assert out["mean_tau_b"] == pytest.approx(1 / 3)


# ---- the fast path -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rows():
    """A dense row at a fixed concurrency and an MoE row of an offline run (the scenario that
    evaluates a sweep and then its last wave)."""
    dense = _row(concurrency="16", scenario="concurrency", output_tokens_per_s_per_gpu="900",
                 tpot_ms="10", ttft_ms="80", framework="vLLM")
    moe = _row(model="Mixtral-8x7B-v0.1", num_gpus="2", total_gpus="2", tp="2",
               scenario="offline", requests="3000", output_tokens_per_s_per_gpu="5000",
               isl="128", osl="128")
    return [prepare_row(r, DEFAULT_DATA_DIR, {}) for r in (dense, moe)]


def test_fast_path_equals_the_cost_model_at_shipped_terms(rows):
    fm = fast.FastModels()
    for r in rows:
        expected = predict_prepared(r, COST_MODEL)
        assert predict_prepared(r, fm.models(terms.shipped())) == pytest.approx(expected, rel=1e-9)


def test_fast_path_equals_the_cost_model_at_other_terms_alone_and_in_a_batch(rows):
    """Host time, fused-MoE variant and TTFT terms all changed: the linear step times give what
    the cost model gives in full with those terms set; in a batch too (settings on the
    candidates axis)."""
    fm, other = fast.FastModels(), perturbed(terms.shipped())
    with terms.full_model_at(other):
        full = [predict_prepared(r, COST_MODEL) for r in rows]
    for r, expected in zip(rows, full):
        assert predict_prepared(r, fm.models(other)) == pytest.approx(expected, rel=1e-9)
        batch = fm.batch([terms.shipped().with_ttft(dict(other.ttft)), other])
        assert predict_prepared(r, batch[1]) == pytest.approx(expected, rel=1e-9)


def test_fast_path_moves_with_each_term(rows):
    """A one-line change to how a term enters must show: more host time, slower TPOT; the
    fused-MoE size terms on, a slower MoE step; a larger t_request, a later TTFT."""
    dense, moe = rows
    fm, base = fast.FastModels(), terms.shipped()
    tpot = lambda r, t: predict_prepared(r, fm.models(t))["tpot"]  # noqa: E731
    assert tpot(dense, base.with_host({"x86": 40.0})) > tpot(dense, base.with_host({"x86": 0.0}))
    engine = moe.workload.engine
    assert tpot(moe, base.with_moe({engine: "full"})) > tpot(moe, base.with_moe({engine: "none"}))
    late = base.with_ttft({GENERIC: BenchmarkTerms(0.5, 0.0, 0.0),
                           "vllm": BenchmarkTerms(0.5, 0.0, 0.0)})
    assert predict_prepared(dense, fm.models(late))["ttft"] > \
        predict_prepared(dense, fm.models(base))["ttft"] + 0.4


# ---- the fits ------------------------------------------------------------------------------


def _table(errors_by_row: list[list[float]], sources_engines: list[str]) -> Table:
    """A table whose row i predicts TPOT and tokens/s/GPU at exp(errors[i][h]) × measured (1)
    at h = 0, 1, 2 µs, every variant alike."""
    n, grid = len(errors_by_row), np.array([0.0, 1.0, 2.0])
    pred = np.full((n, len(VARIANTS), grid.size, 6), np.nan)
    for i, errs in enumerate(errors_by_row):
        pred[i, :, :, 0] = pred[i, :, :, 1] = np.exp(errs)
    return Table(grid, pred, np.ones((n, 3)), list(sources_engines), ["x86"] * n,
                 np.zeros(n, dtype=bool), np.ones(n, dtype=bool))


def test_host_fit_minimizes_the_mean_abs_log_error_by_hand():
    """Rows a (|log error| 0.3, 0.1, 0.2 at h = 0, 1, 2) and b (0.1, 0.2, 0.0): means 0.2, 0.15,
    0.1, so h = 2 µs; a alone: h = 1 µs; b alone: h = 2 µs."""
    table = _table([[0.3, -0.1, 0.2], [-0.1, 0.2, 0.0]], ["trtllm", "trtllm"])
    config = FitConfig("fitted")
    pick = lambda mask: fit_host_and_moe(table, np.array(mask), config)[0]["x86"]  # noqa: E731
    assert pick([True, True]) == 2.0
    assert pick([True, False]) == 1.0
    assert pick([False, True]) == 2.0
    off = fit_host_and_moe(table, np.array([True, True]), FitConfig("off", host="off"))
    assert off[0]["x86"] == 0.0


def test_a_fold_is_fitted_without_its_rows():
    """Source s1's rows want h = 0, s2's h = 2 (|log error| 0 there, 0.5 elsewhere): the fit
    without s1 is s2's h and the other way round."""
    table = _table([[0.0, 0.5, 0.5], [0.0, 0.5, 0.5], [0.5, 0.5, 0.0]], ["trtllm"] * 3)
    table.measured[:, 1] = np.nan  # no TTFT: the TTFT fit has nothing to do
    source = np.array(["s1", "s1", "s2"])
    base, config = terms.shipped(), FitConfig("fitted", ttft="off")
    for left_out, h in (("s1", 2.0), ("s2", 0.0)):
        fold = fit_terms(table, source != left_out, config, base, {"trtllm"},
                         _host_errors(table))
        assert fold.host_s("x86") * 1e6 == pytest.approx(h)


def test_a_host_time_that_only_helps_in_sample_is_dropped():
    """Sources s1 (|log error| 0.3, 0.0, 0.3 at h = 0, 1, 2 µs) and s2 (0.0, 0.1, 0.5): fitted
    on both, h = 1 (means 0.15, 0.05, 0.4). Left out: s1 scored at s2's fit h = 0 misses by 0.3,
    s2 at s1's fit h = 1 by 0.1, pooled 0.2; at h = 0 they miss by 0.3 and 0.0, pooled 0.15. The
    term does worse left out than without it: 0 is shipped."""
    table = _table([[0.3, 0.0, 0.3], [0.0, 0.1, 0.5]], ["trtllm"] * 2)
    sources, config = np.array(["s1", "s2"]), FitConfig("fitted")
    assert fit_host_and_moe(table, np.ones(2, dtype=bool), config)[0]["x86"] == 1.0
    loss = left_out_host_loss(table, sources, config)
    assert loss["x86"] == pytest.approx((0.2, 0.15), rel=1e-12)
    assert shrunk_host_us({"x86": 1.0}, loss) == {"x86": 0.0}


def test_a_host_time_that_holds_left_out_is_kept():
    """s1 (0.3, 0.0, 0.3) and s2 (0.3, 0.1, 0.5): each source alone fits h = 1, so left out s1
    misses by 0.0 and s2 by 0.1 (pooled 0.05) against 0.3 at h = 0: the fitted 1 µs is kept; a
    kind with no left-out rows keeps 0."""
    table = _table([[0.3, 0.0, 0.3], [0.3, 0.1, 0.5]], ["trtllm"] * 2)
    loss = left_out_host_loss(table, np.array(["s1", "s2"]), FitConfig("fitted"))
    assert loss["x86"] == pytest.approx((0.05, 0.3), rel=1e-12)
    assert shrunk_host_us({"x86": 1.0, "grace": 3.0}, loss) == {"x86": 1.0, "grace": 0.0}


def test_the_products_host_fit_shrinks_within_its_own_sources():
    """The product's fit (`host` "shrunk") of the rows above, s1 (0.3, 0.0, 0.3) and s2 (0.0,
    0.1, 0.5), with a third source s3 (0.3, 0.0, 0.3) beside them: on s1 and s2 alone the fit
    (h = 1) fails left out (0.2 against 0.15), so it ships 0 where the plain fit ships 1; on all
    three, each source's fold still fits h = 1 (s3 or s1 pulls it there), left out 0.1/3 against
    0.2: h = 1 is kept."""
    table = _table([[0.3, 0.0, 0.3], [0.0, 0.1, 0.5], [0.3, 0.0, 0.3]], ["trtllm"] * 3)
    table.measured[:, 1] = np.nan  # no TTFT: the TTFT fit has nothing to do
    sources, base = np.array(["s1", "s2", "s3"]), terms.shipped()
    two = np.array([True, True, False])
    fit = lambda train, host: fit_terms(  # noqa: E731
        table, train, FitConfig("fitted", host=host, ttft="off"), base, {"trtllm"},
        _host_errors(table), sources).host_s("x86") * 1e6
    assert fit(two, "fit") == pytest.approx(1.0)
    assert fit(two, "shrunk") == 0.0
    assert fit(np.ones(3, dtype=bool), "shrunk") == pytest.approx(1.0)


def test_ttft_grid_search_finds_the_exhaustive_optimum():
    """Rows whose measured TTFT is 40 ms + fixed + 0.3 · queue + 0.5 · round (± 10% noise):
    the coarse-to-fine search returns what searching every point of the fit script's grid
    returns, near the terms that made them."""
    rng = np.random.default_rng(7)
    n = 60
    fixed, queue = rng.uniform(0.02, 0.5, n), rng.uniform(0.0, 0.4, n)
    rounds = np.where(rng.random(n) < 0.5, rng.uniform(0.0, 0.2, n), 0.0)
    measured = (0.04 + fixed + 0.3 * queue + 0.5 * rounds) * rng.uniform(0.9, 1.1, n)
    grids = ttft_grids("fit")
    found = ttft_grid_search(fixed, queue, rounds, measured, grids)
    t_grid, q_grid, w_grid = grids
    pred = (t_grid[:, None, None, None] + fixed + q_grid[None, :, None, None] * queue
            + w_grid[None, None, :, None] * rounds)
    cost = np.median(np.abs(np.log(pred / measured)), axis=-1)
    i, j, k = np.unravel_index(np.argmin(cost), cost.shape)
    assert found == pytest.approx((t_grid[i], q_grid[j], w_grid[k]))
    assert found[0] == pytest.approx(0.04, abs=0.03)


def test_reruns_count_once_and_lone_deployments_form_no_group():
    """Two runs of TP1 at concurrency 16 (measured 100 and 120, predicted 90 and 110) count as
    one deployment at their medians (predicted 100, measured 110); with TP2 (measured 150) they
    form a group of two; TP1 alone at concurrency 32 forms none."""
    from tests.benchmarks.serving.ranking import deployment_values
    from tests.benchmarks.serving.rows import Result

    def scored(tp, concurrency, predicted, measured):
        row = _row(tp=str(tp), num_gpus=str(tp), total_gpus=str(tp), scenario="concurrency",
                   concurrency=str(concurrency), source_kind="s")
        prepared = prepare_row(row, DEFAULT_DATA_DIR, {})
        result = Result("trtllm", row["model"], "H200", "fixed", False, f"tp{tp}", 467, 256,
                        float(concurrency), {"tokens_per_s_per_gpu": measured},
                        {"tokens_per_s_per_gpu": predicted}, source="s")
        return prepared, result

    pairs = [scored(1, 16, 90.0, 100.0), scored(1, 16, 110.0, 120.0), scored(2, 16, 140.0, 150.0),
             scored(1, 32, 50.0, 60.0)]
    groups = deployment_values([p for p, _ in pairs], [r for _, r in pairs])
    (deployments,) = groups.values()
    assert deployments[("trtllm", "tp1")] == pytest.approx((100.0, 110.0))
    assert deployments[("trtllm", "tp2")] == pytest.approx((140.0, 150.0))
