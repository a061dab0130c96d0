"""Search quality (issue 12, item 7: "hypervolume of the shipped sampler vs RandomSampler and vs
the exact front at 500 / 1,000 / 2,000 trials, 10+ seeds"; goal: median HV ≥ 99% of the exact
front at 2,000 trials).

A quickstart-like benchmark space with a deployment dimension: 8,568 architectures (hidden ×
layers × head_dim × KV heads × q/kv × FFN width), each scored under all 16 deployments (tp 1|2 ×
pp 1|2 × bf16|fp8 weights × bf16|fp8 KV) by the product's sweep (`deployments = "sweep"`: an
architecture's objective is its envelope over every deployment; Optuna samples shapes only).
Every architecture is built and scored once with `evaluate_batch` (vectorized, in chunks; the
table can be cached with --cache), the exact feasible Pareto front is found with moocore, and
its hypervolume is the 100% mark. Each sampler then runs in memory: the product's sampler
(`make_sampler`) and space (`suggest_params`) ask a batch, each trial is told the values and
hard-constraint violations the exhaustive table holds for its architecture (the product's
scoring of that architecture, so no trial is scored twice), and the hypervolume of its first
500 / 1,000 / 2,000 finished trials (feasible ones) is printed as a fraction of the exact one.
`--product-loop` runs the product's own loop instead (`open_study` + `run_batch`, scoring every
batch again; slower) and checks that its values equal the table's.

Hypervolume: each objective is normalized with FIXED bounds (ideal and nadir of the whole
exhaustive feasible set), the reference point is that nadir plus `--ref-margin`; the same for
every run ("HV"). Stricter, "HVf": the same with bounds and reference taken from the exact front
alone (ideal and nadir of the front), so only points near the front count. Also printed: front
recall (share of the exact front's points a run evaluated), feasible and distinct feasible
trials (NSGA-II re-evaluates duplicates), and each part's wall time.

`--tune` adds NSGA-II variants (population/batch size, mutation) that need no change to the
product, and prints the best configuration at 2,000 trials.
Run: python tests/benchmarks/bench_search_quality.py [--trials 2000] [--seeds 10] [--tune]
     [--cache PATH.npz] [--product-loop]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import moocore
import numpy as np
import optuna
from optuna.samplers.nsgaii import PolynomialMutation, SBXCrossover
from optuna.trial import TrialState

from search.study.evaluation import evaluate_batch, hard_constraints
from search.study.runner import RunSummary, make_sampler, open_study, run_batch
from search.study.space import (
    DEPLOYMENT_PARAMS,
    build_candidate,
    deployment_combinations,
    complete_params,
    searched_dimensions,
    suggest_params,
    sweeps_deployments,
)
from search.study.spec import StudySpec, spec_from_dict
from search.study.storage import StorageHandle

# quickstart.toml with coarser steps: 17 × 7 × 2 × 3 × 2 × 6 = 8,568 architectures, each under
# 2 × 2 × 2 × 2 = 16 deployments (tp × pp × precision × kv_precision, all within 4 GPUs).
BENCH_SPEC = {
    "name": "bench-quality", "sampler": "nsga2", "trials": 2000, "seed": 0, "batch_size": 64,
    "deployments": "sweep",
    "budget": {"total_params": 1.2e9, "tolerance_frac": 0.25, "training_tokens": 1.0e12},
    "hardware": {"gpu": "h200", "max_gpus": 4},
    "workload": {"isl_tokens": 1024, "osl_tokens": 512, "interactivity_min": 20.0,
                 "interactivity_max": 2000.0, "x_scale": "log"},
    "space": {
        "hidden_size": {"min": 1024, "max": 3072, "step": 128},
        "num_layers": {"min": 8, "max": 32, "step": 4},
        "head_dim": {"choices": [64, 128]},
        "num_kv_heads": {"choices": [2, 4, 8]},
        "q_per_kv": {"choices": [2, 4]},
        "intermediate_size": {"min": 2048, "max": 12288, "step": 2048},
        "vocab_size": {"value": 128256},
        "tp": {"choices": [1, 2]},
        "pp": {"choices": [1, 2]},
        "precision": {"choices": ["bf16", "fp8"]},
        "kv_precision": {"choices": ["bf16", "fp8"]},
    },
    "constraints": {"alignment": 128, "aspect_ratio_min": 32, "aspect_ratio_max": 256},
    "objectives": {"names": ["frontier_area", "loss"]},
}
CHUNK = 2000  # candidates per evaluate_batch call in the exhaustive pass
CACHE_CHECK = 256  # cached points re-scored before a cached table is trusted


@dataclass
class Exhaustive:
    """Every point of the space: objective values (NaN if not a model) and feasibility."""

    keys: dict[tuple, int]  # searched params (in `dims` order) -> row
    values: np.ndarray  # (n, n_objectives)
    feasible: np.ndarray  # (n,) bool
    dims: tuple[str, ...]
    violations: np.ndarray  # (n, hard constraints) positive parts, as the runner records them


@dataclass
class Normalizer:
    """Maps objective values to [0, 1] minimization with fixed bounds; reference point."""

    sign: np.ndarray  # -1 for maximized objectives
    lo: np.ndarray
    span: np.ndarray
    ref: np.ndarray

    def hypervolume(self, values: np.ndarray) -> float:
        if len(values) == 0:
            return 0.0
        return float(moocore.hypervolume((values * self.sign - self.lo) / self.span, ref=self.ref))


def _score(spec: StudySpec, names: tuple[str, ...], rows: list[tuple]):
    """Objective values (NaN: not a model), feasibility and hard-constraint violations of
    `rows` of searched params."""
    hard = hard_constraints(spec)
    cands = [build_candidate(spec, complete_params(spec, dict(zip(names, r)))) for r in rows]
    values = np.full((len(rows), len(spec.objectives.names)), np.nan)
    feasible = np.zeros(len(rows), bool)
    violations = np.zeros((len(rows), len(hard)))
    for i, outcome in enumerate(evaluate_batch(spec, cands)):
        if outcome.values is not None:
            values[i], feasible[i] = outcome.values, outcome.feasible(hard)
            violations[i] = [max(outcome.constraints[n].value, 0.0) for n in hard]
    return values, feasible, violations


def sampled_dimensions(spec: StudySpec) -> dict:
    """The dimensions Optuna samples: every searched one, less the deployment dimensions when
    the study sweeps them."""
    dims = searched_dimensions(spec.space)
    if sweeps_deployments(spec):
        dims = {n: d for n, d in dims.items() if n not in DEPLOYMENT_PARAMS}
    return dims


def _cache_is_current(spec: StudySpec, names: tuple[str, ...], grid: list[tuple],
                      values: np.ndarray, feasible: np.ndarray) -> bool:
    """Re-score a sample of the cached table: the cost model may have changed since."""
    if len(values) != len(grid):
        return False
    sample = np.random.default_rng(0).choice(len(grid), size=min(CACHE_CHECK, len(grid)),
                                             replace=False)
    fresh_values, fresh_feasible, _ = _score(spec, names, [grid[i] for i in sample])
    return (np.array_equal(fresh_feasible, feasible[sample])
            and np.allclose(fresh_values, values[sample], rtol=1e-12, atol=0, equal_nan=True))


def enumerate_space(spec: StudySpec, cache: Path | None) -> Exhaustive:
    dims = sampled_dimensions(spec)
    names = tuple(dims)
    grid = list(itertools.product(*(dims[n].options for n in names)))
    keys = {r: i for i, r in enumerate(grid)}
    if cache is not None and cache.is_file():
        with np.load(cache) as saved:
            values, feasible, violations = saved["values"], saved["feasible"], saved["violations"]
        if _cache_is_current(spec, names, grid, values, feasible):
            return Exhaustive(keys, values, feasible, names, violations)
        print(f"cache {cache} is stale (the cost model changed): evaluating again")
    parts = [_score(spec, names, grid[i:i + CHUNK]) for i in range(0, len(grid), CHUNK)]
    values, feasible, violations = (np.concatenate([p[k] for p in parts]) for k in range(3))
    if cache is not None:
        np.savez(cache, values=values, feasible=feasible, violations=violations)
    return Exhaustive(keys, values, feasible, names, violations)


def make_normalizer(spec: StudySpec, feasible_values: np.ndarray, margin: float) -> Normalizer:
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in spec.objectives.directions])
    minimized = feasible_values * sign
    lo, hi = minimized.min(axis=0), minimized.max(axis=0)
    return Normalizer(sign, lo, hi - lo, np.full(len(sign), 1.0 + margin))


def exact_front(spec: StudySpec, feasible_values: np.ndarray) -> np.ndarray:
    maximise = [d == "maximize" for d in spec.objectives.directions]
    return moocore.is_nondominated(feasible_values, maximise=maximise)


# ---- sampler runs ------------------------------------------------------------------------------

SamplerFactory = Callable[[StudySpec, int], optuna.samplers.BaseSampler]


@dataclass
class Variant:
    label: str
    batch_size: int
    make: SamplerFactory = make_sampler  # the product's default sampler for the spec


@dataclass
class Checkpoint:
    trials: int
    hv_frac: float  # reference at the nadir of all feasible points (the measure)
    hv_front_frac: float  # reference at the nadir of the exact front (stricter)
    recall_frac: float
    feasible: int
    distinct_feasible: int


@dataclass
class Target:
    """What a run is measured against: the exact front and its hypervolume under both scales."""

    ex: Exhaustive
    front_rows: set[int]
    norm: Normalizer  # bounds of the whole feasible set
    front_norm: Normalizer  # bounds of the exact front
    hv_exact: float
    hv_front_exact: float


def _checkpoint(trials: list, cp: int, target: Target,
                spec: StudySpec) -> tuple[Checkpoint, float]:
    """Checkpoint over trials numbered < cp; also the largest relative difference between a
    trial's values and the exhaustive table's (0 unless the cost model changed)."""
    ex, rows, vals, worst = target.ex, [], [], 0.0
    for t in trials:
        if t.number >= cp or t.state != TrialState.COMPLETE:
            continue
        if any(v > 0 for v in t.constraints.values()):
            continue
        params = complete_params(spec, t.params)
        row = ex.keys[tuple(params[n] for n in ex.dims)]
        rows.append(row)
        vals.append(t.values)
        expected = ex.values[row]
        diff = np.abs(np.asarray(t.values) - expected) / np.maximum(np.abs(expected), 1.0)
        worst = max(worst, float(diff.max()))
    found = target.front_rows & set(rows)
    values = np.asarray(vals, float).reshape(-1, ex.values.shape[1])
    return Checkpoint(cp, target.norm.hypervolume(values) / target.hv_exact,
                      target.front_norm.hypervolume(values) / target.hv_front_exact,
                      len(found) / len(target.front_rows), len(rows), len(set(rows))), worst


def _told_batch(study: optuna.Study, spec: StudySpec, size: int, ex: Exhaustive,
                hard: tuple[str, ...]) -> None:
    """Ask `size` trials (the product's space), tell each the exhaustive table's outcome of its
    architecture: violated hard constraints as the runner records them (`set_constraint`), a
    shape that is no model as FAIL."""
    trials = [study.ask() for _ in range(size)]
    for trial in trials:
        params = complete_params(spec, suggest_params(trial, spec.space, spec))
        row = ex.keys[tuple(params[n] for n in ex.dims)]
        if not np.isfinite(ex.values[row, 0]):
            study.tell(trial, state=TrialState.FAIL)
            continue
        for name, value in zip(hard, ex.violations[row]):
            if value > 0:
                trial.set_constraint(name, float(value))
        study.tell(trial, ex.values[row].tolist())


def _product_batch(study, spec, size, ex, hard, summary=None) -> None:
    run_batch(study, spec, size, hard, summary if summary is not None else RunSummary())


def run_variant(spec: StudySpec, variant: Variant, seed: int, checkpoints: list[int],
                target: Target, product_loop: bool = False
                ) -> tuple[list[Checkpoint], float, float]:
    """One in-memory run to max(checkpoints): trials told from the exhaustive table, or (with
    `product_loop`) the product's loop (`open_study`, `run_batch`) scoring every batch."""
    spec = spec.model_copy(update={"batch_size": variant.batch_size})
    handle = StorageHandle(storage=optuna.storages.InMemoryStorage(), description="memory")
    study = open_study(spec, handle, seed)
    study.sampler = variant.make(spec, seed)
    hard, done, batch = hard_constraints(spec), 0, _product_batch if product_loop else _told_batch
    results, worst, start_s = [], 0.0, time.perf_counter()
    for cp in checkpoints:
        while done < cp:  # batches exactly as run_study makes them for max(checkpoints)
            size = min(spec.batch_size, max(checkpoints) - done)
            batch(study, spec, size, target.ex, hard)
            done += size
        trials = study.get_trials(deepcopy=False)
        point, diff = _checkpoint(trials, cp, target, spec)
        results.append(point)
        worst = max(worst, diff)
    return results, time.perf_counter() - start_s, worst


def _nsga2(population: int, **kwargs) -> SamplerFactory:
    def make(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed, **kwargs)
    return make


def variants(tune: bool, default_batch: int) -> list[Variant]:
    """Labels: bN = batch_size, pN = population_size, poly = PolynomialMutation (eta 20 unless
    given), sbx = SBXCrossover, mpX = mutation_prob (default 1/8 here: 8 searched params)."""
    base = [Variant(f"nsga2 default (b{default_batch})", default_batch),
            Variant("random", default_batch,
                    lambda spec, seed: optuna.samplers.RandomSampler(seed=seed))]
    if not tune:
        return base
    poly = PolynomialMutation
    return base + [
        Variant("nsga2 b20 p20", 20), Variant("nsga2 b32 p32", 32),
        Variant("nsga2 b64 p32", 64, _nsga2(32)),
        Variant("nsga2 b128 p128", 128),
        Variant("nsga2 b64 p64 poly", 64, _nsga2(64, mutation=poly())),
        Variant("nsga2 b64 p32 poly", 64, _nsga2(32, mutation=poly())),
        Variant("nsga2 b32 p32 poly", 32, _nsga2(32, mutation=poly())),
        Variant("nsga2 b32 p32 poly mp0.25", 32, _nsga2(32, mutation=poly(), mutation_prob=0.25)),
        Variant("nsga2 b32 p32 sbx+poly", 32,
                _nsga2(32, mutation=poly(), crossover=SBXCrossover())),
        Variant("nsga2 b64 p64 poly eta5", 64, _nsga2(64, mutation=poly(eta=5.0))),
        Variant("nsga2 b64 p32 poly eta5", 64, _nsga2(32, mutation=poly(eta=5.0))),
        Variant("nsga2 b32 p32 poly eta5", 32, _nsga2(32, mutation=poly(eta=5.0))),
        # fewer repeated designs (over half of 2,000 trials repeat one): more mutation
        Variant("nsga2 b64 p32 poly eta5 mp0.25", 64,
                _nsga2(32, mutation=poly(eta=5.0), mutation_prob=0.25)),
        Variant("nsga2 b64 p32 poly eta5 mp0.5", 64,
                _nsga2(32, mutation=poly(eta=5.0), mutation_prob=0.5)),
        Variant("nsga2 b64 p32 poly eta2", 64, _nsga2(32, mutation=poly(eta=2.0))),
        Variant("nsga2 b64 p24 poly eta5", 64, _nsga2(24, mutation=poly(eta=5.0))),
        Variant("nsga2 b64 p48 poly eta5", 64, _nsga2(48, mutation=poly(eta=5.0))),
    ]


# ---- report ------------------------------------------------------------------------------------

def _stats(points: list[Checkpoint], field: str) -> tuple[float, float, float]:
    """(median, min, max) over seeds."""
    xs = [getattr(p, field) for p in points]
    return statistics.median(xs), min(xs), max(xs)


GOAL_FRAC = 0.99  # issue 12's goal: the median over seeds at 2,000 trials


def _row(label: str, points: list[Checkpoint], wall: str) -> str:
    hv_median, hv_min, hv_max = _stats(points, "hv_frac")
    hvf_median, hvf_min, hvf_max = _stats(points, "hv_front_frac")
    at_goal = sum(p.hv_frac >= GOAL_FRAC for p in points)
    return (f"{label:<26} {points[0].trials:>6} {hv_median:>8.2%} {hv_min:>7.2%}–{hv_max:<7.2%}"
            f"{at_goal:>3}/{len(points):<3} {hvf_median:>8.2%} {hvf_min:>7.2%}–{hvf_max:<7.2%}"
            f"{_stats(points, 'recall_frac')[0]:>7.1%} {_stats(points, 'feasible')[0]:>8.0f} "
            f"{_stats(points, 'distinct_feasible')[0]:>8.0f} {wall:>6}")


def print_table(rows: dict[str, list[list[Checkpoint]]], times_s: dict[str, list[float]]) -> None:
    print(f"{'sampler':<26} {'trials':>6} {'HV med':>8} {'HV range':>15} {'≥99%':>6} "
          f"{'HVf med':>8} {'HVf range':>15} {'recall':>7} {'feasible':>8} {'distinct':>8} "
          f"{'s/run':>6}")
    for label, per_seed in rows.items():
        last = len(per_seed[0]) - 1
        for k in range(last + 1):
            wall = f"{statistics.fmean(times_s[label]):6.1f}" if k == last else ""
            print(_row(label if k == 0 else "", [seed_points[k] for seed_points in per_seed],
                       wall))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials per run (last checkpoint)")
    parser.add_argument("--checkpoints", type=int, nargs="*", default=[500, 1000],
                        help="earlier checkpoints (the last is --trials)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--product-loop", action="store_true",
                        help="run the product's loop (run_batch scores every batch; slower)")
    parser.add_argument("--ref-margin", type=float, default=0.01,
                        help="reference point = normalized nadir + this")
    parser.add_argument("--cache", type=Path,
                        help="reuse (or write) the exhaustive table here, .npz (BENCH_SPEC only)")
    parser.add_argument("--tune", action="store_true", help="also run NSGA-II variants")
    parser.add_argument("--only", nargs="*", default=[],
                        help="run only the variants whose label contains one of these")
    return parser.parse_args()


def make_target(spec: StudySpec, ex: Exhaustive, margin: float) -> Target:
    feasible_rows = np.flatnonzero(ex.feasible)
    feasible_values = ex.values[feasible_rows]
    front_mask = exact_front(spec, feasible_values)
    front = feasible_values[front_mask]
    norm = make_normalizer(spec, feasible_values, margin)
    front_norm = make_normalizer(spec, front, margin)
    return Target(ex, set(feasible_rows[front_mask].tolist()), norm, front_norm,
                  norm.hypervolume(front), front_norm.hypervolume(front))


def run_all(spec: StudySpec, args: argparse.Namespace, target: Target):
    """Every variant × seed; per variant the checkpoints of each seed and the run times."""
    checkpoints = sorted({c for c in args.checkpoints if c < args.trials} | {args.trials})
    rows, times_s, worst = {}, {}, 0.0
    chosen = [v for v in variants(args.tune, spec.batch_size)
              if not args.only or any(word in v.label for word in args.only)]
    for variant in chosen:
        rows[variant.label], times_s[variant.label] = [], []
        for seed in range(args.seeds):
            points, wall_s, diff = run_variant(spec, variant, seed, checkpoints, target,
                                               args.product_loop)
            rows[variant.label].append(points)
            times_s[variant.label].append(wall_s)
            worst = max(worst, diff)
    return rows, times_s, worst


def print_best(rows: dict[str, list[list[Checkpoint]]], trials: int) -> None:
    final = {label: (_stats([p[-1] for p in per_seed], "hv_frac"),
                     _stats([p[-1] for p in per_seed], "hv_front_frac"))
             for label, per_seed in rows.items()}
    best = max(final, key=lambda label: final[label][0][0])
    (hv_median, hv_min, hv_max), (hvf_median, hvf_min, hvf_max) = final[best]
    verdict = "met" if hv_median >= GOAL_FRAC else "NOT met"
    print(f"\nbest at {trials} trials: {best}: HV median {hv_median:.2%} (range {hv_min:.2%}–"
          f"{hv_max:.2%}; goal: median ≥ {GOAL_FRAC:.0%}, {verdict}); front-box HV median "
          f"{hvf_median:.2%} (range {hvf_min:.2%}–{hvf_max:.2%})")


def main() -> None:
    args = parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    spec = spec_from_dict(BENCH_SPEC, "bench_search_quality")
    start_s = time.perf_counter()
    ex = enumerate_space(spec, args.cache)
    enum_s = time.perf_counter() - start_s
    target = make_target(spec, ex, args.ref_margin)
    feasible, valid = int(ex.feasible.sum()), int(np.isfinite(ex.values[:, 0]).sum())
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    per_arch = deployment_combinations(spec.space) if sweeps_deployments(spec) else 1
    print(f"space: {len(ex.keys):,} points ({', '.join(ex.dims)}) x {per_arch} deployments swept "
          f"per architecture; valid models {valid:,}; "
          f"feasible {feasible:,} ({feasible / len(ex.keys):.1%}); "
          f"exact front {len(target.front_rows)} points")
    print(f"exhaustive evaluation: {enum_s:.1f} s ({enum_s / len(ex.keys) * 1e6:.0f} µs/point)"
          f"{' (cached)' if args.cache and enum_s < 20 else ''}; exact normalized HV "
          f"{target.hv_exact:.4f}, front-box HV {target.hv_front_exact:.4f} "
          f"(ref = nadir + {args.ref_margin})")
    start_s = time.perf_counter()
    rows, times_s, worst = run_all(spec, args, target)
    print(f"sampler runs: {time.perf_counter() - start_s:.1f} s, {args.seeds} seeds each, "
          f"in memory; max relative |trial value − exhaustive value| = {worst:.3g}\n")
    if worst > 1e-9:
        print("WARNING: trials scored differently from the exhaustive table (the cost model "
              "changed during the run?): the fractions below are not valid\n")
    print_table(rows, times_s)
    print_best(rows, args.trials)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
