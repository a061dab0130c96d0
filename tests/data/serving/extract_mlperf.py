"""Rebuild mlperf_inference_v5_1.csv from a snapshot of github.com/mlcommons/inference_results_v5.1.

Reads, in the repository's newest commit (git --git-dir=REPO):
- `summary_results.json`: one record per result (submitter, system, benchmark, scenario, node
  count, accelerators, software, weight format, location);
- `<location>/performance/run_1/mlperf_log_summary.txt`: the measured output tokens/s and
  samples/s, the mean / p50 / p99 first-token latency (TTFT) and time per output token (TPOT),
  and the run's TTFT / TPOT limits;
- the submitter's NVIDIA-harness config `closed/<submitter>/configs/<system>/<Scenario>/
  <benchmark>.py` where it has one: tensor / pipeline / expert parallelism, attention DP,
  `gpu_batch_size` (requests per instance), weight and KV formats.

Kept: closed division, LLM benchmarks (Llama-2-70B at the 99% target, Llama-3.1-8B, Llama-3.1-
405B, Mixtral-8x7B, DeepSeek-R1) on the catalog's GPUs (H100 SXM, H200 SXM, B200, GB200, GB300,
RTX PRO 6000 Blackwell Server Edition); the 99.9% Llama-2-70B results are the same systems
again and are left out. The MLPerf datasets have variable input and output lengths: OSL is the
run's own mean (tokens/s ÷ samples/s); the datasets' mean input length is not published with the
results (nor in mlcommons/inference or the MLPerf rules), so `isl` is empty.

Usage: python tests/data/serving/extract_mlperf.py REPO_GIT_DIR OUT.csv
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import COLUMNS, blank_row  # noqa: E402

REPO = "mlcommons/inference_results_v5.1"
DATE = "2025-09-09"  # MLPerf Inference v5.1 publication
NS_PER_MS = 1e6
BENCHMARKS = {"llama2-70b-99": "Llama-2-70B", "llama3.1-8b": "Llama-3.1-8B-Instruct",
              "llama3_1-8b": "Llama-3.1-8B-Instruct", "llama3.1-405b": "Llama-3.1-405B-Instruct",
              "llama3_1-405b": "Llama-3.1-405B-Instruct", "mixtral-8x7b": "Mixtral-8x7B-v0.1",
              "deepseek-r1": "DeepSeek-R1"}
CONFIG_NAMES = {"Llama-2-70B": "llama2-70b", "Llama-3.1-8B-Instruct": "llama3_1-8b",
                "Llama-3.1-405B-Instruct": "llama3_1-405b", "Mixtral-8x7B-v0.1": "mixtral-8x7b",
                "DeepSeek-R1": "deepseek-r1"}
ACCELERATORS = (("H100-SXM", "H100-SXM"), ("H200-SXM", "H200"), ("B200-SXM", "B200"),
                ("GB300", "GB300"), ("GB200", "GB200"),
                ("RTX PRO 6000", "RTX PRO 6000 Blackwell Server"))
SCENARIOS = {"Offline": "offline", "Server": "server", "Interactive": "interactive"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True, capture_output=True,
                          text=True).stdout


def show(repo: Path, path: str) -> str | None:
    try:
        return git(repo, "show", f"HEAD:{path}")
    except subprocess.CalledProcessError:
        return None


def summary_fields(text: str) -> dict[str, float]:
    """Numbers of an mlperf_log_summary.txt by their label (first occurrence)."""
    out = {}
    for line in text.splitlines():
        label, _, value = line.partition(":")
        try:
            out.setdefault(label.strip(), float(value.strip()))
        except ValueError:
            continue
    return out


def config_fields(text: str) -> dict[str, str]:
    """Parallelism, batch and formats of an NVIDIA-harness config (first workload setting)."""
    def first(pattern: str) -> str:
        match = re.search(pattern, text)
        return match.group(1) if match else ""
    return {"tp": first(r"tensor_parallelism:\s*(\d+)"),
            "pp": first(r"pipeline_parallelism:\s*(\d+)"),
            "ep": first(r"moe_expert_parallelism:\s*(\d+)"),
            "max_batch": first(r"gpu_batch_size:\s*{\s*'[^']+':\s*(\d+)"),
            "precision": first(r"model_fields\.precision:\s*'(\w+)'"),
            "kv": first(r"'kv_cache_dtype':\s*'(\w+)'"),
            "adp": first(r"'enable_attention_dp':\s*(True|False)")}


def gpu_of(accelerator: str) -> str | None:
    return next((gpu for word, gpu in ACCELERATORS if word in accelerator), None)


def find_config(repo: Path, submitter: str, system: str, scenario: str, model: str) -> str | None:
    for name in (system, system.removesuffix("_TRT")):
        text = show(repo, f"closed/{submitter}/configs/{name}/{scenario}/{CONFIG_NAMES[model]}.py")
        if text:
            return text
    return None


def row_of(repo: Path, x: dict, commit: str) -> dict[str, str] | None:
    model, gpu = BENCHMARKS.get(x["Model"]), gpu_of(x["Accelerator"])
    if x["Category"] != "closed" or model is None or gpu is None or x["Scenario"] not in SCENARIOS:
        return None
    summary = show(repo, f"{x['Location']}/performance/run_1/mlperf_log_summary.txt")
    if summary is None:
        return None
    s = summary_fields(summary)
    tokens = s.get("Tokens per second") or s.get("Completed tokens per second")
    samples = s.get("Samples per second") or s.get("Completed samples per second")
    submitter, system = x["Submitter"], x["Platform"]
    cfg_text = find_config(repo, submitter, system, x["Scenario"], model)
    cfg = config_fields(cfg_text) if cfg_text else {}
    total_gpus = int(x["a#"]) * int(x["Nodes"]) if x["Nodes"] else int(x["a#"])
    row = blank_row()
    row.update(model=model, gpu=gpu, nodes=str(x["Nodes"]), total_gpus=str(total_gpus),
               framework=f"TensorRT-LLM (MLPerf {submitter} harness)"
               if "TensorRT" in x["Software"] else f"{x['Software'].split(',')[0]} (MLPerf)",
               framework_version=x["Software"], scenario=SCENARIOS[x["Scenario"]],
               precision=(cfg.get("precision") or x["weight_data_types"]).lower(),
               kv_precision=cfg.get("kv", ""), max_batch=cfg.get("max_batch", ""),
               tp=cfg.get("tp", ""), pp=cfg.get("pp", "") or "1", ep=cfg.get("ep", "") or "1",
               isl="", osl=f"{tokens / samples:.1f}",
               total_output_tokens_per_s=f"{tokens:.2f}",
               output_tokens_per_s_per_gpu=f"{tokens / total_gpus:.3f}",
               concurrency="max (offline, all requests queued)"
               if x["Scenario"] == "Offline" else x["Scenario"].lower(),
               source_url=f"https://github.com/{REPO}/tree/{commit}/{x['Location']} "
                          f"(result {x['ID']})", date=DATE, source_kind="mlperf_v5_1")
    if cfg.get("adp") == "True":
        row.update(attention_dp="True", dp=cfg["tp"])
    if x["Scenario"] == "Offline":
        row["requests"] = str(int(s.get("samples_per_query", 0))) or ""
    else:
        row.update(tpot_ms=f"{s['Mean Time to Output Token (ns)'] / NS_PER_MS:.3f}",
                   ttft_ms=f"{s['Mean First Token latency (ns)'] / NS_PER_MS:.3f}",
                   tpot_stat="mean", ttft_stat="mean",
                   tpot_p99_ms=f"{s['99.00 percentile time to output token (ns)'] / NS_PER_MS:.3f}",
                   ttft_p99_ms=f"{s['99.00 percentile first token latency (ns)'] / NS_PER_MS:.3f}",
                   tpot_limit_ms=f"{s['tpot_latency (ns)'] / NS_PER_MS:g}",
                   ttft_limit_ms=f"{s['ttft_latency (ns)'] / NS_PER_MS:g}",
                   request_rate_per_s=f"{samples:g}")
    row["num_gpus"] = str(instance_gpus(row))
    row["derived_fields"] = ("osl = tokens/s / samples/s of the run; output_tokens_per_s_per_gpu "
                             "= tokens/s / total_gpus; tp/pp/ep/max_batch/kv from the config")
    row["notes"] = (f"MLPerf Inference v5.1 closed, {submitter} {system}, {x['Scenario']}. "
                    + ("Config: " + Path(f"configs/{system}").as_posix() if cfg_text
                       else "No NVIDIA-harness config found: parallelism not stated.")
                    + " ISL: the dataset's mean input length is not published with the results.")
    return row


def instance_gpus(row: dict[str, str]) -> int | str:
    """GPUs of one instance: tp·pp (attention-DP ranks are the TP ranks); empty if unknown."""
    if not row["tp"]:
        return ""
    return int(row["tp"]) * int(row["pp"] or 1)


def main(argv: list[str]) -> int:
    repo, out_path = Path(argv[0]), Path(argv[1])
    commit = git(repo, "rev-parse", "HEAD").strip()
    records = json.loads(show(repo, "summary_results.json"))
    rows = [r for x in records if (r := row_of(repo, x, commit)) is not None]
    rows.sort(key=lambda r: (r["model"], r["gpu"], r["scenario"], r["source_url"]))
    with out_path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
