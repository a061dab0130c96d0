"""Fit the serving engine's host time per scheduled sequence per step (cost_model/host.py), per
host CPU kind, on every published end-to-end row of every source.

The term h_cpu · n (n: the sequences the busiest rank's step schedules) is the only free number;
everything else is the cost model as shipped. The rows are every row `validate_serving.py` scores
(its published CSV, the development set and the grown development set: tests/data/
serving_published.csv and tests/data/serving/*.csv but format_pairs.csv; never kernel tables,
never aiconfigurator's silicon_sample.csv) but the MLPerf Server/Interactive ones (their TPOT and
tokens/s/GPU are read where the modelled TTFT meets the SLA: they depend on the TTFT terms). For
each host CPU kind (x86, grace) the rows on GPUs of that kind (`HardwareSpec.host_cpu`) are
scored at every h of a grid (0 … 60 µs by 1 µs), and h minimizes the mean |log(pred/meas)| of
the rows' TPOT and output tokens/s/GPU pooled (the L1 loss: robust to the outliers of a mixed
set, smooth in h, exactly reproducible). The kinds share no rows, so each is a one-dimensional
fit. This is the fit leave-one-source-out validates (tests/benchmarks/serving/folds.py,
`fit_host_and_moe`; `validate_serving.py` prints the h of every fold and the figures with each
source left out): the shipped value is the fit on all sources. The grid and its argmin are the
product's (`search.calibration.serving`: `HOST_GRID_US`, `best_host_index`), which `archscout
calibrate --source RESULTS…` also runs on a user's own benchmark outputs.

The value shipped must earn its place left out (`folds.left_out_host_loss`, `shrunk_host_us`):
for each source the h is refitted without it and its rows are scored at that h and at h = 0; the
fitted h is kept only where the pooled left-out mean |log error| at the folds' h is below the one
at 0, else 0 is shipped (the source string says which, with both losses).

The benchmark-TTFT terms (tests/benchmarks/fit_benchmark_ttft.py) are fitted on top of these step
times: rerun that fit after this one.

Usage: python tests/benchmarks/fit_host_overhead.py [--write]
  --write  store the terms fitted on all sources in cost_model/data/serving/host.toml
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cost_model import host  # noqa: E402
from tests.benchmarks.serving.cli import prepared_rows  # noqa: E402

TOML = REPO / "cost_model" / "data" / "serving" / "host.toml"
COMMAND = "python tests/benchmarks/fit_host_overhead.py --write"


def fit_all() -> tuple[dict[str, float], dict[str, dict]]:
    """({cpu: h µs} fitted on every scored row, {cpu: what the fit used and its figures})."""
    from tests.benchmarks.serving.fast import FastModels
    from tests.benchmarks.serving.folds import (
        HOST_METRICS, FitConfig, build_table, fit_host_and_moe, left_out_host_loss,
        shrunk_host_us,
    )
    from tests.benchmarks.serving.terms import shipped

    rows, results = prepared_rows()
    base = shipped()
    table = build_table(rows, results, FastModels(), base)
    everything = np.ones(len(rows), dtype=bool)
    config = FitConfig("all sources", moe=base.moe)
    fitted, _ = fit_host_and_moe(table, everything, config)
    left_out = left_out_host_loss(table, np.array([r.source for r in rows]), config)
    hosts = shrunk_host_us(fitted, left_out)
    used = {}
    for cpu, h_us in hosts.items():
        mine = table.fitted & (np.array(table.cpus) == cpu)
        j = int(np.flatnonzero(table.grid_us == h_us)[0])
        pred = table.pred[mine, 0, j][:, HOST_METRICS]
        meas = table.measured[mine][:, [0, 2]]
        errors = np.log(pred / meas)
        errors = errors[np.isfinite(errors)]
        used[cpu] = {"rows": int(mine.sum()), "errors": int(errors.size),
                     "mean_abs_log": float(np.mean(np.abs(errors))),
                     "median_abs": float(np.median(np.abs(np.expm1(errors)))),
                     "bias": float(np.median(np.expm1(errors))),
                     "fitted_us": fitted[cpu], "left_out": left_out.get(cpu, (np.nan, np.nan)),
                     "sources": dict(Counter(rows[i].source for i in np.flatnonzero(mine))
                                     .most_common())}
    return hosts, used


def _loso_text(h_us: float, used: dict) -> str:
    """How the fit fared left out, and whether the value was kept or dropped for it."""
    with_h, without = used["left_out"]
    verdict = "kept" if h_us > 0 else "dropped to 0" if used["fitted_us"] > 0 else "kept at 0"
    return (f"fitted {used['fitted_us']:.0f} us, {verdict}: left-out mean |log error| "
            f"{with_h:.4f} at each fold's fit vs {without:.4f} at 0")


def _describe(cpu: str, h_us: float, used: dict) -> str:
    sources = ", ".join(f"{s} {n}" for s, n in used["sources"].items())
    return (f"fitted by `{COMMAND}` on all {used['rows']} scored rows on {cpu} hosts of every "
            f"source ({sources}; TPOT and tokens/s/GPU, {used['errors']} errors) and "
            f"validated leave-one-source-out ({_loso_text(h_us, used)}): mean |log "
            f"error| {used['mean_abs_log']:.3f}, median |error| {used['median_abs']:.1%}, bias "
            f"{used['bias']:+.1%}; left-out figures: tests/benchmarks/validate_serving.py")


def write_terms(hosts: dict[str, float], used: dict[str, dict]) -> None:
    tables = [f'[{cpu}]\nrequest_step_us = {{ value = {hosts[cpu]:.1f}, source = '
              f'"{_describe(cpu, hosts[cpu], used[cpu])}" }}\n' for cpu in host.HOST_CPUS]
    TOML.write_text(
        "# The serving engine's host (CPU) seconds per scheduled sequence per forward step, by "
        "host CPU\n# kind (cost_model/host.py; a GPU's kind is `system.host_cpu` in its catalog "
        f"file). Fitted by\n# `{COMMAND}` on every source's published end-to-end rows\n"
        "# in tests/data (never on kernel tables); a rerun reproduces these values.\n"
        + "\n".join(tables))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="write the terms fitted on all sources to the TOML")
    args = parser.parse_args(argv)
    hosts, used = fit_all()
    for cpu in host.HOST_CPUS:
        u = used[cpu]
        print(f"[{cpu}] h = {hosts[cpu]:.1f} us per sequence per step (shipped "
              f"{host.request_step_s(cpu) * 1e6:.1f}): {u['rows']} rows, {u['errors']} errors, "
              f"mean |log error| {u['mean_abs_log']:.3f}, median |error| {u['median_abs']:.1%}, "
              f"bias {u['bias']:+.1%}")
        print(f"    leave-one-source-out: {_loso_text(hosts[cpu], u)}")
        print(f"    sources: {', '.join(f'{s} {n}' for s, n in u['sources'].items())}")
    if args.write:
        write_terms(hosts, used)
        print(f"wrote {TOML.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
