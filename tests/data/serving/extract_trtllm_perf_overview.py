"""Rebuild trtllm_perf_overview_v0_17.csv from TensorRT-LLM's performance overview at 258c7540.

The page (`docs/source/performance/perf-overview.md` of github.com/NVIDIA/TensorRT-LLM at commit
258c7540c03517def55d9a5aadfa9288af474e1b, the v0.17 release's copy) holds two tables:

1. "Throughput Measurements", generated with version 0.17 (TensorRT engine flow,
   `trtllm-bench build --quantization FP8` then `trtllm-bench throughput`, FP8 KV cache): total
   output tokens/s of an offline run of `$num_requests` equal requests (the page's table) per
   model, TP size, ISL/OSL and GPU. Rows are kept for the catalog's GPUs (H200, H100); GH200,
   L40S and A100 are not in the catalog. Scenario `offline`.
2. "Online Serving Measurements", generated with version 0.14.0 (Triton TensorRT-LLM backend,
   BF16, 500 requests) at a Poisson request rate (QPS): mean TTFT, mean ITL (→ TPOT) and output
   tokens/s. Scenario `poisson_rate` at the measured request rate; rows at QPS "INF" (all 500
   requests sent at once) are scenario `offline` with 500 requests.

Usage: python tests/data/serving/extract_trtllm_perf_overview.py PAGE.md OUT.csv
(PAGE.md: `git show 258c7540:docs/source/performance/perf-overview.md` in a clone.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import blank_row, write_rows  # noqa: E402

COMMIT = "258c7540c03517def55d9a5aadfa9288af474e1b"
URL = f"https://github.com/NVIDIA/TensorRT-LLM/blob/{COMMIT}/docs/source/performance/perf-overview.md"
# page model name -> CSV model
MODELS = {
    "LLaMA v3.1 8B": "Llama-3.1-8B-Instruct", "LLaMA v3.1 70B": "Llama-3.1-70B",
    "LLaMA v3.1 405B": "Llama-3.1-405B-Instruct", "Mistral 7B": "Mistral-7B-v0.1",
    "Mixtral 8x7B": "Mixtral-8x7B-v0.1", "Mixtral 8x22B": "Mixtral-8x22B-v0.1",
    "LLaMA 3.1 8B": "Llama-3.1-8B-Instruct", "LLaMA 3.1 70B": "Llama-3.1-70B",
}
GPUS = {"H200 141GB HBM3": "H200", "H100 80GB HBM3": "H100-SXM", "H200 131GB HBM3": "H200"}
# The page's $num_requests per (ISL, OSL) for the throughput table
REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (2048, 128): 3000,
            (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000,
            (20000, 2000): 1000}
ONLINE_REQUESTS = 500


def cells(line: str) -> list[str]:
    """A markdown table row's cells (empty ones kept)."""
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") else text
    return [c.strip().strip("*").strip() for c in text.split("|")]


def throughput_rows(lines: list[str]) -> list[dict[str, str]]:
    start = next(i for i, line in enumerate(lines) if "Throughput (tokens / sec)" in line)
    gpus = cells(lines[start])[3:]
    precisions = cells(lines[start + 2])[3:]
    out, model, tp = [], None, None
    for line in lines[start + 4:]:
        if not line.startswith("|"):
            break
        c = cells(line)
        model, tp = c[0] or model, c[1] or tp
        isl, osl = (int(x) for x in c[2].split(","))
        for gpu, precision, value in zip(gpus, precisions, c[3:]):
            if gpu not in GPUS or not value:
                continue
            out.append(offline_row(MODELS[model], GPUS[gpu], int(tp), precision.lower(), isl,
                                   osl, float(value)))
    return out


def offline_row(model, gpu, tp, precision, isl, osl, total) -> dict[str, str]:
    row = blank_row()
    row.update(
        model=model, gpu=gpu, num_gpus=str(tp), total_gpus=str(tp), tp=str(tp),
        framework="TensorRT-LLM (trtllm-bench throughput, TensorRT engine)",
        framework_version="0.17.0", precision=precision, kv_precision="fp8", isl=str(isl),
        osl=str(osl), concurrency="max (offline, all requests queued)", scenario="offline",
        requests=str(REQUESTS[(isl, osl)]), total_output_tokens_per_s=f"{total:.2f}",
        output_tokens_per_s_per_gpu=f"{total / tp:.3f}", source_url=URL, date="",
        source_kind="trtllm_perf_overview_v0_17",
        derived_fields="output_tokens_per_s_per_gpu = total / tp; requests from the page's "
                       "$num_requests table",
        notes="Throughput table (v0.17): total output tokens/s of an offline trtllm-bench run; "
              "FP8 weights and activations (--quantization FP8), KV cache FP8 (the page: "
              "'If you specify FP8 quantization, the KV cache will automatically be set to "
              "FP8'). 'Mistral 7B' read as mistralai/Mistral-7B-v0.1 (the checkpoint the page "
              "does not name).",
    )
    return row


def online_rows(lines: list[str]) -> list[dict[str, str]]:
    start = next(i for i, line in enumerate(lines) if "**Mean TTFT(ms)**" in line)
    out, keep = [], {}
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            break
        c = cells(line)
        if set(c) <= {"", "-"} or c[0].startswith("---"):
            continue
        for k, v in zip(("model", "gpu", "tp", "isl", "osl"), c[:5]):
            keep[k] = v or keep.get(k, "")
        if c[3] and not c[4]:
            raise ValueError(f"row lacks an output length: {line!r}")
        qps, rate, ttft, itl, _, out_tput = c[5:11]
        gpu = GPUS[keep["gpu"]]
        out.append(online_row(MODELS[keep["model"]], gpu, int(keep["tp"]), int(keep["isl"]),
                              int(keep["osl"]), qps, float(rate), float(ttft), float(itl),
                              float(out_tput)))
    return out


def online_row(model, gpu, tp, isl, osl, qps, rate, ttft, itl, out_tput) -> dict[str, str]:
    row = blank_row()
    offline = qps.upper() == "INF"
    row.update(
        model=model, gpu=gpu, num_gpus=str(tp), total_gpus=str(tp), tp=str(tp),
        framework="TensorRT-LLM (Triton TensorRT-LLM backend, online serving)",
        framework_version="0.14.0", precision="bf16", kv_precision="bf16", isl=str(isl),
        osl=str(osl), ttft_ms=f"{ttft:g}", tpot_ms=f"{itl:g}", ttft_stat="mean",
        tpot_stat="mean", total_output_tokens_per_s=f"{out_tput:g}",
        output_tokens_per_s_per_gpu=f"{out_tput / tp:.3f}", source_url=URL, date="",
        source_kind="trtllm_online_serving_v0_14",
        scenario="offline" if offline else "poisson_rate",
        requests=str(ONLINE_REQUESTS),
        concurrency="max (offline, all requests queued)" if offline else "",
        request_rate_per_s="" if offline else f"{rate:g}",
        derived_fields="tpot_ms = Mean ITL; output_tokens_per_s_per_gpu = Output Tput / tp",
        notes=f"Online serving table (v0.14.0, 500 requests, BF16): QPS {qps}, measured "
              f"{rate:g} req/s. No date on the page: commit 258c7540 dates this copy.",
    )
    return row


def main(argv: list[str]) -> int:
    lines = Path(argv[0]).read_text(encoding="utf-8").splitlines()
    rows = throughput_rows(lines) + online_rows(lines)
    write_rows(Path(argv[1]), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
