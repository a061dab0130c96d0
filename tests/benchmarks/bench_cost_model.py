"""Cost-model speed (issue: "one frontier ≤ 1 ms, far below a trial's overhead").

Prints, measured in the same run:
  (a) operating points evaluated per second when candidates are evaluated together (vectorized);
  (b) the time of one candidate's whole frontier (concurrency sweep + area), next to the
      overhead of one Optuna trial (NSGA-II, in memory, 9 parameters, 2 objectives,
      3 constraints, an objective that costs nothing) — the baseline;
  (c) the GEMM hot path alone (`gemm_time_s` in float32, the inner loop of step times) on a
      search-sized batch: 5 GEMM rows × 2 cases × the candidates × 16 concurrencies.
Run: python tests/benchmarks/bench_cost_model.py [--candidates 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import optuna

from cost_model import (
    HOT_DTYPE, Architecture, Deployment, GemmRates, Workload, evaluate_points, gemm_time_s,
    get_hardware, get_precision, load_architecture,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import MODEL_CONFIGS as CONFIGS

WORKLOAD = Workload(isl_tokens=1024, osl_tokens=1024)


def _variants(base: Architecture, count: int, seed: int) -> list[Architecture]:
    """Random Llama-like shapes (valid by construction) around `base`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        heads = int(rng.choice([16, 24, 32, 48, 64]))
        out.append(Architecture.model_validate({
            **base.model_dump(), "num_attention_heads": heads, "hidden_size": heads * 128,
            "num_kv_heads": 8, "num_layers": int(rng.integers(16, 80)),
            "intermediate_size": int(rng.integers(16, 112)) * 256,
        }))
    return out


def best_of(repeats: int, fn) -> float:
    """Smallest wall time of `repeats` calls (s)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def points_per_s(archs, hw) -> float:
    deps = [Deployment(tp=2)] * len(archs)
    elapsed = best_of(3, lambda: evaluate_points(archs, deps, hw, WORKLOAD))
    return len(archs) * 16 / elapsed  # 16 concurrencies per candidate (sweep + memory limit)


def one_frontier_s(arch, hw) -> float:
    def run():
        evaluate_points([arch], [Deployment(tp=2)], hw, WORKLOAD).frontier_area(10.0, 1000.0)
    return best_of(50, run)


def gemm_batch_s(candidates: int, hw) -> float:
    """Best of 5 `gemm_time_s` calls on random decode-to-prefill shapes, FP8 rows and one BF16
    row (as the router's), shaped like one step-time batch of the search."""
    rng = np.random.default_rng(0)
    shape = (5, 2, candidates, 16)
    m = rng.integers(1, 4096, shape).astype(np.float64)
    n = rng.choice([1024.0, 4096.0, 6144.0, 14336.0], shape)
    k = rng.choice([4096.0, 14336.0], shape)
    high = np.array([False] * 4 + [True]).reshape(5, 1, 1, 1)
    rates = GemmRates.select(high, GemmRates.of(hw, get_precision("bf16")),
                             GemmRates.of(hw, get_precision("fp8")))
    return best_of(5, lambda: gemm_time_s(m, n, k, 1.0, hw, rates, HOT_DTYPE))


def optuna_trial_overhead_s(trials: int = 1000) -> float:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=0))
    start = time.perf_counter()
    for _ in range(trials):
        trial = study.ask()
        values = [trial.suggest_int(f"p{i}", 1, 64) for i in range(9)]
        for j in range(3):
            trial.set_constraint(f"c{j}", float(values[j] - 32))
        study.tell(trial, [float(sum(values)), float(values[0])])
    return (time.perf_counter() - start) / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=2000)
    args = parser.parse_args()
    hw = get_hardware("h200")
    base = load_architecture(CONFIGS / "Llama-3.1-8B.json")
    archs = _variants(base, args.candidates, seed=0)
    rate = points_per_s(archs, hw)
    frontier = one_frontier_s(base, hw)
    trial = optuna_trial_overhead_s()
    gemm_s = gemm_batch_s(args.candidates, hw)
    print(f"(a) vectorized: {rate:,.0f} operating points/s "
          f"({args.candidates} candidates × 16 concurrencies)")
    print(f"(b) one frontier (16 points + area): {frontier * 1e3:.3f} ms")
    print(f"    one Optuna trial (NSGA-II, in memory, no objective cost): {trial * 1e3:.3f} ms")
    print(f"    frontier / trial overhead = {frontier / trial:.2f}  (goal: frontier <= 1 ms)")
    print(f"(c) GEMM hot path: {gemm_s * 1e3:.1f} ms for 5 × 2 × {args.candidates} × 16 GEMMs "
          f"({5 * 2 * args.candidates * 16 / gemm_s:,.0f} GEMMs/s)")


if __name__ == "__main__":
    main()
