"""The source table: rows per source (`rows.source_of`: one publisher's run set, what
leave-one-source-out leaves out) in the CSVs and scored, by family, engine and GPU, and the
skipped ones by reason."""

from __future__ import annotations

from collections import Counter

from tests.benchmarks.serving.metrics import _model_key, capped
from tests.benchmarks.serving.rows import Result, engine_of, family_of, source_of

def source_table(rows: list[dict[str, str]], results: list[Result],
                 skipped_by_source: Counter | None = None) -> dict:
    """Rows per source (in the CSVs, and scored) by family, engine and GPU; the scored rows by
    family, engine and GPU; the skipped ones by reason where `skipped_by_source` is given."""
    table = {}
    for kind in sorted({source_of(r) for r in rows}):
        mine = [r for r in rows if source_of(r) == kind]
        scored = [r for r in results if result_source(r) == kind]
        table[kind] = {
            "rows": len(mine), "scored": len(scored),
            "family": dict(Counter(family_of(r["model"]) for r in mine).most_common()),
            "engine": dict(Counter(engine_of(r) or "other" for r in mine).most_common()),
            "gpu": dict(Counter(r["gpu"] for r in mine).most_common()),
            "scored_by": {
                "family": dict(Counter(family_of(r.model) for r in scored).most_common()),
                "engine": dict(Counter(r.engine or "other" for r in scored).most_common()),
                "gpu": dict(Counter(r.gpu for r in scored).most_common())},
            "skipped": {reason: n for (k, reason), n in (skipped_by_source or Counter())
                        .most_common() if k == kind},
        }
    return table


def result_source(r: Result) -> str:
    """The source of a scored row (its source_kind where it was built without one)."""
    return r.source or r.source_kind or "?"


def scored_totals(results: list[Result]) -> dict:
    """Scored rows by family, engine and GPU over every source, and the largest model's share
    (before and after the per-model cap)."""
    kept, _ = capped(results)
    def share(rs):
        counts = Counter(_model_key(r.model) for r in rs)
        return max(counts.values()) / len(rs) if rs else None
    return {"family": dict(Counter(family_of(r.model) for r in results).most_common()),
            "engine": dict(Counter(r.engine or "other" for r in results).most_common()),
            "gpu": dict(Counter(r.gpu for r in results).most_common()),
            "largest_model_share": share(results), "largest_model_share_capped": share(kept)}
