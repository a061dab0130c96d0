"""TensorRT-LLM's `trtllm-bench throughput|latency` reports read into benchmark rows
(`search.records.benchmarks`): the printed report and the `--report_json` document.

The report's fields (tensorrt_llm/bench/dataclasses/reporting.py, `report_statistics` and
`get_statistics_dict`): "TP Size", "PP Size", "EP Size", "Max Runtime Batch Size" (world and
runtime), "Number of requests", "Average Input Length (tokens)", "Average Output Length (tokens)"
(request details; inside the performance overview before 0.18), "Total Output Throughput
(tokens/sec)" (0.17: "Token Throughput (tokens/sec)", the same output tokens over the whole run),
"Total Latency (ms)" (first request in to last out) and, with `--streaming`, "Average
time-to-first-token [TTFT] (ms)" and "Average time-per-output-token [TPOT] (ms)" (means over
requests). trtllm-bench queues every request at once (issue rate ~1e14/s) unless `--concurrency`
caps them: the engine holds at most "Max Runtime Batch Size" in flight, and the run is a finite
one (`search.records.comparison.finite_run_tokens_per_s`).
"""

from __future__ import annotations

import math
import re

from cost_model.units import MS_PER_S

REPORT_START = re.compile(r"^=\s*(ENGINE DETAILS|PYTORCH BACKEND|AUTODEPLOY BACKEND)\s*$")
OVERVIEW = "= PERFORMANCE OVERVIEW"
FIELD = re.compile(r"^([A-Za-z][^:]*?):\s+([-+0-9.eE]+)%?\s*$")
TEXT_KEYS = {  # report label -> raw field
    "TP Size": "tp", "PP Size": "pp", "Max Runtime Batch Size": "batch_cap",
    "Number of requests": "completed", "Average Input Length (tokens)": "isl_tokens",
    "Average Output Length (tokens)": "osl_tokens",
    "Total Output Throughput (tokens/sec)": "output_tokens_per_s",
    "Token Throughput (tokens/sec)": "output_tokens_per_s",  # 0.17's name for the same figure
    "Total Latency (ms)": "duration_ms",
    "Average time-to-first-token [TTFT] (ms)": "ttft_ms",
    "Average time-per-output-token [TPOT] (ms)": "tpot_ms",
}
ENGINE = "trtllm"


def _reports(text: str) -> list[list[str]]:
    """The report blocks of a log: each starts at its backend header (one block when none)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if REPORT_START.match(line.strip()) and any(OVERVIEW in x for x in blocks[-1]):
            blocks.append([])
        blocks[-1].append(line)
    return [b for b in blocks if any(OVERVIEW in line for line in b)]


def _raw(lines: list[str]) -> dict:
    raw = {}
    for line in lines:
        match = FIELD.match(line.strip())
        if match and match.group(1).strip() in TEXT_KEYS:
            raw[TEXT_KEYS[match.group(1).strip()]] = float(match.group(2))
    return raw


def read_trtllm_bench_text(text: str) -> list[dict]:
    """Every trtllm-bench report in `text` as a raw row (see `benchmark_row`)."""
    return [benchmark_row(_raw(block), "trtllm-bench text") for block in _reports(text)]


def read_trtllm_bench_json(obj: dict) -> dict | None:
    """A `--report_json` document (keys `performance`, `request_info`, `world_info`, and
    `streaming_metrics` with `--streaming`) as a raw row; None for any other object."""
    perf, req = obj.get("performance"), obj.get("request_info")
    if not isinstance(perf, dict) or not isinstance(req, dict):
        return None
    world, streaming = obj.get("world_info") or {}, obj.get("streaming_metrics") or {}
    raw = {"completed": req.get("num_requests"), "isl_tokens": req.get("avg_input_length"),
           "osl_tokens": req.get("avg_output_length"),
           "output_tokens_per_s": perf.get("system_output_throughput_tok_s"),
           "duration_ms": perf.get("total_latency_ms"), "tp": world.get("tp_size"),
           "pp": world.get("pp_size"), "batch_cap": world.get("max_batch_size"),
           "ttft_ms": streaming.get("avg_ttft_ms"), "tpot_ms": streaming.get("avg_tpot_ms")}
    return benchmark_row({k: float(v) for k, v in raw.items() if isinstance(v, (int, float))},
                         "trtllm-bench json")


def benchmark_row(raw: dict, source: str) -> dict:
    """A trtllm-bench run as a benchmark row: all requests queued at once, so the requests in
    flight are the engine's batch cap (or the requests, when fewer); TTFT and TPOT are means
    over requests (NaN without `--streaming`); GPUs are TP·PP."""
    nan = math.nan
    done, cap = raw.get("completed", nan), raw.get("batch_cap", nan)
    gpus = raw.get("tp", nan) * raw.get("pp", 1.0)
    return {"format": source, "engine": ENGINE, "completed": done,
            "concurrency": min(done, cap) if math.isfinite(cap) else done,
            "concurrency_limited": False, "isl_tokens": raw.get("isl_tokens", nan),
            "osl_tokens": raw.get("osl_tokens", nan), "ttft_ms": raw.get("ttft_ms", nan),
            "tpot_ms": raw.get("tpot_ms", nan),
            "ttft_stat": "mean" if "ttft_ms" in raw else None,
            "tpot_stat": "mean" if "tpot_ms" in raw else None,
            "output_tokens_per_s": raw.get("output_tokens_per_s", nan),
            "duration_s": raw.get("duration_ms", nan) / MS_PER_S, "gpus": gpus}
