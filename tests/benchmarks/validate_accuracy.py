"""Score the accuracy proxy against published comparisons, leave-one-source-out (issue 28 item 3).

Rows: the calibration set (`objectives/data/accuracy_calibration.csv`) and the comparison set
(`tests/data/accuracy/comparisons.csv`). Each row is predicted by the fit that left its source out
(the headline) and by the all-source fit (in sample, in parentheses), with the band of its family
of difference (`objectives.accuracy_validation`: sign agreement, size within 2×, band coverage).
Prints every row and, per family, the left-out and in-sample figures.

Rows tagged `U` (unverified: no stored copy of the source confirmed them) are neither fitted nor
scored; their count is printed.

Usage: python tests/benchmarks/validate_accuracy.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from objectives.accuracy_fit import (
    METRICS, SIGN_METRICS, UNVERIFIED, fit_coefficients, read_rows,
)  # fmt: skip
from objectives.accuracy_validation import score_in_sample, score_left_out, summarize

CALIBRATION = ROOT / "objectives" / "data" / "accuracy_calibration.csv"
COMPARISONS = ROOT / "tests" / "data" / "accuracy" / "comparisons.csv"


def score(fit=None) -> tuple[dict, dict]:
    """({"left_out": scores, "in_sample": scores}, {family: {"left_out": …, "in_sample": …}})."""
    calibration = read_rows(CALIBRATION)
    comparisons = read_rows(COMPARISONS, METRICS + SIGN_METRICS)
    fit = fit or fit_coefficients(calibration)
    scores = {"left_out": score_left_out(fit, calibration, comparisons),
              "in_sample": score_in_sample(fit, calibration, comparisons)}  # fmt: skip
    left, inside = summarize(scores["left_out"]), summarize(scores["in_sample"])
    return scores, {family: {"left_out": left[family], "in_sample": inside[family]}
                    for family in left}  # fmt: skip


def unverified_counts() -> dict[str, int]:
    """The `U` rows each file keeps for the record (never fitted or scored)."""
    return {path.name: sum(r.confidence == UNVERIFIED
                           for r in read_rows(path, METRICS + SIGN_METRICS, unverified=True))
            for path in (CALIBRATION, COMPARISONS)}  # fmt: skip


def _fraction(hit: int, total: int) -> str:
    return f"{hit}/{total} ({hit / total:.0%})" if total else "-"


def print_summary(summary: dict) -> None:
    print("left out (in sample): sign agreement, size within 2x, band coverage")
    for family, s in summary.items():
        out, ins = s["left_out"], s["in_sample"]
        print(f"  {family:12s} rows {out['rows']:2d}  sign {_fraction(out['sign'], out['rows'])} "
              f"({_fraction(ins['sign'], ins['rows'])})  2x "
              f"{_fraction(out['within_2x'], out['sized'])} "
              f"({_fraction(ins['within_2x'], ins['sized'])})  band "
              f"{_fraction(out['covered'], out['banded'])} "
              f"({_fraction(ins['covered'], ins['banded'])})")  # fmt: skip


def _print_rows(scores: dict) -> None:
    print(f"{'id':34s} {'family':12s} {'metric':8s} {'published':>10s} {'left-out':>9s} "
          f"{'band':>7s} sign 2x   band  {'in-sample':>9s}")
    for out, ins in zip(scores["left_out"], scores["in_sample"], strict=True):
        published = ("tie" if out.metric == "tie" else f"{out.published:+.2f}pt"
                     if out.metric == "accuracy" else f"{out.published:+.2%}")  # fmt: skip
        within = "" if out.within_2x is None else ("yes" if out.within_2x else "no")
        covered = "" if out.covered is None else ("in" if out.covered else "OUT")
        print(f"{out.id:34s} {out.family:12s} {out.metric:8s} {published:>10s} "
              f"{out.pred_log:+9.2%} {out.band:7.2%} {'yes' if out.sign_agrees else 'NO ':4s} "
              f"{within:4s} {covered:5s} {ins.pred_log:+9.2%}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    scores, summary = score()
    if args.json:
        print(json.dumps({"rows": {k: [asdict(s) for s in v] for k, v in scores.items()},
                          "summary": summary}, indent=1))  # fmt: skip
    else:
        _print_rows(scores)
        print()
        print_summary(summary)
        left = ", ".join(f"{n} in {name}" for name, n in unverified_counts().items())
        print(f"not scored: the unverified rows ({left})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
