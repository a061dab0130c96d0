"""Rebuild pair_sources/ml_energy_v3.csv: the ML.ENERGY Leaderboard v3 runs of Qwen3-235B-A22B
(2507 Instruct on LMArena chat, 2507 Thinking on GPQA) in FP8 and in BF16 weights.

Source: `public/data/models/<org>__<model>__<task>.json` of github.com/ml-energy/leaderboard at
`COMMIT` (read from a `fetch` snapshot with `git show`), one record per configuration: GPU,
GPU count, vLLM's `max_num_seqs`, median / p90 / p95 / p99 inter-token latency, output tokens/s,
mean output length and mean running batch. The runs (github.com/ml-energy/benchmark, vLLM 0.11.1
per its docs/overview.md) launch vLLM with `--tensor-parallel-size <GPUs>` and
`--enable-expert-parallel` (configs/vllm/<task>/Qwen/<model>/<GPU>/monolithic.config.yaml;
the leaderboard's `parallelization` labels these TP 1, EP <GPUs>), KV cache in the model's dtype
(no `kv-cache-dtype`: BF16 on both sides), and send every request at once (`request_rate` inf,
no client concurrency cap), so `max_num_seqs` is the running batch. The files state no input
length (the prompts are tokenized at run time): the rows keep `isl` empty.

Usage: python tests/data/serving/extract_ml_energy.py GIT_DIR [OUT.csv]
(GIT_DIR: the snapshot's git directory, e.g. /work/.mirror/ml-energy+leaderboard/repo)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import write_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "pair_sources" / "ml_energy_v3.csv"
COMMIT = "0cd52dab897c5d91a45f4d413038f3b8b4251b0f"  # ml-energy/leaderboard, 2026-02-27
URL = f"https://github.com/ml-energy/leaderboard/blob/{COMMIT}/public/data/models/"
FILES = ("Qwen__Qwen3-235B-A22B-Instruct-2507-FP8__lm-arena-chat.json",
         "Qwen__Qwen3-235B-A22B-Instruct-2507__lm-arena-chat.json",
         "Qwen__Qwen3-235B-A22B-Thinking-2507-FP8__gpqa.json",
         "Qwen__Qwen3-235B-A22B-Thinking-2507__gpqa.json")
GPUS = {"H100": "H100-SXM", "B200": "B200"}  # the benchmark's GPUs: H100 SXM and B200 (DGX)
PRECISIONS = {"fp8": "fp8", "bfloat16": "bf16"}
COLUMNS = ("model_id", "task", "precision", "gpu", "num_gpus", "tp", "ep", "max_num_seqs",
           "avg_batch_size", "avg_output_len", "median_itl_ms", "p90_itl_ms", "p95_itl_ms",
           "p99_itl_ms", "output_tokens_per_s", "engine", "source_url")


def records(doc: dict, name: str) -> list[dict[str, str]]:
    """One row per configuration of a leaderboard model file (`doc`, read from `name`)."""
    out = []
    for c in doc["configurations"]:
        gpus = str(c["num_gpus"])
        out.append({"model_id": doc["model_id"], "task": doc["task"],
                    "precision": PRECISIONS[doc["weight_precision"]],
                    "gpu": GPUS[c["gpu_model"]], "num_gpus": gpus, "tp": gpus,
                    "ep": gpus if c["parallelization"]["expert_parallel"] > 1 else "1",
                    "max_num_seqs": str(c["max_num_seqs"]),
                    **{k: f"{c[k]:.4f}" for k in ("avg_batch_size", "avg_output_len",
                                                   "median_itl_ms", "p90_itl_ms",
                                                   "p95_itl_ms", "p99_itl_ms")},
                    "output_tokens_per_s": f"{c['output_throughput_tokens_per_sec']:.4f}",
                    "engine": "vLLM 0.11.1 (ML.ENERGY Benchmark v3)",
                    "source_url": URL + name})
    return sorted(out, key=lambda r: (r["task"], r["precision"], r["gpu"], int(r["num_gpus"]),
                                      int(r["max_num_seqs"])))


def main(argv: list[str]) -> int:
    if not argv:
        print("error: `GIT_DIR` must name a snapshot of ml-energy/leaderboard, got nothing",
              file=sys.stderr)
        return 2
    rows = []
    for name in FILES:
        done = subprocess.run(["git", "--git-dir", argv[0], "show",
                               f"{COMMIT}:public/data/models/{name}"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"error: `GIT_DIR` must hold ml-energy/leaderboard at {COMMIT[:8]} with "
                  f"{name}, got {argv[0]}", file=sys.stderr)
            return 2
        rows += records(json.loads(done.stdout), name)
    write_rows(Path(argv[1]) if len(argv) > 1 else OUT, rows, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
