"""Leave-one-source-out: for each source, every fitted serving term is fitted on the other
sources' rows (`folds.fit_terms`) and the source's rows are scored with that fit; the headline
figures aggregate each row's left-out prediction, beside the in-sample ones (every term fitted on
all rows) and the shipped constants'. The same for each ablation (`CONFIGS`: a term off, or fixed
as shipped), so a term whose in-sample gain does not survive being left out shows."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from cost_model.benchmark_ttft import BenchmarkTerms
from tests.benchmarks.serving.config import MIN_ENGINE_TTFT_ROWS
from tests.benchmarks.serving.fast import FastModels
from tests.benchmarks.serving.terms import Terms, full_model_at, shipped
from tests.benchmarks.serving.folds import FitConfig, _host_errors, build_table, fit_terms
from tests.benchmarks.serving.rows import Prepared, Result, Skip
from tests.benchmarks.serving.scenarios import COST_MODEL, score_prepared

FITTED = "fitted"
CHECK_TOLERANCE = 1e-9  # relative: the fast path must equal the full cost model
MIN_ROWS = MIN_ENGINE_TTFT_ROWS
GENERIC_ONLY = 10**9  # an engine table needs more rows than any set has: the generic table only


def configs(base: Terms) -> tuple[FitConfig, ...]:
    """The product's fit first (host time fitted and kept only where it beats 0 with each of
    the fit's sources left out, `folds.shrunk_host_us`; the benchmark client's t_request and
    queue share q fitted, w = 0, an engine's own TTFT table from `MIN_ROWS` rows; each
    engine's fused-MoE terms as shipped: its own kernels' fit, not fitted on serving rows), then
    each term off, reduced, or fitted where the product does not fit it."""
    engines = [e for e, _ in base.moe]
    every = lambda variant: tuple((e, variant) for e in engines)  # noqa: E731
    shipped_rule = base.moe
    product = {"ttft": "no_round", "min_engine_rows": MIN_ROWS}
    return (
        FitConfig(FITTED, host="shrunk", moe=shipped_rule, **product),
        FitConfig("host time off (h = 0)", host="off", moe=shipped_rule, **product),
        FitConfig("host time fitted, kept even where it fails left out", moe=shipped_rule,
                  **product),
        FitConfig("fused MoE: variant fitted per engine", moe="fit", **product),
        FitConfig("fused MoE: floor only (size terms off)", moe=every("floor"), **product),
        FitConfig("fused MoE: off (no fused-MoE overhead)", moe=every("none"), **product),
        FitConfig("benchmark TTFT: t_request, q and w, a table per engine", moe=shipped_rule),
        FitConfig("benchmark TTFT: t_request, q and w", moe=shipped_rule,
                  min_engine_rows=MIN_ROWS),
        FitConfig("benchmark TTFT: t_request and q, a table per engine", ttft="no_round",
                  moe=shipped_rule),
        FitConfig("benchmark TTFT: t_request and q, the generic table alone", ttft="no_round",
                  moe=shipped_rule, min_engine_rows=GENERIC_ONLY),
        FitConfig("benchmark TTFT: t_request only", ttft="request", moe=shipped_rule,
                  min_engine_rows=MIN_ROWS),
        FitConfig("benchmark TTFT: t_request only, the generic table alone", ttft="request",
                  moe=shipped_rule, min_engine_rows=GENERIC_ONLY),
        FitConfig("benchmark TTFT: off (no client terms)", ttft="off", moe=shipped_rule),
    )


@dataclass
class ConfigRun:
    """One configuration's left-out and in-sample results (None: not scored under that fit,
    e.g. no modelled point meets an SLA) and the terms of each fit."""

    config: FitConfig
    left_out: list
    in_sample: list
    fold_terms: dict = field(default_factory=dict)
    in_sample_terms: Terms | None = None
    seconds: float = 0.0


@dataclass
class LosoRun:
    rows: list[Prepared]
    shipped_results: list[Result]
    sources: list[str]
    runs: dict
    check: dict
    seconds: dict


def run_loso(rows: list[Prepared], results: list[Result], names: set | None = None) -> LosoRun:
    """Leave-one-source-out over `rows` (scored as shipped in `results`), for every
    configuration (or those named in `names`)."""
    start, fm, base = time.perf_counter(), FastModels(), shipped()
    check = check_against_full(rows, results, fm, base)
    seconds = {"check": time.perf_counter() - start}
    table = build_table(rows, results, fm, base)
    seconds["table"] = time.perf_counter() - start - seconds["check"]
    errors, sources = _host_errors(table), np.array([r.source for r in rows])
    runs = {}
    for config in configs(base):
        if names is None or config.name in names:
            runs[config.name] = _run_config(config, rows, table, errors, sources, fm, base)
    seconds["total"] = time.perf_counter() - start
    return LosoRun(rows, results, sorted(set(sources)), runs, check, seconds)


def _run_config(config: FitConfig, rows, table, errors, sources, fm, base) -> ConfigRun:
    start = time.perf_counter()
    everything = np.ones(len(rows), dtype=bool)
    engines = {r.workload.engine for r in rows}
    terms = fit_terms(table, everything, config, base, engines, errors, sources)
    run = ConfigRun(config, [None] * len(rows), score(rows, fm, terms), in_sample_terms=terms)
    for source in sorted(set(sources)):
        out = sources == source
        needed = {rows[i].workload.engine for i in np.flatnonzero(out)}
        fold = fit_terms(table, ~out, config, base, needed, errors, sources)
        run.fold_terms[source] = fold
        for i, result in zip(np.flatnonzero(out), score([rows[i] for i in np.flatnonzero(out)],
                                                        fm, fold)):
            run.left_out[i] = result
    run.seconds = time.perf_counter() - start
    return run


def score(rows: list[Prepared], fm: FastModels, terms: Terms) -> list:
    """Each row's result under `terms` (None where it is not scored there)."""
    models, out = fm.models(terms), []
    for r in rows:
        try:
            out.append(score_prepared(r, models))
        except Skip:
            out.append(None)
    return out


# ---- the fast path against the full cost model -------------------------------------------


def check_rows(rows: list[Prepared], per_kind: int = 2) -> list[int]:
    """A few rows of every regime, dense and MoE, and engine: the first `per_kind` of each."""
    seen, picked = {}, []
    for i, r in enumerate(rows):
        key = (r.regime, r.arch.ffn.is_moe, r.workload.engine)
        if seen.get(key, 0) < per_kind:
            seen[key] = seen.get(key, 0) + 1
            picked.append(i)
    return picked


def perturbed(base: Terms) -> Terms:
    """Terms unlike the shipped ones in every part (for the check)."""
    ttft = {"generic": BenchmarkTerms(0.1, 0.3, 0.5), "trtllm": BenchmarkTerms(0.02, 0.1, 0.7),
            "sglang": BenchmarkTerms(0.04, 0.2, 0.0)}
    return base.with_host({cpu: 7.0 + 11.0 * k for k, (cpu, _) in enumerate(base.host_us)}) \
        .with_moe({e: ("none", "full", "floor")[k % 3] for k, (e, _) in enumerate(base.moe)}) \
        .with_ttft(ttft)


def check_against_full(rows: list[Prepared], results: list[Result], fm: FastModels,
                       base: Terms) -> dict:
    """Largest relative difference between the fast path and the cost model in full, on
    `check_rows`: at the shipped terms (against the shipped results), at `perturbed` terms
    alone and inside a batch (against the cost model with those terms set); raises when
    above `CHECK_TOLERANCE`."""
    picked, other = check_rows(rows), perturbed(base)
    worst = {"shipped": 0.0, "perturbed": 0.0, "perturbed_in_batch": 0.0}
    with full_model_at(other):
        full = [_predicted(rows[i], COST_MODEL) for i in picked]
    for k, i in enumerate(picked):
        batch = fm.batch([base.with_ttft(dict(other.ttft)), other])[1]
        pairs = (("shipped", _predicted(rows[i], fm.models(base)), results[i].predicted),
                 ("perturbed", _predicted(rows[i], fm.models(other)), full[k]),
                 ("perturbed_in_batch", _predicted(rows[i], batch), full[k]))
        for name, fast, slow in pairs:
            worst[name] = max(worst[name], _relative_difference(fast, slow))
    if max(worst.values()) > CHECK_TOLERANCE:
        raise RuntimeError(f"the fast path differs from the cost model: {worst} (relative) on "
                           f"rows {picked}; update tests/benchmarks/serving/fast.py")
    return {"rows": len(picked), "worst_relative_difference": worst}


def _predicted(r: Prepared, models) -> dict | None:
    try:
        return score_prepared(r, models).predicted
    except Skip:
        return None


def _relative_difference(a: dict | None, b: dict | None) -> float:
    if a is None or b is None:
        return 0.0 if a is None and b is None else np.inf
    return max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) if a[k] != b[k] else 0.0 for k in b)
