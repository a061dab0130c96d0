"""The leave-one-source-out figures as a JSON document and as printed tables: the headline
(left-out beside in-sample and shipped, dense and MoE apart), per source, per engine, the
ablation of each fitted term, the fitted terms of every fold, and the ranking."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict

from tests.benchmarks.serving.config import MAX_MODEL_SHARE, METRICS
from tests.benchmarks.serving.loso import FITTED, LosoRun
from tests.benchmarks.serving.metrics import _by_kind, capped
from tests.benchmarks.serving.ranking import ranking
from tests.benchmarks.serving.scenarios import ttft_not_scored

SETS = ("left_out", "in_sample", "shipped")


def _figures(results: list, keep: list[bool]) -> dict:
    """Dense/MoE figures of the results kept (overall, capped per model), per source, per engine."""
    groups = {"per_source": defaultdict(list), "per_engine": defaultdict(list)}
    for r, k in zip(results, keep):
        if k:
            groups["per_source"][r.source].append(r)
            groups["per_engine"][r.engine or "other"].append(r)
    return {name: {key: _by_kind(rs) for key, rs in sorted(g.items())}
            for name, g in groups.items()}


def _terms_json(terms) -> dict:
    return {"host_us": dict(terms.host_us),
            "moe": {str(e) if e else "generic": v for e, v in terms.moe},
            "ttft": {e: {_ms_name(k): _ms_value(k, v) for k, v in asdict(t).items()}
                     for e, t in terms.ttft}}


def _ms_name(field: str) -> str:
    return field[:-2] + "_ms" if field.endswith("_s") else field


def _ms_value(field: str, value):
    return round(value * 1e3, 3) if field.endswith("_s") and value is not None else value


def _sets(run: LosoRun, config_run) -> dict[str, list]:
    return {"left_out": config_run.left_out, "in_sample": config_run.in_sample,
            "shipped": run.shipped_results}


def loso_document(run: LosoRun) -> dict:
    """Everything `print_loso` prints, JSON-ready. Each figure is over the rows scored under
    all three fits (left-out, in-sample, shipped): a row a fit leaves out (no modelled point
    meets its SLA) is counted in `not_scored`; the capped figures keep the rows the shipped
    scoring's per-model cap keeps (`metrics.capped`)."""
    kept_ids = {id(r) for r in capped(run.shipped_results)[0]}
    capped_mask = [id(r) in kept_ids for r in run.shipped_results]
    configs = {}
    for name, cr in run.runs.items():
        sets = _sets(run, cr)
        both = [all(s[i] is not None for s in sets.values()) for i in range(len(run.rows))]
        entry = {"terms": {"in_sample": _terms_json(cr.in_sample_terms),
                           "folds": {s: _terms_json(t) for s, t in cr.fold_terms.items()}},
                 "not_scored": {k: sum(r is None for r in v) for k, v in sets.items()},
                 "seconds": round(cr.seconds, 1)}
        for key, results in sets.items():
            kept = [r for r, b in zip(results, both) if b]
            entry[key] = {"overall": _by_kind(kept),
                          "capped": _by_kind([r for r, b, c in zip(results, both, capped_mask)
                                              if b and c]),
                          **_figures(results, both)}
        configs[name] = entry
    fitted = run.runs[FITTED]
    return {"sources": run.sources, "rows": len(run.rows), "capped_rows": sum(capped_mask),
            "check": run.check, "seconds": {k: round(v, 1) for k, v in run.seconds.items()},
            "configs": configs, "ttft_not_scored": ttft_not_scored(run.rows, fitted.left_out),
            "ranking": {key: ranking(run.rows, results)
                        for key, results in _sets(run, fitted).items()},
            "row_errors": [{"source": r.source, "regime": r.regime,
                            **{key: (None if res[i] is None else res[i].error_frac)
                               for key, res in _sets(run, fitted).items()}}
                           for i, r in enumerate(run.rows)]}


# ---- printing ------------------------------------------------------------------------------

LABELS = ("TPOT", "TTFT", "tok/s/GPU")


def _p1(value, signed: bool = False) -> str:
    """A fraction in percent with one decimal ("-" for none)."""
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def print_loso(doc: dict) -> None:
    print("leave-one-source-out: each source's rows scored with the fitted serving terms (host "
          "time per host CPU kind, the benchmark client's t_request per engine with enough rows; "
          "each engine's fused-MoE kernels as shipped) fitted on the other sources' rows; "
          "in-sample: fitted on all rows; shipped: the constants in cost_model/data. Median "
          "|pred/meas - 1| (bias: signed median)")
    print(f"  {len(doc['sources'])} sources: {', '.join(doc['sources'])}")
    worst = doc["check"]["worst_relative_difference"]
    print(f"  fast path vs the full cost model on {doc['check']['rows']} rows: worst relative "
          f"difference {max(worst.values()):.1e} (shipped, perturbed, batched terms)")
    print(f"  seconds: {', '.join(f'{k} {v:.0f}' for k, v in doc['seconds'].items())}")
    fitted = doc["configs"][FITTED]
    print(f"\nheadline: capped at {MAX_MODEL_SHARE:.0%} of the rows per model "
          f"({doc['capped_rows']} rows), then all {doc['rows']} rows")
    for part in ("capped", "overall"):
        _print_sets(fitted, part)
    print(f"  not scored under a fit: {fitted['not_scored']}")
    for reason, n in doc.get("ttft_not_scored", {}).items():
        print(f"  measured TTFT not scored ({n} rows): {reason}")
    for axis in ("per_source", "per_engine"):
        print(f"\n{axis.replace('_', ' ')}: left-out |error| (bias), in-sample |error| beside")
        _print_axis(fitted, axis)
    print_ablations(doc)
    print_terms(doc)
    print_ranking(doc["ranking"])


def _print_sets(entry: dict, part: str) -> None:
    print(f"{part + ' / models':<26}{'n':>17}" + "".join(f"{label + ' |e|':>14}{'bias':>8}"
                                                        for label in LABELS))
    for kind in ("dense", "moe"):
        for key in SETS:
            stats = entry[key][part][kind]
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            cells = "".join(f"{_p1(stats[m]['median_abs_error_frac']):>14}"
                            f"{_p1(stats[m]['median_error_frac'], True):>8}" for m in METRICS)
            print(f"{kind + ' ' + key:<26}{counts:>17}{cells}")


def _print_axis(entry: dict, axis: str) -> None:
    print(f"{'':<36}{'n':>14}" + "".join(f"{label:>24}" for label in LABELS))
    for key, kinds in entry["left_out"][axis].items():
        for kind, stats in kinds.items():
            if not any(stats[m]["n"] for m in METRICS):
                continue
            inside = entry["in_sample"][axis][key][kind]
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            cells = "".join(f"{_p1(stats[m]['median_abs_error_frac']):>7} "
                            f"({_p1(stats[m]['median_error_frac'], True):>7}) "
                            f"{_p1(inside[m]['median_abs_error_frac']):>7}"
                            for m in METRICS)
            print(f"{key[:30] + ' ' + kind:<36}{counts:>14}{cells}")


def print_ablations(doc: dict) -> None:
    print("\nablations (all rows): median |error| left-out / in-sample; each configuration "
          "fitted as a whole (a term off, reduced, or fitted where the product does not)")
    print(f"{'configuration':<56}{'models':<7}" + "".join(f"{label:>17}" for label in LABELS))
    for name, entry in doc["configs"].items():
        for kind in ("dense", "moe"):
            cells = "".join(
                f"{_p1(entry['left_out']['overall'][kind][m]['median_abs_error_frac']):>9} /"
                f"{_p1(entry['in_sample']['overall'][kind][m]['median_abs_error_frac']):>6}"
                for m in METRICS)
            print(f"{name[:55]:<56}{kind:<7}{cells}")


def _terms_text(terms: dict) -> str:
    hosts = ", ".join(f"{k} {v:.0f}" for k, v in terms["host_us"].items())
    moe = ", ".join(f"{k} {v}" for k, v in terms["moe"].items())
    ttft = ", ".join(f"{k} {v['request_overhead_ms']:.0f}/{v['queue_share_frac']:.2f}/"
                     f"{v['round_wait_share_frac']:.2f}" for k, v in terms["ttft"].items())
    return f"host {hosts}; MoE {moe}; TTFT {ttft}"


def print_terms(doc: dict) -> None:
    print("\nfitted terms (host µs per sequence per step; fused-MoE variant; TTFT t_request ms/"
          "q/w per engine table)")
    fitted = doc["configs"][FITTED]["terms"]
    for name, terms in (("in-sample", fitted["in_sample"]), *fitted["folds"].items()):
        label = name if name == "in-sample" else f"without {name}"
        print(f"  {label:<38} {_terms_text(terms)}")
    print("  in-sample fit of each ablation:")
    for name, entry in doc["configs"].items():
        if name != FITTED:
            print(f"  {name[:55]:<56} {_terms_text(entry['terms']['in_sample'])}")


def print_ranking(rank: dict) -> None:
    print("\nranking of deployments by tokens/s/GPU within (source, model, GPU, ISL/OSL, "
          "concurrency or offline or SLA): mean Kendall τ-b over groups; pooled pairs whose "
          "measured values differ (by > 3%): share the model orders right, τ = 2·share − 1")
    for key in SETS:
        for source, st in rank[key].items():
            if source != "all" and key != "left_out":
                continue
            tau = "-" if st["mean_tau_b"] is None else f"{st['mean_tau_b']:.3f}"
            pairs = "  ".join(_pair_text(st[f"pairs_{p}"]) for p in ("all", "band"))
            print(f"  {key + ' ' + source:<42} groups {st['groups']:>4}  mean τ-b {tau:>6}  "
                  f"{pairs}")
    print("  left-out pairs outside ±3% by what differs between the two deployments: pairs, "
          "ordered wrong (of which the model's own gap is beyond ±3%)")
    for kind, n in rank["left_out"]["all"].get("by_kind", {}).items():
        print(f"    {kind:<28} {n['pairs']:>5}  wrong {n['wrong']:>4} ({n['wrong_band']:>4})  "
              f"right {1 - n['wrong'] / n['pairs']:.1%}")


def _pair_text(p: dict) -> str:
    if not p["pairs"]:
        return "pairs 0"
    return f"pairs {p['pairs']:>5} right {p['agree_frac']:.1%} (τ {p['tau_pooled']:.3f})"
