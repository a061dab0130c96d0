"""Fit the accuracy proxy by source on the declared calibration set and report the fit, each
coefficient's value with every source left out in turn, and the left-out figures (issue 28 item 3).

1. Reads `objectives/data/accuracy_calibration.csv` and fits (`objectives.accuracy_fit`): every
   coefficient on all sources (in sample) and once per source left out; prints each coefficient
   (method, prior, shipped, refit, its range over the folds), and per family the rms
   |ln(proxy/published)| left out (headline) and in sample.
2. Scores every calibration and comparison row (`tests/data/accuracy/comparisons.csv`) left out
   and in sample (`validate_accuracy.py`): sign agreement, within 2× and band coverage by family.
`--write` rewrites `objectives/data/accuracy_coefficients.toml` from the fit.

Usage: python tests/benchmarks/fit_accuracy.py [--write] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from objectives import accuracy_coefficients as coef
from objectives.accuracy_fit import coefficients_toml, fit_coefficients, read_rows
from search.atomic import write_text_atomic
from tests.benchmarks.validate_accuracy import CALIBRATION, print_summary, score

SET_NAME = "objectives/data/accuracy_calibration.csv"
COEFFICIENTS = ROOT / "objectives" / "data" / "accuracy_coefficients.toml"


def report(fit) -> dict:
    coefficients = {}
    for name, rec in coef.SHIPPED_RECORDS.items():
        folds = [getattr(f, name) for f in fit.folds.values()]
        coefficients[name] = {"family": rec.family, "method": rec.method, "prior": rec.prior,
                              "shipped": rec.value, "refit": getattr(fit.coefficients, name),
                              "left_out_range": [min(folds), max(folds)]}  # fmt: skip
    families = {f: {"coefficients": list(ff.coefficients), "rows": len(ff.rows),
                    "left_out_rms_log_error": ff.left_out_rms_log_error,
                    "rms_log_error": ff.rms_log_error, "max_abs_log_error": ff.max_abs_log_error}
                for f, ff in fit.families.items()}  # fmt: skip
    return {"calibration_rows": fit.rows, "sources": sorted(fit.folds),
            "coefficients": coefficients, "families": families}  # fmt: skip


def _print(doc: dict) -> None:
    print(f"calibration set {SET_NAME}: {doc['calibration_rows']} rows, "
          f"{len(doc['sources'])} sources ({', '.join(doc['sources'])})")
    print(f"{'coefficient':22s} {'family':12s} {'method':18s} {'prior':>8s} {'shipped':>9s} "
          f"{'refit':>9s}  left-out folds")
    for name, c in doc["coefficients"].items():
        low, high = c["left_out_range"]
        folds = f"[{low:.4g}, {high:.4g}]" if c["method"] == "least_squares" else "-"
        print(f"{name:22s} {c['family']:12s} {c['method']:18s} {c['prior']:8.4g} "
              f"{c['shipped']:9.4g} {c['refit']:9.4g}  {folds}")
    print("\nrms |ln(proxy/published)| per family, left out (in sample):")
    for family, f in doc["families"].items():
        print(f"  {family:12s} rows {f['rows']:2d}  {f['left_out_rms_log_error']:.2%} "
              f"({f['rms_log_error']:.2%})  fits {', '.join(f['coefficients']) or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the coefficient file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fit = fit_coefficients(read_rows(CALIBRATION))
    if args.write:
        write_text_atomic(COEFFICIENTS, coefficients_toml(fit, coef.SHIPPED_RECORDS, SET_NAME))
    doc = report(fit)
    _, summary = score(fit)
    doc["validation"] = summary
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        _print(doc)
        print()
        print_summary(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
