"""Adversarial probe of the accuracy proxy (issue 11), for the closing note.

1. Each degenerate archetype (`tests/objectives/probe.py`) against its standard shape: central and
   ranked loss, the gap, the hard flags and the terms that moved.
2. Each shipped study (studies/*.toml): the design minimizing the ranked loss alone inside the
   study's space, parameter budget and aspect-ratio rules (random sampling, then coordinate
   descent), its shape, terms and flags, and whether it is degenerate by the issue's list.
3. dense-8b-h200: the best ranked loss of a 4 q / 4 KV × 64 design against the optimum (the
   issue's "+1.7–3.9% with a 4× smaller KV cache").

Usage: python tests/benchmarks/bench_accuracy_probe.py [--samples 3000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from objectives import predict_loss
from tests.objectives.probe import (
    ARCHETYPES,
    _options,
    _polish,
    _score,
    degeneracies,
    load_studies,
    loss_only_optimum,
)  # fmt: skip
from objectives import architecture_from_shape


def _moved(proxy) -> dict:
    return {
        name: round(value, 4) for name, value in proxy.penalties.items() if abs(value - 1) > 5e-5
    }


def archetype_rows() -> list[dict]:
    rows = []
    for a in ARCHETYPES:
        deg, std = (
            predict_loss(architecture_from_shape(a.degenerate), a.tokens),
            predict_loss(architecture_from_shape(a.standard), a.tokens),
        )
        rows.append({"archetype": a.name, "degenerate": a.degenerate, "standard": a.standard,
                     "central": [deg.loss_nats, std.loss_nats],
                     "ranked": [deg.ranked_loss_nats, std.ranked_loss_nats],
                     "ranked_gap_frac": deg.ranked_loss_nats / std.ranked_loss_nats - 1,
                     "degenerate_terms": _moved(deg), "degenerate_hard_flags": list(deg.hard_flags),
                     "passes": deg.ranked_loss_nats > std.ranked_loss_nats})  # fmt: skip
    return rows


def study_rows(samples: int) -> list[dict]:
    rows = []
    for spec in load_studies():
        start = time.perf_counter()
        params, best, arch = loss_only_optimum(spec, samples=samples)
        proxy = predict_loss(arch, spec.budget.training_tokens, spec.budget.training_precision)
        rows.append({"study": spec.name, "seconds": time.perf_counter() - start, "shape": arch.name,
                     "ranked_loss": best, "band": [proxy.band_low_nats, proxy.band_high_nats],
                     "terms": _moved(proxy), "hard_flags": list(proxy.hard_flags),
                     "degenerate": degeneracies(arch)})  # fmt: skip
    return rows


def narrow_kv_row(samples: int) -> dict:
    """dense-8b-h200 restricted to 4 query / 4 KV heads of 64 against its unrestricted optimum."""
    spec = next(s for s in load_studies() if s.name == "dense-8b-h200")
    _, free, _ = loss_only_optimum(spec, samples=samples)
    options = {**_options(spec), "num_kv_heads": [4], "q_per_kv": [1], "head_dim": [64]}
    start = {name: values[len(values) // 2] for name, values in options.items()}
    params, narrow = _polish(spec, options, start, _score(spec, start), rounds=4)
    return {
        "study": spec.name,
        "optimum": free,
        "best_4q4kv_x64": narrow,
        "gap_frac": narrow / free - 1,
    }


def _print(doc: dict) -> None:
    print("degenerate archetypes (ranked loss, degenerate vs standard):")
    for r in doc["archetypes"]:
        print(
            f"  {r['archetype']:18s} {r['ranked'][0]:.4f} vs {r['ranked'][1]:.4f} "
            f"({r['ranked_gap_frac']:+.2%}) {'ok' if r['passes'] else 'FAIL'}  "
            f"terms {r['degenerate_terms']}"
        )
        for flag in r["degenerate_hard_flags"]:
            print(f"      {flag}")
    print("\nloss-only optimum per shipped study:")
    for r in doc["studies"]:
        print(f"  {r['study']:26s} {r['shape']}  ranked {r['ranked_loss']:.4f}  band "
              f"[{r['band'][0]:.4f}, {r['band'][1]:.4f}]  ({r['seconds']:.1f}s)")
        print(f"      terms {r['terms']}  hard flags {len(r['hard_flags'])}  degenerate: "
              f"{', '.join(r['degenerate']) or 'no'}")  # fmt: skip
    k = doc["narrow_kv"]
    print(
        f"\n{k['study']}: best 4q/4kv x 64 ranked {k['best_4q4kv_x64']:.4f} "
        f"vs optimum {k['optimum']:.4f} "
        f"({k['gap_frac']:+.2%})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    doc = {"archetypes": archetype_rows(), "studies": study_rows(args.samples),
           "narrow_kv": narrow_kv_row(args.samples)}  # fmt: skip
    print(json.dumps(doc, indent=1)) if args.json else _print(doc)
    return 0 if all(r["passes"] for r in doc["archetypes"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
