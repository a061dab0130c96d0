"""The command line of tests/benchmarks/validate_serving.py (its docstring is the usage)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.benchmarks.serving.config import CSV_NAME, DEFAULT_DATA_DIR, DEV_SET_CSV
from tests.benchmarks.serving.loso import FITTED, run_loso
from tests.benchmarks.serving.loso_report import loso_document, print_loso
from tests.benchmarks.serving.metrics import summarize
from tests.benchmarks.serving.report import _print_combined, grown_report, print_grown, print_report
from tests.benchmarks.serving.rows import _read_rows, grown_csvs
from tests.benchmarks.serving.scenarios import evaluate_prepared

DESCRIPTION = "Compare the cost model's operating points with published serving measurements."
RULE = "\n" + "=" * 100 + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"folder holding {CSV_NAME} and model_configs/ (default: %(default)s)")
    parser.add_argument("--dev-set", type=Path, default=DEV_SET_CSV,
                        help="development-set CSV scored beside it (default: %(default)s)")
    parser.add_argument("--no-dev-set", action="store_true", help="score the published CSV only")
    parser.add_argument("--no-grown", action="store_true",
                        help="leave out the grown development set (the other CSVs of "
                             "tests/data/serving/) and the format pairs")
    parser.add_argument("--no-loso", action="store_true",
                        help="skip leave-one-source-out (the refits of every fitted term)")
    parser.add_argument("--no-ablations", action="store_true",
                        help="leave-one-source-out of the full fit only, no term switched off")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document instead of tables")
    return parser


@dataclass
class Scored:
    """One CSV's rows, their results, skipped rows by reason and the prepared rows scored."""

    rows: list
    results: list = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    prepared: list = field(default_factory=list)


def _score(rows: list, data_dir: Path, by_source: Counter) -> Scored:
    return Scored(rows, *evaluate_prepared(rows, data_dir, by_source))


def prepared_rows(data_dir: Path = DEFAULT_DATA_DIR) -> tuple[list, list]:
    """(prepared rows, their results as shipped) of every source: the published CSV, the
    development set and the grown development set, as leave-one-source-out reads them."""
    paths = [(data_dir / CSV_NAME, "--data"), (DEV_SET_CSV, "--dev-set")]
    paths += [(path, str(path)) for path in grown_csvs()]
    rows = [r for path, option in paths for r in _read_rows(path, option) or []]
    results, _, prepared = evaluate_prepared(rows, data_dir)
    return prepared, results


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    data_path = args.data / CSV_NAME
    rows = _read_rows(data_path, "--data")
    dev_rows = None if args.no_dev_set else _read_rows(args.dev_set, "--dev-set")
    if rows is None or (dev_rows is None and not args.no_dev_set):
        return 2
    by_source = Counter()  # skipped rows by (source, reason), for the source table
    sets = {"published": _score(rows, args.data, by_source)}
    if dev_rows is not None:
        sets["dev"] = _score(dev_rows, args.data, by_source)
    grown_paths = grown_csvs()
    if dev_rows is not None and not args.no_grown:
        grown_rows = [r for path in grown_paths for r in _read_rows(path, str(path)) or []]
        sets["grown"] = _score(grown_rows, args.data, by_source)
    loso = None
    if not args.no_loso:
        prepared = [p for s in sets.values() for p in s.prepared]
        results = [r for s in sets.values() for r in s.results]
        loso = loso_document(run_loso(prepared, results,
                                      {FITTED} if args.no_ablations else None))
    if args.json:
        print(json.dumps(_document(sets, args, data_path, grown_paths, by_source, loso),
                         indent=1))
    else:
        _print(sets, args, data_path, grown_paths, by_source, loso)
    return 0


def _grown(sets: dict, args, by_source: Counter) -> dict | None:
    if "grown" not in sets:
        return None
    every = list(sets.values())
    g = sets["grown"]
    return grown_report([r for s in every for r in s.rows], [r for s in every for r in s.results],
                        sum((s.skipped for s in every), Counter()), g.rows, g.results,
                        g.skipped, args.data, by_source)


def _document(sets, args, data_path: Path, grown_paths, by_source: Counter, loso) -> dict:
    """The --json document: the published CSV's summary at the top level; `dev_set`,
    `combined`, `grown_set` and `loso` beside it."""
    published = sets["published"]
    document = {"data": str(data_path), **summarize(published.results, published.skipped)}
    if "dev" in sets:
        dev = sets["dev"]
        combined = summarize(published.results + dev.results, published.skipped + dev.skipped)
        document["dev_set"] = {"data": str(args.dev_set), **summarize(dev.results, dev.skipped)}
        document["combined"] = {"data": [str(data_path), str(args.dev_set)],
                                **{k: v for k, v in combined.items() if k != "rows"}}
    grown = _grown(sets, args, by_source)
    if grown is not None:
        document["grown_set"] = {"data": [str(p) for p in grown_paths], **grown}
    if loso is not None:
        document["loso"] = loso
    return document


def _print(sets, args, data_path: Path, grown_paths, by_source: Counter, loso) -> None:
    """The leave-one-source-out headline first, then each CSV's figures."""
    if loso is not None:
        print_loso(loso)
        print(RULE)
    published = sets["published"]
    print_report(summarize(published.results, published.skipped), data_path)
    if "dev" in sets:
        dev = sets["dev"]
        print(RULE)
        print_report(summarize(dev.results, dev.skipped), args.dev_set)
        print(RULE)
        _print_combined(summarize(published.results + dev.results,
                                  published.skipped + dev.skipped), [data_path, args.dev_set])
    grown = _grown(sets, args, by_source)
    if grown is not None:
        print(RULE)
        print_grown(grown, grown_paths)
