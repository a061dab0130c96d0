"""Models as deployed next to their published serving figures (issue 14, "Must show").

1. DeepSeek-R1 (the DeepSeek-V3 config) with NVFP4 routed experts and FP8 attention / dense /
   shared layers on 8× B200, TP 8 EP 8, against every aggregated, non-speculative, no-attention-DP
   row of the development set with that GPU, format (fp4) and parallelism
   (tests/data/serving/published_ttft_tpot.csv and tests/data/serving_published.csv: SemiAnalysis
   InferenceX records, SGLang): the median over runs of each (ISL, OSL, concurrency).
2. gpt-oss-120b with MXFP4 weight-only (w4a16) experts and BF16 attention on H200: its largest
   throughput per GPU at one GPU (TP 1) and on 8 GPUs (attention DP 8, EP 8), against
   TensorRT-LLM's performance overview (max-throughput trtllm-bench, H200 TP1; no gpt-oss row is
   in the development set).
Run: python tests/benchmarks/compare_deployed_formats.py
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import numpy as np

from cost_model import Deployment, Workload, evaluate_points, get_hardware, load_architecture

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import (
    HF_CONFIGS, MODEL_CONFIGS, SERVING_DEV_SET_CSV, SERVING_PUBLISHED_CSV,
)  # fmt: skip

# NVIDIA/TensorRT-LLM docs/source/developer-guide/perf-overview.md at commit
# 03e27c7d5ff0c6e89f8328838c0a8e64f1b34f9d, table "GPT-OSS 120B", column "H200 TP1 (FP8)"
# (MoE backend TRITON, KV cache dtype auto on Hopper): output tokens/s/GPU at maximum load.
TRTLLM_GPT_OSS_H200_TP1 = {(1000, 1000): 6868, (1024, 1024): 6798, (8192, 1024): 1828,
                           (32768, 1024): 519}
DEEPSEEK_NVFP4 = Deployment(tp=8, ep=8, precision="fp8", moe_precision="nvfp4")


def _published_deepseek() -> dict[tuple[int, int, int], list[dict]]:
    rows: dict[tuple[int, int, int], list[dict]] = {}
    for path in (SERVING_DEV_SET_CSV, SERVING_PUBLISHED_CSV):
        with path.open(newline="", encoding="utf-8") as handle:
            for r in csv.DictReader(handle):
                if (r["model"], r["gpu"], r["precision"]) != ("DeepSeek-R1-0528", "B200", "fp4"):
                    continue
                if r["attention_dp"] != "False" or r["spec_decode"] != "none" or \
                        float(r["tp"] or 0) != 8 or float(r["ep"] or 0) != 8 or r["mode"] != "agg":
                    continue
                key = (int(float(r["isl"])), int(float(r["osl"])), int(r["concurrency"]))
                rows.setdefault(key, []).append(r)
    return rows


def _median(rows: list[dict], field: str) -> float:
    values = [float(r[field]) for r in rows if r[field]]
    return statistics.median(values) if values else float("nan")


def deepseek_table() -> None:
    arch, b200 = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json"), get_hardware("b200")
    print("DeepSeek-R1 NVFP4 experts + FP8 attention, 8x B200 TP8 EP8 — model vs published "
          "(InferenceX, SGLang; median over runs)")
    print(f"{'ISL/OSL':>10} {'c':>4} {'runs':>4}  {'TPOT ms':>15}  {'tok/s/GPU':>15}  "
          f"{'TTFT ms (bench)':>17}")
    for (isl, osl, c), rows in sorted(_published_deepseek().items()):
        p = evaluate_points([arch], [DEEPSEEK_NVFP4], b200, Workload(isl_tokens=isl,
                                                                     osl_tokens=osl),
                            np.array([float(c)]))
        tpot, tput = p.tpot_s[0, 0] * 1e3, p.tokens_per_s_per_gpu[0, 0]
        ttft = p.benchmark_ttft_s[0, 0] * 1e3
        pub = [_median(rows, f) for f in ("tpot_ms", "output_tokens_per_s_per_gpu", "ttft_ms")]
        print(f"{isl:>5}/{osl:<4} {c:>4} {len(rows):>4}  {tpot:6.2f} vs {pub[0]:6.2f}  "
              f"{tput:6.0f} vs {pub[1]:6.0f}  {ttft:7.0f} vs {pub[2]:6.0f}")


def gpt_oss_table() -> None:
    arch, h200 = load_architecture(HF_CONFIGS / "gpt-oss-120b.json"), get_hardware("h200")
    deps = {"TP1 (1 GPU)": Deployment(precision="bf16", moe_precision="w4a16"),
            "DP8 EP8 (8 GPUs)": Deployment(dp=8, ep=8, precision="bf16", moe_precision="w4a16")}
    print("\ngpt-oss-120b w4a16 experts + BF16 attention on H200 — largest tokens/s/GPU vs "
          "TensorRT-LLM perf overview (H200 TP1, max throughput)")
    for (isl, osl), published in TRTLLM_GPT_OSS_H200_TP1.items():
        work = Workload(isl_tokens=isl, osl_tokens=osl)
        cells = []
        for name, dep in deps.items():
            p = evaluate_points([arch], [dep], h200, work)
            y = np.where(p.fits_memory, p.tokens_per_s_per_gpu, np.nan)
            j = int(np.nanargmax(y[0]))
            cells.append(f"{name}: {y[0, j]:6.0f} at c={int(p.concurrency[0, j])} "
                         f"(TPOT {p.tpot_s[0, j] * 1e3:.1f} ms)")
        print(f"{isl:>6}/{osl:<5} published {published:>5}   " + "   ".join(cells))


if __name__ == "__main__":
    deepseek_table()
    gpt_oss_table()
