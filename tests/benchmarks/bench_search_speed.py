"""Search speed (issue: "trials/s with the default storage next to in-memory Optuna in the same
run. Goal: the default storage costs ≤ 25% of the in-memory rate, and the cost model ≤ 10% of a
trial").

Runs the product's loop (`run_study`, NSGA-II, batches of the study's `batch_size`) for N trials
on a quickstart study per storage; (a) and (b) `--repeats` times interleaved (the fastest kept:
this machine is shared and noisy), then (c) once:
  (a) in memory (Optuna's InMemoryStorage);
  (b) the default: the batching journal (`open_default(path, shared=False)`, one fsync a batch);
  (c) Optuna's own storage used directly: the same loop (`run_batch`: ask, evaluate the batch,
      tell) on `JournalStorage(JournalFileBackend(PATH))`, one write and fsync per operation,
      the reference for what sampling in memory and one write per batch save;
  with `--postgres URL` also, each on a new database: (d) archscout on PostgreSQL (`open_url`,
  `run_study`: one locked write per batch) and (e) Optuna's own `RDBStorage` used directly.
For each: trials/s, the ratio to (a) and the overhead (1 − ratio), and the share of the wall
time spent inside `evaluate_batch` (the cost model) and `build_candidate` (shapes), measured by
timing wrappers patched into `search.study.runner`.
`--workers N` adds: N processes on one shared journal (as `archscout search --workers N`) next
to 1 process on the same kind of storage.
`--deployments` adds (in memory, in the same run): the study with its deployments swept per
architecture (`deployments = "sweep"`: a trial is one architecture under every deployment)
next to the same study with deployments as sampled dimensions: architectures/s, deployments
and operating points (architecture × deployment × concurrency) scored per second and the cost
model's share of a trial; with `--baseline DIR`, the same measured with the code of checkout
DIR in the same run (issue 25: "≥ 300 architectures/s … beside today's rate"); with
`--no-storages`, only this.
`--scale` (issue 17: cost flat in study size) runs only this instead: one study on the default
journal to `--trials` (e.g. 20000) in three `archscout search` runs, to 1,000, to 5,000 and to
`--trials` (each a resume of the one before), timing every batch; reports the rate of the first
and of the last 2,000 trials, and at 1,000 / 5,000 / `--trials` trials: the resume time (open the
journal, load the study into the run's copy, no new trial), `pareto --json` and `show TRIAL` run
in this process (`search.cli.main.main`, the code path of `archscout show`, imports already warm:
the command's own work, not Python's start-up), whether that `show` was answered through the
journal's trial index (search/study/trial_index.py) or by replaying the study, `show TRIAL` as
a fresh `python -m search.cli.main` process (what `time archscout show` measures: start-up and
imports included), and the Pareto document recomputed from all trials (what `pareto` costs when
the study changed after the search kept its document, e.g. a run killed before its end).
Run: python tests/benchmarks/bench_search_speed.py [--trials 2000] [--workers 2] [--deployments]
     python tests/benchmarks/bench_search_speed.py --study studies/moe-400b-gb300-nvl72.toml \
         --deployments --no-storages --trials 512 --baseline DIR
     python tests/benchmarks/bench_search_speed.py --scale --trials 20000
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import optuna

import cost_model.batch
import search.study.evaluation
import search.study.runner
from cost_model import count_params
from objectives import summarize_shape
from search.study.evaluation import hard_constraints
from search.study.runner import RunSummary, finished_trials, open_study, run_batch, run_study
from search.study.spec import StudySpec, load_spec
from search.study.storage import StorageHandle, open_default, open_url
from tests.fresh_database import fresh_database

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.toml"
# bucket -> the functions timed for it, as (module, name) patched in place during a run.
# "cost model" is all of evaluate_batch; the rest of the buckets break it down (inside it).
TIMED = {
    "cost model": [(search.study.runner, "evaluate_batch")],
    "build": [(search.study.runner, "build_candidate")],
    "serving": [(search.study.evaluation, "score_valid")],
    "params": [(search.study.evaluation, "count_params")],
    "accuracy": [(search.study.evaluation, "predict_loss"),
                 (search.study.evaluation, "ranking_loss_nats"),
                 (search.study.evaluation, "ptq_estimate")],
    "constraints": [(search.study.evaluation, "check_candidate")],
}


class Timed:
    """Wraps a function; accumulates the wall time spent inside it."""

    def __init__(self, fn: Callable):
        self.fn, self.total_s, self.calls = fn, 0.0, 0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.total_s += time.perf_counter() - start
            self.calls += 1


@dataclass
class Result:
    label: str
    trials: int
    wall_s: float
    bucket_s: dict[str, float]  # TIMED bucket -> seconds inside it
    journal_lines: int = 0  # log records in the journal file at the end (0: not a journal)
    rates: tuple[float, ...] = ()  # trials/s of every repeat (this result is the fastest)

    @property
    def rate(self) -> float:
        return self.trials / self.wall_s

    def share(self, bucket: str) -> float:
        return self.bucket_s[bucket] / self.wall_s

    @property
    def optuna_share(self) -> float:
        """Everything but the cost model and building candidates: sampler, storage, loop."""
        return 1 - self.share("cost model") - self.share("build")


def _patch() -> dict[str, list[Timed]]:
    timers = {}
    for bucket, targets in TIMED.items():
        timers[bucket] = [Timed(getattr(module, name)) for module, name in targets]
        for (module, name), timer in zip(targets, timers[bucket]):
            setattr(module, name, timer)
    return timers


def _unpatch(timers: dict[str, list[Timed]]) -> None:
    for bucket, targets in TIMED.items():
        for (module, name), timer in zip(targets, timers[bucket]):
            setattr(module, name, timer.fn)


def _journal_lines(handle: StorageHandle) -> int:
    if not (handle.url or "").startswith("journal:"):
        return 0
    with open(handle.url.removeprefix("journal:"), "rb") as file:
        return sum(1 for _ in file)


def clear_caches() -> None:
    """Forget the per-architecture caches (parameter counts, loss proxy, array rows) and the
    outcome memo, so that no run profits from designs an earlier run in this process scored."""
    for cached in (count_params, search.study.evaluation._loss, cost_model.batch._arch_row,
                   summarize_shape):
        cached.cache_clear()
    search.study.evaluation._memo.clear()
    import importlib

    for module, name in (("cost_model.sharded_gemms", "rows_of"), ("constraints.shapes",
                         "gemm_dims"), ("constraints.columns", "dim_template"),
                         ("constraints.columns", "_static_values"),
                         ("constraints.columns", "_FLAGS"),
                         ("constraints.columns", "_dims"),
                         ("search.study.space", "_RUNNABLE")):  # issue 25's per-design
        try:                                                    # caches, where they exist
            cached = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
        elif isinstance(cached, dict):
            cached.clear()


def timed_run(label: str, spec: StudySpec, handle: StorageHandle, trials: int,
              seed: int) -> Result:
    """`run_study` to `trials` with the TIMED functions timed, caches cold; closes `handle`."""
    return _timed(label, lambda: run_study(spec, handle, trials, seed, show_progress=False).ran,
                  handle)


def _timed(label: str, run: Callable[[], int], handle: StorageHandle | None = None) -> Result:
    clear_caches()
    timers = _patch()
    try:
        start = time.perf_counter()
        ran = run()
        if handle is not None:
            handle.close()
        wall_s = time.perf_counter() - start
    finally:
        _unpatch(timers)
    bucket_s = {bucket: sum(t.total_s for t in ts) for bucket, ts in timers.items()}
    return Result(label, ran, wall_s, bucket_s, _journal_lines(handle) if handle else 0)


def optunas_own_run(label: str, spec: StudySpec, storage, trials: int, seed: int) -> Result:
    """The runner's loop (`run_batch`: ask, evaluate the batch, tell) on `storage` itself:
    Optuna's own storage, every operation written as it happens."""
    from search.study.runner import make_sampler

    def run() -> int:
        study = optuna.create_study(study_name=spec.name, storage=storage,
                                    directions=spec.objectives.directions,
                                    sampler=make_sampler(spec, seed))
        hard, summary = hard_constraints(spec), RunSummary()
        while summary.ran < trials:
            run_batch(study, spec, min(spec.batch_size, trials - summary.ran), hard, summary)
        return summary.ran

    return _timed(label, run)


def memory_handle() -> StorageHandle:
    return StorageHandle(storage=optuna.storages.InMemoryStorage(), description="memory",
                         shared=False)


def _fastest(runs: list[Result]) -> Result:
    best = max(runs, key=lambda r: r.rate)
    best.rates = tuple(r.rate for r in runs)
    return best


def storage_runs(spec: StudySpec, args: argparse.Namespace, folder: Path) -> list[Result]:
    """(a) and (b) `args.repeats` times, interleaved, keeping the fastest of each; (c) once."""
    trials, seed = args.trials, args.seed
    timed_run("warm-up", spec, memory_handle(), spec.batch_size, seed)  # imports, caches
    memory, default = [], []
    for i in range(args.repeats):
        memory.append(timed_run("(a) in memory", spec, memory_handle(), trials, seed))
        default.append(timed_run("(b) default: batching journal", spec, open_default(
            folder / f"default{i}" / "study.journal", shared=False), trials, seed))
    (folder / "plain").mkdir()
    path = str(folder / "plain" / "study.journal")
    plain = optunas_own_run("(c) Optuna's own JournalStorage", spec,
                            optuna.storages.JournalStorage(
                                optuna.storages.journal.JournalFileBackend(path)),
                            args.plain_trials or trials, seed)
    plain.journal_lines = sum(1 for _ in open(path, "rb"))
    results = [_fastest(memory), _fastest(default), plain]
    if args.postgres:
        with fresh_database(args.postgres, "speed") as url:
            results.append(timed_run("(d) archscout on PostgreSQL", spec, open_url(url),
                                     trials, seed))
        with fresh_database(args.postgres, "speed") as url:
            results.append(optunas_own_run("(e) Optuna's own RDBStorage", spec, url,
                                           args.plain_trials or trials, seed))
    return results


def print_storage_table(results: list[Result]) -> None:
    base = results[0].rate
    print(f"{'storage':<32} {'trials':>6} {'wall s':>7} {'trials/s':>9} {'vs (a)':>7} "
          f"{'overhead':>8} {'ms/trial':>8} {'lines/trial':>11}  trials/s of every repeat")
    for r in results:
        lines = f"{r.journal_lines / r.trials:.1f}" if r.journal_lines else "-"
        print(f"{r.label:<32} {r.trials:>6} {r.wall_s:>7.2f} {r.rate:>9.1f} {r.rate / base:>7.1%} "
              f"{1 - r.rate / base:>8.1%} {r.wall_s / r.trials * 1e3:>8.2f} {lines:>11}  "
              + ", ".join(f"{x:.1f}" for x in r.rates))
    print("\nshare of wall time (cost model = evaluate_batch; serving … constraints are inside it)")
    print(f"{'storage':<32} {'optuna+storage':>14} " + " ".join(f"{b:>11}" for b in TIMED))
    for r in results:
        print(f"{r.label:<32} {r.optuna_share:>14.1%} "
              + " ".join(f"{r.share(b):>11.1%}" for b in TIMED))
    a, b, c = results[:3]
    print(f"\ngoal 1: the default storage costs {1 - b.rate / a.rate:.1%} of the in-memory rate "
          f"(goal ≤ 25%); it runs {b.rate / c.rate:.1f}× the rate of Optuna's own journal")
    if len(results) == 5:
        d, e = results[3:]
        print(f"PostgreSQL: archscout {d.rate:.1f} trials/s, {d.rate / e.rate:.1f}× Optuna's own "
              f"RDBStorage used directly ({e.rate:.1f})")
    gpu_model = b.share("serving") + b.share("params")
    print(f"goal 2: the GPU cost model (serving scores + parameter counts) is {gpu_model:.1%} of a "
          f"trial with the default storage ({b.bucket_s['serving'] / b.trials * 1e3:.3f} ms/trial "
          f"for the vectorized serving scores); all of a candidate's scoring (evaluate_batch: "
          f"also the accuracy proxy, constraints, attributes) is {b.share('cost model'):.1%}, "
          f"{a.share('cost model'):.1%} in memory, {b.bucket_s['cost model'] / b.trials * 1e3:.3f} "
          f"ms/trial (goal ≤ 10%)")


# ---- several processes on one shared journal (`archscout search --workers N`) -------------------

def _worker(spec: StudySpec, path: str, trials: int, seed: int, out) -> None:
    handle = open_default(Path(path), worker=True)
    start = time.perf_counter()  # CLOCK_MONOTONIC on Linux: comparable between processes
    summary = run_study(spec, handle, trials, seed, show_progress=False)
    handle.close()
    out.put((start, time.perf_counter(), summary.ran))


def worker_run(spec: StudySpec, path: Path, workers: int, trials: int, seed: int) -> Result:
    """`workers` processes (spawned, imports excluded from the time) until `trials` finish."""
    setup = open_default(path, shared=True)
    open_study(spec, setup, seed)  # create it once, so workers only load it
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(spec, str(path), trials, seed + 7919 * i, out))
             for i in range(workers)]
    for p in procs:
        p.start()
    spans = [out.get() for _ in procs]
    for p in procs:
        p.join()
    wall_s = max(s[1] for s in spans) - min(s[0] for s in spans)
    done = finished_trials(open_study(spec, open_default(path, shared=True), seed))
    return Result(f"{workers} process(es), shared journal", done, wall_s, {})


def print_worker_table(results: list[Result]) -> None:
    base = results[0].rate
    print(f"\n{'workers':<32} {'trials':>6} {'wall s':>7} {'trials/s':>9} {'vs 1':>7}")
    for r in results:
        print(f"{r.label:<32} {r.trials:>6} {r.wall_s:>7.2f} {r.rate:>9.1f} "
              f"{r.rate / base:>7.2f}×")


@dataclass
class ModeRun:
    """One `--deployments` run: trials/s of the whole loop, and what its scored trials stand
    for (`answered`)."""

    mode: str  # "sweep" or "sampled"
    trials: int
    wall_s: float
    cpu_s: float  # this process's CPU time meanwhile (a shared machine inflates it less)
    cost_model_s: float  # inside evaluate_batch
    deployments: int  # deployments the scored trials stand for (sweep: all each runs on)
    points: int  # operating points of those: × concurrencies that fit memory


def deployment_mode_runs(spec: StudySpec, trials: int, seed: int) -> list[ModeRun]:
    """The same study with swept and with sampled deployments, in memory, one after the other
    (runs with whichever tree is on the path: a `--baseline` child runs it too)."""
    runs = []
    for mode in ("sweep", "sampled"):
        moded = spec.model_copy(update={"deployments": mode})
        timed_run("warm-up", moded, memory_handle(), moded.batch_size, seed)
        handle, cpu_start = memory_handle(), time.process_time()
        r = timed_run(f"deployments {mode}", moded, handle, trials, seed)
        cpu_s = time.process_time() - cpu_start
        runs.append(ModeRun(mode, r.trials, r.wall_s, cpu_s, r.bucket_s["cost model"],
                            *answered(moded, handle)))
    return runs


def answered(spec: StudySpec, handle: StorageHandle) -> tuple[int, int]:
    """(deployments, operating points) the run's scored trials stand for, counted alike in every
    tree (after the timed run): each scored architecture under every deployment of the space
    its engine runs (sweep; a deployment breaking a static hard constraint counts too, whether
    the scorer skipped it or not), or the trial's own deployment (sampled), and each of those
    at every concurrency of the sweep 1, 2, 4, … that fits memory."""
    from search.study.evaluation import score_valid, trial_candidate
    from search.study.space import sweeps_deployments, swept_candidates

    study = optuna.load_study(study_name=spec.name, storage=handle.storage)
    scored = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    cands = [trial_candidate(spec, t.params, t.user_attrs) for t in scored]
    sweep = sweeps_deployments(spec)
    flat = [d for c in cands for d in ((swept_candidates(spec, c) or [c]) if sweep else [c])]
    points = sum(int(score_valid(spec, flat[i:i + 512]).points.fits_memory.sum())
                 for i in range(0, len(flat), 512))
    return len(flat), points


def baseline_deployment_runs(args: argparse.Namespace) -> list[ModeRun]:
    """`deployment_mode_runs` with the code of the checkout `args.baseline` (a subprocess)."""
    import json

    command = [sys.executable, __file__, "--study", str(args.study.resolve()), "--trials",
               str(args.trials), "--seed", str(args.seed), "--deployments-child"]
    env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve()),
           "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return [ModeRun(**row) for row in json.loads(out.stdout.splitlines()[-1])]


def print_deployment_modes(spec: StudySpec, rows: list[tuple[str, list[ModeRun]]]) -> None:
    from search.study.space import deployment_combinations

    combos = deployment_combinations(spec.space)
    print(f"\ndeployments swept per architecture vs sampled ({spec.name}: {combos} deployment "
          "combinations in the space; in memory; archs/s = scored trials/s of the whole loop, "
          "deps/s and points/s = what they stand for, `answered`; per second of wall clock, in "
          "parentheses per second of this process's CPU time)")
    print(f"{'code':<28} {'mode':<8} {'trials':>6} {'wall s':>7} {'archs/s':>14} "
          f"{'deps/s':>16} {'points/s':>20} {'cost model':>10}")
    for code, runs in rows:
        for r in runs:
            rates = [f"{n / r.wall_s:.1f} ({n / r.cpu_s:.1f})"
                     for n in (r.trials, r.deployments, r.points)]
            print(f"{code:<28} {r.mode:<8} {r.trials:>6} {r.wall_s:>7.2f} {rates[0]:>14} "
                  f"{rates[1]:>16} {rates[2]:>20} {r.cost_model_s / r.wall_s:>10.1%}")


# ---- the sweep's scorer alone (`--scorer`, issue 25) ---------------------------------------------

def scorer_params(spec: StudySpec, count: int, seed: int) -> list[dict]:
    """`count` distinct parameter sets inside the study's budget, drawn uniformly (this tree's
    `param_table` filters the draws; the architectures are what a budget-true search scores)."""
    import numpy as np

    from search.study.param_table import column, within_rules
    from search.study.proposals import sampled_distributions
    from search.study.space import complete_params
    from search.study.spec import Space

    rng, out, seen = np.random.default_rng(seed), [], set()
    space = {n: (d.choices if hasattr(d, "choices") else list(range(d.low, d.high + 1, d.step)))
             for n, d in sampled_distributions(spec.model_copy(
                 update={"deployments": "sweep"})).items()}
    while len(out) < count:
        params = {n: v[rng.integers(len(v))] for n, v in space.items()}
        params = {n: v.item() if hasattr(v, "item") else v for n, v in params.items()}
        key = tuple(sorted(params.items()))
        full = complete_params(spec, params)
        if key in seen or not within_rules(spec, {n: column([full[n]], n)
                                                  for n in Space.model_fields})[0]:
            continue
        seen.add(key)
        out.append(params)
    return out


def scorer_rate(study_file: Path, params: list[dict], batch: int, repeats: int) -> dict:
    """Architectures, deployments and points per second of `evaluate_batch` with every
    deployment swept, on `params` (cold per-design caches: the memo and lru caches are cleared
    before each repeat); the fastest of `repeats`. Runs with whichever tree is on the path."""
    from search.study.evaluation import evaluate_batch
    from search.study.space import build_candidate, complete_params, swept_candidates

    spec = load_spec(study_file).model_copy(update={"deployments": "sweep"})
    cands = [build_candidate(spec, complete_params(spec, p)) for p in params]
    evaluate_batch(spec, cands[:2])  # imports, shipped tables
    deployments = sum(len(swept_candidates(spec, c)) or 1 for c in cands)
    best, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        clear_caches()
        start, start_cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(cands), batch):
            evaluate_batch(spec, cands[i:i + batch])
        best = min(best, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return {"architectures": len(cands), "deployments": deployments, "wall_s": best,
            "cpu_s": cpu}


def scored_points(study_file: Path, params: list[dict]) -> int:
    """Operating points (architecture × deployment × concurrency that fits memory) of every
    architecture under every deployment of the space: what a sweep scores."""
    from search.study.evaluation import score_valid
    from search.study.space import build_candidate, complete_params, swept_candidates

    spec = load_spec(study_file).model_copy(update={"deployments": "sweep"})
    cands = [build_candidate(spec, complete_params(spec, p)) for p in params]
    flat = [d for c in cands for d in (swept_candidates(spec, c) or [c])]
    return int(sum(score_valid(spec, flat[i:i + 512]).points.fits_memory.sum()
                   for i in range(0, len(flat), 512)))


def scorer_comparison(args: argparse.Namespace, spec: StudySpec) -> None:
    """This tree's scorer beside `--baseline`'s (a subprocess with that tree's code), on the
    same architectures, interleaved `--repeats` times."""
    import json

    params = scorer_params(spec, args.scorer, args.seed)
    points = scored_points(args.study, params)
    rows = [("this tree", scorer_rate(args.study, params, spec.batch_size, args.repeats))]
    if args.baseline is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(params, f)
        command = [sys.executable, __file__, "--study", str(args.study), "--scorer-child", f.name,
                   "--repeats", str(args.repeats)]
        env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve()),
               "PYTHONDONTWRITEBYTECODE": "1"}
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        rows.append((f"baseline {args.baseline}", json.loads(out.stdout.splitlines()[-1])))
        os.unlink(f.name)
    print(f"\nscorer: {len(params)} architectures inside the budget of {spec.name}, every "
          f"deployment swept (evaluate_batch, batches of {spec.batch_size}, cold caches, fastest "
          f"of {args.repeats}); {points:,} operating points (architecture × deployment × "
          "concurrency fitting memory)")
    print("(wall clock; in parentheses per second of this process's CPU time, which a machine "
          "shared with other jobs inflates less)")
    print(f"{'code':<32} {'archs/s':>16} {'deps/s':>18} {'points/s':>20}")
    for label, r in rows:
        print(f"{label:<32} {_rates(r['architectures'], r):>16} "
              f"{_rates(r['deployments'], r):>18} {_rates(points, r):>20}")


def _rates(count: int, r: dict) -> str:
    """'80 (210)': per second of wall clock (of CPU time)."""
    return f"{count / r['wall_s']:.0f} ({count / r['cpu_s']:.0f})"


# ---- cost flat in study size (`--scale`) ---------------------------------------------------------

SCALE_CHECKPOINTS = (1000, 5000)  # trials at which resume, pareto and show are timed
RATE_WINDOW_TRIALS = 2000


@dataclass
class Checkpoint:
    trials: int
    resume_s: float
    pareto_s: float  # `pareto --json` reading the document the search kept
    show_s: float  # `show TRIAL` in this process
    show_indexed: bool  # that `show` read the trial through the journal's trial index
    show_cold_s: float  # `show TRIAL` as a fresh process
    recomputed_s: float  # the document from all trials


def _batch_timer(times: list[tuple[int, float]]) -> Callable:
    """A wrapper of `LocalRun.persist` recording (trials in the batch, seconds since the last
    batch was written: ask, evaluate, tell and the write)."""
    inner = search.study.runner.LocalRun.persist
    last = [time.perf_counter()]

    def timed(run, batch, target):
        done = inner(run, batch, target)
        now = time.perf_counter()
        times.append((len(batch), now - last[0]))
        last[0] = now
        return done
    timed.inner = inner
    return timed


def _cli_s(argv: list[str]) -> float:
    """Wall time of one in-process CLI command, its output discarded."""
    import io

    from search.cli.main import main

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"{argv} exited {code}")
    return time.perf_counter() - start


def _cold_s(argv: list[str]) -> float:
    """Wall time of one CLI command in a fresh interpreter (`archscout ARGV`), output discarded."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "search.cli.main", *argv], check=True,
                   stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[2])
    return time.perf_counter() - start


def _show_indexed(spec: StudySpec, study_file: Path, number: int) -> bool:
    """Whether `show` answers trial `number` through the trial index (`indexed_trial`, the
    function `archscout show` tries first), not by replaying the study."""
    from search.cli.inspect import indexed_trial

    return indexed_trial(study_file, spec, number) is not None


def _recomputed_s(spec: StudySpec, study_file: Path) -> float:
    """The Pareto document computed from the journal's trials (no kept document): what
    `pareto` costs after a run that did not reach its end."""
    from search.cli.study import load_study, open_for_reading
    from search.study.record import recorded_spec
    from search.study.report import pareto_document

    start = time.perf_counter()
    study = load_study(spec, open_for_reading(study_file, spec, None))
    pareto_document(recorded_spec(study, spec), study)
    return time.perf_counter() - start


def _checkpoint(spec: StudySpec, study_file: Path, journal: Path, trials: int,
                seed: int) -> Checkpoint:
    # readers first: reopening as the owner appends to the journal (Optuna's create_study
    # logs a study creation before it finds the study exists), so the kept document is stale
    # after it; each reader twice, the faster kept (the first call imports its modules)
    pareto_s = min(_cli_s(["pareto", str(study_file), "--json"]) for _ in range(2))
    show = ["show", str(study_file), str(trials // 2)]
    show_s = min(_cli_s(show) for _ in range(2))
    show_cold_s = _cold_s(show)
    recomputed_s = _recomputed_s(spec, study_file)
    indexed = _show_indexed(spec, study_file, trials // 2)
    start = time.perf_counter()
    handle = open_default(journal, shared=False)
    run_study(spec, handle, trials, seed, show_progress=False)
    handle.close()
    return Checkpoint(trials, time.perf_counter() - start, pareto_s, show_s, indexed,
                      show_cold_s, recomputed_s)


def _window_rate(times: list[tuple[int, float]], first: bool) -> float:
    """Trials/s over the first (or last) RATE_WINDOW_TRIALS trials' batches."""
    picked, count = [], 0
    for size, seconds in (times if first else reversed(times)):
        if count >= RATE_WINDOW_TRIALS:
            break
        picked.append(seconds)
        count += size
    return count / sum(picked)


def scale_run(source: Path, trials: int, seed: int, folder: Path) -> None:
    """The `--scale` run of the study file `source` (renamed `scale`) in `folder`."""
    import re

    study_file = folder / "scale.toml"
    study_file.write_text(re.sub(r'^name = ".*"$', 'name = "scale"', source.read_text(),
                                 count=1, flags=re.MULTILINE))
    spec = load_spec(study_file)
    journal = folder / "out" / spec.name / "study.journal"
    times: list[tuple[int, float]] = []
    search.study.runner.LocalRun.persist = _batch_timer(times)
    checkpoints = []
    try:
        for target in (*[c for c in SCALE_CHECKPOINTS if c < trials], trials):
            _cli_s(["search", str(study_file), "--trials", str(target), "--seed", str(seed),
                    "--no-progress"])
            checkpoints.append(_checkpoint(spec, study_file, journal, target, seed))
            print(f"  {target:,} trials: {os.path.getsize(journal) / 1e6:.1f} MB journal",
                  flush=True)
    finally:
        search.study.runner.LocalRun.persist = search.study.runner.LocalRun.persist.inner
    first, last = _window_rate(times, True), _window_rate(times, False)
    print(f"\nrate: first {RATE_WINDOW_TRIALS:,} trials {first:.1f} trials/s, last "
          f"{RATE_WINDOW_TRIALS:,} of {trials:,} {last:.1f} trials/s: {last / first:.0%} "
          f"(goal >= 90%)")
    print(f"{'trials':>7} {'resume s':>9} {'pareto s':>9} {'show s':>7} {'show via':>8} "
          f"{'show cold s':>11} {'recomputed s':>12}   (pareto: the kept document; show cold: "
          "a fresh process; recomputed: from all trials)")
    for c in checkpoints:
        via = "index" if c.show_indexed else "replay"
        print(f"{c.trials:>7,} {c.resume_s:>9.2f} {c.pareto_s:>9.2f} {c.show_s:>7.2f} "
              f"{via:>8} {c.show_cold_s:>11.2f} {c.recomputed_s:>12.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=QUICKSTART, help="study file (TOML)")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the study's batch_size")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of (a) and (b), interleaved; the fastest of each is kept")
    parser.add_argument("--plain-trials", type=int, default=None,
                        help="trials for (c) and (e), Optuna's own storages (default: --trials)")
    parser.add_argument("--postgres", default=None, metavar="URL",
                        help="also (d) and (e) on new databases of this PostgreSQL server")
    parser.add_argument("--workers", type=int, default=0,
                        help="also compare N processes on one shared journal with 1 (0: skip)")
    parser.add_argument("--worker-trials", type=int, default=500,
                        help="trials for the --workers comparison (plain journal: slow)")
    parser.add_argument("--deployments", action="store_true",
                        help="also compare swept with sampled deployments (in memory)")
    parser.add_argument("--scorer", type=int, default=0, metavar="N",
                        help="only the sweep's scorer on N architectures inside the budget "
                             "(issue 25): architectures, deployments and points per second")
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="with --scorer or --deployments: also the code of the checkout "
                             "DIR (e.g. `git archive integ | tar -x -C DIR`), same run")
    parser.add_argument("--no-storages", action="store_true",
                        help="skip the storage comparison (a)-(c) (e.g. with --deployments)")
    parser.add_argument("--scorer-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--deployments-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scale", action="store_true",
                        help="only the study-size run: rate of the first vs last 2,000 trials, "
                             "resume/pareto/show at 1,000, 5,000 and --trials trials")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the journal files go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the folder of journals (e.g. to time `archscout show` on "
                             "the --scale study afterwards)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = load_spec(args.study)
    if args.deployments_child:  # a --baseline tree running the `--deployments` comparison
        import json
        from dataclasses import asdict

        runs = deployment_mode_runs(spec, args.trials, args.seed)
        print(json.dumps([asdict(r) for r in runs]))
        return
    if args.scorer_child:  # a --baseline tree measuring the same architectures
        import json

        params = json.loads(Path(args.scorer_child).read_text())
        print(json.dumps(scorer_rate(args.study, params, spec.batch_size, args.repeats)))
        return
    if args.scorer:
        print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
        scorer_comparison(args, spec)
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return
    if args.batch_size:
        spec = spec.model_copy(update={"batch_size": args.batch_size})
    prefix = "bench-search-speed-"
    folder_made = (contextlib.nullcontext(tempfile.mkdtemp(dir=args.dir, prefix=prefix))
                   if args.keep else tempfile.TemporaryDirectory(dir=args.dir, prefix=prefix))
    with folder_made as tmp:
        folder = Path(tmp)
        if args.scale:
            print(f"study {spec.name}, {args.trials:,} trials on the default journal in "
                  f"{folder}; load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
            scale_run(args.study, args.trials, args.seed, folder)
            print(f"load average at end: {os.getloadavg()[0]:.1f}")
            return
        plain = args.plain_trials or args.trials
        print(f"study {spec.name} ({args.study.name}), sampler {spec.sampler}, batch "
              f"{spec.batch_size}, {args.trials} trials per run ({plain} for (c)), fastest of "
              f"{args.repeats} for (a) and (b); journals in {folder}")
        print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)\n")
        if not args.no_storages:
            print_storage_table(storage_runs(spec, args, folder))
        if args.deployments:
            rows = [("this tree", deployment_mode_runs(spec, args.trials, args.seed))]
            if args.baseline is not None:
                rows.append((f"baseline {args.baseline}", baseline_deployment_runs(args)))
            print_deployment_modes(spec, rows)
        if args.workers > 1:
            runs = [worker_run(spec, folder / f"workers{n}" / "study.journal", n,
                               args.worker_trials, args.seed) for n in (1, args.workers)]
            print_worker_table(runs)
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
