"""Rebuild the InferenceX rows of published_ttft_tpot.csv from the InferenceX-app fixture files.

The fixtures are JSON exports of SemiAnalysis InferenceX benchmark records, as kept in the
`packages/app/cypress/fixtures/api/` folder of the InferenceX app (see SOURCES.md for the exact
commits). Pass the four files in the order (label, path):

    python tests/data/serving/extract_inferencex.py OUT.csv \
        528c414:benchmarks.json=/tmp/bench_528.json \
        528c414:benchmarks-history.json=/tmp/hist_528.json \
        cac6246:benchmarks.json=/tmp/bench_cac.json \
        cac6246:benchmarks-history.json=/tmp/hist_cac.json

Only aggregated (disagg false), non-speculative (spec_method "none") records on catalog GPUs are
kept; one row per distinct (configuration, GitHub Actions run); rows already in
tests/data/serving_published.csv (same run, GPU, parallelism, ISL/OSL, concurrency) are left out.
A row whose median TTFT is above SUSPECT_TTFT_RATIO x the median over the runs of its configuration
(configurations with at least 3 runs) says so in its notes; it is kept. Rows of OUT.csv from other
sources (source_kind not "inferencex") are kept, after the InferenceX rows.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

REPO = "vngcloud/InferenceX-app"
COMMITS = {"528c414": "528c4146b8f502fcbce8df7870a935a970cbae25",
           "cac6246": "cac6246e9fef70841e48e1434cbf10bb9a2802a8"}
GPUS = {"h100": "H100-SXM", "h200": "H200", "b200": "B200", "b300": "B300", "gb200": "GB200",
        "gb300": "GB300"}
MODELS = {"dsr1": "DeepSeek-R1-0528"}
SUSPECT_TTFT_RATIO, SUSPECT_MIN_RUNS = 4.0, 3
EXISTING = Path(__file__).resolve().parents[1] / "serving_published.csv"


def columns() -> list[str]:
    with EXISTING.open(newline="", encoding="utf-8") as f:
        return next(csv.reader(f))


def existing_keys() -> set[tuple]:
    keys = set()
    with EXISTING.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["source_kind"] != "inferencex":
                continue
            run = r["source_url"].split(" ")[0]
            keys.add((run, r["gpu"], int(float(r["tp"])), int(float(r["ep"] or 1)),
                      r["attention_dp"] == "True", int(float(r["isl"])), int(float(r["osl"])),
                      int(float(r["concurrency"])), r["precision"], r["framework"]))
    return keys


def rows(files: list[tuple[str, Path]]) -> list[dict[str, str]]:
    seen, out, skip = set(), [], existing_keys()
    for label, path in files:
        commit, name = label.split(":", 1)
        fixture_url = (f"https://github.com/{REPO}/blob/{COMMITS[commit]}"
                       f"/packages/app/cypress/fixtures/api/{name}")
        for x in json.loads(path.read_text(encoding="utf-8")):
            if (x["disagg"] or x["spec_method"] != "none" or x["hardware"] not in GPUS
                    or x["model"] not in MODELS):
                continue
            gpu, tp, ep = GPUS[x["hardware"]], x["decode_tp"], x["decode_ep"]
            dpa = bool(x["decode_dp_attention"])
            key = (x["run_url"], gpu, tp, ep, dpa, x["isl"], x["osl"], x["conc"], x["precision"],
                   x["framework"])
            if key in seen or key in skip:
                continue
            seen.add(key)
            m = x["metrics"]
            if "mean_tpot" in m:
                tpot, tpot_name = m["mean_tpot"], "mean_tpot"
            else:
                tpot, tpot_name = m["median_tpot"], "median_tpot"
            per_gpu = m.get("output_tput_per_gpu")
            out.append({
                "model": MODELS[x["model"]], "gpu": gpu, "num_gpus": str(tp),
                "framework": x["framework"],
                "precision": x["precision"], "tp": str(tp), "ep": str(ep), "pp": "1",
                "isl": str(x["isl"]), "osl": str(x["osl"]), "concurrency": str(x["conc"]),
                "output_tokens_per_s_per_gpu": "" if per_gpu is None else f"{per_gpu:.3f}",
                "tokens_per_s_per_user": f"{m['median_intvty']:.3f}",
                "tpot_ms": f"{1000 * tpot:.4f}", "ttft_ms": f"{1000 * m['median_ttft']:.2f}",
                "source_url": f"{x['run_url']} (record in {fixture_url})", "date": x["date"],
                "source_kind": "inferencex", "mode": "agg", "attention_dp": str(dpa),
                "spec_decode": "none", "prefill_config": "", "decode_config": "",
                "framework_version": x.get("image") or "",
                "total_output_tokens_per_s": "" if per_gpu is None else f"{per_gpu * tp:.1f}",
                "derived_fields": f"tpot_ms={tpot_name}*1000; ttft_ms=median_ttft*1000; "
                                  "num_gpus=decode_tp; "
                                  "total_output_tokens_per_s=output_tput_per_gpu*tp",
                "notes": (f"InferenceX (ex-InferenceMAX) record from {name}: output_tput_per_gpu, "
                          "median interactivity (tok/s/user), median TTFT, "
                          f"{tpot_name.replace('_', ' ').upper()}. "
                          "Random ISL/OSL around the nominal values (mean below nominal; "
                          "measured OSL ~0.9x). "
                          f"model key \"{x['model']}\" (DeepSeek-R1-0528). num_gpus = tp "
                          "(fixture num_*_gpu reads tp*ep, an artifact; output_tput_per_gpu is per "
                          "tp GPUs). Same configuration may recur on other dates/software versions "
                          "(one row per GitHub Actions run)."),
            })
    return out


def config_key(r: dict[str, str]) -> tuple:
    return tuple(r[c] for c in ("gpu", "framework", "precision", "tp", "ep", "attention_dp", "isl",
                                "osl", "concurrency"))


def flag_suspect(result: list[dict[str, str]]) -> int:
    """Say in the notes which rows' TTFT is far above the other runs of the same configuration."""
    groups: dict[tuple, list[dict[str, str]]] = {}
    for r in result:
        groups.setdefault(config_key(r), []).append(r)
    flagged = 0
    for runs in groups.values():
        if len(runs) < SUSPECT_MIN_RUNS:
            continue
        ttfts = sorted(float(r["ttft_ms"]) for r in runs)
        mid = len(ttfts) // 2
        median = ttfts[mid] if len(ttfts) % 2 else (ttfts[mid - 1] + ttfts[mid]) / 2
        for r in runs:
            if float(r["ttft_ms"]) > SUSPECT_TTFT_RATIO * median:
                r["notes"] += (f" SUSPECT: TTFT {float(r['ttft_ms']):.0f} ms is over "
                               f"{SUSPECT_TTFT_RATIO:g}x the median ({median:.0f} ms) of the "
                               f"{len(runs)} runs of this configuration.")
                flagged += 1
    return flagged


def main(argv: list[str]) -> int:
    out_path = Path(argv[0])
    files = [(a.split("=", 1)[0], Path(a.split("=", 1)[1])) for a in argv[1:]]
    result = rows(files)
    result.sort(key=lambda r: (r["gpu"], r["framework"], r["precision"], int(r["tp"]), int(r["ep"]),
                               r["attention_dp"], int(r["isl"]), int(r["osl"]),
                               int(r["concurrency"]), r["date"]))
    flagged = flag_suspect(result)
    others = []
    if out_path.is_file():
        with out_path.open(newline="", encoding="utf-8") as f:
            others = [r for r in csv.DictReader(f) if r["source_kind"] != "inferencex"]
    with out_path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns())
        w.writeheader()
        w.writerows(result + others)
    print(f"{len(result)} InferenceX rows ({flagged} flagged suspect) + {len(others)} other rows "
          f"-> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
