"""Rebuild mlperf_inference_v<round>.csv from a snapshot of MLPerf Inference results.

Reads, at the round's commit (git --git-dir=REPO):
- `summary_results.json`: one record per result (submitter, system, benchmark, scenario, node
  count, accelerators, software, weight format, location);
- `<location>/performance/run_1/mlperf_log_summary.txt`: the measured output tokens/s and
  samples/s, the mean / p50 / p99 first-token latency (TTFT) and time per output token (TPOT),
  and the run's TTFT / TPOT limits;
- the submitter's NVIDIA-harness config `closed/<submitter>/configs/<system>/<Scenario>/
  <benchmark>.py` where it has one: tensor / pipeline / expert parallelism, attention DP,
  `gpu_batch_size` (requests per instance), weight and KV formats, speculative decoding.

Kept: closed division, LLM benchmarks (Llama-2-70B at the 99% target, Llama-3.1-8B, Llama-3.1-
405B, Mixtral-8x7B, DeepSeek-R1, gpt-oss-120b) on the catalog's GPUs (H100 SXM, H200 SXM, B200,
B300, GB200, GB300, RTX PRO 6000 Blackwell Server Edition); the 99.9% Llama-2-70B results are
the same systems again and are left out. The MLPerf datasets have variable input and output
lengths: OSL is the run's own mean (tokens/s ÷ samples/s); ISL is the dataset's mean input
length (`dataset_mean_isl`: the per-sample input token counts of the official dataset files,
as published in openshift-psap/performance-dashboard's `mlperf-data/summaries/`); empty where
no such count is published (gpt-oss-120b).

Usage: python tests/data/serving/extract_mlperf.py REPO_GIT_DIR LENGTHS_GIT_DIR OUT.csv
       [--round 5.1|6.0] [--commit SHA]
(LENGTHS_GIT_DIR: a snapshot of github.com/openshift-psap/performance-dashboard.)
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import blank_row, write_rows  # noqa: E402

# round -> (repository cited, publication date, source_kind)
ROUNDS = {"5.1": ("mlcommons/inference_results_v5.1", "2025-09-09", "mlperf_v5_1"),
          "6.0": ("mlcommons/inference_results_v6.0", "2026-03-26", "mlperf_v6_0")}
NS_PER_MS = 1e6
BENCHMARKS = {"llama2-70b-99": "Llama-2-70B", "llama3.1-8b": "Llama-3.1-8B-Instruct",
              "llama3_1-8b": "Llama-3.1-8B-Instruct", "llama3.1-405b": "Llama-3.1-405B-Instruct",
              "llama3_1-405b": "Llama-3.1-405B-Instruct", "mixtral-8x7b": "Mixtral-8x7B-v0.1",
              "deepseek-r1": "DeepSeek-R1", "gpt-oss-120b": "gpt-oss-120b"}
CONFIG_NAMES = {"Llama-2-70B": "llama2-70b", "Llama-3.1-8B-Instruct": "llama3_1-8b",
                "Llama-3.1-405B-Instruct": "llama3_1-405b", "Mixtral-8x7B-v0.1": "mixtral-8x7b",
                "DeepSeek-R1": "deepseek-r1", "gpt-oss-120b": "gpt-oss-120b"}
# model -> performance-dashboard summary of the dataset MLPerf runs (per-sample input tokens)
LENGTH_SUMMARIES = {"Llama-2-70B": "llama2-70b-99", "Llama-3.1-8B-Instruct":
                    "llama3-1-8b-datacenter", "Llama-3.1-405B-Instruct": "llama3-1-405b",
                    "Mixtral-8x7B-v0.1": "mixtral-8x7b", "DeepSeek-R1": "deepseek-r1"}
LENGTHS_REPO = "openshift-psap/performance-dashboard"
LENGTHS_DIR = "mlperf-data/summaries"
# accelerator name words -> catalog GPU, most specific first ("GB300" holds "B300")
ACCELERATORS = (("H100-SXM", "H100-SXM"), ("H200-SXM", "H200"), ("B200-SXM", "B200"),
                ("GB300", "GB300"), ("GB200", "GB200"), ("B300-SXM", "B300"),
                ("RTX PRO 6000", "RTX PRO 6000 Blackwell Server"))
SCENARIOS = {"Offline": "offline", "Server": "server", "Interactive": "interactive"}
SPEC_WORDS = re.compile(r"speculative_decoding|eagle|'MTP'", re.IGNORECASE)
# (round, model, scenario) that run speculative decoding by rule: v6.0's DeepSeek-R1 interactive
# scenario "features the first standard for speculative decoding in MLPerf" (EAGLE-style, the
# DeepSeek-R1 MTP head): https://mlcommons.org/2026/03/mlperf-inference-gpt-oss
SPECULATIVE_BY_RULE = {("6.0", "DeepSeek-R1", "Interactive")}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True, capture_output=True,
                          text=True).stdout


def show(repo: Path, commit: str, path: str) -> str | None:
    try:
        return git(repo, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return None


def mean_input_tokens(summary_csv: str) -> tuple[float, int]:
    """(mean of the `input_length` column, samples) of a performance-dashboard summary."""
    lengths = [float(r["input_length"]) for r in csv.DictReader(summary_csv.splitlines())]
    return sum(lengths) / len(lengths), len(lengths)


def dataset_mean_isl(lengths_repo: Path, commit: str) -> dict[str, tuple[float, int, str]]:
    """model -> (mean input tokens, samples, source) over the dataset MLPerf runs."""
    out = {}
    for model, name in LENGTH_SUMMARIES.items():
        path = f"{LENGTHS_DIR}/{name}.csv"
        mean, count = mean_input_tokens(show(lengths_repo, commit, path))
        out[model] = (mean, count, f"https://github.com/{LENGTHS_REPO}/blob/{commit}/{path}")
    return out


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
    """Parallelism, batch, formats and speculative decoding of an NVIDIA-harness config (first
    workload setting)."""
    def first(pattern: str) -> str:
        match = re.search(pattern, text)
        return match.group(1) if match else ""
    return {"tp": first(r"tensor_parallelism:\s*(\d+)"),
            "pp": first(r"pipeline_parallelism:\s*(\d+)"),
            "ep": first(r"moe_expert_parallelism:\s*(\d+)"),
            "max_batch": first(r"gpu_batch_size:\s*{\s*'[^']+':\s*(\d+)"),
            "precision": first(r"model_fields\.precision:\s*'(\w+)'"),
            "kv": first(r"'kv_cache_dtype':\s*'(\w+)'"),
            "adp": first(r"'enable_attention_dp':\s*(True|False)"),
            "spec": "yes" if SPEC_WORDS.search(text) else ""}


def gpu_of(accelerator: str) -> str | None:
    return next((gpu for word, gpu in ACCELERATORS if word in accelerator), None)


def find_config(repo: Path, commit: str, submitter: str, system: str, scenario: str,
                model: str) -> str | None:
    for name in (system, system.removesuffix("_TRT")):
        text = show(repo, commit,
                    f"closed/{submitter}/configs/{name}/{scenario}/{CONFIG_NAMES[model]}.py")
        if text:
            return text
    return None


def run_folder(location: str) -> str:
    """The result's performance run folder (v5.1 locations end at the scenario, v6.0's at the
    run)."""
    location = location.removeprefix("./").rstrip("/")
    return location if location.endswith("performance/run_1") else \
        f"{location}/performance/run_1"


def _selected(x: dict) -> bool:
    return (x["Category"] == "closed" and x["Model"] in BENCHMARKS
            and gpu_of(x["Accelerator"]) is not None and x["Scenario"] in SCENARIOS)


def row_of(repo: Path, commit: str, x: dict, isl: dict, round_: str) -> dict[str, str] | None:
    if not _selected(x):
        return None
    folder = run_folder(x["Location"])
    summary = show(repo, commit, f"{folder}/mlperf_log_summary.txt")
    if summary is None:
        return None
    s = summary_fields(summary)
    tokens = s.get("Tokens per second") or s.get("Completed tokens per second")
    samples = s.get("Samples per second") or s.get("Completed samples per second")
    if not tokens or not samples:
        return None
    model = BENCHMARKS[x["Model"]]
    cfg_text = find_config(repo, commit, x["Submitter"], x["Platform"], x["Scenario"], model)
    cfg = config_fields(cfg_text) if cfg_text else {}
    row = _base_row(x, model, cfg, tokens, samples, round_)
    _fill_isl(row, isl.get(model))
    _fill_parallelism(row, cfg)
    _fill_scenario(row, x["Scenario"], s, samples)
    row["source_url"] = f"https://github.com/{ROUNDS[round_][0]}/tree/{commit}/" \
                        f"{folder.removesuffix('/performance/run_1')} (result {x['ID']})"
    row["notes"] = _notes(x, cfg_text, round_, isl.get(model))
    return row


def _base_row(x: dict, model: str, cfg: dict, tokens: float, samples: float,
              round_: str) -> dict[str, str]:
    total_gpus = int(x["a#"]) * int(x["Nodes"]) if x["Nodes"] else int(x["a#"])
    software = x["Software"]
    row = blank_row()
    row.update(model=model, gpu=gpu_of(x["Accelerator"]), nodes=str(x["Nodes"] or 1),
               total_gpus=str(total_gpus), framework_version=software,
               framework=f"TensorRT-LLM (MLPerf {x['Submitter']} harness)"
               if "TensorRT" in software else f"{' '.join(software.split())} (MLPerf)",
               scenario=SCENARIOS[x["Scenario"]],
               precision=(cfg.get("precision") or x["weight_data_types"]).lower(),
               kv_precision=cfg.get("kv", ""), max_batch=cfg.get("max_batch", ""),
               osl=f"{tokens / samples:.1f}", total_output_tokens_per_s=f"{tokens:.2f}",
               output_tokens_per_s_per_gpu=f"{tokens / total_gpus:.3f}",
               concurrency="max (offline, all requests queued)"
               if x["Scenario"] == "Offline" else x["Scenario"].lower(),
               date=ROUNDS[round_][1], source_kind=ROUNDS[round_][2],
               spec_decode=_speculative(cfg, round_, model, x["Scenario"]))
    row["derived_fields"] = ("osl = tokens/s / samples/s of the run; isl = the dataset's mean "
                             "input tokens; output_tokens_per_s_per_gpu = tokens/s / "
                             "total_gpus; tp/pp/ep/max_batch/kv from the config")
    return row


def _speculative(cfg: dict, round_: str, model: str, scenario: str) -> str:
    if cfg.get("spec"):
        return "speculative (config)"
    return "speculative (MLPerf rule)" if (round_, model, scenario) in SPECULATIVE_BY_RULE \
        else "none"


def _fill_isl(row: dict[str, str], isl: tuple[float, int, str] | None) -> None:
    if isl is not None:
        row["isl"] = f"{isl[0]:.0f}"


def _fill_parallelism(row: dict[str, str], cfg: dict) -> None:
    row.update(tp=cfg.get("tp", ""), pp=cfg.get("pp", "") or "1", ep=cfg.get("ep", "") or "1")
    if cfg.get("adp") == "True":
        row.update(attention_dp="True", dp=cfg["tp"])
    row["num_gpus"] = str(instance_gpus(row))


def _fill_scenario(row: dict[str, str], scenario: str, s: dict[str, float],
                   samples: float) -> None:
    if scenario == "Offline":
        row["requests"] = str(int(s.get("samples_per_query", 0))) or ""
        return
    mean_tpot_ns = s.get("Mean Time to Output Token (ns)") or s["Mean Time per Output Token (ns)"]
    row.update(tpot_ms=f"{mean_tpot_ns / NS_PER_MS:.3f}",
               ttft_ms=f"{s['Mean First Token latency (ns)'] / NS_PER_MS:.3f}",
               tpot_stat="mean", ttft_stat="mean",
               tpot_p99_ms=f"{s['99.00 percentile time to output token (ns)'] / NS_PER_MS:.3f}",
               ttft_p99_ms=f"{s['99.00 percentile first token latency (ns)'] / NS_PER_MS:.3f}",
               tpot_limit_ms=f"{s['tpot_latency (ns)'] / NS_PER_MS:g}",
               ttft_limit_ms=f"{s['ttft_latency (ns)'] / NS_PER_MS:g}",
               request_rate_per_s=f"{samples:g}")


def _notes(x: dict, cfg_text: str | None, round_: str,
           isl: tuple[float, int, str] | None) -> str:
    config = ("Config: " + Path(f"configs/{x['Platform']}").as_posix() + "." if cfg_text
              else "No NVIDIA-harness config found: parallelism not stated.")
    length = (f" ISL: mean input tokens of the {isl[1]}-sample dataset ({isl[2]})" if isl
              else " ISL: the dataset's mean input length is not published.")
    return (f"MLPerf Inference v{round_} closed, {x['Submitter']} {x['Platform']}, "
            f"{x['Scenario']}. {config}{length}")


def instance_gpus(row: dict[str, str]) -> int | str:
    """GPUs of one instance: tp·pp (attention-DP ranks are the TP ranks); empty if unknown."""
    if not row["tp"]:
        return ""
    return int(row["tp"]) * int(row["pp"] or 1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("lengths_repo", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--round", dest="round_", default="5.1", choices=sorted(ROUNDS))
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args(argv)
    commit = git(args.repo, "rev-parse", args.commit).strip()
    isl = dataset_mean_isl(args.lengths_repo, git(args.lengths_repo, "rev-parse", "HEAD").strip())
    records = json.loads(show(args.repo, commit, "summary_results.json"))
    rows = [r for x in records if (r := row_of(args.repo, commit, x, isl, args.round_))]
    rows.sort(key=lambda r: (r["model"], r["gpu"], r["scenario"], r["source_url"]))
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
