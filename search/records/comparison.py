"""A measured benchmark row (`search.records.benchmarks`) next to what the cost model predicts
for the same deployment, workload and load.

A benchmark is a finite run: N requests, at most W of them in flight (the client's
`--max-concurrency`, else all N at once; trtllm-bench: its engine's batch cap), and at most what
memory holds. Its output tokens/s is the run's total over its duration, ramp-down included, not
the steady state at W. With equal lengths the requests admitted together finish together, so
the run is ⌊N/W⌋ full waves and a last one of r = N mod W (`finite_run_tokens_per_s`, the
formula of tests/benchmarks/validate_serving.py's offline runs); each wave of w requests runs at
the steady rate R(w) of w in flight. Outputs whose lengths vary (ShareGPT) last as long as their
longest request: for a run of one wave, `longest_osl_tokens` says how long it must have been at
the measured TPOT.
"""

from __future__ import annotations

import math

import numpy as np

from cost_model import (
    MS_PER_S, Architecture, Deployment, evaluate_points, get_hardware, make_workload,
)
from search.records.documents import point_document
from search.records.errors import ExportError


def predicted_point(arch: Architecture, dep: Deployment, hardware: str, isl: int, osl: int,
                    concurrency: int, engine: str | None) -> dict:
    """The cost model's point at `concurrency`: TPOT, benchmark TTFT (what a client measures,
    with the engine's terms), tokens/s/GPU and per user."""
    return predicted_points(arch, dep, hardware, isl, osl, [concurrency], engine)[0]


def predicted_points(arch: Architecture, dep: Deployment, hardware: str, isl: int, osl: int,
                     concurrencies: list[int], engine: str | None) -> list[dict]:
    """`predicted_point` at each concurrency (one call), each with `max_concurrency`: the most
    requests memory holds at this ISL + OSL."""
    workload = make_workload(isl_tokens=isl, osl_tokens=osl, engine=engine)
    points = evaluate_points([arch], [dep], get_hardware(hardware), workload,
                             np.array([float(c) for c in concurrencies]))
    limit = float(points.max_concurrency[0, 0])
    return [{**point_document(points, j), "max_concurrency": limit}
            for j in range(len(concurrencies))]


def finite_run_tokens_per_s(requests: int, wave: int, wave_rate: float,
                            last_rate: float) -> float:
    """Throughput of `requests` equal requests run `wave` at a time: ⌊N/W⌋ full waves at R(W)
    and a last one of r = N mod W at R(r). A wave of w requests serves w·OSL tokens in
    w·OSL/R(w), so the run's rate is N / (⌊N/W⌋·W/R(W) + r/R(r)), R(W) when r = 0 (per GPU
    when the rates are)."""
    full, last = divmod(requests, wave)
    seconds_per_token = full * wave / wave_rate + (last / last_rate if last else 0.0)
    return requests / seconds_per_token


def _error(measured: float, predicted: float) -> float:
    ok = math.isfinite(measured) and measured > 0 and math.isfinite(predicted)
    return predicted / measured - 1.0 if ok else math.nan


# a run of one wave whose implied longest request exceeds its mean OSL by this factor had
# lengths that vary: it lasted as long as its longest request, not as a wave of equal ones
LONGEST_OVER_MEAN = 1.5


def longest_osl_tokens(row: dict, waves: int) -> float:
    """For a run of one wave: how long its longest request must have been at the measured TPOT
    (it lasted the run's duration); NaN otherwise."""
    longest = (row["duration_s"] - row["ttft_ms"] / MS_PER_S) * MS_PER_S / row["tpot_ms"] \
        if waves == 1 else math.nan
    return longest if math.isfinite(longest) else math.nan


def lengths_vary(row: dict, wave: int, osl: int) -> bool:
    """Whether a run's tokens/s is its longest request's, not a wave's (`LONGEST_OVER_MEAN`)."""
    longest = longest_osl_tokens(row, math.ceil(check_row(row)[0] / wave))
    return math.isfinite(longest) and longest > LONGEST_OVER_MEAN * osl


def check_row(row: dict) -> tuple[int, int, int, int]:
    """(requests, most in flight, ISL, OSL) of a row, each ≥ 1 (`ExportError` otherwise)."""
    c, isl, osl = row["concurrency"], row["isl_tokens"], row["osl_tokens"]
    done = row["completed"] if math.isfinite(row["completed"]) else c
    if not all(math.isfinite(v) and v >= 1 for v in (c, isl, osl, done)):
        raise ExportError(f"`RESULTS` ({row['file']}): a row without its concurrency, ISL or "
                          f"OSL (concurrency {c}, ISL {isl}, OSL {osl}) cannot be predicted")
    return round(done), round(c), round(isl), round(osl)


def _run(requests: int, limit: int, arch, dep, hardware: str, isl: int, osl: int,
         engine: str | None) -> tuple[dict, int, float]:
    """(the point at the wave, the wave W, the run's tokens/s/GPU): W = the requests in flight,
    at most what memory holds."""
    first = predicted_point(arch, dep, hardware, isl, osl, 1, engine)
    wave = max(1, min(limit, requests, int(first["max_concurrency"]) or limit))
    last = requests % wave
    points = predicted_points(arch, dep, hardware, isl, osl, [wave, max(last, 1)], engine)
    rate = finite_run_tokens_per_s(requests, wave, points[0]["tokens_per_s_per_gpu"],
                                   points[1]["tokens_per_s_per_gpu"])
    return points[0], wave, rate


def compare_row(row: dict, arch: Architecture, dep: Deployment, hardware: str,
                engine: str | None) -> dict:
    """One measured row beside the prediction at its own ISL, OSL and load: TPOT and TTFT at
    the wave's concurrency, tokens/s/GPU of the finite run (and the steady rate at the wave)."""
    requests, limit, isl, osl = check_row(row)
    point, wave, run_rate = _run(requests, limit, arch, dep, hardware, isl, osl, engine)
    gpus = dep.gpus
    measured_gpu = row["output_tokens_per_s"] / gpus
    predicted_s = requests * osl / (run_rate * gpus)
    waves = math.ceil(requests / wave)
    longest = longest_osl_tokens(row, waves)
    return {"file": row["file"], "requests": requests, "concurrency": wave, "isl": isl,
            "osl": osl, "stat": f"{row['ttft_stat'] or '-'}/{row['tpot_stat'] or '-'}",
            "ttft_stat": row["ttft_stat"], "tpot_stat": row["tpot_stat"],
            "tpot_ms": row["tpot_ms"], "predicted_tpot_ms": point["tpot_ms"],
            "tpot_error_frac": _error(row["tpot_ms"], point["tpot_ms"]),
            "ttft_ms": row["ttft_ms"], "predicted_ttft_ms": point["benchmark_ttft_ms"],
            "ttft_error_frac": _error(row["ttft_ms"], point["benchmark_ttft_ms"]),
            "tokens_per_s_per_gpu": measured_gpu,
            "predicted_tokens_per_s_per_gpu": run_rate,
            "tokens_per_s_per_gpu_error_frac": _error(measured_gpu, run_rate),
            "predicted_steady_tokens_per_s_per_gpu": point["tokens_per_s_per_gpu"],
            "waves": waves, "duration_s": row["duration_s"],
            "predicted_duration_s": predicted_s,
            "longest_osl_tokens": longest,
            "gpus_measured": row.get("gpus", math.nan)}
