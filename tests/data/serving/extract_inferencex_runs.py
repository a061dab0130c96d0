"""Rebuild inferencex_runs.csv from InferenceX benchmark-run artifacts (`agg_bmk.json`).

SemiAnalysis InferenceX (ex-InferenceMAX) uploads one `agg_bmk.json` per GitHub Actions run of
github.com/SemiAnalysisAI/InferenceX: a list of records, one per benchmarked configuration, each
with the model, GPU, engine (`framework`, `image`), format, TP / EP / attention DP (or, for a
disaggregated run, the prefill and decode workers), ISL/OSL, concurrency, output tokens/s per
GPU and the client's mean / median / p99 TTFT and TPOT. github.com/gminneci/mantile keeps
copies of runs' artifacts under `reconcile/sources/inferencemax/raw/run_<id>/agg_bmk.json`
(the run id names the folder; `raw/agg_bmk.json` repeats run 21012127808 and is not read).

Kept: records of a catalog GPU (H100, H200, B200, GB200) without speculative decoding (and,
disaggregated, whose pools are stated: `pools_stated`), of
gpt-oss-120b (every run) and DeepSeek-R1 / -0528 (runs not already in ../serving_published.csv or
published_ttft_tpot.csv, which carry the same records from the InferenceX app's fixtures).
Conventions as in those files (tests/data/serving/SOURCES.md §1): `num_gpus` = TP (the record's
`output_tput_per_gpu` is per TP GPU), or for a disaggregated run every worker's GPUs, with the
pools in `prefill_config` / `decode_config`; requests = 10 × concurrency with lengths uniform in
[0.8, 1] × nominal. TTFT and TPOT are the client's MEANS (`mean_ttft`, `mean_tpot`); the p99s
beside them. Formats from the launch scripts of the runs' time (SemiAnalysisAI/InferenceX at
70c1eceb, 2026-01-05, `benchmarks/gptoss_fp4_*`): gpt-oss-120b keeps its MXFP4 experts
(`moe_precision` mxfp4 on Blackwell: vLLM's FlashInfer MXFP4×MXFP8 MoE, TensorRT-LLM's TRTLLM MoE
backend; w4a16 on Hopper: `VLLM_MXFP4_USE_MARLIN=1`) and BF16 attention; the KV cache is FP8 on
B200 (`kv-cache-dtype: fp8`, `kv_cache_config.dtype: fp8`) and BF16 on Hopper (vLLM's `auto`).

Usage: python tests/data/serving/extract_inferencex_runs.py MANTILE_GIT_DIR OUT.csv
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import blank_row, write_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
RAW = "reconcile/sources/inferencemax/raw"
MANTILE = "gminneci/mantile"
ACTIONS = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs"
EXISTING = (HERE.parent / "serving_published.csv", HERE / "published_ttft_tpot.csv")
MS_PER_S = 1000.0
PROMPTS_PER_SLOT = 10  # --num-prompts 10 x conc
GPUS = {"h100": "H100-SXM", "h200": "H200", "b200": "B200", "b200-trt": "B200", "gb200": "GB200"}
HOPPER = ("H100-SXM", "H200")
ENGINES = {"trt": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang",
           "dynamo-trt": "dynamo-trt", "dynamo-sglang": "dynamo-sglang"}
RUN_DIR = re.compile(r"/run_(\d+)/agg_bmk\.json$")


def model_of(name: str) -> str | None:
    """The CSV model name of a record's `model` (a Hugging Face id or a local path)."""
    low = name.lower()
    if "gpt-oss-120b" in low:
        return "gpt-oss-120b"
    if low.startswith("amd/") or "deepseek-r1" not in low:
        return None
    return "DeepSeek-R1-0528" if "0528" in low else "DeepSeek-R1"


def formats(model: str, gpu: str, precision: str) -> dict[str, str]:
    """precision / moe_precision / kv_precision of a record (module docstring)."""
    if model != "gpt-oss-120b":
        return {"precision": precision}
    hopper = gpu in HOPPER
    return {"precision": "bf16", "moe_precision": "w4a16" if hopper else "mxfp4",
            "kv_precision": "bf16" if hopper else "fp8"}


def pool(workers, tp, ep, dp_attention) -> str:
    return f"{int(workers)}x(tp{int(tp)},ep{int(ep)},dp_attn={str(dp_attention).lower() == 'true'})"


def _parallelism(x: dict) -> dict[str, str]:
    if not x.get("disagg"):
        return {"tp": str(x["tp"]), "ep": str(x["ep"]), "num_gpus": str(x["tp"]),
                "attention_dp": str(str(x["dp_attention"]).lower() == "true")}
    gpus = x["prefill_num_workers"] * x["prefill_tp"] + x["decode_num_workers"] * x["decode_tp"]
    return {"tp": str(x["decode_tp"]), "ep": str(x["decode_ep"]), "num_gpus": str(gpus),
            "mode": "disagg", "attention_dp": str(str(x["decode_dp_attention"]).lower() == "true"),
            "prefill_config": pool(x["prefill_num_workers"], x["prefill_tp"], x["prefill_ep"],
                                   x["prefill_dp_attention"]),
            "decode_config": pool(x["decode_num_workers"], x["decode_tp"], x["decode_ep"],
                                  x["decode_dp_attention"])}


def pools_stated(x: dict) -> bool:
    """A disaggregated record whose workers × TP add up to its prefill and decode GPU counts
    (the dynamo-sglang records carry TP = EP = 1 placeholders beside 16 + 32 GPUs: not stated)."""
    return not x.get("disagg") or (
        x["prefill_num_workers"] * x["prefill_tp"] == x.get("num_prefill_gpu")
        and x["decode_num_workers"] * x["decode_tp"] == x.get("num_decode_gpu"))


def row_of(x: dict, run_id: str, commit: str) -> dict[str, str] | None:
    model, gpu = model_of(x["model"]), GPUS.get(x["hw"])
    if model is None or gpu is None or x.get("spec_decoding", "none") != "none" \
            or not pools_stated(x):
        return None
    image = x.get("image", "")
    row = blank_row()
    row.update(model=model, gpu=gpu, framework=ENGINES.get(x["framework"], x["framework"]),
               framework_version=image.rsplit(":", 1)[-1] if ":" in image else image,
               isl=str(x["isl"]), osl=str(x["osl"]), concurrency=str(x["conc"]),
               scenario="concurrency", requests=str(PROMPTS_PER_SLOT * int(x["conc"])),
               output_tokens_per_s_per_gpu=f"{x['output_tput_per_gpu']:.3f}",
               tokens_per_s_per_user=f"{x['median_intvty']:.3f}",
               tpot_ms=f"{x['mean_tpot'] * MS_PER_S:.4f}", tpot_stat="mean",
               ttft_ms=f"{x['mean_ttft'] * MS_PER_S:.2f}", ttft_stat="mean",
               tpot_p99_ms=f"{x['p99_tpot'] * MS_PER_S:.4f}",
               ttft_p99_ms=f"{x['p99_ttft'] * MS_PER_S:.2f}",
               source_kind="inferencex", **formats(model, gpu, x["precision"]),
               **_parallelism(x))
    row["total_output_tokens_per_s"] = f"{x['output_tput_per_gpu'] * int(row['num_gpus']):.1f}"
    row["source_url"] = (f"{ACTIONS}/{run_id} (artifact agg_bmk.json, copy in https://github.com/"
                         f"{MANTILE}/blob/{commit}/{RAW}/run_{run_id}/agg_bmk.json)")
    row["derived_fields"] = ("tpot_ms=mean_tpot*1000; ttft_ms=mean_ttft*1000; p99s likewise; "
                             "num_gpus=tp (disagg: all workers' GPUs); requests=10*conc")
    row["notes"] = (f"InferenceX run {run_id}, image {image}. Median TTFT "
                    f"{x['median_ttft'] * MS_PER_S:.2f} ms, median TPOT "
                    f"{x['median_tpot'] * MS_PER_S:.4f} ms. Random ISL/OSL uniform in "
                    "[0.8, 1] x nominal.")
    return row


def existing_runs(paths=EXISTING) -> set[str]:
    """GitHub Actions run ids already carried by the other InferenceX rows."""
    runs = set()
    for path in paths:
        runs |= set(re.findall(r"actions/runs/(\d+)", path.read_text(encoding="utf-8")))
    return runs


def records(repo: Path, commit: str):
    """(run id, record) of every run folder's agg_bmk.json."""
    names = subprocess.run(["git", f"--git-dir={repo}", "ls-tree", "-r", "--name-only", commit,
                            RAW], check=True, capture_output=True, text=True).stdout.split()
    for name in sorted(names):
        match = RUN_DIR.search(name)
        if not match:
            continue
        text = subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{name}"],
                              check=True, capture_output=True, text=True).stdout
        data = json.loads(text or "[]")
        for x in data if isinstance(data, list) else [data]:
            yield match.group(1), x


def main(argv: list[str]) -> int:
    repo, out = Path(argv[0]), Path(argv[1])
    commit = subprocess.run(["git", f"--git-dir={repo}", "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    seen, skip_runs, rows = set(), existing_runs(), []
    for run_id, x in records(repo, commit):
        row = row_of(x, run_id, commit)
        if row is None or (row["model"] != "gpt-oss-120b" and run_id in skip_runs):
            continue
        key = tuple(row[c] for c in ("model", "gpu", "framework", "tp", "ep", "attention_dp",
                                     "prefill_config", "decode_config", "precision", "isl",
                                     "osl", "concurrency", "output_tokens_per_s_per_gpu"))
        if key not in seen:
            seen.add(key)
            rows.append(row)
    rows.sort(key=lambda r: (r["model"], r["gpu"], r["framework"], r["mode"], r["precision"],
                             int(r["isl"]), int(r["osl"]), int(r["tp"]), int(r["concurrency"]),
                             r["source_url"]))
    write_rows(out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
