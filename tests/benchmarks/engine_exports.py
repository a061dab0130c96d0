"""For every shipped study (or the ones named): its top 5 Pareto designs exported for each
engine the study allows, every flag and value checked against the engine's own definitions
(tests/data/engine_args): prints the flags checked and those outside them, per study and
engine, with each table's version. Studies must have been searched (`archscout search`).

    python tests/benchmarks/engine_exports.py [studies/quickstart.toml …] [--top 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from search.cli.inspect import opened_study  # noqa: E402
from search.records.engines import ENGINES, engine_document  # noqa: E402
from search.study.evaluation import score_valid, trial_candidate  # noqa: E402
from search.study.report import pareto_document  # noqa: E402
from tests.search.records.engine_flags import document_problems, flag_count, table  # noqa: E402


def study_rows(path: Path, top: int) -> list[tuple]:
    args = argparse.Namespace(study=str(path), storage=None)
    rows = []
    with opened_study(args) as (spec, study):
        items = pareto_document(spec, study)["pareto"][:top]
        trials = {t.number: t for t in study.get_trials(deepcopy=False)}
        for engine in ENGINES if spec.engine is None else (spec.engine,):
            checked, problems = 0, []
            for item in items:
                t = trials[item["trial"]]
                cand = trial_candidate(spec, t.params, t.user_attrs)
                limit = int(score_valid(spec, [cand]).max_concurrency[0])
                doc = engine_document(engine, spec, cand, max(limit, 1))
                checked += flag_count(doc)
                problems += [f"trial {t.number}: {p}" for p in document_problems(doc)]
            rows.append((spec.name, engine, len(items), checked, problems))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", nargs="*", type=Path)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args(argv)
    paths = args.studies or sorted((ROOT / "studies").glob("*.toml"))
    for engine in ENGINES:
        t = table(engine)
        print(f"{engine}: {t['version']} ({len(t['flags'])} flags)")
    total = 0
    for path in paths:
        for name, engine, designs, checked, problems in study_rows(path, args.top):
            total += len(problems)
            print(f"{name:28s} {engine:7s} top {designs}: {checked:4d} flags/fields checked, "
                  f"{len(problems)} outside the engine's definitions")
            for p in problems:
                print(f"    {p}")
    print(f"total outside the definitions: {total}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
