"""Refit the accuracy proxy's free coefficients on the declared calibration set and report the
fit error and the validation figures by family (issue 11 item 2).

1. Reads `objectives/data/accuracy_calibration.csv` and fits (`objectives.accuracy_fit`): prints
   each coefficient (fitted or policy, shipped value, refit value) and, per family, the rms and max
   |ln(proxy/published)| over its calibration rows.
2. With the refit coefficients in force, checks `tests/data/accuracy/validation.csv` (rows not
   fitted on; `validate_accuracy.py`): sign agreement and within-2x rates by family.
`--write` rewrites `objectives/data/accuracy_coefficients.toml` from the fit (then rerun to see
the validation figures under the new file).

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
from tests.benchmarks.validate_accuracy import validate

CALIBRATION = ROOT / "objectives" / "data" / "accuracy_calibration.csv"
SET_NAME = "objectives/data/accuracy_calibration.csv"
COEFFICIENTS = ROOT / "objectives" / "data" / "accuracy_coefficients.toml"


def report(fit) -> dict:
    coefficients = {
        name: {"family": rec.family, "fitted": rec.fitted, "shipped": rec.value,
               "refit": getattr(fit.coefficients, name)}
        for name, rec in coef.SHIPPED_RECORDS.items()
    }  # fmt: skip
    families = {f: {"coefficients": list(ff.coefficients), "rows": len(ff.rows),
                    "rms_log_error": ff.rms_log_error, "max_abs_log_error": ff.max_abs_log_error}
                for f, ff in fit.families.items()}  # fmt: skip
    return {"calibration_rows": fit.rows, "coefficients": coefficients, "families": families}


def _print(doc: dict, summary: dict) -> None:
    print(f"calibration set {SET_NAME}: {doc['calibration_rows']} rows")
    print(f"{'coefficient':24s} {'family':12s} {'kind':7s} {'shipped':>10s} {'refit':>10s}")
    for name, c in doc["coefficients"].items():
        kind = "fitted" if c["fitted"] else "policy"
        print(f"{name:24s} {c['family']:12s} {kind:7s} {c['shipped']:10.6g} {c['refit']:10.6g}")
    print("\nfit error on the calibration rows, |ln(proxy/published)|:")
    for family, f in doc["families"].items():
        print(f"  {family:12s} rows {f['rows']:2d}  rms {f['rms_log_error']:.2%}  "
              f"max {f['max_abs_log_error']:.2%}  fits {', '.join(f['coefficients']) or '-'}")
    print("\nvalidation (validation.csv, not fitted on), shipped coefficients:")
    for key, s in summary.items():
        sized = f"{s['within_2x']}/{s['sized_rows']}" if s["sized_rows"] else "-"
        print(f"  {key:26s} sign {s['sign_agree']}/{s['rows']}  within 2x {sized}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the coefficient file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fit = fit_coefficients(read_rows(CALIBRATION))
    if args.write:
        write_text_atomic(COEFFICIENTS, coefficients_toml(fit, coef.SHIPPED_RECORDS, SET_NAME))
    doc = report(fit)
    _, summary = validate()
    doc["validation"] = summary
    print(json.dumps(doc, indent=1)) if args.json else _print(doc, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
