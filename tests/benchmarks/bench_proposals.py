"""Budget-true sampling (issue 25: "Share of scored trials inside the budget on every shipped
study and on a ~30B-total MoE study: ≥ 95%; repeats scored: 0").

Runs the product's loop (`run_study`, the study's sampler and batch size, in memory) for
`--trials` trials on each study and reports, from the trials it recorded: trials, scored trials
(COMPLETE: told values), the share of scored trials inside the parameter budget (their recorded
`params_budget` constraint ≤ 0), scored trials that repeat a design scored before (same
`design_key` and deployment: what `design_identity` calls one design), and the proposals'
acceptance (accepted / drawn, `ProposalSampler.stats`). `--baseline DIR` runs the same
measurement with the code of another checkout (e.g. `git archive 7fbe978 | tar -x -C DIR`, the
tree before issue 25) in a subprocess, in the same run, for the figures side by side.
Run: python tests/benchmarks/bench_proposals.py [--trials 256] [--baseline DIR] [STUDY.toml ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna

from search.study.evaluation import trial_candidate
from search.study.runner import run_study
from search.study.spec import load_spec
from search.study.storage import StorageHandle

REPO = Path(__file__).resolve().parents[2]
DEFAULT = sorted((REPO / "studies").glob("*.toml"))


def measure(path: Path, trials: int, seed: int) -> dict:
    spec = load_spec(path)
    handle = StorageHandle(storage=optuna.storages.InMemoryStorage(), description="memory",
                           shared=False)
    start = time.perf_counter()
    summary = run_study(spec, handle, trials, seed, show_progress=False)
    wall_s = time.perf_counter() - start
    study = optuna.load_study(study_name=spec.name, storage=handle.storage)
    done = study.get_trials(deepcopy=False)
    scored = [t for t in done if t.state.name == "COMPLETE"]
    inside = [t for t in scored
              if t.user_attrs["details"]["constraints"]["params_budget"][0] <= 0]
    seen, repeats = set(), 0
    for t in scored:
        cand = trial_candidate(spec, t.params, t.user_attrs)
        design = (cand.arch.design_key, cand.deployment)
        repeats += design in seen
        seen.add(design)
    stats = dict(getattr(summary, "proposals", {}) or {})
    return {"study": spec.name, "trials": len(done), "scored": len(scored),
            "inside_frac": len(inside) / len(scored) if scored else float("nan"),
            "repeats_scored": repeats, "feasible": summary.feasible, "wall_s": wall_s,
            "drawn": stats.get("drawn"), "accepted": stats.get("accepted"),
            "fallback": stats.get("fallback", 0)}


def _measured(path: Path, trials: int, seed: int, quiet: bool) -> dict | None:
    """`measure`, or None (said on stderr) for a study this tree's code cannot load (a baseline
    older than a study file's keys, e.g. `[sla]`)."""
    try:
        return measure(path, trials, seed)
    except Exception as exc:  # noqa: BLE001 - one line per study this code cannot run
        print(f"{path.name}: not measured ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def print_rows(label: str, rows: list[dict]) -> None:
    print(f"\n{label}")
    print(f"{'study':<28} {'trials':>6} {'scored':>6} {'in budget':>9} {'repeats':>7} "
          f"{'feasible':>8} {'accept':>7} {'fallback':>8} {'wall s':>7}")
    for r in rows:
        accept = f"{r['accepted'] / r['drawn']:.1%}" if r.get("drawn") else "-"
        print(f"{r['study']:<28} {r['trials']:>6} {r['scored']:>6} {r['inside_frac']:>9.1%} "
              f"{r['repeats_scored']:>7} {r['feasible']:>8} {accept:>7} {r['fallback']:>8} "
              f"{r['wall_s']:>7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout whose code measures the same studies too")
    parser.add_argument("--json", action="store_true", help="rows as JSON (one document)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = [_measured(p.resolve(), args.trials, args.seed, args.json) for p in args.studies]
    rows = [r for r in rows if r is not None]
    if args.json:
        print(json.dumps(rows))
        return
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs); "
          f"{args.trials} trials per study, seed {args.seed}, in memory")
    budget_true = importlib.util.find_spec("search.study.proposals") is not None
    print_rows("this tree" + (" (budget-true proposals)" if budget_true else ""), rows)
    if args.baseline is not None:
        command = [sys.executable, __file__, "--json", "--trials", str(args.trials), "--seed",
                   str(args.seed), *map(str, (p.resolve() for p in args.studies))]
        env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve()),
               "PYTHONDONTWRITEBYTECODE": "1"}
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        print_rows(f"baseline {args.baseline}", json.loads(out.stdout))
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
