"""How well the model ranks deployments: within each group of rows of one source, model, GPU,
workload (ISL/OSL) and concurrency (or offline run, or SLA), the deployments (engine, parallelism,
formats) ordered by predicted tokens/s/GPU against the measured order. Rows of one deployment
measured several times (InferenceX reruns) count once, at their medians. Reported: Kendall's τ-b
per group (mean over the groups with two deployments or more), and the pairs pooled over all
groups: the share whose faster deployment the model names, over the pairs whose measured
tokens/s/GPU differ (and over those that differ by more than `DISTINCT_BAND`)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from tests.benchmarks.serving.metrics import _model_key
from tests.benchmarks.serving.rows import Prepared, Result

DISTINCT_BAND = 0.03  # measured tokens/s/GPU ratios within 1 ± this are measurement noise
METRIC = "tokens_per_s_per_gpu"


def kendall_tau_b(x, y) -> float | None:
    """τ-b = (C − D) / √((n0 − n1)(n0 − n2)): C, D the concordant and discordant pairs, n0 all
    pairs, n1 and n2 the pairs tied in x and in y; None when either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    i, j = np.triu_indices(x.size, 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    n0 = i.size
    denominator = np.sqrt(float(n0 - np.sum(dx == 0)) * float(n0 - np.sum(dy == 0)))
    if denominator == 0:
        return None
    return float(np.sum(dx * dy) / denominator)


def group_key(r: Prepared) -> tuple:
    """Source, model (models sharing a config count as one), GPU, ISL/OSL and the load: the
    concurrency, the offline run, or the SLA's limits."""
    row = r.row
    if r.regime == "max":
        load = ("offline",)
    elif r.regime == "sla":
        load = ("sla", row.get("scenario", ""), row.get("ttft_limit_ms", ""),
                row.get("tpot_limit_ms", ""))
    elif r.regime == "rate":
        load = ("rate", row.get("request_rate_per_s", ""))
    else:
        load = (r.regime, round(float(r.concurrency), 6))
    return (r.source, _model_key(row["model"]), r.hw.name, r.workload.isl_tokens,
            r.workload.osl_tokens, *load)


def deployment_values(rows: list[Prepared], results: list[Result | None]) -> dict:
    """group -> {deployment: (median predicted, median measured)} over the scored rows."""
    values = defaultdict(lambda: defaultdict(list))
    for r, res in zip(rows, results):
        if res is None or not res.measured.get(METRIC):
            continue
        deployment = (res.engine, res.deployment)
        values[group_key(r)][deployment].append((res.predicted[METRIC], res.measured[METRIC]))
    return {g: {d: tuple(np.median(np.array(v), axis=0)) for d, v in deps.items()}
            for g, deps in values.items() if len(deps) >= 2}


def ranking(rows: list[Prepared], results: list[Result | None]) -> dict:
    """τ-b per group and the pooled pair agreement, over all sources and per source, and the
    pairs outside the noise band by what differs between their two deployments (`pair_kinds`)."""
    groups = deployment_values(rows, results)
    out = {"all": _summary(groups)}
    for source in sorted({g[0] for g in groups}):
        out[source] = _summary({g: v for g, v in groups.items() if g[0] == source})
    out["all"]["by_kind"] = pair_kinds(groups)
    return out


def _fields(deployment: str) -> dict[str, str]:
    """The parts of a deployment as `rows._describe` writes it ("tp1 ep8 pp1 dp8 fp8_block
    moe-nvfp4"; a disaggregated one, "2P … + 1D …", as its pools' parts in order): tp, ep, pp,
    dp, the format (the experts' after a "/") and the pools ("agg" where there are none)."""
    parts: dict[str, list[str]] = defaultdict(list)
    for word in deployment.split():
        size = word[:2] in ("tp", "ep", "pp", "dp") and word[2:].isdigit()
        if size:
            parts[word[:2]].append(word[2:])
        elif word[-1:] in "PD" and word[:-1].isdigit():
            parts["pools"].append(word)
        elif word != "+":
            parts["format"].append(word.removeprefix("moe-"))
    return {k: "/".join(parts.get(k, ["agg"] if k == "pools" else []))
            for k in ("tp", "ep", "pp", "dp", "format", "pools")}


def pair_kind(a: tuple, b: tuple) -> str:
    """What differs between two (engine, deployment) keys: "engine", then "pools" alone where
    one is disaggregated or their xPyD ratios differ, else "format" and the parallel sizes
    that differ (TP, EP, DP, PP), joined by "+"; "none" when nothing does."""
    (engine_a, dep_a), (engine_b, dep_b) = a, b
    fa, fb = _fields(dep_a), _fields(dep_b)
    kinds = ["engine"] if engine_a != engine_b else []
    if fa["pools"] != fb["pools"]:  # aggregated vs disaggregated, or another xPyD
        return "+".join(kinds + ["pools"])
    kinds += [k.upper() if k != "format" else k for k in ("format", "tp", "ep", "dp", "pp")
              if fa[k] != fb[k]]
    return "+".join(kinds) or "none"


def pair_kinds(groups: dict) -> dict[str, dict[str, int]]:
    """Pairs whose measured tokens/s/GPU differ by more than `DISTINCT_BAND`, by `pair_kind`:
    how many, how many the model orders wrong, and of those how many it calls the slower one
    faster by more than the band (a confident wrong call, not a near tie)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"pairs": 0, "wrong": 0, "wrong_band": 0})
    for deps in groups.values():
        keys = list(deps)
        for i in range(len(keys)):
            for j in range(i + 1, len(keys)):
                (pa, ma), (pb, mb) = deps[keys[i]], deps[keys[j]]
                if abs(np.log(ma / mb)) <= np.log1p(DISTINCT_BAND):
                    continue
                entry = out[pair_kind(keys[i], keys[j])]
                entry["pairs"] += 1
                wrong = np.sign(pa - pb) != np.sign(ma - mb)
                entry["wrong"] += int(wrong)
                entry["wrong_band"] += int(wrong and abs(np.log(pa / pb)) > np.log1p(DISTINCT_BAND))
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["wrong"]))


def _summary(groups: dict) -> dict:
    taus, pairs = [], {"all": [0, 0], "band": [0, 0]}  # [agree, disagree]
    for deps in groups.values():
        pred, meas = (np.array([v[k] for v in deps.values()]) for k in (0, 1))
        tau = kendall_tau_b(pred, meas)
        if tau is not None:
            taus.append(tau)
        i, j = np.triu_indices(pred.size, 1)
        differ = meas[i] != meas[j]
        distinct = np.abs(np.log(meas[i] / meas[j])) > np.log1p(DISTINCT_BAND)
        agree = np.sign(pred[i] - pred[j]) == np.sign(meas[i] - meas[j])
        for name, mask in (("all", differ), ("band", distinct)):
            pairs[name][0] += int(np.sum(agree & mask))
            pairs[name][1] += int(np.sum(~agree & mask))
    return {"groups": len(groups), "groups_with_tau": len(taus),
            "mean_tau_b": float(np.mean(taus)) if taus else None,
            **{f"pairs_{name}": _pairs(agree, disagree)
               for name, (agree, disagree) in pairs.items()}}


def _pairs(agree: int, disagree: int) -> dict:
    n = agree + disagree
    return {"pairs": n, "agree_frac": agree / n if n else None,
            "tau_pooled": (agree - disagree) / n if n else None}
