"""Check the accuracy proxy against published two-architecture comparisons.

Reads the validation set `tests/data/accuracy/validation.csv` (published comparisons the proxy's
coefficients were NOT fitted on; the fitted rows are `objectives/data/accuracy_calibration.csv`,
see fit_accuracy.py): each
row two shapes (`objectives/shapes.py` strings), their training tokens and formats, the published
values of both and the source.
For each row the proxy's relative loss difference pred = L(b)/L(a) − 1 (central loss) is set
against the published one:

- metric `loss`: published = value_b/value_a − 1; the sign agrees when both have the same sign,
  and the size is "within 2×" when pred/published lies in [1/2, 2];
- metric `accuracy` (benchmark points, higher is better): the sign agrees when the loss moves
  the other way; no size check (points are not nats);
- metric `tie` (published "comparable"): agrees when |pred| <= TIE_FRAC;
- metric `params` (a published effective-parameter ratio, e.g. Clark's EPC): pred is the ratio of
  the proxy's effective parameter counts minus 1, checked like `loss`.

Prints per-row results and, per family, sign agreement and within-2× rates.
Usage: python tests/benchmarks/validate_accuracy.py [--ranked] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from objectives.accuracy import predict_loss, ranking_loss_nats
from tests.objectives.shapes import build

DATA = ROOT / "tests" / "data" / "accuracy" / "validation.csv"
TIE_FRAC = 0.01  # policy: "comparable" read as within 1% of loss
WITHIN_FACTOR = 2.0


def _loss(shape: str, tokens: float, precision: str, ranked: bool, metric: str = "loss") -> float:
    arch = build(shape)
    if metric == "params":
        return predict_loss(arch, tokens, precision).effective_params
    if ranked:
        return ranking_loss_nats(arch, tokens, precision)
    return predict_loss(arch, tokens, precision).loss_nats


def evaluate_row(row: dict, ranked: bool = False) -> dict:
    metric, a, b = row["metric"], float(row["value_a"]), float(row["value_b"])
    loss_a = _loss(row["shape_a"], float(row["tokens_a"]), row["precision_a"], ranked, metric)
    loss_b = _loss(row["shape_b"], float(row["tokens_b"]), row["precision_b"], ranked, metric)
    pred = loss_b / loss_a - 1
    published, within = None, None
    if metric in ("loss", "params"):
        published = b / a - 1
        sign = pred * published > 0
        ratio = pred / published if published else float("inf")
        within = 1 / WITHIN_FACTOR <= ratio <= WITHIN_FACTOR
    elif metric == "accuracy":
        published = b - a
        sign = pred * published < 0
    else:
        sign = abs(pred) <= TIE_FRAC
    return {"id": row["id"], "family": row["family"], "role": row["role"], "metric": metric,
            "pred_frac": pred, "published": published, "sign_agrees": sign,
            "within_2x": within}  # fmt: skip


def summarize(results: list[dict]) -> dict:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in results:
        groups[(r["role"], r["family"])].append(r)
        groups[(r["role"], "all")].append(r)
    summary = {}
    for (role, family), rows in sorted(groups.items()):
        sized = [r for r in rows if r["within_2x"] is not None]
        summary[f"{role}/{family}"] = {
            "rows": len(rows), "sign_agree": sum(r["sign_agrees"] for r in rows),
            "sized_rows": len(sized), "within_2x": sum(r["within_2x"] for r in sized),
        }  # fmt: skip
    return summary


def _print(results: list[dict], summary: dict) -> None:
    print(f"{'id':32s} {'family':12s} {'metric':8s} {'pred':>8s} {'published':>10s} sign 2x")
    for r in results:
        pub = (
            ""
            if r["published"] is None
            else (
                f"{r['published']:+.2%}"
                if r["metric"] in ("loss", "params")
                else f"{r['published']:+.2f}pt"
            )
        )
        within = "" if r["within_2x"] is None else ("yes" if r["within_2x"] else "no")
        print(f"{r['id']:32s} {r['family']:12s} {r['metric']:8s} {r['pred_frac']:+8.2%} {pub:>10s} "
              f"{'yes' if r['sign_agrees'] else 'NO ':4s} {within}")  # fmt: skip
    print()
    for key, s in summary.items():
        sized = f"{s['within_2x']}/{s['sized_rows']}" if s["sized_rows"] else "-"
        print(f"{key:26s} sign {s['sign_agree']}/{s['rows']} ({s['sign_agree'] / s['rows']:.0%})  "
              f"within 2x {sized}")


def validate(path: Path = DATA, ranked: bool = False) -> tuple[list[dict], dict]:
    with path.open() as handle:
        results = [evaluate_row(row, ranked) for row in csv.DictReader(handle)]
    return results, summarize(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranked", action="store_true", help="compare ranked (pessimistic) losses")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results, summary = validate(DATA, args.ranked)
    if args.json:
        print(json.dumps({"rows": results, "summary": summary}, indent=1))
    else:
        _print(results, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
