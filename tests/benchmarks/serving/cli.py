"""The command line of tests/benchmarks/validate_serving.py (its docstring is the usage)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from tests.benchmarks.serving.config import CSV_NAME, DEFAULT_DATA_DIR, DEV_SET_CSV
from tests.benchmarks.serving.metrics import summarize
from tests.benchmarks.serving.report import _print_combined, grown_report, print_grown, print_report
from tests.benchmarks.serving.rows import _read_rows, grown_csvs
from tests.benchmarks.serving.scenarios import evaluate_all

DESCRIPTION = "Compare the cost model's operating points with published serving measurements."

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"folder holding {CSV_NAME} and model_configs/ (default: %(default)s)")
    parser.add_argument("--dev-set", type=Path, default=DEV_SET_CSV,
                        help="development-set CSV scored beside it (default: %(default)s)")
    parser.add_argument("--no-dev-set", action="store_true", help="score the published CSV only")
    parser.add_argument("--no-grown", action="store_true",
                        help="leave out the grown development set (the other CSVs of "
                             "tests/data/serving/) and the format pairs")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of tables"
    )
    args = parser.parse_args(argv)
    data_path = args.data / CSV_NAME
    rows = _read_rows(data_path, "--data")
    if rows is None:
        return 2
    dev_rows = None if args.no_dev_set else _read_rows(args.dev_set, "--dev-set")
    if dev_rows is None and not args.no_dev_set:
        return 2
    by_source = Counter()  # skipped rows by (source_kind, reason), for the grown-set table
    results, skipped = evaluate_all(rows, args.data, by_source)
    summary = summarize(results, skipped)
    dev_summary = combined = None
    if dev_rows is not None:
        dev_results, dev_skipped = evaluate_all(dev_rows, args.data, by_source)
        dev_summary = summarize(dev_results, dev_skipped)
        combined = summarize(results + dev_results, skipped + dev_skipped)
    grown = None
    if dev_rows is not None and not args.no_grown:
        grown_paths = grown_csvs()
        grown_rows = [r for path in grown_paths for r in _read_rows(path, str(path)) or []]
        grown_results, grown_skipped = evaluate_all(grown_rows, args.data, by_source)
        grown = grown_report(rows + dev_rows + grown_rows,
                             results + dev_results + grown_results,
                             skipped + dev_skipped + grown_skipped, grown_rows, grown_results,
                             grown_skipped, args.data, by_source)
    if args.json:
        document = {"data": str(data_path), **summary}
        if dev_summary is not None:
            document["dev_set"] = {"data": str(args.dev_set), **dev_summary}
            document["combined"] = {"data": [str(data_path), str(args.dev_set)],
                                    **{k: v for k, v in combined.items() if k != "rows"}}
        if grown is not None:
            document["grown_set"] = {"data": [str(p) for p in grown_paths], **grown}
        print(json.dumps(document, indent=1))
    else:
        print_report(summary, data_path)
        if dev_summary is not None:
            print("\n" + "=" * 100 + "\n")
            print_report(dev_summary, args.dev_set)
            print("\n" + "=" * 100 + "\n")
            _print_combined(combined, [data_path, args.dev_set])
        if grown is not None:
            print("\n" + "=" * 100 + "\n")
            print_grown(grown, grown_paths)
    return 0
