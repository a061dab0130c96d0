"""Measurements coming back: the serving engines' benchmark outputs read into rows, and each row
next to what the cost model predicts for the same deployment, workload and concurrency.

`read_benchmark_output(path) -> list[dict]` reads
- the "Serving Benchmark Result" block that `vllm bench serve`, `python -m sglang.bench_serving`
  and TensorRT-LLM's `tensorrt_llm.serve.scripts.benchmark_serving` print (several blocks per
  file: one row each);
- `vllm bench serve --save-result` JSON and `sglang.bench_serving --output-file` JSONL (one
  object per line), which share the keys `mean_ttft_ms`, `mean_tpot_ms`, `output_throughput`,
  `max_concurrency`, `completed`, `total_input_tokens`, `total_output_tokens`;
- genai-perf / AIPerf `profile_export_*.json` (`time_to_first_token`, `inter_token_latency`,
  `output_token_throughput`, each with `avg`).
Each row: concurrency, ISL and OSL per request (totals over completed requests), TTFT and TPOT
(mean, ms), output tokens/s of the whole deployment, and the format it came from. `calibrate
--source` may read the same rows.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from cost_model import Architecture, Deployment, evaluate_points, get_hardware, make_workload
from search.records.documents import point_document
from search.records.errors import ExportError

BLOCK_START = "Serving Benchmark Result"
LINE = re.compile(r"^\s*([^:]+?):\s+([-+0-9.eE]+|inf|not set)\s*$")
TEXT_KEYS = {  # console label -> row field
    "Successful requests": "completed", "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_tokens_per_s",
    "Mean TTFT (ms)": "ttft_ms", "Mean TPOT (ms)": "tpot_ms",
    "Maximum request concurrency": "concurrency", "Max request concurrency": "concurrency",
    "Max reqeuest concurrency": "concurrency",  # SGLang's printed spelling in some versions
}
JSON_KEYS = {"completed": "completed", "total_input_tokens": "total_input_tokens",
             "total_output_tokens": "total_output_tokens",
             "output_throughput": "output_tokens_per_s", "mean_ttft_ms": "ttft_ms",
             "mean_tpot_ms": "tpot_ms", "max_concurrency": "concurrency"}


def _number(text: str) -> float:
    return math.nan if text in ("inf", "not set") else float(text)


def _finish(raw: dict, source: str) -> dict:
    """Per-request ISL/OSL from the totals; NaN for what the output does not say. A run with
    no concurrency limit (`--max-concurrency` unset, the request rate unlimited) sends every
    request at once: its concurrency is the requests completed."""
    done = raw.get("completed", math.nan)
    concurrency = raw.get("concurrency", math.nan)
    if not math.isfinite(concurrency):
        concurrency = done
    row = {"format": source, "concurrency": concurrency,
           "completed": done, "ttft_ms": raw.get("ttft_ms", math.nan),
           "tpot_ms": raw.get("tpot_ms", math.nan),
           "output_tokens_per_s": raw.get("output_tokens_per_s", math.nan)}
    row["isl_tokens"] = raw.get("isl_tokens", raw.get("total_input_tokens", math.nan) / done
                                if done else math.nan)
    row["osl_tokens"] = raw.get("osl_tokens", raw.get("total_output_tokens", math.nan) / done
                                if done else math.nan)
    return row


def read_console(text: str) -> list[dict]:
    """Every "Serving Benchmark Result" block; a concurrency printed just before a block (older
    vLLM prints it above the table) belongs to that block."""
    rows, raw, inside, pending = [], {}, False, math.nan
    for line in text.splitlines():
        if BLOCK_START in line:
            inside, raw = True, {"concurrency": pending}
            continue
        match = LINE.match(line.lstrip("# "))
        key = TEXT_KEYS.get(match.group(1).strip()) if match else None
        if key == "concurrency" and not inside:
            pending = _number(match.group(2))
        elif key is not None and inside:
            raw[key] = _number(match.group(2))
        if inside and line.strip().startswith("=====") and BLOCK_START not in line:
            rows.append(_finish(raw, "serving-benchmark text"))
            inside, pending = False, math.nan
    if inside:
        rows.append(_finish(raw, "serving-benchmark text"))
    return rows


def _from_json_object(obj: dict, source: str) -> dict | None:
    if "mean_tpot_ms" in obj or "mean_ttft_ms" in obj:
        raw = {JSON_KEYS[k]: float(v) for k, v in obj.items()
               if k in JSON_KEYS and isinstance(v, (int, float))}
        for field, key in (("isl_tokens", "random_input_len"), ("osl_tokens", "random_output_len")):
            if "completed" not in raw and isinstance(obj.get(key), (int, float)):
                raw[field] = float(obj[key])
        return _finish(raw, source)
    if "time_to_first_token" in obj:  # genai-perf / AIPerf
        avg = lambda key: float(obj.get(key, {}).get("avg", math.nan))  # noqa: E731
        config = obj.get("input_config", {})
        load = config.get("loadgen", config.get("perf_analyzer", {}).get("stimulus", {}))
        raw = {"ttft_ms": avg("time_to_first_token"), "tpot_ms": avg("inter_token_latency"),
               "output_tokens_per_s": avg("output_token_throughput"),
               "concurrency": float(load.get("concurrency", math.nan) or math.nan),
               "isl_tokens": avg("input_sequence_length"),
               "osl_tokens": avg("output_sequence_length"), "completed": avg("request_count")}
        return _finish(raw, "genai-perf/aiperf json")
    return None


def read_benchmark_output(path: str | Path) -> list[dict]:
    """The measured rows of one benchmark output file (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ExportError(f"`RESULTS` ({path}) cannot be read: {exc.strerror or exc}") from None
    rows = _json_rows(text)
    if not rows:
        rows = read_console(text)
    if not rows:
        raise ExportError(f"`RESULTS` ({path}) holds no benchmark result: expected a \"Serving "
                          "Benchmark Result\" block, vLLM/SGLang result JSON(L) or a "
                          "genai-perf/AIPerf profile export")
    return [{**row, "file": path.name} for row in rows]


def _json_rows(text: str) -> list[dict]:
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    objects = [whole] if isinstance(whole, dict) else []
    if whole is None:
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                objects.append(value)
    rows = [_from_json_object(obj, "result json") for obj in objects]
    return [row for row in rows if row is not None]


# ---- the prediction beside each row -------------------------------------------------------------


def predicted_point(arch: Architecture, dep: Deployment, hardware: str, isl: int, osl: int,
                    concurrency: int, engine: str | None) -> dict:
    """The cost model's point at `concurrency`: TPOT, benchmark TTFT (what a client measures,
    with the engine's terms), tokens/s/GPU and per user."""
    workload = make_workload(isl_tokens=isl, osl_tokens=osl, engine=engine)
    points = evaluate_points([arch], [dep], get_hardware(hardware), workload,
                             np.array([float(concurrency)]))
    return point_document(points, 0)


def _error(measured: float, predicted: float) -> float:
    ok = math.isfinite(measured) and measured > 0 and math.isfinite(predicted)
    return predicted / measured - 1.0 if ok else math.nan


def compare_row(row: dict, arch: Architecture, dep: Deployment, hardware: str,
                engine: str | None) -> dict:
    """One measured row beside the prediction at its own ISL, OSL and concurrency."""
    c, isl, osl = row["concurrency"], row["isl_tokens"], row["osl_tokens"]
    if not all(math.isfinite(v) and v >= 1 for v in (c, isl, osl)):
        raise ExportError(f"`RESULTS` ({row['file']}): a row without its concurrency, ISL or "
                          f"OSL (concurrency {c}, ISL {isl}, OSL {osl}) cannot be predicted")
    point = predicted_point(arch, dep, hardware, round(isl), round(osl), round(c), engine)
    measured_gpu = row["output_tokens_per_s"] / dep.gpus
    return {"file": row["file"], "concurrency": int(c), "isl": round(isl), "osl": round(osl),
            "tpot_ms": row["tpot_ms"], "predicted_tpot_ms": point["tpot_ms"],
            "tpot_error_frac": _error(row["tpot_ms"], point["tpot_ms"]),
            "ttft_ms": row["ttft_ms"], "predicted_ttft_ms": point["benchmark_ttft_ms"],
            "ttft_error_frac": _error(row["ttft_ms"], point["benchmark_ttft_ms"]),
            "tokens_per_s_per_gpu": measured_gpu,
            "predicted_tokens_per_s_per_gpu": point["tokens_per_s_per_gpu"],
            "tokens_per_s_per_gpu_error_frac": _error(measured_gpu,
                                                      point["tokens_per_s_per_gpu"])}
