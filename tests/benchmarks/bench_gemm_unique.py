"""The duplicate-GEMM step of the cost model (issue 25: "the dedupe costs more than the GEMMs it
saves"), timed on the real step tables of a study.

Runs the product's loop (`run_study`, in memory, deployments swept per architecture as
`bench_search_speed.py --deployments` does) for `--trials` trials, recording every table that
`GemmList.times_s` hands `unique_gemm_time_s`, then times each recorded table `--repeats` times,
interleaved, keeping each table's least CPU time (this machine is shared and noisy):
  this tree      `unique_gemm_time_s` as it is;
  baseline       the same function from the checkout `--baseline DIR` (its
                 cost_model/gemm_unique.py, on this tree's `gemm_time_s`), checked bit-identical;
  GEMMs only     `gemm_time_s` of the distinct GEMMs alone (what no dedupe can go under);
  per row        no dedupe: `gemm_time_s` of every live GEMM, row by row.
Prints CPU ms per architecture (the tables' total over the trials scored) and the distinct share.
Run: python tests/benchmarks/bench_gemm_unique.py --study studies/moe-400b-gb300-nvl72.toml \\
         [--trials 128] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import optuna

import cost_model.gemm_unique
import cost_model.layers
from cost_model.gemm import GemmRates, gemm_time_s
from search.study.spec import load_spec
from tests.benchmarks.bench_search_speed import memory_handle, timed_run


def recorded_tables(study: Path, trials: int, seed: int) -> list[tuple]:
    """The arguments of every `unique_gemm_time_s` call of a swept-deployments run."""
    spec = load_spec(study)
    spec = spec.model_copy(update={"deployments": "sweep"})
    timed_run("warm-up", spec, memory_handle(), spec.batch_size, seed)
    calls, original = [], cost_model.layers.unique_gemm_time_s

    def record(dims, live, hw, rates, dtype=np.float64):
        calls.append((dims, live, hw, rates, dtype))
        return original(dims, live, hw, rates, dtype)

    cost_model.layers.unique_gemm_time_s = record
    try:
        timed_run("recorded", spec, memory_handle(), trials, seed)
    finally:
        cost_model.layers.unique_gemm_time_s = original
    return calls


def per_row(dims, live, hw, rates, dtype=np.float64) -> np.ndarray:
    """No dedupe: each row's live GEMMs in one `gemm_time_s` call."""
    out = None
    for r, (m, n, k, groups) in enumerate(dims):
        on = live[r]
        row = GemmRates(**{f.name: _live(_row(getattr(rates, f.name), r), on)
                           for f in fields(GemmRates)})
        times = gemm_time_s(*(_live(x, on) for x in (m, n, k, groups)), hw, row, dtype)
        out = np.zeros(live.shape, dtype=times.dtype) if out is None else out
        out[r][on] = times
    return out


def _row(value, r: int):
    return value[r if value.shape[0] > 1 else 0] if isinstance(value, np.ndarray) else value


def _live(value, on: np.ndarray):
    """`value` at the live GEMMs of a row (a float stays a float)."""
    if isinstance(value, float):
        return value
    return np.broadcast_to(np.asarray(value, dtype=np.float64), on.shape)[on]


def distinct_args(call: tuple) -> tuple:
    """The `gemm_time_s` arguments of the distinct GEMMs of `call` (this tree's dedupe)."""
    seen, original = [], cost_model.gemm_unique.gemm_time_s

    def keep(*args):
        seen.append(args)
        return original(*args)

    cost_model.gemm_unique.gemm_time_s = keep
    try:
        cost_model.gemm_unique.unique_gemm_time_s(*call)
    finally:
        cost_model.gemm_unique.gemm_time_s = original
    return seen[0]


def baseline_function(checkout: Path):
    path = checkout / "cost_model" / "gemm_unique.py"
    spec = importlib.util.spec_from_file_location("baseline_gemm_unique", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.unique_gemm_time_s


def least_cpu_s(variants: dict, calls: list[tuple], repeats: int) -> dict[str, float]:
    """Per variant, the sum over `calls` of each call's least CPU time over `repeats`."""
    best = {name: [np.inf] * len(calls) for name in variants}
    for _ in range(repeats):
        for i, call in enumerate(calls):
            for name, run in variants.items():
                start = time.process_time()
                run(i, call)
                best[name][i] = min(best[name][i], time.process_time() - start)
    return {name: float(sum(b)) for name, b in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=Path("studies/moe-400b-gb300-nvl72.toml"))
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    calls = recorded_tables(args.study, args.trials, args.seed)
    pre = [distinct_args(c) for c in calls]
    variants = {"this tree": lambda i, c: cost_model.gemm_unique.unique_gemm_time_s(*c)}
    if args.baseline is not None:
        base = baseline_function(args.baseline)
        same = all(np.array_equal(base(*c), cost_model.gemm_unique.unique_gemm_time_s(*c))
                   for c in calls)
        print(f"baseline {args.baseline}: bit-identical on every table: {same}")
        variants["baseline"] = lambda i, c: base(*c)
    variants["GEMMs only"] = lambda i, c: gemm_time_s(*pre[i])
    variants["per row"] = lambda i, c: per_row(*c)
    live = sum(int(c[1].sum()) for c in calls)
    distinct = sum(np.size(p[0]) for p in pre)
    print(f"{args.study.name}: {args.trials} architectures, {len(calls)} tables, {live} live "
          f"GEMMs, {distinct} distinct ({distinct / live:.1%})")
    for name, cpu_s in least_cpu_s(variants, calls, args.repeats).items():
        print(f"{name:<12} {1000 * cpu_s / args.trials:6.2f} ms CPU per architecture")


if __name__ == "__main__":
    main()
