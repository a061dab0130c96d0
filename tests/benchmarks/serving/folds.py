"""Fitting every fitted serving term on a subset of the scored rows (one fold of
leave-one-source-out, or all of them), the way the fit scripts fit them:

- the scheduler's host time h per host CPU kind (tests/benchmarks/fit_host_overhead.py): the h of
  its grid (`HOST_GRID_US`) minimizing the mean |log(pred/meas)| of the rows' TPOT and tokens/s/GPU
  pooled, on that kind's rows;
- the fused-MoE variant per engine (an ablation only: the package prices each engine's own
  kernels' fitted terms in full, `Env.moe_terms`): for each engine with MoE rows, the scaling
  (full, floor, none; `terms.MOE_VARIANTS`) of its fitted terms that, with h refitted, gives the
  least pooled mean |log error|; an engine without rows in the fold keeps them in full;
- the benchmark-TTFT terms per engine table (the product's fit, `search.calibration.serving`,
  as tests/benchmarks/fit_benchmark_ttft.py runs it): t_request and q (the ablations also fit w)
  on its grids minimizing the median
  |log error| of TTFT, on the rows of the engine with a measured TTFT where it has
  `FitConfig.min_engine_rows` of them (the generic table on all of them). Only closed-loop rows
  enter it: a TTFT measured under Poisson arrivals or in an offline run (`OPEN_LOOP_REGIMES`) is
  the arrival model's (cost_model.arrival_queue, nothing fitted), scored with the fitted
  t_request but not fitted on.

The first two read a `Table` of every row's predictions at every h of the grid and every variant,
made once (`build_table`, with `fast.FastModels`); the third searches the TTFT grid coarse to
fine (`ttft_grid_search`): the exhaustive search of fit_benchmark_ttft.py takes minutes per fit.
Rows scored under an MLPerf SLA are left out of the fits: their TPOT and tokens/s/GPU are read at
the largest throughput whose modelled TTFT meets the limit, so they depend on the TTFT terms being
fitted (and on the model's p99 = its mean), and they are scored only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from cost_model.benchmark_ttft import GENERIC, BenchmarkTerms
from cost_model.host import DEFAULT_HOST_CPU
from search.calibration import serving
from search.calibration.serving import HOST_GRID_US, best_host_index
from tests.benchmarks.serving.config import OPEN_LOOP_REGIMES
from tests.benchmarks.serving.fast import Batch, FastModels
from tests.benchmarks.serving.terms import Terms
from tests.benchmarks.serving.rows import Prepared, Result, Skip
from tests.benchmarks.serving.scenarios import _as_measured, fixed_values, predict_prepared

VARIANTS = ("full", "floor", "none")  # fused-MoE variants; ties keep the first
QUANTITIES = ("tpot", "tokens_per_s_per_gpu", "steady_ttft", "poll_wait", "prompt_queue",
              "round_wait")
HOST_METRICS = (0, 1)  # TPOT and tokens/s/GPU: the host fit's errors
NOT_FITTED_REGIMES = ("sla",)
FIXED_REGIMES = ("fixed",)  # one point at the row's own concurrency
ZERO_TTFT = BenchmarkTerms(0.0, 0.0, 0.0)


@dataclass
class Table:
    """Every row's predictions at every (MoE variant, h on the grid): `pred[row, variant, h,
    quantity]` (NaN where the row is not scored there), its measured TPOT, TTFT and tokens/s/GPU
    (`measured[row, 0..2]`, NaN where not published), its engine and host CPU kind, and whether
    the fits may use it."""

    grid_us: np.ndarray
    pred: np.ndarray
    measured: np.ndarray
    engines: list
    cpus: list
    is_moe: np.ndarray
    fitted: np.ndarray
    statistics: list | None = None  # what each row's TTFT is (mean, median, unstated)


def build_table(rows: list[Prepared], results: list[Result], fm: FastModels,
                terms: Terms) -> Table:
    """The table of `rows` (scored as `results`); `terms` sets everything the table does not
    vary (the TTFT terms: no fitted row's TPOT or tokens/s/GPU depends on them)."""
    grid = np.asarray(HOST_GRID_US, dtype=np.float64)
    pred = np.full((len(rows), len(VARIANTS), grid.size, len(QUANTITIES)), np.nan)
    fitted = np.array([r.regime not in NOT_FITTED_REGIMES for r in rows])
    settings = {}  # (host kind, engine, MoE or not) -> the settings of the grid
    for i, r in enumerate(rows):
        if not fitted[i]:
            continue
        variants = VARIANTS if r.arch.ffn.is_moe else VARIANTS[:1]
        key = (r.hw.host_cpu, r.workload.engine, variants)
        if key not in settings:
            settings[key] = (_settings(terms, grid, *key), {})
        table = _row_table(r, fm, *settings[key]).reshape(len(variants), grid.size, -1)
        pred[i] = np.broadcast_to(table, pred.shape[1:])  # a dense model: its one, each
    measured = np.array([[_positive(res.measured.get(k)) if k != "ttft_s"
                          or r.regime not in OPEN_LOOP_REGIMES else np.nan
                          for k in ("tpot_s", "ttft_s", "tokens_per_s_per_gpu")]
                         for r, res in zip(rows, results)])
    return Table(grid, pred, measured.reshape(len(rows), 3), [r.workload.engine for r in rows],
                 [r.hw.host_cpu for r in rows], np.array([r.arch.ffn.is_moe for r in rows]), fitted,
                 [r.ttft_statistic for r in rows])


def _positive(value) -> float:
    return float(value) if value is not None and value > 0 else np.nan


def _row_table(r: Prepared, fm: FastModels, settings: list[Terms], thetas: dict | None = None
               ) -> np.ndarray:
    """(settings, quantities) for one row: a row at a fixed concurrency reads every
    setting off one batched evaluation (`fixed_values`), any other runs its scenario per
    setting. `thetas`: the settings' (h, f, m) by (host kind, engine), kept between rows."""
    shared = Batch(settings, _thetas={} if thetas is None else thetas)
    if r.regime in FIXED_REGIMES:
        p = fm.batch_points(shared, [r.arch], [r.dep], r.hw, r.workload,
                            np.array([r.concurrency]))
        values, fits = fixed_values(p, r.ttft_statistic)
        values["concurrency"] = r.concurrency
        _as_measured(r.row, r.regime, values)
        out = np.stack([values[q] for q in QUANTITIES], axis=-1)
        return np.where(fits[:, None], out, np.nan)
    out = np.full((len(settings), len(QUANTITIES)), np.nan)
    for g, models in enumerate(fm.batch(settings, shared)):
        try:
            predicted = predict_prepared(r, models)
        except Skip:
            continue
        out[g] = [predicted[q] for q in QUANTITIES]
    return out


def _settings(terms: Terms, grid: np.ndarray, cpu: str, engine, variants) -> list[Terms]:
    return [terms.with_host({cpu: float(h)}).with_moe({engine: v}) for v in variants
            for h in grid]


# ---- host time and the fused-MoE variants --------------------------------------------------


@dataclass(frozen=True)
class FitConfig:
    """Which terms a fit fits: `host` "fit", "shrunk" (fitted, then 0 unless it beats 0 with
    each of the fit's sources left out: `shrunk_host_us`, the shipped fit) or "off" (h = 0);
    `moe` "fit" (a variant per engine) or fixed ((engine, variant) pairs); `ttft` "fit",
    "no_queue" (q = 0), "no_round" (w = 0), "request" (t_request only) or "off" (no client
    terms); an engine gets TTFT terms of its own from `min_engine_rows` rows with a measured
    TTFT (fewer: the generic table's)."""

    name: str
    host: str = "fit"
    moe: str | tuple = "fit"
    ttft: str = "fit"
    min_engine_rows: int = 1


def _host_errors(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """Per row, variant and h: the sum of |log error| of TPOT and tokens/s/GPU, and their count."""
    pred = table.pred[..., HOST_METRICS]
    meas = table.measured[:, None, None, [0, 2]]
    err = np.abs(np.log(pred / meas))
    ok = np.isfinite(err)
    return np.where(ok, err, 0.0).sum(-1), ok.sum(-1)


def fit_host_and_moe(table: Table, train: np.ndarray, config: FitConfig,
                     errors=None) -> tuple[dict[str, float], dict]:
    """({cpu: h µs}, {engine: variant}) for the rows in `train`."""
    total, count = errors if errors is not None else _host_errors(table)
    rows = train & table.fitted
    engines = sorted({e for e, use, moe in zip(table.engines, rows, table.is_moe) if use and moe},
                     key=str)
    if config.moe == "fit":
        assignments = [dict(zip(engines, combo))
                       for combo in itertools.product(VARIANTS, repeat=len(engines))]
    else:
        assignments = [dict(config.moe)]
    best = None
    for assignment in assignments:
        hosts, loss = _fit_hosts(table, rows, total, count, assignment, config.host != "off")
        if best is None or loss < best[0]:
            best = (loss, hosts, assignment)
    return best[1], best[2]


def _fit_hosts(table: Table, rows, total, count, assignment: dict, fit_h: bool):
    """The h of each host kind for one variant assignment and the pooled mean |log error|."""
    variant = np.array([VARIANTS.index(assignment.get(e, VARIANTS[0])) for e in table.engines])
    picked_total = total[np.arange(len(variant)), variant]  # (rows, h)
    picked_count = count[np.arange(len(variant)), variant]
    hosts, loss_sum, loss_n = {}, 0.0, 0
    for cpu in sorted(set(table.cpus)):
        mine = rows & (np.array(table.cpus) == cpu)
        s, n = picked_total[mine].sum(0), picked_count[mine].sum(0)
        j = best_host_index(s, n)  # the product's fit (search.calibration.serving)
        if j is None:
            continue
        j = j if fit_h else 0
        hosts[cpu] = float(table.grid_us[j])
        loss_sum, loss_n = loss_sum + s[j], loss_n + n[j]
    return hosts, loss_sum / max(loss_n, 1)


def left_out_host_loss(table: Table, sources: np.ndarray, config: FitConfig,
                       train: np.ndarray | None = None) -> dict[str, tuple[float, float]]:
    """Per host CPU kind, the pooled mean |log error| of TPOT and tokens/s/GPU over every
    source's rows (of `train`; None: all) scored left out: (at the h fitted on the other
    sources of `train`, at h = 0), both with that fold's fused-MoE variants. The shipped h
    keeps its value only where the first is the smaller (`shrunk_host_us`): a term whose
    in-sample gain does not survive being left out is dropped."""
    total, count = _host_errors(table)
    cpus, rows = np.array(table.cpus), np.arange(len(table.engines))
    train = np.ones(len(rows), dtype=bool) if train is None else train
    sums = {cpu: np.zeros(2) for cpu in sorted(set(table.cpus))}
    counts = {cpu: np.zeros(2) for cpu in sums}
    for source in sorted(set(sources[train])):
        fold, assignment = fit_host_and_moe(table, train & (sources != source), config,
                                            (total, count))
        variant = np.array([VARIANTS.index(assignment.get(e, VARIANTS[0]))
                            for e in table.engines])
        for cpu in sums:
            mine = (sources == source) & (cpus == cpu) & table.fitted & train
            j = int(np.flatnonzero(table.grid_us == fold.get(cpu, 0.0))[0])
            sums[cpu] += [total[rows, variant, j][mine].sum(), total[rows, variant, 0][mine].sum()]
            counts[cpu] += [count[rows, variant, j][mine].sum(),
                            count[rows, variant, 0][mine].sum()]
    return {cpu: (float(sums[cpu][0] / max(counts[cpu][0], 1)),
                  float(sums[cpu][1] / max(counts[cpu][1], 1))) for cpu in sums}


def shrunk_host_us(fitted_us: dict[str, float], left_out: dict[str, tuple[float, float]]
                   ) -> dict[str, float]:
    """The fitted h where its left-out loss is below h = 0's, else 0 (a tie, or no left-out
    rows: 0)."""
    def earns(cpu: str) -> bool:
        loss = left_out.get(cpu)
        return loss is not None and loss[0] < loss[1]
    return {cpu: h if earns(cpu) else 0.0 for cpu, h in fitted_us.items()}


# ---- the benchmark-TTFT terms --------------------------------------------------------------


def ttft_inputs(table: Table, rows: np.ndarray, hosts: dict, assignment: dict):
    """(fixed, queue, round, measured) TTFT arrays of `rows` at the fitted h and variants:
    fixed = steady-state TTFT + polling wait (nothing fitted in them)."""
    idx = np.flatnonzero(rows & table.fitted & np.isfinite(table.measured[:, 1]))
    variant = [VARIANTS.index(assignment.get(table.engines[i], VARIANTS[0])) for i in idx]
    h = [int(np.flatnonzero(table.grid_us == hosts.get(table.cpus[i], 0.0))[0]) for i in idx]
    q = {name: table.pred[idx, variant, h, QUANTITIES.index(name)] for name in QUANTITIES}
    ok = np.isfinite(q["steady_ttft"])
    return (idx[ok], (q["steady_ttft"] + q["poll_wait"])[ok], q["prompt_queue"][ok],
            q["round_wait"][ok], table.measured[idx, 1][ok])


def _fit_table(idx, fixed, queue, rounds, measured, statistics: list | None, mode: str
               ) -> BenchmarkTerms:
    """One engine table's terms: the product's fit (`search.calibration.serving.fit_ttft_terms`:
    mean and median rows apart) on `mode`'s grids, its grid search done coarse to fine
    (`ttft_grid_search`). A row is a mean row when its statistic says so (fit_benchmark_ttft.py's
    `statistic`: a row that does not say is a median)."""
    grids = ttft_grids(mode)
    is_mean = np.array([statistics is not None and statistics[i] == "mean" for i in idx],
                       dtype=bool)
    x = serving.TtftInputs(np.asarray(fixed, dtype=np.float64), queue, rounds, measured, is_mean)
    search = lambda base, q, w, m, shares, w_grid: ttft_grid_search(  # noqa: E731
        base, q, w, m, (grids[0], shares, w_grid))
    return BenchmarkTerms(*serving.fit_ttft_terms(x, grids[1:], search=search))


def ttft_grid_search(fixed, queue, rounds, measured, grids) -> tuple[float, float, float]:
    """(t_request s, q, w) minimizing the median |log error| over `grids` = (t, q, w) grids:
    on every 5th t, q and w first, then on the whole grids within two coarse steps of that
    optimum. The same optimum as the exhaustive search where the objective is unimodal at the
    coarse steps' scale (on all rows: checked in the tests)."""
    t_grid, q_grid, w_grid = grids
    if not np.any(rounds > 0):
        w_grid = w_grid[:1]
    coarse = _search(fixed, queue, rounds, measured, t_grid[::5], q_grid[::5], w_grid[::5])
    window = lambda g, v: g[np.abs(g - v) <= 10 * (g[1] - g[0]) + 1e-12] if g.size > 1 else g  # noqa: E731
    return _search(fixed, queue, rounds, measured, window(t_grid, coarse[0]),
                   window(q_grid, coarse[1]), window(w_grid, coarse[2]))


def _search(fixed, queue, rounds, measured, t_grid, q_grid, w_grid):
    return serving.grid_fit(fixed, queue, rounds, measured, q_grid, w_grid, overheads=t_grid)


def ttft_grids(mode: str):
    """The fit's (t, q, w) grids (`search.calibration.serving`); "no_queue": q = 0, "no_round":
    w = 0, "request": both."""
    zero = np.zeros(1)
    share = zero if mode in ("no_queue", "request") else serving.SHARE_GRID
    rounds = zero if mode in ("no_round", "request") else serving.ROUND_GRID
    return serving.OVERHEAD_GRID_S, share, rounds


def fit_ttft(table: Table, train: np.ndarray, hosts: dict, assignment: dict,
             config: FitConfig, needed: set) -> dict[str, BenchmarkTerms]:
    """Benchmark-TTFT terms per engine with enough TTFT rows in `train`, and the generic table
    (all of them) when an engine in `needed` has none; "off": zero terms everywhere."""
    mode = config.ttft
    if mode == "off":
        return {GENERIC: ZERO_TTFT}
    inputs = ttft_inputs(table, train, hosts, assignment)
    engines = np.array([str(table.engines[i]) for i in inputs[0]])
    tables = {}
    for engine in sorted({e for e in engines if e != "None"}):
        mine = engines == engine
        if mine.sum() >= config.min_engine_rows:
            tables[engine] = _fit_table(*(x[mine] for x in inputs), table.statistics, mode)
    if needed - set(tables):  # the generic table only where a scored engine has none
        tables[GENERIC] = _fit_table(*inputs, table.statistics, mode)
    return tables


def fit_terms(table: Table, train: np.ndarray, config: FitConfig, base: Terms, needed: set,
              errors=None, sources: np.ndarray | None = None) -> Terms:
    """Every fitted term on the rows in `train`, as `Terms` (`base` gives the kinds and
    engines a fit leaves as they are); `sources`, each row's, for a "shrunk" host fit (its
    leave-one-source-out within `train`)."""
    hosts, assignment = fit_host_and_moe(table, train, config, errors)
    if config.host == "shrunk":
        hosts = shrunk_host_us(hosts, left_out_host_loss(table, sources, config, train))
    ttft = fit_ttft(table, train, hosts, assignment, config, needed)
    fallback = hosts.get(DEFAULT_HOST_CPU, 0.0)  # a host kind without rows in the fold
    terms = base.with_host({cpu: hosts.get(cpu, fallback) for cpu, _ in base.host_us})
    moe_engines = {e for e, _ in base.moe}
    moe = {e: assignment.get(e, VARIANTS[0]) for e in moe_engines} if config.moe == "fit" \
        else dict(config.moe)
    return terms.with_moe(moe).with_ttft(ttft)
