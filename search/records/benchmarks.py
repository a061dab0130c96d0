"""Measurements coming back: the serving engines' benchmark outputs read into rows
(`archscout compare`, and `archscout calibrate --source` may read the same rows).

`read_benchmark_output(path) -> list[dict]` reads
- the "Serving Benchmark Result" block that `vllm bench serve`, `python -m sglang.bench_serving`
  and TensorRT-LLM's `tensorrt_llm.serve.scripts.benchmark_serving` print (several blocks per
  file: one row each);
- `vllm bench serve --save-result` JSON and `sglang.bench_serving --output-file` JSONL (one
  object per line), which share the keys `mean_ttft_ms`, `mean_tpot_ms`, `output_throughput`,
  `max_concurrency`, `completed`, `total_input_tokens`, `total_output_tokens`, `duration`
  (`median_ttft_ms` / `median_tpot_ms` when a file has no means);
- TensorRT-LLM `trtllm-bench throughput` reports, printed or `--report_json`
  (`search.records.trtllm_bench`);
- genai-perf / AIPerf `profile_export_*.json` (`time_to_first_token`, `inter_token_latency`,
  `output_token_throughput`, each with `avg`).

Each row (a dict; NaN for what the output does not say):
- `file`, `format` (which of the above), `engine` ("vllm", "sglang", "trtllm" where the output
  says so, else None);
- `completed` (requests), `concurrency` (the most requests in flight: the client's
  `--max-concurrency`, else every request at once, the requests; trtllm-bench: its engine's
  batch cap, at most the requests) and `concurrency_limited` (whether the client capped it);
- `isl_tokens`, `osl_tokens`: per request (means over the completed requests);
- `ttft_ms`, `tpot_ms` with `ttft_stat`, `tpot_stat`: which statistic over requests they are
  ("mean", else "median");
- `output_tokens_per_s`: generated tokens of the whole run over its duration, all GPUs (a finite
  run: see `search.records.comparison`); `duration_s`; `gpus` when the output says (trtllm-bench).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from search.records.errors import ExportError
from search.records.trtllm_bench import read_trtllm_bench_json, read_trtllm_bench_text

BLOCK_START = "Serving Benchmark Result"
LINE = re.compile(r"^\s*([^:]+?):\s+([-+0-9.eE]+|inf|not set)\s*$")
BACKEND = re.compile(r"^\s*Backend:\s+(\S+)")
TEXT_KEYS = {  # console label -> row field
    "Successful requests": "completed", "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_tokens_per_s",
    "Benchmark duration (s)": "duration_s",
    "Mean TTFT (ms)": "ttft_ms", "Mean TPOT (ms)": "tpot_ms",
    "Median TTFT (ms)": "median_ttft_ms", "Median TPOT (ms)": "median_tpot_ms",
    "Maximum request concurrency": "concurrency", "Max request concurrency": "concurrency",
    "Max reqeuest concurrency": "concurrency",  # SGLang's printed spelling in some versions
}
JSON_KEYS = {"completed": "completed", "total_input_tokens": "total_input_tokens",
             "total_output_tokens": "total_output_tokens", "duration": "duration_s",
             "output_throughput": "output_tokens_per_s", "mean_ttft_ms": "ttft_ms",
             "mean_tpot_ms": "tpot_ms", "median_ttft_ms": "median_ttft_ms",
             "median_tpot_ms": "median_tpot_ms", "max_concurrency": "concurrency"}
ENGINE_OF_BACKEND = (("sglang", "sglang"), ("vllm", "vllm"), ("trt", "trtllm"),
                     ("tensorrt", "trtllm"))


def _number(text: str) -> float:
    return math.nan if text in ("inf", "not set") else float(text)


def engine_of_backend(backend: str | None) -> str | None:
    """"sglang-oai" -> "sglang": the engine a benchmark's `--backend` names."""
    name = (backend or "").lower()
    return next((engine for prefix, engine in ENGINE_OF_BACKEND if name.startswith(prefix)),
                None)


def _statistic(raw: dict, name: str) -> tuple[float, str | None]:
    """The mean of `name` ("ttft_ms", "tpot_ms"), else its median, with which it is."""
    for key, stat in ((name, "mean"), (f"median_{name}", "median")):
        value = raw.get(key, math.nan)
        if math.isfinite(value):
            return value, stat
    return math.nan, None


def _finish(raw: dict, source: str, engine: str | None = None) -> dict:
    """Per-request ISL/OSL from the totals; NaN for what the output does not say. A run with
    no concurrency limit (`--max-concurrency` unset, the request rate unlimited) sends every
    request at once: its concurrency is the requests completed."""
    done = raw.get("completed", math.nan)
    concurrency = raw.get("concurrency", math.nan)
    limited = math.isfinite(concurrency)
    ttft, ttft_stat = _statistic(raw, "ttft_ms")
    tpot, tpot_stat = _statistic(raw, "tpot_ms")
    row = {"format": source, "engine": engine, "completed": done,
           "concurrency": concurrency if limited else done, "concurrency_limited": limited,
           "ttft_ms": ttft, "tpot_ms": tpot, "ttft_stat": ttft_stat, "tpot_stat": tpot_stat,
           "output_tokens_per_s": raw.get("output_tokens_per_s", math.nan),
           "duration_s": raw.get("duration_s", math.nan), "gpus": math.nan}
    for field, total in (("isl_tokens", "total_input_tokens"),
                         ("osl_tokens", "total_output_tokens")):
        row[field] = raw.get(field, raw.get(total, math.nan) / done if done else math.nan)
    return row


def read_console(text: str) -> list[dict]:
    """Every "Serving Benchmark Result" block; a concurrency printed just before a block (older
    vLLM prints it above the table) belongs to that block."""
    rows, raw, inside, pending, backend = [], {}, False, math.nan, None
    for line in text.splitlines():
        if BLOCK_START in line:
            inside, raw, backend = True, {"concurrency": pending}, None
            continue
        if inside and (found := BACKEND.match(line)):
            backend = found.group(1)
        match = LINE.match(line.lstrip("# "))
        key = TEXT_KEYS.get(match.group(1).strip()) if match else None
        if key == "concurrency" and not inside:
            pending = _number(match.group(2))
        elif key is not None and inside:
            raw[key] = _number(match.group(2))
        if inside and line.strip().startswith("=====") and BLOCK_START not in line:
            rows.append(_finish(raw, "serving-benchmark text", engine_of_backend(backend)))
            inside, pending = False, math.nan
    if inside:
        rows.append(_finish(raw, "serving-benchmark text", engine_of_backend(backend)))
    return rows


def _from_json_object(obj: dict, source: str) -> dict | None:
    if any(k in obj for k in ("mean_tpot_ms", "mean_ttft_ms", "median_ttft_ms")):
        raw = {JSON_KEYS[k]: float(v) for k, v in obj.items()
               if k in JSON_KEYS and isinstance(v, (int, float))}
        for field, key in (("isl_tokens", "random_input_len"), ("osl_tokens", "random_output_len")):
            if "completed" not in raw and isinstance(obj.get(key), (int, float)):
                raw[field] = float(obj[key])
        return _finish(raw, source, engine_of_backend(obj.get("backend")))
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
    return read_trtllm_bench_json(obj)


def read_benchmark_output(path: str | Path) -> list[dict]:
    """The measured rows of one benchmark output file (see the module docstring); an
    `ExportError` naming `RESULTS` when the file cannot be read or holds no result."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ExportError(f"`RESULTS` ({path}) cannot be read: {exc.strerror or exc}") from None
    rows = _json_rows(text) or read_console(text) or read_trtllm_bench_text(text)
    if not rows:
        raise ExportError(f"`RESULTS` ({path}) holds no benchmark result: expected a \"Serving "
                          "Benchmark Result\" block, vLLM/SGLang result JSON(L), a trtllm-bench "
                          "report or a genai-perf/AIPerf profile export")
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
