"""Printing the comparison: per model × GPU, dense vs MoE, per source, by statistic, capped,
skipped rows, format pairs; and the grown development set's report document."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.benchmarks.serving.config import (
    ABS_WIDTH, BIAS_WIDTH, FORMAT_PAIRS_CSV, MAX_MODEL_SHARE, METRIC_LABELS, METRICS,
    TRTLLM_BENCH_MAX_BATCH,
)
from tests.benchmarks.serving.metrics import (
    _by_kind, _p99_over_mean, by_statistic, capped, per_source, sla_tpot, summarize,
    ttft_by_client,
)
from tests.benchmarks.serving.pairs import (
    _read_pairs, pair_groups, print_pairs, score_format_pairs,
)
from tests.benchmarks.serving.sources import scored_totals, source_table

def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.0f}%"


def _abs_pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _cells(stats: dict) -> str:
    return "".join(f"{_abs_pct(stats[m]['median_abs_error_frac']):>{ABS_WIDTH}}"
                   f"{_pct(stats[m]['median_error_frac']):>{BIAS_WIDTH}}" for m in METRICS)


def _header(first: str) -> str:
    return first + "".join(
        f"{label + ' |e|':>{ABS_WIDTH}}{'bias':>{BIAS_WIDTH}}" for label in METRIC_LABELS
    )


def print_report(summary: dict, data_path: Path) -> None:
    print(f"serving validation: {data_path}")
    print(f"rows evaluated {summary['rows_evaluated']}, skipped {summary['rows_skipped']}; "
          "error = pred/meas - 1: median |error| then signed median (bias)")
    print("regime: fixed = at the row's concurrency; max = best throughput up to min(memory limit, "
          f"{TRTLLM_BENCH_MAX_BATCH} per DP rank, the run's requests) over the run's waves vs "
          "trtllm-bench offline max load\n")
    print(_header(f"{'model':<26} {'gpu':<9} {'regime':<6} {'n':>4}"))
    for g in summary["groups"]:
        print(
            f"{g['model']:<26} {g['gpu']:<9} {g['regime']:<6} {g['rows']:>4}{_cells(g['metrics'])}"
        )
    print()
    _print_overall(summary)


def _print_combined(summary: dict, paths: list[Path]) -> None:
    print(f"serving validation, combined: {' + '.join(str(p) for p in paths)}")
    print(f"rows evaluated {summary['rows_evaluated']}, skipped {summary['rows_skipped']}\n")
    _print_overall(summary)
    print("\ndeclared split by configuration (split_half): the benchmark-TTFT terms are fitted "
          "on `fit` only")
    print(_header(f"{'half / models':<26} {'n':>21}"))
    for half, kinds in summary["halves"].items():
        for kind, stats in kinds.items():
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            print(f"{half + ' ' + kind:<26} {counts:>21}{_cells(stats)}")


def _print_overall(summary: dict) -> None:
    """The dense / MoE overall table and the skipped rows by reason."""
    print("overall (n per metric: TPOT / TTFT / tok/s/GPU)")
    print(_header(f"{'models':<26} {'n':>21}"))
    for kind, stats in summary["overall"].items():
        counts = "/".join(str(stats[m]["n"]) for m in METRICS)
        print(f"{kind:<26} {counts:>21}{_cells(stats)}")
    print("\nskipped rows by reason")
    for reason, count in summary["skipped"].items():
        print(f"{count:>5}  {reason}")


def _fmt_table(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def print_sources(table: dict, totals: dict | None = None) -> None:
    print("source table: rows in the CSVs (scored) by family, engine and GPU")
    for kind, t in table.items():
        print(f"  {kind}: {t['rows']} rows ({t['scored']} scored)")
        for axis in ("family", "engine", "gpu"):
            print(f"      {axis:<7} {_fmt_table(t[axis])}")
        if t.get("scored") and t.get("scored_by"):
            for axis in ("family", "engine", "gpu"):
                print(f"      scored {axis:<7} {_fmt_table(t['scored_by'][axis])}")
        for reason, n in t.get("skipped", {}).items():
            print(f"      skipped {n:>4}  {reason}")
    if totals:
        print("  all scored rows:")
        for axis in ("family", "engine", "gpu"):
            print(f"      {axis:<7} {len(totals[axis])}: {_fmt_table(totals[axis])}")
        print(f"      largest model share {totals['largest_model_share']:.0%}, after the cap "
              f"{totals['largest_model_share_capped']:.0%}")


def print_per_source(errors: dict) -> None:
    print("\nper-source errors (n per metric: TPOT / TTFT / tok/s/GPU)")
    print(_header(f"{'source / models':<34} {'n':>13}"))
    for kind, kinds in errors.items():
        for models, stats in kinds.items():
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            if any(stats[m]["n"] for m in METRICS):
                print(f"{kind[:28] + ' ' + models:<34} {counts:>13}{_cells(stats)}")


def print_statistics(stats: dict, p99: dict) -> None:
    print("\nby the statistic each row reports (model: steady-state TPOT, benchmark TTFT)")
    _print_error_rows(stats, key_width=16)
    ratios = ", ".join(f"{m.upper()} {v:.2f}" for m, v in p99.items() if v is not None)
    print(f"  p99/mean in the MLPerf logs (median over rows): {ratios or '-'}; the SLA scoring "
          "takes the p99 TTFT under Poisson arrivals (cost_model.arrival_queue) and p99 TPOT = "
          "the model's TPOT (_predict_sla)")


def print_clients(stats: dict) -> None:
    print("\nTTFT by the benchmark's client (fixed: closed loop; rate: Poisson arrivals; sla: "
          "MLPerf Server/Interactive, Poisson at its measured rate; max: offline run; "
          "p99: the published p99 TTFT vs the model's under the same client)")
    _print_error_rows(stats, key_width=16)


def print_sla_tpot(stats: dict) -> None:
    print("\nMLPerf SLA rows' TPOT by the criterion that picks the point (sla criterion: the "
          "model's p99 TTFT under Poisson arrivals; closed-loop proxy: its closed-loop mean TTFT "
          "as the p99)")
    _print_error_rows(stats, key_width=18)


def _print_error_rows(stats: dict, key_width: int) -> None:
    """One line per group: its row count, median |error| and median signed error (bias)."""
    for key, st in stats.items():
        print(f"  {key:<{key_width}} n {st['n']:>4}   median |error| "
              f"{_abs_pct(st['median_abs_error_frac'])}   bias {_pct(st['median_error_frac'])}")


def grown_report(all_rows, all_results, all_skipped, grown_rows, grown_results, grown_skipped,
                 data_dir: Path, skipped_by_source: Counter | None = None) -> dict:
    kept, cut = capped(all_results)
    pairs, pair_lines, pair_skipped = score_format_pairs(_read_pairs(FORMAT_PAIRS_CSV), data_dir)
    return {"grown": {**summarize(grown_results, grown_skipped)},
            "sources": source_table(all_rows, all_results, skipped_by_source),
            "scored_totals": scored_totals(all_results),
            "per_source": per_source(all_results),
            "by_statistic": by_statistic(all_results),
            "ttft_by_client": ttft_by_client(all_results),
            "sla_tpot": sla_tpot(all_results),
            "p99_over_mean": _p99_over_mean(all_rows),
            "capped": {"cut": {m: list(v) for m, v in cut.items()}, "overall": _by_kind(kept),
                       "rows": len(kept)},
            "format_pairs": pairs, "format_pair_lines": pair_lines,
            "format_pair_groups": pair_groups(pair_lines),
            "format_pair_skipped": dict(pair_skipped), "all_skipped": dict(all_skipped)}


def print_grown(report: dict, paths: list[Path]) -> None:
    print("grown development set: " + " + ".join(p.name for p in paths))
    g = report["grown"]
    print(f"rows evaluated {g['rows_evaluated']}, skipped {g['rows_skipped']}\n")
    _print_overall(g)
    print("\n" + "=" * 100 + "\n\nall sources together (published + development + grown)\n")
    print_sources(report["sources"], report.get("scored_totals"))
    print_per_source(report["per_source"])
    print_statistics(report["by_statistic"], report["p99_over_mean"])
    print_clients(report["ttft_by_client"])
    print_sla_tpot(report.get("sla_tpot", {}))
    cap = report["capped"]
    cut = ", ".join(f"{m.split(':')[-1]} {n}→{k}" for m, (n, k) in cap["cut"].items())
    print(f"\ncapped at {MAX_MODEL_SHARE:.0%} of the rows per model ({cut or 'none cut'}; "
          f"{cap['rows']} rows)")
    print(_header(f"{'models':<26} {'n':>21}"))
    for kind, stats in cap["overall"].items():
        counts = "/".join(str(stats[m]["n"]) for m in METRICS)
        print(f"{kind:<26} {counts:>21}{_cells(stats)}")
    print("\nskipped rows by reason (all sources)")
    for reason, count in sorted(report["all_skipped"].items(), key=lambda kv: -kv[1]):
        print(f"{count:>5}  {reason}")
    print_pairs(report["format_pairs"], report["format_pair_lines"],
                Counter(report["format_pair_skipped"]), report.get("format_pair_groups"))
