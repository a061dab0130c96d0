"""Error summaries: median |pred/meas − 1| and its signed median (bias) per metric, by dense and
MoE models, by group, per source and by the statistic each row reports; the per-model cap."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

import numpy as np

from tests.benchmarks.serving.config import HALVES, MAX_MODEL_SHARE, METRICS, MODEL_CONFIGS
from tests.benchmarks.serving.rows import Result, _number

def log_error_summary(log_errors: np.ndarray, decimals: int = 0) -> str:
    """"median |error| X%, bias Y%" of errors given as log(pred/meas) (the fit scripts' form)."""
    rel = np.exp(log_errors) - 1.0
    return f"median |error| {np.median(np.abs(rel)):.{decimals}%}, " \
        f"bias {np.median(rel):+.{decimals}%}"


def _stats(results: list[Result]) -> dict[str, dict[str, float | int | None]]:
    out = {}
    for metric in METRICS:
        errs = np.array([r.error_frac[metric] for r in results if r.error_frac[metric] is not None])
        out[metric] = {
            "n": int(errs.size),
            "median_abs_error_frac": float(np.median(np.abs(errs))) if errs.size else None,
            "median_error_frac": float(np.median(errs)) if errs.size else None,
        }
    return out


def summarize(results: list[Result], skipped: Counter) -> dict:
    groups = defaultdict(list)
    for r in results:
        groups[(r.model, r.gpu, r.regime)].append(r)
    by_group = [{"model": m, "gpu": g, "regime": reg, "rows": len(rs), "metrics": _stats(rs)}
                for (m, g, reg), rs in sorted(groups.items())]
    return {
        "rows_evaluated": len(results),
        "rows_skipped": sum(skipped.values()),
        "groups": by_group,
        "overall": _by_kind(results),
        "halves": {half: _by_kind([r for r in results if r.half == half]) for half in HALVES},
        "skipped": dict(skipped.most_common()),
        "rows": [{**r.__dict__, "half": r.half, "ttft_statistic": r.statistic.get("ttft")}
                 for r in results],
    }


def _by_kind(results: list[Result]) -> dict:
    return {kind: _stats([r for r in results if r.is_moe == (kind == "moe")])
            for kind in ("dense", "moe")}


def model_cap(counts: list[int], max_share: float = MAX_MODEL_SHARE) -> int:
    """The largest per-model row count K such that no model keeps more than `max_share` of the
    rows once every model is cut to K: K ≤ share · Σ min(n_m, K)."""
    best = 0
    for k in range(1, max(counts, default=0) + 1):
        if k <= max_share * sum(min(n, k) for n in counts):
            best = k
    return best


def _model_key(model: str) -> str:
    """Models that share a config count as one (DeepSeek-R1, -0528 and V3; base and Instruct)."""
    return MODEL_CONFIGS.get(model, model)


def capped(results: list[Result], max_share: float = MAX_MODEL_SHARE):
    """(results with no model above `max_share`, {model: (rows, kept)} for the models cut).
    Deterministic: a cut model keeps the rows whose SHA-256 of their configuration comes
    first."""
    by_model = defaultdict(list)
    for r in results:
        by_model[_model_key(r.model)].append(r)
    cap = model_cap([len(rs) for rs in by_model.values()], max_share)
    kept, cut = [], {}
    for model, rs in sorted(by_model.items()):
        if len(rs) > cap:
            rs = sorted(rs, key=_row_hash)[:cap]
            cut[model] = (len(by_model[model]), cap)
        kept += rs
    return kept, cut


def _row_hash(r: Result) -> str:
    key = f"{r.source_kind}|{r.model}|{r.gpu}|{r.deployment}|{r.isl_tokens}|{r.osl_tokens}|" \
          f"{r.concurrency}|{r.measured}"
    return hashlib.sha256(key.encode()).hexdigest()


def _p99_over_mean(rows: list[dict[str, str]]) -> dict[str, float | None]:
    """Median p99/mean of TPOT and TTFT over the rows that publish both (MLPerf's logs)."""
    out = {}
    for metric in ("tpot", "ttft"):
        ratios = [_number(r[f"{metric}_p99_ms"]) / _number(r[f"{metric}_ms"]) for r in rows
                  if _number(r.get(f"{metric}_p99_ms", "")) and _number(r.get(f"{metric}_ms", ""))]
        out[metric] = float(np.median(ratios)) if ratios else None
    return out


def per_source(results: list[Result]) -> dict:
    groups = defaultdict(list)
    for r in results:
        groups[r.source or r.source_kind or "?"].append(r)
    return {kind: _by_kind(rs) for kind, rs in sorted(groups.items())}


def ttft_by_client(results: list[Result]) -> dict:
    """TTFT errors by the client each regime's rows ran (closed loop, Poisson rate, MLPerf SLA
    at its measured rate, offline run), and the p99 TTFT of the rows that publish one against
    the model's p99 under the same client (`cost_model.arrival_queue`)."""
    out = {}
    for regime in sorted({r.regime for r in results}):
        stats = _stats([r for r in results if r.regime == regime])["ttft"]
        if stats["n"]:
            out[regime] = stats
    errs = np.array([r.predicted["ttft_p99"] / r.measured["ttft_p99_s"] - 1.0 for r in results
                     if r.measured.get("ttft_p99_s") and np.isfinite(r.predicted.get(
                         "ttft_p99", np.nan))])
    if errs.size:
        out["p99"] = {"n": int(errs.size), "median_abs_error_frac": float(np.median(abs(errs))),
                      "median_error_frac": float(np.median(errs))}
    return out


def sla_tpot(results: list[Result]) -> dict:
    """The MLPerf SLA rows' TPOT errors: at the SLA criterion's point (the model's p99 TTFT
    under Poisson arrivals) and at the closed-loop proxy's (its mean TTFT as the p99), on the
    rows that have both."""
    pairs = [(r.predicted["tpot"], r.predicted["tpot_closed_loop_proxy"], r.measured["tpot_s"])
             for r in results if r.regime == "sla" and r.measured.get("tpot_s")
             and np.isfinite(r.predicted.get("tpot_closed_loop_proxy", np.nan))]
    out = {}
    for name, k in (("sla criterion", 0), ("closed-loop proxy", 1)):
        errs = np.array([pair[k] / pair[2] - 1.0 for pair in pairs])
        if errs.size:
            out[name] = {"n": int(errs.size), "median_abs_error_frac":
                         float(np.median(abs(errs))), "median_error_frac": float(np.median(errs))}
    return out


def by_statistic(results: list[Result]) -> dict:
    """TPOT and TTFT errors by the statistic each row reports (mean, median, unstated)."""
    out = {}
    for metric in ("tpot", "ttft"):
        for stat in sorted({r.statistic.get(metric, "unstated") for r in results}):
            rs = [r for r in results if r.statistic.get(metric, "unstated") == stat]
            stats = _stats(rs)[metric]
            if stats["n"]:
                out[f"{metric} {stat}"] = stats
    return out
