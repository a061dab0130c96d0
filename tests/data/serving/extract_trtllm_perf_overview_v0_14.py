"""Rebuild trtllm_perf_overview_v0_14.csv from TensorRT-LLM's performance overview at v0.14.

The page (`docs/source/performance/perf-overview.md` of TensorRT-LLM as of its 0.14 release, as
carried by the fork github.com/arthurrasmusson/TensorRT-LLM at commit e00d4e65; the NVIDIA
repository's own copies of that version are not stored here) has a throughput table "generated
using version 0.14.0": output tokens/s of an offline `trtllm-bench throughput` run of
`$num_requests` equal requests (the page's table, as in v0.17) per model, ISL/OSL, TP size and
GPU × precision column. The page builds FP8 engines with `--quantization FP8` ("If you specify FP8
quantization, the KV cache will automatically be set to FP8 as well") and FP16 ones without it
("simply remove the `--quantization FP8` option"), so H100 runs in both formats: the FP8 vs FP16
pairs of `extract_format_pairs.py`. Rows are kept for the catalog's GPUs (H200 FP8, H100 FP8,
H100 FP16); A100 and L40S are not in the catalog. "LLaMA v3 70B" is Meta-Llama-3-70B (scored
with Llama-3.1-70B's config: the same layer dimensions; only RoPE scaling and the context length
differ). The page's online-serving table (v0.14, BF16) is already in
trtllm_perf_overview_v0_17.csv (`trtllm_online_serving_v0_14`).

Usage: python tests/data/serving/extract_trtllm_perf_overview_v0_14.py PAGE.md OUT.csv
(PAGE.md: `git show e00d4e65:docs/source/performance/perf-overview.md` in a clone of the fork.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_trtllm_perf_overview import GPUS, MODELS, REQUESTS, cells  # noqa: E402
from schema import blank_row, write_rows  # noqa: E402

COMMIT = "e00d4e6564921307dd264b61fe1d46f116095e0e"
URL = (f"https://github.com/arthurrasmusson/TensorRT-LLM/blob/{COMMIT}/docs/source/performance/"
       "perf-overview.md")
SOURCE_KIND = "trtllm_perf_overview_v0_14"
PAGE_MODELS = {**MODELS, "LLaMA v3 70B": "Llama-3-70B"}


def throughput_rows(lines: list[str]) -> list[dict[str, str]]:
    """The throughput table's catalog-GPU cells: one row per model, ISL/OSL, TP and column."""
    start = next(i for i, line in enumerate(lines) if "**GPU**" in line)
    gpus, precisions = cells(lines[start])[3:], cells(lines[start + 1])[3:]
    out, model, lengths = [], None, None
    for line in lines[start + 3:]:
        if not line.startswith("|"):
            break
        c = cells(line)
        model, lengths = c[0] or model, c[1] or lengths
        isl, osl = (int(x) for x in lengths.split("/"))
        for gpu, precision, value in zip(gpus, precisions, c[3:]):
            if gpu in GPUS and value:
                out.append(offline_row(PAGE_MODELS[model], GPUS[gpu], int(c[2]),
                                       precision.lower(), isl, osl, float(value)))
    return out


def offline_row(model, gpu, tp, precision, isl, osl, total) -> dict[str, str]:
    row = blank_row()
    row.update(
        model=model, gpu=gpu, num_gpus=str(tp), total_gpus=str(tp), tp=str(tp),
        framework="TensorRT-LLM (trtllm-bench throughput, TensorRT engine)",
        framework_version="0.14.0", precision=precision, kv_precision=precision, isl=str(isl),
        osl=str(osl), concurrency="max (offline, all requests queued)", scenario="offline",
        requests=str(REQUESTS[(isl, osl)]), total_output_tokens_per_s=f"{total:.4f}",
        output_tokens_per_s_per_gpu=f"{total / tp:.3f}", source_url=URL, date="",
        source_kind=SOURCE_KIND,
        derived_fields="output_tokens_per_s_per_gpu = total / tp; requests from the page's "
                       "$num_requests table; kv_precision = precision (FP8 engines set FP8 KV)",
        notes=f"Throughput table (v0.14.0): output tokens/s of an offline trtllm-bench run, "
              f"{precision.upper()} engine. 'Mistral 7B' read as mistralai/Mistral-7B-v0.1; "
              "'LLaMA v3 70B' as Meta-Llama-3-70B.",
    )
    return row


def main(argv: list[str]) -> int:
    rows = throughput_rows(Path(argv[0]).read_text(encoding="utf-8").splitlines())
    write_rows(Path(argv[1]), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
