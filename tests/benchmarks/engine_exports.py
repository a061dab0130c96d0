"""For every shipped study (or the ones named): its top 5 Pareto designs exported for each
engine the study allows, every flag and value checked against the engine's own definitions
(tests/data/engine_args): prints the flags checked and those outside them, per study and
engine, with each table's version. Each design is exported under its trial's deployment and
every other deployment on its frontier (a study that sweeps deployments), at the requests the
deployment holds, as the export and as the bundle's dummy-weight serve command. Studies must
have been searched (`archscout search`; studies/out/ is git-ignored).

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
from search.study.evaluation import deployment_label, score_valid, trial_candidate  # noqa: E402
from search.study.report import pareto_document  # noqa: E402
from search.study.space import sweeps_deployments, swept_candidates  # noqa: E402
from tests.search.records.engine_flags import document_problems, flag_count, table  # noqa: E402


def design_candidates(spec, trial, item: dict) -> list:
    """The trial's candidate and one per other deployment on the design's frontier."""
    cand = trial_candidate(spec, trial.params, trial.user_attrs)
    labels = {p["deployment"] for p in item.get("frontier", [])}
    if not sweeps_deployments(spec) or not labels:
        return [cand]
    others = [c for c in swept_candidates(spec, cand)
              if deployment_label(c.deployment) in labels
              and c.deployment != cand.deployment]
    return [cand, *others]


def study_rows(path: Path, top: int) -> list[tuple]:
    args = argparse.Namespace(study=str(path), storage=None)
    rows = []
    with opened_study(args) as (spec, study):
        items = pareto_document(spec, study)["pareto"][:top]
        trials = {t.number: t for t in study.get_trials(deepcopy=False)}
        cands = [(item["trial"], c) for item in items
                 for c in design_candidates(spec, trials[item["trial"]], item)]
        for engine in ENGINES if spec.engine is None else (spec.engine,):
            checked, problems, unrunnable = 0, [], 0
            for number, cand in cands:
                limit = int(score_valid(spec, [cand]).max_concurrency[0])
                for dummy in (False, True):  # the export, and the bundle's dummy-weight serve
                    doc = engine_document(engine, spec, cand, max(limit, 1), dummy=dummy)
                    checked += flag_count(doc)
                    unrunnable += not dummy and any(n.startswith("not what ")
                                                    for n in doc["notes"])
                    problems += [f"trial {number} ({deployment_label(cand.deployment)}"
                                 f"{', dummy' if dummy else ''}): {p}"
                                 for p in document_problems(doc)]
            rows.append((spec.name, engine, len(items), len(cands), checked, problems,
                         unrunnable))
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
        for name, engine, designs, exports, checked, problems, unrunnable in \
                study_rows(path, args.top):
            total += len(problems)
            print(f"{name:28s} {engine:7s} top {designs} ({exports:2d} deployments): "
                  f"{checked:4d} flags/fields checked, {len(problems)} outside the engine's "
                  f"definitions; {unrunnable} deployment(s) noted as not what {engine} runs")
            for p in problems:
                print(f"    {p}")
    print(f"total outside the definitions: {total}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
