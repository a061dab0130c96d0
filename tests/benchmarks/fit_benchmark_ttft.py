"""Fit the benchmark-TTFT terms (cost_model/benchmark_ttft.py) on published end-to-end rows of every
source, per serving engine.

benchmark TTFT = t_request + T_steady + share · Q + w · W_round + W_poll + W_slot, with T_steady
(the engine's steady-state TTFT), Q (draining the other prompts of the request's group), W_round
(TensorRT-LLM's attention-DP balancer waiting for a full DP round, where the run turned it on),
W_poll (the request-queue polling interval of the run) and W_slot (the wait for a slot beyond the
engine's batch cap) from the cost model. Only t_request and the queue share q are fitted:
leave-one-source-out (`validate_serving.py`, its ablations "benchmark TTFT: ...") showed that the
round-wait share w improves the rows it is fitted on and not the sources left out (the left-out
figures are no better with it, and better with t_request and q alone), so w is 0. The rows are
every row `validate_serving.py --json --no-loso` scores with a measured TTFT: its published CSV,
development set and grown development set (tests/data/serving_published.csv,
tests/data/serving/*.csv but format_pairs.csv; never kernel tables, never aiconfigurator's
silicon_sample.csv), but the rows measured under Poisson arrivals (MLPerf Server/Interactive,
rate runs) or in offline runs: their TTFT is the arrival model's, scored but not fitted on
(`OPEN_LOOP_REGIMES`). The median
request's t_request and q̃ are fitted on the rows that report a median (or state nothing; on
every row where fewer than MIN_MEAN_ROWS do), the mean request's (q̄ ≥ q̃) on the rows that
report a mean where at least MIN_MEAN_ROWS do (else the mean takes the median's): the fit itself
is the product's (`search.calibration.serving`, also what `archscout calibrate --source RESULTS…`
runs on a user's own benchmark outputs); this script gathers the published rows and writes the
shipped file. An engine
(`Result.engine`: sglang, trtllm, vllm) gets terms of its own where it has at least
MIN_ENGINE_TTFT_ROWS rows (fewer: a few rows' client, not the engine's); [generic], fitted on
every row, serves the others and a workload that names no engine. The objective is the median
|log(pred/meas)| over t_request 0…300 ms by 2 ms and q 0…1 by 0.02: robust to the outliers of a
mixed set, and exactly reproducible. The figures printed here are in-sample; the left-out ones
(each source's rows scored with the terms fitted on the other sources) are validate_serving.py's
headline.

Usage: python tests/benchmarks/fit_benchmark_ttft.py [--write]
  --write  store the terms fitted on all sources in cost_model/data/serving/benchmark.toml
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_serving  # noqa: E402

from cost_model import GENERIC  # noqa: E402
from tests.benchmarks.serving.config import OPEN_LOOP_REGIMES  # noqa: E402

from search.calibration import serving  # noqa: E402
from search.calibration.serving import TERMS_GRIDS  # noqa: E402

TOML = REPO / "cost_model" / "data" / "serving" / "benchmark.toml"
MIN_ENGINE_TTFT_ROWS = validate_serving.MIN_ENGINE_TTFT_ROWS
COMMAND = "python tests/benchmarks/fit_benchmark_ttft.py --write"
_summary = validate_serving.log_error_summary  # median |error| and bias, whole percent


def ttft_rows() -> list[dict]:
    """validate_serving's scored rows of every source (published, development and grown sets)
    that carry a measured TTFT from a closed-loop client."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        validate_serving.main(["--json", "--no-loso"])
    doc = json.loads(out.getvalue())
    rows = doc["rows"] + doc.get("dev_set", {}).get("rows", []) \
        + doc.get("grown_set", {}).get("grown", {}).get("rows", [])
    return [r for r in rows if (r["measured"].get("ttft_s") or 0) > 0
            and r["regime"] not in OPEN_LOOP_REGIMES]


def statistic(row: dict) -> str:
    """"mean" or "median": what the row's TTFT is (a row that does not say: a median)."""
    return row.get("ttft_statistic") or row["measured"].get("ttft_statistic") or "median"


def inputs(rows: list[dict]) -> serving.TtftInputs:
    """The fit's inputs of validate_serving's rows: fixed = steady-state TTFT + polling wait."""
    get = lambda key: np.array([r["predicted"][key] for r in rows])  # noqa: E731
    return serving.TtftInputs(get("steady_ttft") + get("poll_wait"), get("prompt_queue"),
                              get("round_wait"),
                              np.array([r["measured"]["ttft_s"] for r in rows]),
                              np.array([statistic(r) == "mean" for r in rows]))


def log_errors(rows: list[dict], terms) -> np.ndarray:
    return serving.ttft_log_errors(terms, inputs(rows))


def fit(rows: list[dict], grids=TERMS_GRIDS) -> serving.TtftTerms:
    """The terms of one engine table on these rows (`search.calibration.serving.fit_ttft_terms`,
    the product's fit)."""
    return serving.fit_ttft_terms(inputs(rows), grids)


def engines_of(rows: list[dict]) -> list[str]:
    """The engines with at least MIN_ENGINE_TTFT_ROWS rows, then the generic table (every
    row)."""
    counts = Counter(r["engine"] for r in rows if r.get("engine"))
    return sorted(e for e, n in counts.items() if n >= MIN_ENGINE_TTFT_ROWS) + [GENERIC]


def rows_of(rows: list[dict], engine: str) -> list[dict]:
    return rows if engine == GENERIC else [r for r in rows if r.get("engine") == engine]


def _used(rows: list[dict]) -> str:
    by_source = Counter(r.get("source") or r.get("source_kind") or "?" for r in rows)
    means = sum(statistic(r) == "mean" for r in rows)
    return (f"{len(rows)} rows ({means} mean, {len(rows) - means} median; "
            + ", ".join(f"{s} {n}" for s, n in by_source.most_common()) + ")")


def _table(engine: str, terms, rows: list[dict]) -> str:
    fitted = (f"fitted by `{COMMAND}` on all {_used(rows)} with a measured TTFT"
              f"{'' if engine == GENERIC else ' on ' + engine} of every source, t_request and "
              "q (w = 0): "
              f"{_summary(log_errors(rows, terms))} in-sample; left-out figures: "
              "tests/benchmarks/validate_serving.py")
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
        "# per serving engine with enough rows; [generic] for a workload that names none or an\n"
        f"# engine without a table. Fitted by\n# `{COMMAND}` on every source's\n"
        "# published end-to-end rows in tests/data (never on kernel tables); a rerun reproduces\n"
        "# these values.\n" + "\n".join(tables))


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
    parser.add_argument("--write", action="store_true",
                        help="write the terms fitted on all sources to the TOML")
    args = parser.parse_args(argv)
    rows = ttft_rows()
    print(f"{_used(rows)} with a measured TTFT")
    tables, terms_of = [], {}
    for engine in engines_of(rows):
        mine = rows_of(rows, engine)
        terms = terms_of[engine] = fit(mine)
        mean_terms = "the median's" if terms[3] is None else f"{terms[3] * 1e3:.0f} ms"
        print(f"[{engine}] {_used(mine)}: t_request {terms[0] * 1e3:.0f} ms; mean: {mean_terms}")
        _report("in-sample", mine, terms)
        tables.append(_table(engine, terms, mine))
    pooled = np.array([log_errors([r], terms_of.get(r.get("engine"), terms_of[GENERIC]))[0]
                       for r in rows])
    print(f"each row under its engine's terms (in-sample): {len(pooled)} rows, "
          f"{_summary(pooled)}")
    if args.write:
        write_terms(tables)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
