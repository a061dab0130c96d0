"""Fused-MoE fit bias by expert-parallel split: why serving over-pays MoE models (issue 23's
regression of the serving validation's MoE TPOT).

The shipped `[moe.<format>]` entry of each engine is one joint fit (`search/calibration/moe.py`)
of the grouped GEMMs' ceilings and the fused-MoE overhead over every balanced row of the engine's
aiconfigurator-core moe_perf table, most of them with moe_ep_size > 1 (over 80% of TensorRT-LLM's
and SGLang's rows, about half of vLLM's) and of other models' shapes. Most serving rows run EP = 1
(DeepSeek-R1 on SGLang TP8, gpt-oss-120b on vLLM and TensorRT-LLM TP1-8), so each format also
ships `[moe.<format>.ep1]`, fitted on the EP = 1 rows alone, which EP = 1 deployments run (and
the medians below). This prints, per
engine, GPU and experts' format, the median predicted / measured time of the fused MoE op (the
two grouped expert GEMMs plus `cost_model.layers.moe_overhead_s`: what a serving step pays per MoE
layer at EP = 1, where it adds no imbalance and no busiest-rank term) over the EP = 1 rows and over
the EP > 1 rows, and the EP = 1 median again with the fused-MoE overhead off (the GEMMs alone at
the fitted ceilings: what the "fused MoE: off" ablation of validate_serving.py prices). Then the
same at EP = 1 for the cells of the two MoE models most serving rows are made of (DeepSeek-V3/R1,
gpt-oss-120b). A ratio above 1 there says the fit over-prices the served shapes themselves; when
the GEMMs alone are already above 1, the overhead is not what over-pays, and switching it off
only offsets the GEMMs' excess.
EP = 1 configurations whose times repeat their EP = 2 twin's (`search.calibration.moe`,
`repeated_ep_rows`: an EP = 1 layer reads twice the weights of an EP = 2 one, yet in these tables
DeepSeek-V3's layer times the same) are left out of the fit and of the EP = 1 medians here and
counted in `ep1_repeated`; the served cells list them apart (`repeats_ep2` yes), their ratio
against rows that did not run what they are labelled.
Tokens ≤ 1024 (decode and chunked-prefill sizes). Reads no serving row.
With --apart it also asks whether the fit's form needs EP = 1 apart: per engine, GPU and format
(filter with --hardware, --format) it refits on four fifths of the shapes (the hash split of
bench_moe_fit.py --held-out shape) once on every row (the shipped way) and once on the EP = 1
and EP > 1 rows apart, and prints the held-out median |error| of the EP = 1 and EP > 1 rows
under each, with the fitted floors. Three fits a table: minutes per table on a shared CPU.
Run: python tests/benchmarks/bench_moe_ep_split.py [--engine trtllm|vllm|sglang ...]
     [--apart [--hardware GPU ...] [--format FMT ...]]
"""

from __future__ import annotations

import argparse

import numpy as np

from cost_model import get_efficiency, get_hardware, get_precision
from search.calibration.moe import (
    fit_moe_format,
    measured_moe,
    moe_efficiency_of,
    moe_table,
    predicted_s,
    repeated_ep_rows,
    with_moe,
)
from search.calibration.tables import AIC_SYSTEMS, ENGINES, read_parquet
from tests.benchmarks.bench_moe_fit import held_out_mask
from search.records.tables import format_table

MAX_TOKENS = 1024
SAMPLE = 4000  # as the shipped calibration
SERVED_SHAPES = {"DeepSeek-V3": (7168, 2048, 256, 8),  # hidden, H', experts, top-k
                 "gpt-oss-120b": (2880, 2880, 128, 4)}


def _without_overhead(eff, fmt):
    """`eff` with the format's fused-MoE overhead (joint and EP = 1 entries) off."""
    off = {"fixed_overhead_s": 0.0, "per_local_copy_s": 0.0, "per_scanned_copy_s": 0.0}
    return eff.model_copy(update={
        "moe": {**eff.moe, fmt: eff.moe[fmt].model_copy(update=off)},
        "moe_ep1": {k: v.model_copy(update=off) if k == fmt else v
                    for k, v in eff.moe_ep1.items()}})


def _median(values: np.ndarray) -> float | str:
    return float(np.median(values)) if values.size else "-"


def measured_tables(engine: str, hardware: str) -> dict:
    """The fit's rows (repeated EP = 1 configurations left out)."""
    return measured_moe(read_parquet(moe_table(hardware, engine)[0]))[0]


def _tables(engine: str, hardware: str) -> dict:
    try:
        return measured_moe(read_parquet(moe_table(hardware, engine)[0]), False)[0]
    except Exception as exc:  # noqa: BLE001 - a GPU without this engine's table
        print(f"  {engine} {hardware}: no table ({exc})")
        return {}


def split_rows(engine: str) -> tuple[list[dict], list[dict]]:
    """(per format: EP = 1 vs EP > 1 medians; per served shape at EP = 1)."""
    rows, served = [], []
    for hardware in AIC_SYSTEMS:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for fmt, data in _tables(engine, hardware).items():
            if not hw.supports(get_precision(fmt)) or fmt not in eff.moe:
                continue
            data = data.subset(np.flatnonzero(data.tokens <= MAX_TOKENS))
            ratio = predicted_s(data, hw, eff) / data.time_s
            gemms = predicted_s(data, hw, _without_overhead(eff, fmt)) / data.time_s
            repeated = repeated_ep_rows(data)
            ep1 = (data.moe_ep == 1) & ~repeated
            rows.append({"engine": engine, "hardware": hardware, "format": fmt,
                         "ep1_rows": int(ep1.sum()), "ep1_repeated": int(repeated.sum()),
                         "ep1_pred/meas": _median(ratio[ep1]),
                         "ep1_gemms_alone": _median(gemms[ep1]),
                         "ep>1_rows": int((data.moe_ep > 1).sum()),
                         "ep>1_pred/meas": _median(ratio[data.moe_ep > 1])})
            for model, shape in SERVED_SHAPES.items():
                layer = (data.moe_ep == 1) & (data.hidden == shape[0]) \
                    & (data.inter == shape[1]) & (data.experts == shape[2]) \
                    & (data.top_k == shape[3])
                for flag, cell in (("no", layer & ~repeated), ("yes", layer & repeated)):
                    if cell.any():
                        served.append({"model": model, "engine": engine, "hardware": hardware,
                                       "format": fmt, "repeats_ep2": flag,
                                       "ep1_rows": int(cell.sum()),
                                       "pred/meas": _median(ratio[cell]),
                                       "gemms_alone": _median(gemms[cell])})
    return rows, served


def _held_out_error(data, test, hw, eff, fmt, hardware, rows) -> tuple[np.ndarray, float]:
    """|error| on the held-out rows of `data` of a fit on the kept rows among `rows`; floor."""
    kept = data.subset(np.flatnonzero(rows & ~test))
    fit = fit_moe_format(kept, hw, eff, hardware, "held out", SAMPLE)
    held = data.subset(np.flatnonzero(rows & test))
    fitted = with_moe(eff, fmt, moe_efficiency_of(fit.coefficients))
    return np.abs(predicted_s(held, hw, fitted) / held.time_s - 1.0), \
        fit.coefficients["fixed_overhead_us"]


def apart_rows(engine: str, hardware_names: list[str], formats: list[str] | None) -> list[dict]:
    """Held-out |error| at EP = 1 and EP > 1: one joint fit vs the two EP splits fitted apart."""
    out = []
    for hardware in hardware_names:
        hw, eff = get_hardware(hardware), get_efficiency(hardware, engine)
        for fmt, data in measured_tables(engine, hardware).items():
            if not hw.supports(get_precision(fmt)) or (formats and fmt not in formats):
                continue
            test = held_out_mask(data, "shape")
            ep1 = data.moe_ep == 1
            joint, floor = _held_out_error(data, test, hw, eff, fmt, hardware, ep1 | ~ep1)
            alone1, floor1 = _held_out_error(data, test, hw, eff, fmt, hardware, ep1)
            alone_n, floor_n = _held_out_error(data, test, hw, eff, fmt, hardware, ~ep1)
            joint1, joint_n = joint[ep1[test]], joint[~ep1[test]]
            out.append({"engine": engine, "hardware": hardware, "format": fmt,
                        "ep1_joint": _median(joint1), "ep1_apart": _median(alone1),
                        "ep>1_joint": _median(joint_n), "ep>1_apart": _median(alone_n),
                        "floor_us_joint": floor, "floor_us_ep1": floor1,
                        "floor_us_ep>1": floor_n})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--apart", action="store_true",
                        help="also refit EP = 1 and EP > 1 apart, shapes held out")
    parser.add_argument("--hardware", nargs="+", choices=list(AIC_SYSTEMS),
                        default=list(AIC_SYSTEMS))
    parser.add_argument("--format", nargs="+", help="experts' formats for --apart (default all)")
    args = parser.parse_args(argv)
    rows, served = [], []
    for engine in args.engine:
        split, shapes = split_rows(engine)
        rows += split
        served += shapes
    print(f"fused MoE op, median predicted / measured, balanced rows, tokens <= {MAX_TOKENS}")
    print(format_table(rows))
    print(f"\nthe served models' cells at EP = 1 (every moe_tp, tokens <= {MAX_TOKENS})")
    print(format_table(served))
    if args.apart:
        apart = [row for engine in args.engine
                 for row in apart_rows(engine, args.hardware, args.format)]
        print("\nheld out 1 in 5 shapes: median |error| of one joint fit vs EP = 1 and EP > 1 "
              "fitted apart (all tokens), with the fitted floors")
        print(format_table(apart))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
