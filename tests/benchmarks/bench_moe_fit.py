"""Fused-MoE fidelity per serving engine and experts' format (issue 23: "the MoE kernel fit per
engine and format, held out by shape, with its median error").

Prints, per engine, GPU and format, the median and 90th-percentile |predicted / measured − 1| over
the balanced, gated rows of that engine's aiconfigurator-core moe_perf table (the fastest kernel
per shape, as the fit reads it), before (the two grouped expert GEMMs alone on the format's dense
kernel model, no fused-MoE entry) and after (the shipped `[moe.<format>]` entry: the fused
kernel's ceilings, floor, per local copy and per scanned index; at EP = 1 its `[moe.<format>.ep1]`
entry where it has one), with the EP = 1 and EP > 1 rows' medians apart. With --held-out
shape|config it refits each format's two entries (`fit_moe_entries`: the joint one on every row,
the EP = 1 one on the EP = 1 rows) on four fifths of the rows and scores the rest: `shape` holds
out a fifth of the measured shapes (a hash of tokens, hidden, H', experts, top-k, moe-TP, EP),
`config` a fifth of the layer configurations (every token count of a configuration goes
together: layers the fit never saw), under both entries (`after`) and under the joint entry
alone (`joint`: every deployment on one fit, as before the EP = 1 entry), EP = 1 and EP > 1 rows
apart. It ends with the headline table, engine × format: the held-out median pooled over GPUs
and, beside it, the in-sample median (the same fits on the rows they saw).
Then the measured NVFP4 / FP8 ratio of DeepSeek-V3's layer next to the model's (issue 23: the
NVFP4 MoE advantage).
Run: pip install aiconfigurator-core; python tests/benchmarks/bench_moe_fit.py
     [--engine trtllm|vllm|sglang ...] [--held-out] [--sample N]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import zlib

import numpy as np

from cost_model import get_efficiency, get_hardware, get_precision
from search.calibration.fitting import abs_error_quantiles
from search.calibration.moe import (
    fit_moe_entries,
    fitted_efficiency,
    measured_moe,
    moe_efficiency_of,
    moe_table,
    predicted_s,
    with_moe,
)
from search.calibration.tables import AIC_PACKAGE, AIC_SYSTEMS, ENGINES, read_parquet
from search.records.tables import format_table

HELD_OUT_SHARE = 5
SAMPLE = 4000  # as the shipped calibration
DEEPSEEK = (7168, 2048, 256, 8)  # hidden, H', experts, top-k
RATIO_SPLITS = ((1, 8), (8, 1))  # (moe_tp, moe_ep)
RATIO_TOKENS = (1, 4, 16, 64, 256)
_WHAT = {"shape": "shapes (hash of tokens and layer)", "config": "layer configurations"}


def _tables(engine: str, hardware: str):
    path, _ = moe_table(hardware, engine)
    return measured_moe(read_parquet(path))


def _without_moe(eff, fmt):
    return eff.model_copy(update={"moe": {k: v for k, v in eff.moe.items() if k != fmt},
                                  "moe_ep1": {k: v for k, v in eff.moe_ep1.items() if k != fmt}})


def _median(errors: np.ndarray) -> float | str:
    return float(np.median(errors)) if errors.size else "-"


def _by_ep(prefix: str, errors: np.ndarray, ep: np.ndarray) -> dict:
    """{prefix_ep1: median over EP = 1 rows, prefix_ep>1: over the others}."""
    return {f"{prefix}ep1": _median(errors[ep == 1]), f"{prefix}ep>1": _median(errors[ep > 1])}


def shipped_rows(engine: str) -> list[dict]:
    rows = []
    for hardware in AIC_SYSTEMS:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for fmt, data in _tables(engine, hardware)[0].items():
            if not hw.supports(get_precision(fmt)):
                continue
            before = abs_error_quantiles(predicted_s(data, hw, _without_moe(eff, fmt)),
                                         data.time_s)
            predicted = predicted_s(data, hw, eff)
            after = abs_error_quantiles(predicted, data.time_s)
            rows.append({"engine": engine, "hardware": hardware, "format": fmt,
                         "rows": len(data), "ep1_entry": "yes" if fmt in eff.moe_ep1 else "no",
                         "gemms_alone_median": before[0], "median": after[0], "p90": after[1],
                         **_by_ep("", np.abs(predicted / data.time_s - 1.0), data.moe_ep)})
    return rows


def held_out_mask(data, split: str) -> np.ndarray:
    """True for the rows held out: a stable hash of the shape, or of its configuration."""
    keys = zip(*data.keys()) if split == "shape" else \
        zip(data.hidden, data.inter, data.experts, data.top_k, data.moe_tp, data.moe_ep)
    hashes = [zlib.crc32(",".join(str(int(v)) for v in key).encode()) for key in keys]
    return np.array(hashes) % HELD_OUT_SHARE == 0


def _errors(data, hw, eff) -> np.ndarray:
    return np.abs(predicted_s(data, hw, eff) / data.time_s - 1.0)


def held_out_rows(engine: str, split: str, sample: int
                  ) -> tuple[list[dict], dict[str, dict[str, list[np.ndarray]]]]:
    """Per GPU and format, the two entries fitted on the kept rows, scored on the held-out ones;
    the errors pooled per format ({"held_out": {fmt: [...]}, "in_sample": {...}, "joint": ...,
    "ep": ...}: `joint` the held-out errors under the joint entry alone, `ep` the held-out rows'
    EP)."""
    rows: list[dict] = []
    pooled: dict = {"held_out": {}, "in_sample": {}, "joint": {}, "ep": {}, "seen_ep": {}}
    for hardware in AIC_SYSTEMS:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for fmt, data in _tables(engine, hardware)[0].items():
            mask = held_out_mask(data, split)
            if not hw.supports(get_precision(fmt)) or not mask.any() or mask.all():
                continue
            kept, test = data.subset(np.flatnonzero(~mask)), data.subset(np.flatnonzero(mask))
            fit = fit_moe_entries(kept, hw, eff, hardware, "held out", sample)
            fitted = fitted_efficiency(eff, fit)
            error, seen = _errors(test, hw, fitted), _errors(kept, hw, fitted)
            joint = _errors(test, hw, with_moe(eff, fmt, moe_efficiency_of(fit.coefficients)))
            rows.append({"engine": engine, "hardware": hardware, "format": fmt,
                         "fit_rows": len(kept), "held_out_rows": len(test),
                         "ep1_entry": "no" if fit.ep1 is None else "yes",
                         "median": float(np.median(error)), "p90": float(np.quantile(error, 0.9)),
                         **_by_ep("", error, test.moe_ep), **_by_ep("joint_", joint, test.moe_ep),
                         "in_sample_median": float(np.median(seen))})
            for key, values in (("held_out", error), ("in_sample", seen), ("joint", joint),
                                ("ep", test.moe_ep), ("seen_ep", kept.moe_ep)):
                pooled[key].setdefault(fmt, []).append(values)
    return rows, pooled


def ratio_rows(engine: str) -> list[dict]:
    """DeepSeek-V3's fused MoE layer, NVFP4 over each FP8 format, measured and modelled
    (geometric mean over the shapes both formats were measured on)."""
    rows = []
    for hardware in AIC_SYSTEMS:
        tables, _ = _tables(engine, hardware)
        if "nvfp4" not in tables:
            continue
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for fp8 in ("fp8", "fp8_block"):
            if fp8 not in tables:
                continue
            pair = _common(tables["nvfp4"], tables[fp8])
            if pair is None:
                continue
            a, b = pair
            measured = np.exp(np.mean(np.log(a.time_s / b.time_s)))
            model = np.exp(np.mean(np.log(predicted_s(a, hw, eff) / predicted_s(b, hw, eff))))
            rows.append({"engine": engine, "hardware": hardware, "pair": f"nvfp4/{fp8}",
                         "shapes": len(a.time_s), "measured": measured, "model": model})
    return rows


def _common(nvfp4, fp8):
    def keys(d):
        return {tuple(int(v) for v in k): i for i, k in enumerate(zip(*d.keys()))}

    ka, kb = keys(nvfp4), keys(fp8)
    wanted = [k for k in ka if k in kb and k[1:5] == (DEEPSEEK[0], DEEPSEEK[1], DEEPSEEK[3],
                                                      DEEPSEEK[2])
              and k[5:] in RATIO_SPLITS and k[0] in RATIO_TOKENS]
    if not wanted:
        return None
    return (nvfp4.subset(np.array([ka[k] for k in wanted])),
            fp8.subset(np.array([kb[k] for k in wanted])))


def summary_rows(engine: str, pooled: dict[str, dict[str, list[np.ndarray]]]) -> list[dict]:
    """Engine × format: held-out median and p90 pooled over GPUs, the in-sample median beside."""
    rows = []
    for fmt, errors in pooled["held_out"].items():
        held, seen = np.concatenate(errors), np.concatenate(pooled["in_sample"][fmt])
        joint, ep = np.concatenate(pooled["joint"][fmt]), np.concatenate(pooled["ep"][fmt])
        seen_ep = np.concatenate(pooled["seen_ep"][fmt])
        rows.append({"engine": engine, "format": fmt, "held_out_rows": len(held),
                     "held_out_median": float(np.median(held)),
                     "held_out_p90": float(np.quantile(held, 0.9)),
                     **_by_ep("held_out_", held, ep), **_by_ep("joint_", joint, ep),
                     "in_sample_median": float(np.median(seen)),
                     **_by_ep("in_sample_", seen, seen_ep)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", choices=ENGINES)
    parser.add_argument("--held-out", choices=("shape", "config"),
                        help="also refit on a split of the rows and score the rest")
    parser.add_argument("--sample", type=int, default=SAMPLE)
    args = parser.parse_args()
    if importlib.util.find_spec(AIC_PACKAGE) is None:
        print("pip install aiconfigurator-core to compare with its measured MoE tables")
        return
    headline = []
    for engine in args.engine or ENGINES:
        start = time.perf_counter()
        rows = shipped_rows(engine)
        print(f"\n{engine}: fused MoE |predicted/measured - 1|, shipped [moe.<format>] entries\n")
        print(format_table(rows))
        if args.held_out:
            rows, pooled = held_out_rows(engine, args.held_out, args.sample)
            print(f"\n{engine}: held out 1 in {HELD_OUT_SHARE} {_WHAT[args.held_out]}\n")
            print(format_table(rows))
            headline += summary_rows(engine, pooled)
            print(f"\n{engine}: pooled over GPUs\n\n" + format_table(summary_rows(engine, pooled)))
        print(f"\n{engine}: DeepSeek-V3 layer, NVFP4 / FP8 time ratio (tokens "
              f"{', '.join(map(str, RATIO_TOKENS))}; EP 8 or moe-TP 8)\n")
        print(format_table(ratio_rows(engine)))
        print(f"({time.perf_counter() - start:.0f} s)")
    if headline:
        print(f"\nFused MoE |error| per engine and format, held out 1 in {HELD_OUT_SHARE} "
              f"{_WHAT[args.held_out]}, pooled over GPUs (in-sample beside it)\n")
        print(format_table(headline))


if __name__ == "__main__":
    main()
