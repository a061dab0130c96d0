"""The frontier of the design a trial belongs to, in a study whose deployments are sampled: its
points come from every feasible trial of that design (each a deployment of it), as the Pareto
table shows them. `export --interactivity` picks its operating point from here, so every point
of a Pareto row can be exported, whichever sibling trial realizes it."""

from __future__ import annotations

import optuna

from search.study.report import design_items, group_designs, load_records
from search.study.space import Candidate
from search.study.spec import StudySpec


def design_frontier(spec: StudySpec, study: optuna.Study, number: int
                    ) -> tuple[list[dict], dict[int, Candidate]] | None:
    """(the envelope points of trial `number`'s design, each naming the trial that realizes
    it; the candidate of each such trial), or None when the trial is no feasible design."""
    records = load_records(spec, study)
    mine = next((r for r in records if r.trial.number == number), None)
    if mine is None or not mine.feasible or not mine.candidate.valid:
        return None
    design = next(d for d in group_designs(records) if d.records[0].arch_key == mine.arch_key)
    item = design_items(spec, [design])[0]
    return item["frontier"], {r.trial.number: r.candidate for r in design.records}
