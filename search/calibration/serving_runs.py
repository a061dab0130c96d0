"""A user's own serving-benchmark runs (`search.records.benchmarks.read_benchmark_output`: the
files `archscout compare` reads) fitted into the serving terms of one deployment
(`archscout calibrate --source RESULTS…`): the host time per sequence per step of the GPU's host
CPU kind, then the benchmark-TTFT terms of each engine table on top of it, with the fits of
`search.calibration.serving`. Each run is predicted as `compare` predicts it
(`search.records.comparison`): TPOT and TTFT at its wave of requests in flight, tokens/s/GPU of
the finite run.

Too few points leave a term at the value it had (the user's previous file's, else the shipped
one), said in one line:
- h needs runs at MIN_HOST_CONCURRENCIES different concurrencies: h is a cost per sequence in
  a step, seen as step time growing with the sequences in flight; runs at one concurrency
  cannot tell it from an error of the GPU's step time there;
- t_request needs MIN_TTFT_RUNS run with a measured TTFT (one offset, one point);
- the queue share q needs MIN_QUEUE_LENGTHS different prompt-queue lengths (C_g − 1)·S_prompt
  among them: it is a slope in the queue, and one length fixes only the sum t + q·queue.
Runs whose lengths vary enough that one wave lasted as long as its longest request (compare's
note, `comparison.LONGEST_OVER_MEAN`) give their TPOT only: their tokens/s is not a wave's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from cost_model import (
    GENERIC, MS_PER_S, Architecture, Deployment, evaluate_points, get_hardware, make_workload,
    request_step_s, shipped_terms, trial_host_us,
)
from search.calibration.serving import (
    HOST_GRID_US, NO_ROUND_GRID, SHARE_GRID, TtftInputs, abs_log_errors, best_host_index,
    fit_ttft_terms, ttft_log_errors,
)
from search.records.comparison import check_row, finite_run_tokens_per_s, lengths_vary

MIN_HOST_CONCURRENCIES = 2
MIN_TTFT_RUNS = 1
MIN_QUEUE_LENGTHS = 2


@dataclass(frozen=True)
class Target:
    """The deployment the runs measured (what a benchmark output does not say)."""

    arch: Architecture
    dep: Deployment
    hardware: str
    engine: str | None  # the flag's or the study's; else each output's own


@dataclass(frozen=True)
class MeasuredRun:
    row: dict  # the benchmark row
    requests: int
    wave: int  # requests in flight: the client's limit, at most what memory holds
    isl: int
    osl: int
    engine: str | None

    @property
    def table(self) -> str:
        return self.engine or GENERIC


def measured_runs(rows: list[dict], target: Target) -> list[MeasuredRun]:
    """Each benchmark row with its wave (`comparison.check_row` refuses a row without its
    concurrency, ISL or OSL)."""
    runs = []
    for row in rows:
        requests, limit, isl, osl = check_row(row)
        engine = target.engine or row.get("engine")
        p = _points(target, isl, osl, engine, [1])
        memory = int(p.max_concurrency[0, 0]) or limit
        runs.append(MeasuredRun(row, requests, max(1, min(limit, requests, memory)), isl, osl,
                                engine))
    return runs


def _points(target: Target, isl: int, osl: int, engine: str | None, concurrencies):
    workload = make_workload(isl_tokens=isl, osl_tokens=osl, engine=engine)
    return evaluate_points([target.arch], [target.dep], get_hardware(target.hardware), workload,
                           np.array([float(c) for c in concurrencies]))


def predict(run: MeasuredRun, target: Target) -> dict:
    """The run as `compare` predicts it: TPOT and the TTFT's parts at the wave, tokens/s/GPU of
    the finite run (in s and tokens/s/GPU)."""
    last = run.requests % run.wave
    p = _points(target, run.isl, run.osl, run.engine, [run.wave, max(last, 1)])
    rate = finite_run_tokens_per_s(run.requests, run.wave, float(p.tokens_per_s_per_gpu[0, 0]),
                                   float(p.tokens_per_s_per_gpu[0, 1]))
    part = lambda values: float(np.nan_to_num(values[0, 0])) if values is not None else 0.0  # noqa
    return {"tpot_s": float(p.tpot_s[0, 0]), "tokens_per_s_per_gpu": rate,
            "fixed_s": float(p.ttft_s[0, 0]) + part(p.poll_wait_s) + part(p.slot_wait_s),
            "queue_s": float(p.prompt_queue_s[0, 0]), "round_s": part(p.round_wait_s),
            "benchmark_ttft_s": float(p.benchmark_ttft_s[0, 0])}


def _measured(run: MeasuredRun, gpus: int) -> tuple[float, float]:
    """(TPOT s, tokens/s/GPU) measured; NaN where absent, tokens/s where lengths vary."""
    r = run.row
    tpot = r["tpot_ms"] / MS_PER_S if math.isfinite(r["tpot_ms"]) else math.nan
    rate = r["output_tokens_per_s"] / gpus
    return tpot, math.nan if lengths_vary(r, run.wave, run.osl) else rate


# ---- the host time ---------------------------------------------------------------------------

@dataclass
class TermFit:
    """One term of one table: its value before and after, what it was fitted on (or why kept),
    and the error of the figures it was fitted on, before and after."""

    term: str
    table: str
    before: float
    after: float
    points: int
    files: list[str]
    error_before: float = math.nan
    error_after: float = math.nan
    kept_because: str | None = None
    extra: dict = field(default_factory=dict)
    note: str | None = None


def _files(runs: list[MeasuredRun]) -> list[str]:
    return sorted({run.row["file"] for run in runs})


def host_errors(runs: list[MeasuredRun], target: Target, cpu: str, h_us: float) -> np.ndarray:
    """|log error| of every measured TPOT and tokens/s/GPU with h = `h_us` (NaN: not scored)."""
    with trial_host_us({cpu: float(h_us)}):
        pred = [predict(run, target) for run in runs]
    measured = np.array([_measured(run, target.dep.gpus) for run in runs]).reshape(-1, 2)
    predicted = np.array([[p["tpot_s"], p["tokens_per_s_per_gpu"]] for p in pred]).reshape(-1, 2)
    return abs_log_errors(predicted, measured)


def fit_host(runs: list[MeasuredRun], target: Target) -> TermFit:
    """h of the GPU's host CPU kind on every run's TPOT and tokens/s/GPU (module docstring)."""
    cpu = get_hardware(target.hardware).host_cpu
    before_us = request_step_s(cpu) * 1e6
    now = host_errors(runs, target, cpu, before_us)
    scored = int(np.isfinite(now).sum())
    loads = {run.wave for run, ok in zip(runs, np.isfinite(now).any(axis=1)) if ok}
    fit = TermFit("request_step_us", cpu, before_us, before_us, scored, _files(runs),
                  float(np.nanmean(now)) if scored else math.nan)
    if len(loads) < MIN_HOST_CONCURRENCIES:
        fit.kept_because = (f"{scored} measured TPOT or tokens/s at {len(loads)} concurrency; "
                            f"it needs runs at {MIN_HOST_CONCURRENCIES} different ones")
        fit.error_after = fit.error_before
        return fit
    errors = [host_errors(runs, target, cpu, h) for h in HOST_GRID_US]
    j = best_host_index([np.nansum(e) for e in errors], [np.isfinite(e).sum() for e in errors])
    fit.after, fit.error_after = float(HOST_GRID_US[j]), float(np.nanmean(errors[j]))
    fit.extra = {"concurrencies": sorted(loads)}
    if j == len(HOST_GRID_US) - 1:
        fit.note = (f"{cpu}.request_step_us is at the top of its grid ({HOST_GRID_US[-1]:g} µs): "
                    "the runs are slower than the model explains by host time; check the "
                    "deployment given (GPU, TP, formats) before trusting it")
    return fit


# ---- the benchmark-TTFT terms ----------------------------------------------------------------

def ttft_inputs(runs: list[MeasuredRun], target: Target) -> tuple[list[MeasuredRun], TtftInputs]:
    """The runs with a measured TTFT and the fit's inputs (at the host time now in force)."""
    timed = [run for run in runs if math.isfinite(run.row["ttft_ms"]) and run.row["ttft_ms"] > 0]
    pred = [predict(run, target) for run in timed]
    x = TtftInputs(np.array([p["fixed_s"] for p in pred]), np.array([p["queue_s"] for p in pred]),
                   np.array([p["round_s"] for p in pred]),
                   np.array([run.row["ttft_ms"] / MS_PER_S for run in timed]),
                   np.array([run.row["ttft_stat"] == "mean" for run in timed]))
    return timed, x


def _terms_tuple(engine: str) -> tuple:
    t = shipped_terms(None if engine == GENERIC else engine)
    return (t.request_overhead_s, t.queue_share_frac, t.round_wait_share_frac,
            t.mean_request_overhead_s, t.mean_queue_share_frac)


def fit_ttft_table(table: str, runs: list[MeasuredRun], x: TtftInputs) -> list[TermFit]:
    """t_request and q of one engine table (q kept where the queue lengths are too few)."""
    before = _terms_tuple(table)
    files, n = _files(runs), len(runs)
    error = lambda terms: float(np.median(np.abs(ttft_log_errors(terms, x)))) if n else math.nan  # noqa: E731
    if n < MIN_TTFT_RUNS:
        return [TermFit("request_overhead_ms", table, before[0] * 1e3, before[0] * 1e3, 0, files,
                        kept_because=f"no run with a measured TTFT (needs {MIN_TTFT_RUNS})")]
    lengths = len(np.unique(np.round(x.queue_s, 6)))
    shares = SHARE_GRID if lengths >= MIN_QUEUE_LENGTHS else np.array([before[1]])
    after = fit_ttft_terms(x, (shares, NO_ROUND_GRID))
    e0, e1 = error(before), error(after)
    fits = [TermFit("request_overhead_ms", table, before[0] * 1e3, after[0] * 1e3, n, files, e0,
                    e1, extra={"terms": after}),
            TermFit("queue_share_frac", table, before[1], after[1], n, files, e0, e1)]
    if lengths < MIN_QUEUE_LENGTHS:
        fits[1].kept_because = (f"{n} run(s) with a TTFT at {lengths} prompt-queue length; it "
                                f"needs {MIN_QUEUE_LENGTHS} different ones")
    return fits


def fit_ttft(runs: list[MeasuredRun], target: Target) -> list[TermFit]:
    """Every engine table the runs name (a run naming none: the generic table)."""
    timed, x = ttft_inputs(runs, target)
    tables = sorted({run.table for run in runs})
    out = []
    for table in tables:
        mine = np.array([run.table == table for run in timed], bool)
        out += fit_ttft_table(table, [r for r, m in zip(timed, mine) if m], x.subset(mine))
    return out


def statistics_of(runs: list[MeasuredRun]) -> str:
    counts = Counter(run.row["ttft_stat"] or "no" for run in runs)
    return ", ".join(f"{n} {stat}" for stat, n in sorted(counts.items()))
