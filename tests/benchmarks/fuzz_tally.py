"""The fuzzer's tally (issue 29, "must show"): every kind of input of tests/search/cli/
fuzz_inputs.py (study TOML, CLI flags, HF configs, hardware files, `evaluate --batch` /
`calibrate --source` / `gemm --shapes` CSVs, output paths), mutated by hypothesis and run through
`archscout` in-process, with more examples than the suite runs (tests/search/cli/test_fuzz.py).

Prints per kind the cases run and how each came out: ok (exit 0), infeasible (exit 1, one line),
clear (exit 2, one line), unclear (another exit code, or not one line), traceback, hang (past
fuzz_inputs.HANG_S) and leftover (a file written or changed that should not be), then up to
`--show` cases of each bad outcome with what happened. The examples are derandomized: the same
command prints the same tally on the same code.

Run: python tests/benchmarks/fuzz_tally.py [--examples 200] [--kinds "HF config" ...]
     [--show 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hypothesis import HealthCheck, Phase, given, settings

from tests.search.cli.fuzz_inputs import GOOD, OUTCOMES, Outcome, run_case
from tests.search.cli.fuzz_kinds import KINDS


def tally(kind: str, examples: int) -> tuple[list[Outcome], float]:
    """Run `examples` cases of `kind`; every outcome, and the seconds they took."""
    outcomes: list[Outcome] = []

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=KINDS[kind])
    def run(case):
        outcomes.append(run_case(case))

    start = time.perf_counter()
    run()
    return outcomes, time.perf_counter() - start


def print_tally(results: dict[str, tuple[list[Outcome], float]], show: int) -> None:
    width = max(map(len, results)) + 2
    print(f"{'kind':<{width}}{'cases':>6}" + "".join(f"{o:>12}" for o in OUTCOMES) + f"{'s':>7}")
    totals: Counter = Counter()
    for kind, (outcomes, seconds) in results.items():
        counts = Counter(o.kind for o in outcomes)
        totals.update(counts)
        print(f"{kind:<{width}}{len(outcomes):>6}" + "".join(f"{counts[o]:>12}" for o in OUTCOMES)
              + f"{seconds:>7.0f}")
    cases = sum(totals.values())
    print(f"{'all':<{width}}{cases:>6}" + "".join(f"{totals[o]:>12}" for o in OUTCOMES))
    good = sum(totals[o] for o in GOOD)
    print(f"\n{good} of {cases} cases ({good / max(cases, 1):.1%}) ok, infeasible or clear")
    for kind, (outcomes, _) in results.items():
        bad = [o for o in outcomes if o.kind not in GOOD]
        for outcome in bad[:show]:
            print(f"\n[{kind}] {outcome.kind} (exit {outcome.code}): {outcome.detail}\n"
                  f"    {outcome.case.shown()[:300]}")
        if len(bad) > show:
            print(f"\n[{kind}] … and {len(bad) - show} more not ok, infeasible or clear")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="cases per kind")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--show", type=int, default=3, help="bad cases shown per kind")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts here")
    args = parser.parse_args()
    results = {kind: tally(kind, args.examples) for kind in args.kinds}
    print_tally(results, args.show)
    if args.json:
        args.json.write_text(json.dumps({kind: {"cases": len(o), "seconds": round(s, 1),
                                                **Counter(x.kind for x in o)}
                                         for kind, (o, s) in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
