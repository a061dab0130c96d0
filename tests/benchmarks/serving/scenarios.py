"""Predicting one prepared row as its source measured it: at a fixed concurrency, the best
point of an offline run (over its waves), the largest throughput within an MLPerf SLA, a Poisson
rate's mean concurrency, or a disaggregated deployment at its own xPyD ratio; then the errors
pred/meas − 1. The cost model comes in as `Models` (the shipped `evaluate_points` and
`evaluate_disaggregated` by default; leave-one-source-out passes one with refitted terms)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Callable

import numpy as np

from cost_model.architecture import Architecture
from cost_model.arrival_queue import OFFLINE, POISSON, concurrency_at_rate
from cost_model.disaggregated import PoolLimits, evaluate_disaggregated
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.order_statistics import expected_largest_z
from cost_model.units import MS_PER_S
from search.records.comparison import finite_run_tokens_per_s
from tests.benchmarks.serving.config import (
    INFERENCEX, INFERENCEX_PROMPTS_PER_SLOT, INFERENCEX_RANGE_RATIO, NOT_SCORED, PERF_OVERVIEW,
    PERF_OVERVIEW_REQUESTS, RATE_ABOVE_CAPACITY, RATE_GRID, TRTLLM_BENCH_MAX_BATCH,
    WEIGHTS_DO_NOT_FIT,
)
from tests.benchmarks.serving.rows import (
    Measured, Prepared, Result, Skip, _describe, _measured, _number, _statistic,
    instance_rate_per_s, source_of, prepare_row,
)


@dataclass(frozen=True)
class Models:
    """The two cost-model entry points the scenarios call (same signatures as cost_model's)."""

    points: Callable = evaluate_points
    disaggregated: Callable = evaluate_disaggregated


COST_MODEL = Models()  # the shipped cost model with its shipped fitted terms

def _predict_fixed(r: Prepared, concurrency: float, models: Models) -> dict[str, float]:
    p = models.points([r.arch], [r.dep], r.hw, r.workload, concurrency=np.array([concurrency]))
    if p.max_concurrency[0, 0] < 1:
        raise Skip(WEIGHTS_DO_NOT_FIT)
    if not p.fits_memory[0, 0]:
        raise Skip("the row's concurrency exceeds the model's memory limit")
    return {**_ttft_parts(p, 0, r.ttft_statistic), "concurrency": concurrency}


def fixed_values(p, statistic: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the figures at column 0 of every candidate, which candidates fit there): what
    `_predict_fixed` reads, for a batch of candidates at once (copies)."""
    fits = (p.max_concurrency[:, 0] >= 1) & p.fits_memory[:, 0]
    return {name: np.array(values[:, 0])
            for name, values in _columns(p, statistic).items()}, fits


def benchmark_ttft(p, statistic: str) -> np.ndarray:
    """The benchmark TTFT of the statistic the row reports: the median request's where the
    model gives it apart (`benchmark_ttft_median_s`) and the row's is not a mean, else the
    model's (mean) benchmark TTFT."""
    median = getattr(p, "benchmark_ttft_median_s", None)
    return p.benchmark_ttft_s if median is None or statistic == "mean" else median


def _columns(p, statistic: str) -> dict[str, np.ndarray]:
    """The benchmark TTFT with the parts the fit of its terms needs, TPOT and tokens/s/GPU."""
    return {"ttft": benchmark_ttft(p, statistic), "steady_ttft": p.ttft_s,
            "prompt_queue": p.prompt_queue_s, "round_wait": p.round_wait_s,
            "poll_wait": p.poll_wait_s, "tpot": p.tpot_s,
            "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu}


def _ttft_parts(p, j: int, statistic: str) -> dict[str, float]:
    """The figures of `_columns` at column j."""
    return {name: float(values[0, j]) for name, values in _columns(p, statistic).items()}


def _predict_max(r: Prepared, models: Models, requests: int | None = None,
                 batch_cap: int | None = None) -> dict[str, float]:
    """The highest-throughput point up to the memory limit and the batch cap per attention-DP
    rank (the run's `max_batch`, else trtllm-bench's); with `requests` (a finite offline run), no
    more than that in flight, and the run's throughput over its waves
    (`offline_run_tokens_per_s`)."""
    p = models.points([r.arch], [r.dep], r.hw, r.workload)
    cap = (batch_cap or TRTLLM_BENCH_MAX_BATCH) * r.dep.dp
    allowed = p.fits_memory[0] & (p.concurrency[0] <= cap)
    throughput = np.where(allowed, p.tokens_per_s_per_gpu[0], np.nan)
    if not np.any(np.isfinite(throughput)):
        raise Skip(WEIGHTS_DO_NOT_FIT)
    best = int(np.nanargmax(throughput))
    if requests is not None and requests <= p.concurrency[0, best]:  # one wave
        return {**_predict_fixed(r, float(requests), models),
                **_offline_ttft(r, models, requests, batch_cap)}
    predicted = {**_ttft_parts(p, best, r.ttft_statistic),
                 "tokens_per_s_per_gpu": float(throughput[best]),
                 "concurrency": float(p.concurrency[0, best])}
    if requests is not None:
        wave = int(predicted["concurrency"])
        last = requests % wave
        last_rate = _predict_fixed(r, float(last), models)[
            "tokens_per_s_per_gpu"] if last else 0.0
        predicted["tokens_per_s_per_gpu"] = offline_run_tokens_per_s(
            requests, wave, predicted["tokens_per_s_per_gpu"], last_rate)
        predicted.update(_offline_ttft(r, models, requests, batch_cap))
    return predicted


def _offline_ttft(r: Prepared, models: Models, requests: int, batch_cap: int | None
                  ) -> dict[str, float]:
    """The TTFT of an offline run of `requests` queued at once (`cost_model.arrival_queue`,
    arrivals "offline"), the engine admitting up to the memory limit and the batch cap."""
    workload = r.workload.model_copy(update={
        "arrivals": OFFLINE, "max_batch_sequences": batch_cap or TRTLLM_BENCH_MAX_BATCH})
    p = models.points([r.arch], [r.dep], r.hw, workload, concurrency=np.array([requests]))
    return {"ttft": float(benchmark_ttft(p, r.ttft_statistic)[0, 0]),
            "ttft_p99": float(p.benchmark_ttft_p99_s[0, 0])}


def offline_run_tokens_per_s(requests: int, wave: int, wave_rate: float,
                             last_rate: float) -> float:
    """Throughput of an offline run of `requests` equal requests all queued at once, on an
    engine that holds `wave` of them at a time: the product's finite-run formula
    (`search.records.comparison.finite_run_tokens_per_s`). With equal ISL/OSL the requests
    admitted together finish together (TensorRT-LLM's default GUARANTEED_NO_EVICT admits a
    request only with KV for its whole ISL + OSL), so the run is ⌊N/W⌋ full waves and a last one
    of r = N mod W requests, N / (⌊N/W⌋·W/R(W) + r/R(r)); R(W) when r = 0."""
    return finite_run_tokens_per_s(requests, wave, wave_rate, last_rate)


def _errors(measured: Measured, predicted: dict[str, float]) -> dict[str, float | None]:
    """pred/meas − 1 per metric; None where either is missing (a NaN prediction: not modelled
    there, e.g. an SLA row's measured rate above the model's capacity)."""
    pairs = {"tpot": measured.tpot_s, "ttft": measured.ttft_s,
             "tokens_per_s_per_gpu": measured.tokens_per_s_per_gpu}
    return {
        m: None if meas is None or meas <= 0 or not np.isfinite(predicted[m])
        else predicted[m] / meas - 1.0
        for m, meas in pairs.items()
    }


@cache
def benchmark_drain_factor(concurrency: float) -> float:
    """Run length of an InferenceX benchmark over its steady-state share, 1 + CV·√(1/n)·z_C: each
    of the C slots serves n = 10 requests one after another (`--num-prompts 10 × conc`), each
    as long as its OSL, uniform in [r, 1] × nominal (`--random-range-ratio` r = 0.8), so a slot's
    busy time has a coefficient of variation CV/√n with CV = (1 − r)/√12 / ((1 + r)/2), and the run
    ends with the slowest of C slots, z_C standard deviations late (the largest of C normal
    draws, `cost_model.order_statistics`): 1.021 at C = 4, 1.047 at C = 64.
    Client settings: tests/data/serving/SOURCES.md §1 (InferenceX's benchmark_serving.py)."""
    if concurrency <= 1:
        return 1.0
    spread = (1.0 - INFERENCEX_RANGE_RATIO) / np.sqrt(12.0) / ((1.0 + INFERENCEX_RANGE_RATIO) / 2)
    slowest = float(expected_largest_z(concurrency))
    return float(1.0 + spread / np.sqrt(INFERENCEX_PROMPTS_PER_SLOT) * slowest)


def offline_requests(row: dict[str, str]) -> int | None:
    """The requests of the row's offline run where its source states them (its `requests`
    column; TensorRT-LLM's performance overview, `PERF_OVERVIEW_REQUESTS`); None: a steady
    state."""
    stated = _number(row.get("requests", ""))
    if stated and row.get("scenario", "").strip() == "offline":
        return int(stated)
    if row.get("source_kind", "").strip() != PERF_OVERVIEW:
        return None
    return PERF_OVERVIEW_REQUESTS.get((int(_number(row["isl"]) or 0),
                                       int(_number(row["osl"]) or 0)))


def _as_measured(row: dict[str, str], regime: str, predicted: dict[str, float]) -> None:
    """Predicted tokens/s/GPU over the run the row measured (InferenceX: a finite run)."""
    if row.get("source_kind", "").strip() == INFERENCEX and regime == "fixed":
        predicted["tokens_per_s_per_gpu"] /= benchmark_drain_factor(predicted["concurrency"])


def sla_best_index(tokens_per_s_per_gpu: np.ndarray, ttft_p99_s: np.ndarray,
                   tpot_p99_s: np.ndarray, allowed: np.ndarray, ttft_limit_s: float,
                   tpot_limit_s: float) -> int | None:
    """Index of the largest tokens/s/GPU over a concurrency sweep whose p99 TTFT and p99 TPOT
    meet the limits (MLPerf Server / Interactive: the largest throughput that meets them); None
    when no allowed point does."""
    ok = allowed & (ttft_p99_s <= ttft_limit_s) & (tpot_p99_s <= tpot_limit_s)
    if not np.any(ok):
        return None
    return int(np.argmax(np.where(ok, tokens_per_s_per_gpu, -np.inf)))


def _predict_sla(r: Prepared, models: Models) -> dict[str, float]:
    """The largest modelled throughput whose p99 TTFT under Poisson arrivals
    (`cost_model.arrival_queue`: each point of the sweep the steady state of arrivals at the rate
    it completes) and TPOT meet the row's limits (`sla_best_index`), over the sweep up to memory
    and the run's batch cap: what MLPerf Server / Interactive score. The p99 TPOT is taken as
    the steady-state TPOT (every request of a steady batch sees the same steps). The TTFT
    scored is the mean (and p99) under Poisson arrivals at the row's own measured rate
    (`_at_rate`; NaN where that rate is above the model's capacity or not stated)."""
    row = r.row
    ttft_limit, tpot_limit = _number(row["ttft_limit_ms"]), _number(row["tpot_limit_ms"])
    if ttft_limit is None or tpot_limit is None:
        raise Skip("SLA-bound row without its TTFT/TPOT limits")
    cap = (_number(row.get("max_batch", "")) or TRTLLM_BENCH_MAX_BATCH) * r.dep.dp
    p, allowed = _rate_sweep(r, models)
    allowed = allowed & (p.concurrency[0] <= cap)
    best = sla_best_index(p.tokens_per_s_per_gpu[0], p.benchmark_ttft_p99_s[0], p.tpot_s[0],
                          allowed, ttft_limit / MS_PER_S, tpot_limit / MS_PER_S)
    if best is None:
        raise Skip("no modelled concurrency meets the row's TTFT/TPOT limits")
    stated = _number(row.get("request_rate_per_s", ""))
    at = None if stated is None else _at_rate(r, p, allowed, instance_rate_per_s(row))
    return {**_ttft_parts(p, best, r.ttft_statistic),
            "ttft": np.nan if at is None else at["ttft"],
            "ttft_p99": np.nan if at is None else at["ttft_p99"],
            "tpot_closed_loop_proxy": _closed_loop_proxy_tpot(r, models, cap, ttft_limit,
                                                              tpot_limit),
            "concurrency": float(p.concurrency[0, best])}


def _closed_loop_proxy_tpot(r: Prepared, models: Models, cap: float, ttft_limit_ms: float,
                            tpot_limit_ms: float) -> float:
    """The TPOT the SLA criterion read before the arrival model, printed beside it: the
    closed loop's mean benchmark TTFT taken as the p99 (`sla_best_index` over the default
    sweep); NaN where no point meets the limits."""
    p = models.points([r.arch], [r.dep], r.hw, r.workload)
    allowed = p.fits_memory[0] & (p.concurrency[0] <= cap)
    best = sla_best_index(p.tokens_per_s_per_gpu[0], p.benchmark_ttft_s[0], p.tpot_s[0],
                          allowed, ttft_limit_ms / MS_PER_S, tpot_limit_ms / MS_PER_S)
    return np.nan if best is None else float(p.tpot_s[0, best])


def _rate_sweep(r: Prepared, models: Models):
    """(operating points under Poisson arrivals on `RATE_GRID`, which of them fit memory
    within the engine's in-flight cap)."""
    workload = r.workload.model_copy(update={"arrivals": POISSON})
    p = models.points([r.arch], [r.dep], r.hw, workload, concurrency=RATE_GRID)
    if p.max_concurrency[0, 0] < 1:
        raise Skip(WEIGHTS_DO_NOT_FIT)
    return p, p.fits_memory[0] & (p.concurrency[0] <= p.max_concurrency[0, 0])


def _at_rate(r: Prepared, p, allowed: np.ndarray, rate_per_s: float) -> dict | None:
    """Every figure at the concurrency whose modelled completion rate is `rate_per_s` (Little's
    law's fixed point, `concurrency_at_rate`), linear between the sweep's points; None above the
    model's capacity."""
    requests_per_s = p.tokens_per_s_per_gpu[0] * r.dep.gpus / r.workload.osl_tokens
    at = concurrency_at_rate(rate_per_s, p.concurrency[0], requests_per_s, allowed)
    if at is None:
        return None
    grid = p.concurrency[0][allowed]
    columns = {**_columns(p, r.ttft_statistic), "ttft_p99": p.benchmark_ttft_p99_s}
    return {**{name: float(np.interp(at, grid, values[0][allowed]))
               for name, values in columns.items()}, "concurrency": at}


def _predict_rate(r: Prepared, models: Models) -> dict[str, float]:
    """A Poisson-rate row at the concurrency its rate sustains in the model (`_at_rate`)."""
    predicted = _at_rate(r, *_rate_sweep(r, models), instance_rate_per_s(r.row))
    if predicted is None:
        raise Skip(RATE_ABOVE_CAPACITY)
    return predicted


def _predict(r: Prepared, models: Models) -> dict[str, float]:
    if r.regime == "max":
        return _predict_max(r, models, offline_requests(r.row),
                            int(_number(r.row.get("max_batch", "")) or 0) or None)
    if r.regime == "sla":
        return _predict_sla(r, models)
    if r.regime == "rate":
        return _predict_rate(r, models)
    return _predict_fixed(r, r.concurrency, models)


def _predict_disaggregated(r: Prepared, models: Models) -> dict[str, float]:
    """A disaggregated row at its own xPyD ratio; concurrency is split over the decode
    instances."""
    x, prefill, y, decode = r.pools
    p = models.disaggregated([r.arch], [prefill], [decode], r.hw, r.workload,
                             np.array([max(round(r.concurrency / y), 1)]),
                             PoolLimits(ratio=(x, y)))
    if not p.fits_memory[0, 0]:
        raise Skip("disaggregated: a pool does not fit memory at the row's concurrency")
    return {"tpot": float(p.tpot_s[0, 0]),
            "ttft": float(benchmark_ttft(p, r.ttft_statistic)[0, 0]),
            "steady_ttft": float(p.ttft_s[0, 0]), "prompt_queue": float(p.wave_queue_s[0, 0]),
            "round_wait": 0.0, "poll_wait": 0.0,
            "tokens_per_s_per_gpu": float(p.tokens_per_s_per_gpu[0, 0]),
            "concurrency": r.concurrency}


def describe(r: Prepared) -> str:
    """The deployment as the tables print it (both pools of a disaggregated one)."""
    if r.pools is None:
        return _describe(r.dep)
    x, prefill, y, decode = r.pools
    return f"{x}P {_describe(prefill)} + {y}D {_describe(decode)}"


def predict_prepared(r: Prepared, models: Models = COST_MODEL) -> dict[str, float]:
    """The model's figures for one prepared row as its source measured them (TPOT, benchmark
    TTFT and its parts, tokens/s/GPU, the concurrency); raises `Skip` when it has none."""
    try:
        predicted = _predict_disaggregated(r, models) if r.pools is not None \
            else _predict(r, models)
    except ConfigError as exc:
        raise Skip(f"cost model refused the row: {exc}") from exc
    _as_measured(r.row, r.regime, predicted)
    return predicted


def scored_measurement(r: Prepared) -> Measured:
    """The row's measurements that are scored: not those its regime takes as input
    (`NOT_SCORED`: a Poisson-rate row's tokens/s/GPU is its rate × OSL)."""
    measured = _measured(r.row)
    return replace(measured, **{f: None for f in NOT_SCORED.get(r.regime, {})})


def ttft_not_scored(rows: list[Prepared], results: list[Result | None] | None = None
                    ) -> dict[str, int]:
    """Rows with a measured TTFT that is not scored, by reason: an SLA row whose measured rate
    is above the model's capacity (its TTFT predicted NaN)."""
    out: dict[str, int] = {}
    for r, res in zip(rows, results or [None] * len(rows)):
        if res is not None and res.measured.get("ttft_s") and res.error_frac["ttft"] is None:
            reason = f"TTFT of an MLPerf {r.regime} row: {RATE_ABOVE_CAPACITY}"
            out[reason] = out.get(reason, 0) + 1
    return out


def score_prepared(r: Prepared, models: Models = COST_MODEL) -> Result:
    """The comparison for one prepared row; raises `Skip` with the reason when it has none."""
    predicted = predict_prepared(r, models)
    measured = scored_measurement(r)
    return Result(r.workload.engine, r.row["model"], r.row["gpu"], r.regime, r.arch.ffn.is_moe,
                  describe(r), r.workload.isl_tokens, r.workload.osl_tokens,
                  predicted.pop("concurrency"), measured.__dict__, predicted,
                  _errors(measured, predicted), r.row.get("source_kind", "").strip(),
                  _statistic(r.row), r.source)


def evaluate_row(row: dict[str, str], data_dir: Path, archs: dict[Path, Architecture],
                 models: Models = COST_MODEL) -> Result:
    """The comparison for one CSV row; raises `Skip` with the reason when it has none."""
    return score_prepared(prepare_row(row, data_dir, archs), models)


def _count_skip(row, reason, skipped: Counter, skipped_by_source: Counter | None) -> None:
    skipped[str(reason)] += 1
    if skipped_by_source is not None:
        skipped_by_source[(source_of(row), str(reason))] += 1


def evaluate_prepared(rows: list[dict[str, str]], data_dir: Path,
                      skipped_by_source: Counter | None = None
                      ) -> tuple[list[Result], Counter, list[Prepared]]:
    """(the rows' comparisons, the skipped rows by reason, the prepared rows the comparisons
    belong to, one to one); `skipped_by_source`, when given, also counts the skipped rows by
    (source, reason)."""
    results, skipped, kept, archs = [], Counter(), [], {}
    for row in rows:
        try:
            prepared = prepare_row(row, data_dir, archs)
            results.append(score_prepared(prepared))
            kept.append(prepared)
        except Skip as reason:
            _count_skip(row, reason, skipped, skipped_by_source)
    return results, skipped, kept


def evaluate_all(rows: list[dict[str, str]], data_dir: Path,
                 skipped_by_source: Counter | None = None) -> tuple[list[Result], Counter]:
    """The rows' comparisons and the skipped rows by reason; `skipped_by_source`, when given,
    also counts them by (source, reason)."""
    results, skipped, _ = evaluate_prepared(rows, data_dir, skipped_by_source)
    return results, skipped
