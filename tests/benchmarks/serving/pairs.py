"""Format pairs (tests/data/serving/format_pairs.csv): the same deployment measured in two number
formats; the model's a/b ratios of TPOT and tokens/s/GPU against the measured ones."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

from tests.benchmarks.serving.config import FORMAT_PAIR_BAND
from tests.benchmarks.serving.rows import Skip, _number, engine_of
from tests.benchmarks.serving.scenarios import evaluate_row

def _pair_row(pair: dict[str, str], side: str) -> dict[str, str]:
    """One side of a format pair as a CSV row `evaluate_row` reads."""
    row = {c: pair.get(c, "") for c in ("model", "gpu", "framework", "tp", "ep", "attention_dp",
                                        "isl", "osl", "concurrency", "source_kind", "num_gpus",
                                        "precision", "moe_precision", "kv_precision",
                                        "scenario", "requests", "max_batch")}
    row.update(pp="1", mode="agg", spec_decode="none", prefill_config="", decode_config="",
               derived_fields="", notes="", tpot_ms=pair[f"tpot_ms_{side}"],
               ttft_ms=pair[f"ttft_ms_{side}"],
               output_tokens_per_s_per_gpu=pair[f"output_tokens_per_s_per_gpu_{side}"])
    row[pair["field"]] = pair[f"format_{side}"]
    return row


def format_pair_ratio_errors(pred: np.ndarray, meas: np.ndarray,
                             band: float = FORMAT_PAIR_BAND) -> dict[str, float | int | None]:
    """Agreement on the faster format (pairs whose measured ratio is outside 1 ± band) and the
    median |predicted ratio − measured ratio| over all pairs."""
    decided = np.abs(meas - 1.0) > band
    agree = np.sign(np.log(pred[decided])) == np.sign(np.log(meas[decided]))
    return {"pairs": int(meas.size), "decided": int(decided.sum()),
            "faster_agree_frac": float(agree.mean()) if decided.any() else None,
            "median_abs_ratio_error": float(np.median(np.abs(pred - meas))) if meas.size else None,
            "median_measured_ratio": float(np.median(meas)) if meas.size else None,
            "median_predicted_ratio": float(np.median(pred)) if meas.size else None}


def pair_group(pair: dict[str, str]) -> str:
    """A format pair's group: its source, the field that differs and the two formats."""
    return f"{pair.get('source_kind', '')} {pair['field']} {pair['format_a']}/{pair['format_b']}"


def score_format_pairs(pairs: list[dict[str, str]], data_dir: Path) -> tuple[dict, list, Counter]:
    """The model's a/b ratios of TPOT and tokens/s/GPU against the measured ones (each line
    carries its `group`, `pair_group`)."""
    archs, lines, skipped = {}, [], Counter()
    for pair in pairs:
        try:
            a, b = (evaluate_row(_pair_row(pair, side), data_dir, archs) for side in "ab")
        except Skip as reason:
            skipped[str(reason)] += 1
            continue
        concurrency = "" if _number(pair["concurrency"]) is None else f" c{pair['concurrency']}"
        line = {"pair": f"{pair['model']} {pair['gpu']} {engine_of(pair) or pair['framework']} "
                        f"{a.deployment} {pair['isl']}/{pair['osl']}{concurrency} "
                        f"{pair['format_a']}/{pair['format_b']}", "group": pair_group(pair)}
        for metric in PAIR_METRICS:
            key = "tpot_s" if metric == "tpot" else metric
            if a.measured[key] and b.measured[key]:
                line[metric] = (a.predicted[metric] / b.predicted[metric],
                                a.measured[key] / b.measured[key])
        lines.append(line)
    return _pair_summary(lines), lines, skipped


PAIR_METRICS = ("tpot", "tokens_per_s_per_gpu")


def _pair_summary(lines: list[dict]) -> dict:
    """`format_pair_ratio_errors` per metric over the lines that have it."""
    out = {}
    for metric in PAIR_METRICS:
        have = [line[metric] for line in lines if metric in line]
        pred, meas = (np.array([p[i] for p in have]) for i in (0, 1))
        out[metric] = format_pair_ratio_errors(pred, meas)
    return out


def pair_groups(lines: list[dict]) -> dict:
    """The pair figures per group (`pair_group`)."""
    return {g: _pair_summary([line for line in lines if line["group"] == g])
            for g in sorted({line["group"] for line in lines})}


def _read_pairs(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def print_pairs(summary: dict, lines: list, skipped: Counter, groups: dict | None = None) -> None:
    print("\nformat pairs (tests/data/serving/format_pairs.csv): ratio a/b, predicted vs measured")
    for line in lines:
        cells = "  ".join(f"{m.split('_')[0]} {line[m][0]:.2f} vs {line[m][1]:.2f}"
                          for m in PAIR_METRICS if m in line)
        print(f"  {line['pair']}: {cells}")
    for group, by_metric in (groups or {}).items():
        print(f"  group {group}:")
        _print_pair_figures(by_metric, "    ")
    print("  all pairs:")
    _print_pair_figures(summary, "    ")
    for reason, count in skipped.items():
        print(f"  skipped {count}: {reason}")


def _print_pair_figures(summary: dict, indent: str) -> None:
    for metric, st in summary.items():
        if not st["pairs"]:
            continue
        agree = "-" if st["faster_agree_frac"] is None else f"{st['faster_agree_frac']:.0%}"
        err = "-" if st["median_abs_ratio_error"] is None else f"{st['median_abs_ratio_error']:.3f}"
        medians = f"measured median {st['median_measured_ratio'] or 0:.2f}, " \
                  f"model {st['median_predicted_ratio'] or 0:.2f}"
        print(f"{indent}{metric}: {st['pairs']} pairs, faster format agrees {agree} of the "
              f"{st['decided']} outside ±{FORMAT_PAIR_BAND:.0%}, median |ratio error| {err} "
              f"({medians})")
