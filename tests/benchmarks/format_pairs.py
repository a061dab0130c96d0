"""The format pairs alone (tests/data/serving/format_pairs.csv, scored as validate_serving.py
scores them): the model's a/b ratios of TPOT and tokens/s/GPU against the measured ones, per
source and formats, per model and over all. Faster than validate_serving.py (no other rows).

Run: python tests/benchmarks/format_pairs.py [--csv PATH] [--quiet] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.*

from tests.benchmarks.serving.config import DEFAULT_DATA_DIR, FORMAT_PAIRS_CSV  # noqa: E402
from tests.benchmarks.serving.config import FORMAT_PAIR_BAND  # noqa: E402
from tests.benchmarks.serving.pairs import (  # noqa: E402
    _pair_summary, _print_pair_figures, _read_pairs, pair_group, pair_groups, print_pairs,
    score_format_pairs,
)

MEASURED = (("tpot", "tpot_ms"), ("tokens_per_s_per_gpu", "output_tokens_per_s_per_gpu"))


def model_groups(lines: list[dict]) -> dict:
    """The pair figures per model (the pair text's first word)."""
    models = sorted({line["pair"].split()[0] for line in lines})
    return {m: _pair_summary([line for line in lines if line["pair"].split()[0] == m])
            for m in models}


def measured_ratios(pairs: list[dict[str, str]]) -> dict[str, dict[str, list[float]]]:
    """Every pair's measured a/b ratios per group, scored or not (a pair the validator skips,
    e.g. for want of an ISL, still shows which format its source measured faster)."""
    out: dict[str, dict[str, list[float]]] = {}
    for pair in pairs:
        for metric, column in MEASURED:
            a, b = pair.get(f"{column}_a", "").strip(), pair.get(f"{column}_b", "").strip()
            if a and b:
                out.setdefault(pair_group(pair), {}).setdefault(metric, []).append(
                    float(a) / float(b))
    return out


def _print_measured(ratios: dict[str, dict[str, list[float]]]) -> None:
    print("  measured a/b ratios of every pair in the CSV (scored or skipped):")
    for group, by_metric in sorted(ratios.items()):
        for metric, values in by_metric.items():
            lower = sum(v < 1.0 - FORMAT_PAIR_BAND for v in values)
            higher = sum(v > 1.0 + FORMAT_PAIR_BAND for v in values)
            print(f"    {group} {metric}: {len(values)} pairs, median {median(values):.2f}, "
                  f"below 1 ± {FORMAT_PAIR_BAND:.0%} in {lower}, above in {higher}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=FORMAT_PAIRS_CSV, help="format-pairs CSV")
    parser.add_argument("--quiet", action="store_true", help="figures only, no line per pair")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        print(f"error: `--csv` must name a file, got {args.csv}", file=sys.stderr)
        return 2
    summary, lines, skipped = score_format_pairs(_read_pairs(args.csv), DEFAULT_DATA_DIR)
    groups, models = pair_groups(lines), model_groups(lines)
    measured = measured_ratios(_read_pairs(args.csv))
    if args.json:
        print(json.dumps({"all": summary, "groups": groups, "models": models,
                          "skipped": dict(skipped), "measured": measured, "lines": lines},
                         indent=1))
        return 0
    print_pairs(summary, [] if args.quiet else lines, skipped, groups)
    for model, by_metric in models.items():
        print(f"  model {model}:")
        _print_pair_figures(by_metric, "    ")
    _print_measured(measured)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
