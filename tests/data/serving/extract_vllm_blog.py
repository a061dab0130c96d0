"""Rebuild vllm_blog_fp8_kv.csv from the vLLM blog post "The State of FP8 KV-Cache and Attention
Quantization in vLLM" (github.com/vllm-project/vllm-project.github.io, `_posts/2026-04-22-fp8-
kvcache.md` at commit 5ffe2dd543a30f34309d71d8374803612223e9fb).

Its section "Throughput under Load" (Hopper: "All Hopper experiments run on a single H100 GPU",
vLLM v0.19.1 per the post's table 3): 150 requests at concurrency 8, ~20k input and ~2k output
tokens (±15%), KV cache in BF16 or FP8; tables 4 (Llama-3.1-8B) and 5 (gpt-oss-20b) give the
median TTFT, the median ITL (→ TPOT, median), the run's duration and output tokens/s. Weights as
published: Llama-3.1-8B in BF16; gpt-oss-20b's MXFP4 experts (on Hopper vLLM runs them as
W4A16), the rest BF16. The "FP8 skip-SW" row (FP8 KV except on sliding-window layers) is kept;
the validator leaves it out (a per-layer KV format is not a deployment field).

Usage: python tests/data/serving/extract_vllm_blog.py POST.md OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import blank_row, write_rows  # noqa: E402

COMMIT = "5ffe2dd543a30f34309d71d8374803612223e9fb"
URL = (f"https://github.com/vllm-project/vllm-project.github.io/blob/{COMMIT}/_posts/"
       "2026-04-22-fp8-kvcache.md")
TABLES = {"*Table 4:": ("Llama-3.1-8B-Instruct", "bf16", ""),
          "*Table 5:": ("gpt-oss-20b", "bf16", "w4a16")}
KV = {"BF16": "bf16", "FP8": "fp8", "FP8 skip-SW": "fp8 (sliding-window layers bf16)"}
ISL, OSL, CONCURRENCY, REQUESTS = 20000, 2000, 8, 150


def table_rows(lines: list[str], caption: str) -> list[list[str]]:
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    rows, i = [], start + 1
    while i < len(lines) and not lines[i].startswith("| Config"):
        i += 1
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def row_of(model: str, precision: str, moe: str, cells: list[str]) -> dict[str, str]:
    config, ttft, itl, duration, out_tput = cells
    row = blank_row()
    row.update(model=model, gpu="H100-SXM", num_gpus="1", total_gpus="1", tp="1",
               framework="vLLM (vllm bench serve)", framework_version="0.19.1",
               precision=precision, moe_precision=moe, kv_precision=KV[config],
               isl=str(ISL), osl=str(OSL), concurrency=str(CONCURRENCY), scenario="concurrency",
               requests=str(REQUESTS), ttft_ms=ttft, tpot_ms=itl, ttft_stat="median",
               tpot_stat="median", total_output_tokens_per_s=out_tput,
               output_tokens_per_s_per_gpu=out_tput, source_url=URL, date="2026-04-22",
               source_kind="vllm_blog",
               derived_fields="tpot_ms = median ITL; output_tokens_per_s_per_gpu = output tok/s "
                              "(one GPU)",
               notes=f"KV cache {config}; run of {REQUESTS} requests took {duration} s. Lengths "
                     "vary ±15% around the nominal ISL/OSL.")
    return row


def main(argv: list[str]) -> int:
    lines = Path(argv[0]).read_text(encoding="utf-8").splitlines()
    rows = [row_of(model, precision, moe, cells)
            for caption, (model, precision, moe) in TABLES.items()
            for cells in table_rows(lines, caption)]
    write_rows(Path(argv[1]), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
