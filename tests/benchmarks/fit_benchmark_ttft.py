"""Fit the benchmark-TTFT terms (cost_model/benchmark_ttft.py) on published end-to-end rows, per
serving engine.

benchmark TTFT = t_request + T_steady + share · Q + w · W_round + W_poll, with T_steady (the
engine's steady-state TTFT), Q (draining the other prompts of the request's group), W_round
(TensorRT-LLM's attention-DP balancer waiting for a full DP round, where the run turned it on)
and W_poll (the request-queue polling interval of the run, SGLang `--scheduler-recv-interval`)
from the cost model, and the free terms fitted here on the measured TTFTs of every published row
that `validate_serving.py` scores (its `--json` rows; never kernel tables, never
aiconfigurator's silicon_sample.csv): the median request's t_request and share q̃ of Q and w on
the rows that report a median, then, where at least MIN_MEAN_ROWS rows report a mean, the mean
request's own t_request and share q̄ ≥ q̃ on those (else the mean takes the median's terms). A
row says which statistic its TTFT is (`ttft_statistic`, "mean" or "median"); a row that does
not is a median (the development set's InferenceX records: `median_ttft`; its 9 NIM rows are
means, too few for terms of their own). Each engine (`Result.engine`: sglang, trtllm, vllm)
with rows gets its own terms; [generic] is fitted on every row, for a workload that names no
engine. The objective is the median |log(pred/meas)| over a grid (t_request 0…300 ms by 2 ms,
shares 0…1 by 0.02, w 0…1 by 0.05; w only where rows have a round wait): robust to the outliers
of a mixed set, and exactly reproducible.

Declared split (to avoid fitting to the test): `validate_serving.split_half` divides the rows by a
hash of their configuration (model, GPU, deployment, ISL, OSL, concurrency; one configuration
measured on several dates stays on one side). The terms are fitted on the `fit` half only and
scored on the `holdout` half; a fit on all rows is printed beside them for comparison.

Usage: python tests/benchmarks/fit_benchmark_ttft.py [--write]
  --write  store the terms fitted on the `fit` half in cost_model/data/serving/benchmark.toml
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_serving  # noqa: E402

from cost_model.benchmark_ttft import GENERIC  # noqa: E402

TOML = REPO / "cost_model" / "data" / "serving" / "benchmark.toml"
OVERHEAD_GRID_S = np.arange(0.0, 0.3005, 0.002)
SHARE_GRID = np.round(np.arange(0.0, 1.0001, 0.02), 2)
ROUND_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
NO_ROUND_GRID = np.zeros(1)
MIN_MEAN_ROWS = 20  # fewer mean rows than this: the mean's t_request is the median's
_summary = validate_serving.log_error_summary  # median |error| and bias, whole percent


def ttft_rows() -> list[dict]:
    """validate_serving's scored rows that carry a measured TTFT."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        validate_serving.main(["--json"])
    doc = json.loads(out.getvalue())
    rows = doc["rows"] + doc.get("dev_set", {}).get("rows", [])  # published + development set
    return [r for r in rows if (r["measured"].get("ttft_s") or 0) > 0]


def statistic(row: dict) -> str:
    """"mean" or "median": what the row's TTFT is (a row that does not say: a median)."""
    return row.get("ttft_statistic") or row["measured"].get("ttft_statistic") or "median"


def _arrays(rows: list[dict]):
    get = lambda key: np.array([r["predicted"][key] for r in rows])  # noqa: E731
    measured = np.array([r["measured"]["ttft_s"] for r in rows])
    fixed = get("steady_ttft") + get("poll_wait")  # nothing fitted in these two
    mean = np.array([statistic(r) == "mean" for r in rows])
    return fixed, get("prompt_queue"), get("round_wait"), measured, mean


def _predict(terms, fixed, queue, rounds, mean) -> np.ndarray:
    overhead_s, share, round_share, mean_overhead_s, mean_share = terms
    mean_overhead_s = overhead_s if mean_overhead_s is None else max(mean_overhead_s, overhead_s)
    mean_share = share if mean_share is None else max(mean_share, share)
    return np.where(mean, mean_overhead_s, overhead_s) + fixed \
        + np.where(mean, mean_share, share) * queue + round_share * rounds


def log_errors(rows: list[dict], terms) -> np.ndarray:
    fixed, queue, rounds, measured, mean = _arrays(rows)
    return np.log(_predict(terms, fixed, queue, rounds, mean) / measured)


def _grid_fit(base, queue, rounds, measured, shares, w_grid) -> tuple[float, float, float]:
    """(t_request s, share, w) of least median |log error| for predictions
    t + base + share · queue + w · rounds."""
    best = (np.inf, 0.0, 0.0, 0.0)
    for w in w_grid:
        pred = (OVERHEAD_GRID_S[:, None, None] + (base + w * rounds)[None, None, :]
                + shares[None, :, None] * queue[None, None, :])
        cost = np.median(np.abs(np.log(pred / measured)), axis=2)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        if cost[i, j] < best[0]:
            best = (float(cost[i, j]), float(OVERHEAD_GRID_S[i]), float(shares[j]), float(w))
    return best[1:]


def fit(rows: list[dict]) -> tuple[float, float, float, float | None, float | None]:
    """(median t_request s, q̃, w, mean t_request s or None, q̄ or None): the median's terms
    on the median rows (on every row when none is a median), the mean's on the mean rows when
    there are at least MIN_MEAN_ROWS of them (q̄ ≥ q̃, w the median's)."""
    fixed, queue, rounds, measured, mean = _arrays(rows)
    median = ~mean if np.any(~mean) else np.ones_like(mean)
    w_grid = ROUND_GRID if np.any(rounds[median] > 0) else NO_ROUND_GRID
    t, share, w = _grid_fit(fixed[median], queue[median], rounds[median], measured[median],
                            SHARE_GRID, w_grid)
    if int(np.sum(mean)) < MIN_MEAN_ROWS:
        return t, share, w, None, None
    t_mean, share_mean, _ = _grid_fit(fixed[mean], queue[mean], rounds[mean], measured[mean],
                                      SHARE_GRID[SHARE_GRID >= share], np.array([w]))
    return t, share, w, t_mean, share_mean


def engines_of(rows: list[dict]) -> list[str]:
    """The engines with rows, then the generic table (every row)."""
    return sorted({r["engine"] for r in rows if r.get("engine")}) + [GENERIC]


def rows_of(rows: list[dict], engine: str) -> list[dict]:
    return rows if engine == GENERIC else [r for r in rows if r.get("engine") == engine]


def _table(engine: str, terms, fit_rows: list[dict], holdout: list[dict]) -> str:
    fitted = (f"fitted by tests/benchmarks/fit_benchmark_ttft.py on the {len(fit_rows)} published "
              f"{'' if engine == GENERIC else engine + ' '}TTFT rows of the declared fit half of "
              f"tests/data (validate_serving.split_half): "
              f"{_summary(log_errors(fit_rows, terms))}; holdout {len(holdout)} rows: "
              f"{_summary(log_errors(holdout, terms))}")
    overhead_s, share, round_share, mean_overhead_s, mean_share = terms
    entry = lambda v: f'{{ value = {v}, source = "{fitted}" }}'  # noqa: E731
    mean = "" if mean_overhead_s is None else (
        f"mean_request_overhead_ms = {entry(f'{mean_overhead_s * 1e3:.1f}')}\n"
        f"mean_queue_share_frac = {entry(f'{mean_share:.2f}')}\n")
    return (f"[{engine}]\nrequest_overhead_ms = {entry(f'{overhead_s * 1e3:.1f}')}\n"
            f"queue_share_frac = {entry(f'{share:.2f}')}\n"
            f"round_wait_share_frac = {entry(f'{round_share:.2f}')}\n{mean}")


def write_terms(tables: list[str]) -> None:
    TOML.write_text(
        "# What a benchmark client adds to the engine's own TTFT (cost_model/benchmark_ttft.py),\n"
        "# per serving engine; [generic] for a workload that names none. Fitted by\n"
        "# `python tests/benchmarks/fit_benchmark_ttft.py --write` on published end-to-end rows\n"
        "# in tests/data (never on kernel tables); a rerun reproduces these values.\n"
        + "\n".join(tables))


def _report(name: str, part: list[dict], terms) -> None:
    if not part:
        return
    print(f"    {name} ({len(part)} rows): {_summary(log_errors(part, terms))}")
    for kind in ("dense", "moe"):
        sub = [r for r in part if r["is_moe"] == (kind == "moe")]
        if sub:
            print(f"      {kind}: {len(sub)} rows, {_summary(log_errors(sub, terms))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fit-half terms to the TOML")
    args = parser.parse_args(argv)
    rows = ttft_rows()
    fit_half = [r for r in rows if r["half"] == validate_serving.HALVES[0]]
    holdout_half = [r for r in rows if r["half"] != validate_serving.HALVES[0]]
    print(f"{len(rows)} rows with a measured TTFT: {len(fit_half)} fit, "
          f"{len(holdout_half)} holdout")
    tables, pooled = [], []
    for engine in engines_of(rows):
        fit_rows, holdout = rows_of(fit_half, engine), rows_of(holdout_half, engine)
        terms = fit(fit_rows)
        mean_terms = "the median's" if terms[3] is None else \
            f"{terms[3] * 1e3:.0f} ms, q {terms[4]:.2f}"
        print(f"[{engine}] fit on the fit half ({sum(statistic(r) == 'mean' for r in fit_rows)} "
              f"mean rows): t_request {terms[0] * 1e3:.0f} ms, q {terms[1]:.2f}, "
              f"w {terms[2]:.2f}; mean: {mean_terms}")
        for name, part in (("fit half", fit_rows), ("holdout", holdout),
                           ("all rows", rows_of(rows, engine))):
            _report(name, part, terms)
        tables.append(_table(engine, terms, fit_rows, holdout))
        if engine != GENERIC:
            pooled += [(r, terms) for r in rows_of(rows, engine)]
    generic = fit(fit_half)
    pooled += [(r, generic) for r in rows if not r.get("engine")]
    for half in validate_serving.HALVES + ("all",):
        errs = np.array([log_errors([r], t)[0] for r, t in pooled if half in ("all", r["half"])])
        print(f"each row under its engine's terms, {half}: {len(errs)} rows, {_summary(errs)}")
    if args.write:
        write_terms(tables)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
