"""Compare the cost model's operating points with published serving measurements.

Reads `tests/data/serving_published.csv` (published results, each row with its source URL; see
tests/data/SOURCES.md), evaluates every aggregated-serving row on a catalog GPU whose model the
importer supports, and reports the relative error pred/meas − 1 of TPOT, TTFT (the benchmark
client's TTFT, `benchmark_ttft_s`: what published measurements report) and output
tokens/s/GPU, by model × GPU, then for dense vs MoE models, then the rows left out and why.
Nothing here is fitted to these rows, except the benchmark-TTFT terms
(tests/benchmarks/fit_benchmark_ttft.py) and the host time per scheduled sequence
(tests/benchmarks/fit_host_overhead.py), each on the declared fit half only (`split_half`).

Row conventions (the CSV's own notes and TensorRT-LLM's mapping):
- "max (offline, all requests queued)" rows (trtllm-bench throughput) have no concurrency: they
  are compared with the model's highest-throughput point of the sweep 1 … min(memory limit,
  trtllm-bench's batch cap of 4096 per attention-DP rank) (regime "max"); where the source states
  the run's requests (the performance overview, `PERF_OVERVIEW_REQUESTS`) no more than those are
  in flight and the throughput is the run's, over its full waves and the last partial one
  (`offline_run_tokens_per_s`); rows with a number are evaluated at that concurrency (regime
  "fixed").
- an empty `ep` is 1: TensorRT-LLM's `Mapping` defaults to moe_ep_size = 1 (MoE TP) when neither
  moe size is given.
- `attention_dp` True with tp = T maps to tp = 1, dp = T (cost_model/deployment.py); so does
  an MoE row of TensorRT-LLM's performance overview, with ep = T too: the page's commands for
  MoE models turn attention DP on (`PERF_OVERVIEW`).
- "fp4" on NVIDIA GPUs is NVFP4 (on a DeepSeek-V3-family model NVIDIA's checkpoint mix: MLA in
  `fp8_block`, routed experts in NVFP4); "fp8" on a DeepSeek-V3-family model is its native
  block-scaled FP8 (`fp8_block`).
- InferenceX rows (`source_kind` inferencex) measure tokens/s over a finite run: the client sends
  10 × C prompts at concurrency C with lengths drawn in [0.8, 1] × nominal, so the run lasts
  until its slowest slot drains (`benchmark_drain_factor`); their predicted tokens/s/GPU is the
  steady state over that factor.

Also reads the development set `tests/data/serving/published_ttft_tpot.csv` (more published rows
with TTFT and TPOT; tests/data/serving/SOURCES.md) and reports it apart, then both sets combined;
`--json` keeps the published set's summary at the top level, with `dev_set` and `combined` beside
it.

Usage: python tests/benchmarks/validate_serving.py [--data DIR] [--dev-set CSV | --no-dev-set]
[--json]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from cost_model import (
    MS_PER_S, Architecture, ConfigError, Deployment, HardwareSpec, PoolLimits, Workload,
    catalog_names, config_error_from, deployment_violations, evaluate_disaggregated,
    evaluate_points, expected_largest_z, get_hardware, load_architecture,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.data_paths
from tests.data_paths import HF_CONFIGS, TEST_DATA  # noqa: E402

DEFAULT_DATA_DIR = TEST_DATA  # serving_published.csv and model_configs/
CSV_NAME = "serving_published.csv"
HF_CONFIG_DIR = HF_CONFIGS
DEV_SET_CSV = TEST_DATA / "serving" / "published_ttft_tpot.csv"  # development set (its SOURCES.md)

# CSV model name -> config file: "data:" under the data folder, "tests:" under
# tests/data/hf_configs.
MODEL_CONFIGS = {
    "DeepSeek-R1": "data:model_configs/DeepSeek-V3.json",  # R1 and R1-0528 share V3's shape
    "DeepSeek-R1-0528": "data:model_configs/DeepSeek-V3.json",
    "DeepSeek-V3": "data:model_configs/DeepSeek-V3.json",
    "Llama-3.1-8B": "data:model_configs/Llama-3.1-8B.json",
    "Llama-3.1-8B-Instruct": "data:model_configs/Llama-3.1-8B.json",
    "Qwen3-30B-A3B": "data:model_configs/Qwen3-30B-A3B.json",
    "Llama-3.3-70B-Instruct": "tests:serving_Llama-3.3-70B-Instruct.json",
    "Llama-3.1-405B": "tests:serving_Llama-3.1-405B-Instruct.json",
    "Llama-3.1-405B-Instruct": "tests:serving_Llama-3.1-405B-Instruct.json",
    "Llama-2-70B": "tests:serving_Llama-2-70B.json",
    "Qwen3-235B-A22B": "tests:serving_Qwen3-235B-A22B.json",
    "Llama-4-Scout-17B-16E-Instruct": "tests:serving_Llama-4-Scout-17B-16E-Instruct.json",
    "Llama-4-Maverick-17B-128E-Instruct": "tests:serving_Llama-4-Maverick-17B-128E-Instruct.json",
    "Llama-3.1-70B": "tests:Llama-3.1-70B.json",
    # Meta-Llama-3-70B (TensorRT-LLM's v0.14 overview, "LLaMA v3 70B"): Llama-3.1-70B's layer
    # dimensions; only RoPE scaling and the context length differ
    "Llama-3-70B": "tests:Llama-3.1-70B.json",
    "Mistral-7B-v0.1": "data:model_configs/Mistral-7B-v0.1.json",
    "Mixtral-8x7B-v0.1": "data:model_configs/Mixtral-8x7B-v0.1.json",
    "Mixtral-8x22B-v0.1": "tests:Mixtral-8x22B-v0.1.json",
    "gpt-oss-20b": "tests:gpt-oss-20b.json",
    "gpt-oss-120b": "tests:gpt-oss-120b.json",
}
# The grown development set: every CSV in tests/data/serving/ but the two below (its columns:
# tests/data/serving/schema.py; its sources: tests/data/serving/SOURCES.md)
SERVING_DIR = TEST_DATA / "serving"
FORMAT_PAIRS_CSV = SERVING_DIR / "format_pairs.csv"
NOT_GROWN = (DEV_SET_CSV.name, FORMAT_PAIRS_CSV.name)
# scenario column -> regime (schema.py): fixed concurrency, offline run, MLPerf SLA-bound, Poisson
SCENARIO_REGIMES = {"concurrency": "fixed", "offline": "max", "server": "sla",
                    "interactive": "sla", "poisson_rate": "rate"}
MAX_MODEL_SHARE = 0.25  # no model above this share of the scored rows (deterministic cap)
FORMAT_PAIR_BAND = 0.03  # pairs whose measured |ratio - 1| is within this band have no faster one
# model name prefix -> family, for the source table
FAMILIES = (("Llama-2", "Llama-2"), ("Llama-3", "Llama-3"), ("Llama-4", "Llama-4"),
            ("Mistral", "Mistral"), ("Mixtral", "Mixtral"), ("DeepSeek", "DeepSeek-V3/R1"),
            ("Qwen3-30B-A3B", "Qwen3-MoE"), ("Qwen3-235B", "Qwen3-MoE"), ("Qwen3", "Qwen3"),
            ("gpt-oss", "gpt-oss"))
MAX_CONCURRENCY_PREFIX = "max"
# trtllm-bench caps max_batch_size at 4096 requests ("Cap total batch size to avoid decoder
# buffer size becoming too large"): tensorrt_llm/bench/build/tuning.py, finetune_setting(). The
# PyTorch backend applies it per attention-DP rank: each rank's scheduler admits max_batch_size
# requests (tensorrt_llm/_torch/pyexecutor/_util.py, BindCapacityScheduler(max_batch_size ·
# pp_size, ...) built per rank; py_executor.py fetches up to tp_size · max_num_active_requests).
TRTLLM_BENCH_MAX_BATCH = 4096
# The requests of each trtllm-bench run of TensorRT-LLM's performance overview, all queued at
# once ("For each input and output sequence length combination, the table below details the
# $num_requests that were used": docs/source/performance/perf-overview.md at 00f37686, the page
# of the rows in serving_published.csv): (ISL, OSL) -> requests
PERF_OVERVIEW_REQUESTS = {
    (128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
    (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
    (500, 2000): 3000, (20000, 2000): 1000,
}
SPEC_DECODE_NONE = ("", "none")
AGG_MODES = ("", "agg")
DISAGG_MODE = "disagg"
# "2x(tp8,ep8,dp_attn=True)": instances × (TP, EP, attention DP) of one pool
POOL_PATTERN = re.compile(r"^\s*(\d+)x\(tp(\d+),ep(\d+),dp_attn=(True|False)\)\s*$")
METRICS = ("tpot", "ttft", "tokens_per_s_per_gpu")
METRIC_LABELS = ("TPOT", "TTFT", "tok/s/GPU")
ABS_WIDTH, BIAS_WIDTH = 15, 7  # printed columns: median |error|, signed median
REQUIRED_COLUMNS = (
    "model", "gpu", "num_gpus", "precision", "tp", "ep", "pp", "isl", "osl", "concurrency",
    "output_tokens_per_s_per_gpu", "tpot_ms", "ttft_ms", "mode", "attention_dp", "spec_decode",
)
WEIGHTS_DO_NOT_FIT = "weights and workspace do not fit memory (no concurrency fits)"
HALVES = ("fit", "holdout")
# TensorRT-LLM's performance overview (source_kind trtllm_perf_overview) runs MoE models with
# attention DP and experts over the ranks: its "For MoE models" command passes `--ep $ep_size`
# with an llm_options.yml holding `enable_attention_dp: true` (indented under
# `cuda_graph_config` there, a slip of the page: it is a top-level LlmArgs field)
# (docs/source/performance/perf-overview.md at 00f37686, the v1.0 tables in
# serving_published.csv), and later versions of the page label the same models' columns "DEP4"
# (attention DP, EP 4) with `enable_attention_dp: true` under "Qwen3 MoE, Llama4 Maverick". So an
# MoE row of that page whose `attention_dp` is empty maps to dp = ep = its TP ("TP8" = DEP8).
PERF_OVERVIEW = "trtllm_perf_overview"
INFERENCEX = "inferencex"  # source_kind of the InferenceX rows (tests/data/serving/SOURCES.md)
INFERENCEX_PROMPTS_PER_SLOT = 10  # --num-prompts 10 x conc at --max-concurrency conc
INFERENCEX_RANGE_RATIO = 0.8  # --random-range-ratio: lengths uniform in [0.8, 1] x nominal
# CSV `framework` -> cost_model.deployment.ENGINES (None: generic, e.g. AMD's ATOM). NIM runs a
# TensorRT-LLM profile where the model has one (tests/data/serving/SOURCES.md §2: its rows are
# Llama-3.3-70B FP8 TP2 on H100, a TensorRT-LLM profile of that NIM); LLM-D serves with vLLM (Red
# Hat's MLPerf v6.0 software line: "LLM-D v0.5.0 ,vLLM 0.14.1")
ENGINE_WORDS = (("sglang", "sglang"), ("vllm", "vllm"), ("llm-d", "vllm"), ("tensorrt", "trtllm"),
                ("trt", "trtllm"), ("nim", "trtllm"))
# InferenceX's DeepSeek-R1 launch scripts (github.com/SemiAnalysisAI/InferenceX, benchmarks/):
# SGLang on B200/B300 (dsr1_fp8_b200.sh, dsr1_fp4_b200.sh) passes `--scheduler-recv-interval` 10,
# or 30 from concurrency 16; on H200 (dsr1_fp8_h200.sh) none (SGLang's default, 1). TensorRT-LLM
# with attention DP (dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh) sets `attention_dp_config:
# enable_balance: true, batching_wait_iters: 0, timeout_iters: 60`.
INFERENCEX_SGLANG_POLL_GPUS = ("b200", "b300")
INFERENCEX_SGLANG_POLL_STEPS = (10, 30)  # below / from the concurrency below
INFERENCEX_SGLANG_POLL_FROM_CONCURRENCY = 16
INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS = 60
# gpt-oss-120b's TensorRT-LLM script (gptoss_fp4_b200_trt.sh, tests/data/serving/SOURCES.md §7)
# sets `attention_dp_config: enable_balance: true` without `timeout_iters`: TensorRT-LLM's default,
# AttentionDpConfig.timeout_iters = 50 (tensorrt_llm/llmapi/llm_args.py)
INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS_BY_MODEL = {"gpt-oss-120b": 50}


class Skip(Exception):
    """A row the comparison leaves out; the message is the reason."""


@dataclass(frozen=True)
class Measured:
    tpot_s: float | None
    ttft_s: float | None
    tokens_per_s_per_gpu: float | None


@dataclass
class Result:
    engine: str | None
    model: str
    gpu: str
    regime: str
    is_moe: bool
    deployment: str
    isl_tokens: int
    osl_tokens: int
    concurrency: float
    measured: dict[str, float | None]
    predicted: dict[str, float]
    error_frac: dict[str, float | None] = field(default_factory=dict)
    source_kind: str = ""
    statistic: dict[str, str] = field(default_factory=dict)  # tpot / ttft -> mean, median, ...

    @property
    def half(self) -> str:
        return split_half(self.model, self.gpu, self.deployment, self.isl_tokens,
                          self.osl_tokens, self.concurrency)


def split_half(model: str, gpu: str, deployment: str, isl_tokens, osl_tokens,
               concurrency) -> str:
    """`fit` or `holdout`: the declared split of the scored rows by configuration (SHA-256 of
    model, GPU, deployment, ISL, OSL and concurrency; even first byte: fit), so a configuration
    measured on several dates stays on one side. The benchmark-TTFT terms are fitted on the fit
    half only (tests/benchmarks/fit_benchmark_ttft.py)."""
    key = f"{model}|{gpu}|{deployment}|{isl_tokens}|{osl_tokens}|{concurrency}"
    return HALVES[hashlib.sha256(key.encode()).digest()[0] % 2]


# ---- parsing ---------------------------------------------------------------------------------


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _int_or(text: str, default: int) -> int:
    value = _number(text)
    return default if value is None else int(value)


def _measured(row: dict[str, str]) -> Measured:
    tpot_ms, ttft_ms = _number(row["tpot_ms"]), _number(row["ttft_ms"])
    return Measured(
        tpot_s=None if tpot_ms is None else tpot_ms / MS_PER_S,
        ttft_s=None if ttft_ms is None else ttft_ms / MS_PER_S,
        tokens_per_s_per_gpu=_number(row["output_tokens_per_s_per_gpu"]),
    )


def _formats(row: dict[str, str], arch: Architecture) -> dict[str, str]:
    """The deployment's `precision` (and `moe_precision` where the checkpoint mixes formats)."""
    text = row["precision"].strip().lower()
    deepseek = arch.family == "deepseek_v3"
    explicit = {k: row[k].strip() for k in ("moe_precision", "kv_precision")
                if row.get(k, "").strip()}
    if explicit.get("kv_precision", "") not in ("", "fp8", "bf16", "fp16"):
        raise Skip(f"KV format not a deployment field: {explicit['kv_precision']!r}")
    if text in ("bf16", "fp16"):
        return {"precision": text, **explicit}
    if text.startswith("fp4"):
        # NVIDIA's DeepSeek FP4 checkpoints keep MLA in DeepSeek's block-scaled FP8: Model
        # Optimizer's examples/deepseek/ptq.py disables the `*attn*` quantizers unless asked
        # (github.com/NVIDIA/TensorRT-Model-Optimizer); the experts are NVFP4.
        return {"precision": "fp8_block", "moe_precision": "nvfp4"} if deepseek \
            else {"precision": "nvfp4", **explicit}
    if text.startswith("fp8"):
        return {"precision": "fp8_block" if deepseek else "fp8", **explicit}
    raise Skip(f"precision not mapped: {row['precision']!r}")


def _perf_overview_moe(row: dict[str, str], arch: Architecture) -> bool:
    """A TensorRT-LLM performance-overview row of an MoE model that states no attention DP:
    its documented options turn attention DP on, with EP over the same ranks (`PERF_OVERVIEW`)."""
    return (row.get("source_kind", "").strip() == PERF_OVERVIEW and arch.is_moe
            and not row["attention_dp"].strip())


def _deployment(row: dict[str, str], arch: Architecture) -> Deployment:
    if row.get("scenario", "").strip() and not row["tp"].strip():
        raise Skip("parallelism not stated (no launch config published with the result)")
    tp, ep, pp = _int_or(row["tp"], 1), _int_or(row["ep"], 1), _int_or(row["pp"], 1)
    dp = 1
    if _perf_overview_moe(row, arch):
        tp, ep, dp = 1, tp, tp
    elif row["attention_dp"].strip().lower() == "true":
        tp, dp = 1, tp
    try:
        return Deployment(tp=tp, ep=ep, pp=pp, dp=dp, **_formats(row, arch))
    except ValidationError as exc:  # Deployment's own rules surface as pydantic errors
        raise Skip(str(config_error_from(exc, "invalid deployment"))) from exc


def engine_of(row: dict[str, str]) -> str | None:
    """The serving engine the row ran on, from its `framework` (None: not one we model apart)."""
    text = row.get("framework", "").strip().lower()
    return next((engine for word, engine in ENGINE_WORDS if word in text), None)


def _run_settings(row: dict[str, str], engine: str | None) -> dict[str, int]:
    """The scheduler settings of the row's launch script (InferenceX only; engine defaults else)."""
    if row.get("source_kind", "").strip() != INFERENCEX:
        return {}
    if engine == "sglang" and row["gpu"].strip().lower() in INFERENCEX_SGLANG_POLL_GPUS:
        c = _number(row["concurrency"]) or 1.0
        low, high = INFERENCEX_SGLANG_POLL_STEPS
        return {"scheduler_recv_interval_steps":
                high if c >= INFERENCEX_SGLANG_POLL_FROM_CONCURRENCY else low}
    if engine == "trtllm" and row["attention_dp"].strip().lower() == "true":
        return {"adp_balance_timeout_steps": INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS_BY_MODEL.get(
            row["model"].strip(), INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS)}
    return {}


def _workload(row: dict[str, str]) -> Workload:
    isl, osl = _number(row["isl"]), _number(row["osl"])
    if isl is None and osl is not None:
        raise Skip("no ISL in the row (its source does not publish the mean input length)")
    if isl is None or osl is None:
        raise Skip("no ISL/OSL in the row")
    engine = engine_of(row)
    return Workload(isl_tokens=int(isl), osl_tokens=int(osl), engine=engine,
                    **_run_settings(row, engine))


def _regime(row: dict[str, str]) -> tuple[str, float | None]:
    scenario = row.get("scenario", "").strip()
    if scenario:
        return _scenario_regime(row, scenario)
    text = row["concurrency"].strip()
    if text.lower().startswith(MAX_CONCURRENCY_PREFIX):
        return "max", None
    value = _number(text)
    if value is None or value < 1:
        raise Skip(f"concurrency not a number: {text!r}")
    return "fixed", value


# ---- checks that leave a row out -------------------------------------------------------------


def _check_serving_mode(row: dict[str, str]) -> None:
    mode = row["mode"].strip().lower()
    if mode not in AGG_MODES and mode != DISAGG_MODE:
        raise Skip(f"{row['mode']} serving (not modelled)")
    spec = row["spec_decode"].strip().lower()
    if spec not in SPEC_DECODE_NONE or "speculative" in row["precision"].lower():
        raise Skip("speculative decoding: the row does not state its draft tokens or acceptance")


# CSV GPU name -> catalog name where they differ (lower case)
GPU_ALIASES = {"rtx pro 6000 blackwell server": "rtx-pro-6000"}


def _hardware(row: dict[str, str]) -> HardwareSpec:
    name = row["gpu"].strip().lower()
    name = GPU_ALIASES.get(name, name)
    if name not in catalog_names():
        raise Skip(f"GPU not in catalog: {row['gpu']}")
    return get_hardware(name)


def _config_path(model: str, data_dir: Path) -> Path:
    if model not in MODEL_CONFIGS:
        raise Skip(f"no config for model: {model}")
    where, name = MODEL_CONFIGS[model].split(":", 1)
    return data_dir / name if where == "data" else HF_CONFIG_DIR / name


def _check_deployment(row: dict[str, str], arch: Architecture, dep: Deployment) -> None:
    violations = deployment_violations(arch, dep)
    if violations:
        raise Skip(f"invalid deployment: {violations[0]}")
    num_gpus = _number(row["num_gpus"])
    if num_gpus is not None and int(num_gpus) != dep.gpus:
        raise Skip(f"num_gpus ({int(num_gpus)}) differs from tp·dp·pp ({dep.gpus})")


# ---- evaluation ------------------------------------------------------------------------------


def _predict_fixed(arch: Architecture, dep: Deployment, hw: HardwareSpec, workload: Workload,
                   concurrency: float) -> dict[str, float]:
    p = evaluate_points([arch], [dep], hw, workload, concurrency=np.array([concurrency]))
    if p.max_concurrency[0, 0] < 1:
        raise Skip(WEIGHTS_DO_NOT_FIT)
    if not p.fits_memory[0, 0]:
        raise Skip("the row's concurrency exceeds the model's memory limit")
    return {**_ttft_parts(p, 0), "tpot": float(p.tpot_s[0, 0]),
            "tokens_per_s_per_gpu": float(p.tokens_per_s_per_gpu[0, 0]), "concurrency": concurrency}


def _ttft_parts(p, j: int) -> dict[str, float]:
    """The benchmark TTFT at column j and the parts the fit of its terms needs."""
    return {"ttft": float(p.benchmark_ttft_s[0, j]), "steady_ttft": float(p.ttft_s[0, j]),
            "prompt_queue": float(p.prompt_queue_s[0, j]),
            "round_wait": float(p.round_wait_s[0, j]), "poll_wait": float(p.poll_wait_s[0, j])}


def _predict_max(arch: Architecture, dep: Deployment, hw: HardwareSpec, workload: Workload,
                 requests: int | None = None, batch_cap: int | None = None) -> dict[str, float]:
    """The highest-throughput point up to the memory limit and the batch cap per attention-DP
    rank (the run's `max_batch`, else trtllm-bench's); with `requests` (a finite offline run), no
    more than that in flight, and the run's throughput over its waves
    (`offline_run_tokens_per_s`)."""
    p = evaluate_points([arch], [dep], hw, workload)
    cap = (batch_cap or TRTLLM_BENCH_MAX_BATCH) * dep.dp
    allowed = p.fits_memory[0] & (p.concurrency[0] <= cap)
    throughput = np.where(allowed, p.tokens_per_s_per_gpu[0], np.nan)
    if not np.any(np.isfinite(throughput)):
        raise Skip(WEIGHTS_DO_NOT_FIT)
    best = int(np.nanargmax(throughput))
    if requests is not None and requests <= p.concurrency[0, best]:
        return _predict_fixed(arch, dep, hw, workload, float(requests))  # one wave
    predicted = {**_ttft_parts(p, best), "tpot": float(p.tpot_s[0, best]),
                 "tokens_per_s_per_gpu": float(throughput[best]),
                 "concurrency": float(p.concurrency[0, best])}
    if requests is not None:
        wave = int(predicted["concurrency"])
        last = requests % wave
        last_rate = _predict_fixed(arch, dep, hw, workload, float(last))[
            "tokens_per_s_per_gpu"] if last else 0.0
        predicted["tokens_per_s_per_gpu"] = offline_run_tokens_per_s(
            requests, wave, predicted["tokens_per_s_per_gpu"], last_rate)
    return predicted


def offline_run_tokens_per_s(requests: int, wave: int, wave_rate: float,
                             last_rate: float) -> float:
    """Throughput of an offline run of `requests` equal requests all queued at once, on an
    engine that holds `wave` of them at a time. With equal ISL/OSL the requests admitted
    together finish together (TensorRT-LLM's default GUARANTEED_NO_EVICT admits a request only
    with KV for its whole ISL + OSL), so the run is ⌊N/W⌋ full waves and a last one of
    r = N mod W requests. A wave of w requests serves w·OSL tokens at its rate R(w), taking
    w·OSL/R(w); so the run's rate is
        N·OSL / (⌊N/W⌋·W·OSL/R(W) + r·OSL/R(r)) = N / (⌊N/W⌋·W/R(W) + r/R(r)),
    R(W) when r = 0. Per GPU when the rates are."""
    full, last = divmod(requests, wave)
    seconds_per_token = full * wave / wave_rate + (last / last_rate if last else 0.0)
    return requests / seconds_per_token


def _errors(measured: Measured, predicted: dict[str, float]) -> dict[str, float | None]:
    pairs = {"tpot": measured.tpot_s, "ttft": measured.ttft_s,
             "tokens_per_s_per_gpu": measured.tokens_per_s_per_gpu}
    return {
        m: None if meas is None or meas <= 0 else predicted[m] / meas - 1.0
        for m, meas in pairs.items()
    }


def _describe(dep: Deployment) -> str:
    experts = "" if dep.moe_precision is None else f" moe-{dep.moe_precision}"
    return f"tp{dep.tp} ep{dep.ep} pp{dep.pp} dp{dep.dp} {dep.precision}{experts}"


def _pool(text: str, arch: Architecture, row: dict[str, str]) -> tuple[int, Deployment]:
    """(instances, deployment) of one pool written as "2x(tp8,ep8,dp_attn=True)"."""
    match = POOL_PATTERN.match(text or "")
    if not match:
        raise Skip(f"disaggregated pool not understood: {text!r}")
    count, tp, ep, dp_attn = match.groups()
    tp, dp = (1, int(tp)) if dp_attn == "True" else (int(tp), 1)
    try:
        return int(count), Deployment(tp=tp, ep=int(ep), dp=dp, **_formats(row, arch))
    except ValidationError as exc:
        raise Skip(str(config_error_from(exc, "invalid deployment"))) from exc


def _evaluate_disaggregated(row, arch: Architecture, hw: HardwareSpec, workload: Workload,
                            concurrency: float | None) -> Result:
    """A disaggregated row at its own xPyD ratio; concurrency is split over the decode
    instances."""
    x, prefill = _pool(row["prefill_config"], arch, row)
    y, decode = _pool(row["decode_config"], arch, row)
    if concurrency is None:
        raise Skip("disaggregated row without a concurrency")
    for dep in (prefill, decode):
        violations = deployment_violations(arch, dep)
        if violations:
            raise Skip(f"invalid deployment: {violations[0]}")
    p = evaluate_disaggregated([arch], [prefill], [decode], hw, workload,
                               np.array([max(round(concurrency / y), 1)]), PoolLimits(ratio=(x, y)))
    if not p.fits_memory[0, 0]:
        raise Skip("disaggregated: a pool does not fit memory at the row's concurrency")
    predicted = {"tpot": float(p.tpot_s[0, 0]), "ttft": float(p.benchmark_ttft_s[0, 0]),
                 "steady_ttft": float(p.ttft_s[0, 0]), "prompt_queue": float(p.queue_s[0, 0]),
                 "round_wait": 0.0, "poll_wait": 0.0,
                 "tokens_per_s_per_gpu": float(p.tokens_per_s_per_gpu[0, 0])}
    measured = _measured(row)
    return Result(workload.engine, row["model"], row["gpu"], "disagg", arch.is_moe,
                  f"{x}P {_describe(prefill)} + {y}D {_describe(decode)}", workload.isl_tokens,
                  workload.osl_tokens, concurrency, measured.__dict__, predicted,
                  _errors(measured, predicted), row.get("source_kind", "").strip(),
                  _statistic(row))


def benchmark_drain_factor(concurrency: float) -> float:
    """Run length of an InferenceX benchmark over its steady-state share, 1 + CV·√(1/n)·z_C: each
    of the C slots serves n = 10 requests one after another (`--num-prompts 10 × conc`), each
    as long as its OSL, uniform in [r, 1] × nominal (`--random-range-ratio` r = 0.8), so a slot's
    busy time has a coefficient of variation CV/√n with CV = (1 − r)/√12 / ((1 + r)/2), and the run
    ends with the slowest of C slots, z_C standard deviations late (the largest of C normal
    draws, `cost_model.order_statistics`): 1.021 at C = 4, 1.047 at C = 64.
    Client settings: tests/data/serving/SOURCES.md §1 (InferenceX's benchmark_serving.py)."""
    if concurrency <= 1:
        return 1.0
    spread = (1.0 - INFERENCEX_RANGE_RATIO) / np.sqrt(12.0) / ((1.0 + INFERENCEX_RANGE_RATIO) / 2)
    slowest = float(expected_largest_z(concurrency))
    return float(1.0 + spread / np.sqrt(INFERENCEX_PROMPTS_PER_SLOT) * slowest)


def offline_requests(row: dict[str, str]) -> int | None:
    """The requests of the row's offline run where its source states them (its `requests`
    column; TensorRT-LLM's performance overview, `PERF_OVERVIEW_REQUESTS`); None: a steady
    state."""
    stated = _number(row.get("requests", ""))
    if stated and row.get("scenario", "").strip() == "offline":
        return int(stated)
    if row.get("source_kind", "").strip() != PERF_OVERVIEW:
        return None
    return PERF_OVERVIEW_REQUESTS.get((int(_number(row["isl"]) or 0),
                                       int(_number(row["osl"]) or 0)))


def _as_measured(row: dict[str, str], regime: str, predicted: dict[str, float]) -> None:
    """Predicted tokens/s/GPU over the run the row measured (InferenceX: a finite run)."""
    if row.get("source_kind", "").strip() == INFERENCEX and regime == "fixed":
        predicted["tokens_per_s_per_gpu"] /= benchmark_drain_factor(predicted["concurrency"])


def _scenario_regime(row: dict[str, str], scenario: str) -> tuple[str, float | None]:
    """(regime, concurrency) of a grown-set row by its `scenario` (tests/data/serving/schema.py)."""
    if scenario not in SCENARIO_REGIMES:
        raise Skip(f"scenario not modelled: {scenario!r}")
    regime = SCENARIO_REGIMES[scenario]
    if regime == "fixed":
        value = _number(row["concurrency"])
        if value is None or value < 1:
            raise Skip(f"concurrency not a number: {row['concurrency']!r}")
        return regime, value
    if regime == "rate":
        return regime, poisson_concurrency(row)
    return regime, None


def little_concurrency(rate_per_s: float, ttft_s: float, tpot_s: float, osl_tokens: float) -> float:
    """Requests in flight at a Poisson rate λ (Little's law): L = λ · W, W the mean request
    latency TTFT + (OSL − 1) · TPOT."""
    return rate_per_s * (ttft_s + (osl_tokens - 1.0) * tpot_s)


def poisson_concurrency(row: dict[str, str]) -> float:
    """The mean concurrency per instance of a `poisson_rate` row, from its measured request rate
    and mean latencies (`little_concurrency`); at least one request."""
    rate, m = _number(row.get("request_rate_per_s", "")), _measured(row)
    osl = _number(row["osl"])
    if rate is None or m.ttft_s is None or m.tpot_s is None or osl is None:
        raise Skip("poisson_rate row without its rate, mean TTFT, mean TPOT and OSL")
    instances = (_number(row.get("total_gpus", "")) or 1) / (_number(row["num_gpus"]) or 1)
    return max(little_concurrency(rate / instances, m.ttft_s, m.tpot_s, osl), 1.0)


def sla_best_index(tokens_per_s_per_gpu: np.ndarray, ttft_p99_s: np.ndarray,
                   tpot_p99_s: np.ndarray, allowed: np.ndarray, ttft_limit_s: float,
                   tpot_limit_s: float) -> int | None:
    """Index of the largest tokens/s/GPU over a concurrency sweep whose p99 TTFT and p99 TPOT
    meet the limits (MLPerf Server / Interactive: the largest throughput that meets them); None
    when no allowed point does."""
    ok = allowed & (ttft_p99_s <= ttft_limit_s) & (tpot_p99_s <= tpot_limit_s)
    if not np.any(ok):
        return None
    return int(np.argmax(np.where(ok, tokens_per_s_per_gpu, -np.inf)))


def _predict_sla(arch: Architecture, dep: Deployment, hw: HardwareSpec, workload: Workload,
                 row: dict[str, str]) -> dict[str, float]:
    """The largest modelled throughput whose TTFT and TPOT meet the row's limits
    (`sla_best_index`) over the concurrency sweep up to memory and the run's batch cap.
    Percentile approximation: the p99 of each is taken as the model's value at that concurrency
    (the steady-state TPOT, the benchmark TTFT): every request of a steady batch sees the same
    steps; the MLPerf logs' own p99/mean ratios are printed beside the scores
    (`_p99_over_mean`)."""
    ttft_limit, tpot_limit = _number(row["ttft_limit_ms"]), _number(row["tpot_limit_ms"])
    if ttft_limit is None or tpot_limit is None:
        raise Skip("SLA-bound row without its TTFT/TPOT limits")
    p = evaluate_points([arch], [dep], hw, workload)
    cap = (_number(row.get("max_batch", "")) or TRTLLM_BENCH_MAX_BATCH) * dep.dp
    allowed = p.fits_memory[0] & (p.concurrency[0] <= cap)
    best = sla_best_index(p.tokens_per_s_per_gpu[0], p.benchmark_ttft_s[0], p.tpot_s[0], allowed,
                          ttft_limit / MS_PER_S, tpot_limit / MS_PER_S)
    if best is None:
        raise Skip("no modelled concurrency meets the row's TTFT/TPOT limits")
    return {**_ttft_parts(p, best), "tpot": float(p.tpot_s[0, best]),
            "tokens_per_s_per_gpu": float(p.tokens_per_s_per_gpu[0, best]),
            "concurrency": float(p.concurrency[0, best])}


def _statistic(row: dict[str, str]) -> dict[str, str]:
    """What `tpot_ms` / `ttft_ms` hold: the row's `tpot_stat` / `ttft_stat`, else as its
    `derived_fields` say (InferenceX: mean or median TPOT, median TTFT); `unstated` otherwise."""
    derived = row.get("derived_fields", "")
    out = {}
    for metric in ("tpot", "ttft"):
        stated = row.get(f"{metric}_stat", "").strip()
        inferred = next((s for s in ("mean", "median") if f"{s}_{metric}" in derived), "")
        out[metric] = stated or inferred or "unstated"
    return out


def _predict(row, arch, dep, hw, workload, regime, concurrency) -> dict[str, float]:
    if regime == "max":
        return _predict_max(arch, dep, hw, workload, offline_requests(row),
                            int(_number(row.get("max_batch", "")) or 0) or None)
    if regime == "sla":
        return _predict_sla(arch, dep, hw, workload, row)
    return _predict_fixed(arch, dep, hw, workload, concurrency)


def evaluate_row(row: dict[str, str], data_dir: Path, archs: dict[Path, Architecture]) -> Result:
    """The comparison for one CSV row; raises `Skip` with the reason when it has none."""
    path = _config_path(row["model"], data_dir)
    hw = _hardware(row)
    _check_serving_mode(row)
    workload, (regime, concurrency) = _workload(row), _regime(row)
    if path not in archs:
        archs[path] = load_architecture(path)
    arch = archs[path]
    if row["mode"].strip().lower() == DISAGG_MODE:
        return _evaluate_disaggregated(row, arch, hw, workload, concurrency)
    dep = _deployment(row, arch)
    _check_deployment(row, arch, dep)
    try:
        predicted = _predict(row, arch, dep, hw, workload, regime, concurrency)
    except ConfigError as exc:
        raise Skip(f"cost model refused the row: {exc}") from exc
    _as_measured(row, regime, predicted)
    measured = _measured(row)
    return Result(
        workload.engine,
        row["model"],
        row["gpu"],
        regime,
        arch.is_moe,
        _describe(dep),
        workload.isl_tokens,
        workload.osl_tokens,
        predicted.pop("concurrency"),
        measured.__dict__,
        predicted,
        _errors(measured, predicted),
        row.get("source_kind", "").strip(),
        _statistic(row),
    )


def evaluate_all(rows: list[dict[str, str]], data_dir: Path,
                 skipped_by_source: Counter | None = None) -> tuple[list[Result], Counter]:
    """The rows' comparisons and the skipped rows by reason; `skipped_by_source`, when given,
    also counts them by (source_kind, reason)."""
    results, skipped, archs = [], Counter(), {}
    for row in rows:
        try:
            results.append(evaluate_row(row, data_dir, archs))
        except Skip as reason:
            skipped[str(reason)] += 1
            if skipped_by_source is not None:
                skipped_by_source[(_source_kind(row), str(reason))] += 1
    return results, skipped


def _source_kind(row: dict[str, str]) -> str:
    return row.get("source_kind", "").strip() or "?"


# ---- summaries -------------------------------------------------------------------------------


def log_error_summary(log_errors: np.ndarray, decimals: int = 0) -> str:
    """"median |error| X%, bias Y%" of errors given as log(pred/meas) (the fit scripts' form)."""
    rel = np.exp(log_errors) - 1.0
    return f"median |error| {np.median(np.abs(rel)):.{decimals}%}, " \
        f"bias {np.median(rel):+.{decimals}%}"


def _stats(results: list[Result]) -> dict[str, dict[str, float | int | None]]:
    out = {}
    for metric in METRICS:
        errs = np.array([r.error_frac[metric] for r in results if r.error_frac[metric] is not None])
        out[metric] = {
            "n": int(errs.size),
            "median_abs_error_frac": float(np.median(np.abs(errs))) if errs.size else None,
            "median_error_frac": float(np.median(errs)) if errs.size else None,
        }
    return out


def summarize(results: list[Result], skipped: Counter) -> dict:
    groups = defaultdict(list)
    for r in results:
        groups[(r.model, r.gpu, r.regime)].append(r)
    by_group = [{"model": m, "gpu": g, "regime": reg, "rows": len(rs), "metrics": _stats(rs)}
                for (m, g, reg), rs in sorted(groups.items())]
    return {
        "rows_evaluated": len(results),
        "rows_skipped": sum(skipped.values()),
        "groups": by_group,
        "overall": _by_kind(results),
        "halves": {half: _by_kind([r for r in results if r.half == half]) for half in HALVES},
        "skipped": dict(skipped.most_common()),
        "rows": [{**r.__dict__, "half": r.half} for r in results],
    }


def _by_kind(results: list[Result]) -> dict:
    return {kind: _stats([r for r in results if r.is_moe == (kind == "moe")])
            for kind in ("dense", "moe")}


# ---- printing --------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.0f}%"


def _abs_pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _cells(stats: dict) -> str:
    return "".join(f"{_abs_pct(stats[m]['median_abs_error_frac']):>{ABS_WIDTH}}"
                   f"{_pct(stats[m]['median_error_frac']):>{BIAS_WIDTH}}" for m in METRICS)


def _header(first: str) -> str:
    return first + "".join(
        f"{label + ' |e|':>{ABS_WIDTH}}{'bias':>{BIAS_WIDTH}}" for label in METRIC_LABELS
    )


def print_report(summary: dict, data_path: Path) -> None:
    print(f"serving validation: {data_path}")
    print(f"rows evaluated {summary['rows_evaluated']}, skipped {summary['rows_skipped']}; "
          "error = pred/meas - 1: median |error| then signed median (bias)")
    print("regime: fixed = at the row's concurrency; max = best throughput up to min(memory limit, "
          f"{TRTLLM_BENCH_MAX_BATCH} per DP rank, the run's requests) over the run's waves vs "
          "trtllm-bench offline max load\n")
    print(_header(f"{'model':<26} {'gpu':<9} {'regime':<6} {'n':>4}"))
    for g in summary["groups"]:
        print(
            f"{g['model']:<26} {g['gpu']:<9} {g['regime']:<6} {g['rows']:>4}{_cells(g['metrics'])}"
        )
    print()
    _print_overall(summary)


def _read_rows(path: Path, option: str) -> list[dict[str, str]] | None:
    """The CSV's rows, or None (the reason printed) when it is missing or lacks a column."""
    if not path.is_file():
        print(f"`{option}`: {path} does not exist", file=sys.stderr)
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
        rows = list(reader)
    if missing:
        print(f"`{option}`: {path} lacks the column(s) {', '.join(missing)}", file=sys.stderr)
        return None
    return rows


def _print_combined(summary: dict, paths: list[Path]) -> None:
    print(f"serving validation, combined: {' + '.join(str(p) for p in paths)}")
    print(f"rows evaluated {summary['rows_evaluated']}, skipped {summary['rows_skipped']}\n")
    _print_overall(summary)
    print("\ndeclared split by configuration (split_half): the benchmark-TTFT terms are fitted "
          "on `fit` only")
    print(_header(f"{'half / models':<26} {'n':>21}"))
    for half, kinds in summary["halves"].items():
        for kind, stats in kinds.items():
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            print(f"{half + ' ' + kind:<26} {counts:>21}{_cells(stats)}")


def _print_overall(summary: dict) -> None:
    """The dense / MoE overall table and the skipped rows by reason."""
    print("overall (n per metric: TPOT / TTFT / tok/s/GPU)")
    print(_header(f"{'models':<26} {'n':>21}"))
    for kind, stats in summary["overall"].items():
        counts = "/".join(str(stats[m]["n"]) for m in METRICS)
        print(f"{kind:<26} {counts:>21}{_cells(stats)}")
    print("\nskipped rows by reason")
    for reason, count in summary["skipped"].items():
        print(f"{count:>5}  {reason}")


# ---- the grown development set: sources, statistics, the per-model cap, format pairs -------


def grown_csvs(folder: Path = SERVING_DIR) -> list[Path]:
    """The grown development set's CSVs (every CSV in tests/data/serving/ but `NOT_GROWN`)."""
    return sorted(p for p in folder.glob("*.csv") if p.name not in NOT_GROWN)


def family_of(model: str) -> str:
    return next((family for prefix, family in FAMILIES if model.startswith(prefix)), model)


def model_cap(counts: list[int], max_share: float = MAX_MODEL_SHARE) -> int:
    """The largest per-model row count K such that no model keeps more than `max_share` of the
    rows once every model is cut to K: K ≤ share · Σ min(n_m, K)."""
    best = 0
    for k in range(1, max(counts, default=0) + 1):
        if k <= max_share * sum(min(n, k) for n in counts):
            best = k
    return best


def _model_key(model: str) -> str:
    """Models that share a config count as one (DeepSeek-R1, -0528 and V3; base and Instruct)."""
    return MODEL_CONFIGS.get(model, model)


def capped(results: list[Result], max_share: float = MAX_MODEL_SHARE):
    """(results with no model above `max_share`, {model: (rows, kept)} for the models cut).
    Deterministic: a cut model keeps the rows whose SHA-256 of their configuration comes
    first."""
    by_model = defaultdict(list)
    for r in results:
        by_model[_model_key(r.model)].append(r)
    cap = model_cap([len(rs) for rs in by_model.values()], max_share)
    kept, cut = [], {}
    for model, rs in sorted(by_model.items()):
        if len(rs) > cap:
            rs = sorted(rs, key=_row_hash)[:cap]
            cut[model] = (len(by_model[model]), cap)
        kept += rs
    return kept, cut


def _row_hash(r: Result) -> str:
    key = f"{r.source_kind}|{r.model}|{r.gpu}|{r.deployment}|{r.isl_tokens}|{r.osl_tokens}|" \
          f"{r.concurrency}|{r.measured}"
    return hashlib.sha256(key.encode()).hexdigest()


def _p99_over_mean(rows: list[dict[str, str]]) -> dict[str, float | None]:
    """Median p99/mean of TPOT and TTFT over the rows that publish both (MLPerf's logs)."""
    out = {}
    for metric in ("tpot", "ttft"):
        ratios = [_number(r[f"{metric}_p99_ms"]) / _number(r[f"{metric}_ms"]) for r in rows
                  if _number(r.get(f"{metric}_p99_ms", "")) and _number(r.get(f"{metric}_ms", ""))]
        out[metric] = float(np.median(ratios)) if ratios else None
    return out


def source_table(rows: list[dict[str, str]], results: list[Result],
                 skipped_by_source: Counter | None = None) -> dict:
    """Rows per source (in the CSVs, and scored) by family, engine and GPU; the scored rows by
    family, engine and GPU; the skipped ones by reason where `skipped_by_source` is given."""
    table = {}
    for kind in sorted({_source_kind(r) for r in rows}):
        mine = [r for r in rows if _source_kind(r) == kind]
        scored = [r for r in results if (r.source_kind or "?") == kind]
        table[kind] = {
            "rows": len(mine), "scored": len(scored),
            "family": dict(Counter(family_of(r["model"]) for r in mine).most_common()),
            "engine": dict(Counter(engine_of(r) or "other" for r in mine).most_common()),
            "gpu": dict(Counter(r["gpu"] for r in mine).most_common()),
            "scored_by": {
                "family": dict(Counter(family_of(r.model) for r in scored).most_common()),
                "engine": dict(Counter(r.engine or "other" for r in scored).most_common()),
                "gpu": dict(Counter(r.gpu for r in scored).most_common())},
            "skipped": {reason: n for (k, reason), n in (skipped_by_source or Counter())
                        .most_common() if k == kind},
        }
    return table


def scored_totals(results: list[Result]) -> dict:
    """Scored rows by family, engine and GPU over every source, and the largest model's share
    (before and after the per-model cap)."""
    kept, _ = capped(results)
    def share(rs):
        counts = Counter(_model_key(r.model) for r in rs)
        return max(counts.values()) / len(rs) if rs else None
    return {"family": dict(Counter(family_of(r.model) for r in results).most_common()),
            "engine": dict(Counter(r.engine or "other" for r in results).most_common()),
            "gpu": dict(Counter(r.gpu for r in results).most_common()),
            "largest_model_share": share(results), "largest_model_share_capped": share(kept)}


def per_source(results: list[Result]) -> dict:
    groups = defaultdict(list)
    for r in results:
        groups[r.source_kind or "?"].append(r)
    return {kind: _by_kind(rs) for kind, rs in sorted(groups.items())}


def by_statistic(results: list[Result]) -> dict:
    """TPOT and TTFT errors by the statistic each row reports (mean, median, unstated)."""
    out = {}
    for metric in ("tpot", "ttft"):
        for stat in sorted({r.statistic.get(metric, "unstated") for r in results}):
            rs = [r for r in results if r.statistic.get(metric, "unstated") == stat]
            stats = _stats(rs)[metric]
            if stats["n"]:
                out[f"{metric} {stat}"] = stats
    return out


def _pair_row(pair: dict[str, str], side: str) -> dict[str, str]:
    """One side of a format pair as a CSV row `evaluate_row` reads."""
    row = {c: pair.get(c, "") for c in ("model", "gpu", "framework", "tp", "ep", "attention_dp",
                                        "isl", "osl", "concurrency", "source_kind", "num_gpus",
                                        "precision", "moe_precision", "kv_precision",
                                        "scenario", "requests")}
    row.update(pp="1", mode="agg", spec_decode="none", prefill_config="", decode_config="",
               derived_fields="", notes="", tpot_ms=pair[f"tpot_ms_{side}"],
               ttft_ms=pair[f"ttft_ms_{side}"],
               output_tokens_per_s_per_gpu=pair[f"output_tokens_per_s_per_gpu_{side}"])
    row[pair["field"]] = pair[f"format_{side}"]
    return row


def format_pair_ratio_errors(pred: np.ndarray, meas: np.ndarray,
                             band: float = FORMAT_PAIR_BAND) -> dict[str, float | int | None]:
    """Agreement on the faster format (pairs whose measured ratio is outside 1 ± band) and the
    median |predicted ratio − measured ratio| over all pairs."""
    decided = np.abs(meas - 1.0) > band
    agree = np.sign(np.log(pred[decided])) == np.sign(np.log(meas[decided]))
    return {"pairs": int(meas.size), "decided": int(decided.sum()),
            "faster_agree_frac": float(agree.mean()) if decided.any() else None,
            "median_abs_ratio_error": float(np.median(np.abs(pred - meas))) if meas.size else None,
            "median_measured_ratio": float(np.median(meas)) if meas.size else None,
            "median_predicted_ratio": float(np.median(pred)) if meas.size else None}


def pair_group(pair: dict[str, str]) -> str:
    """A format pair's group: its source, the field that differs and the two formats."""
    return f"{pair.get('source_kind', '')} {pair['field']} {pair['format_a']}/{pair['format_b']}"


def score_format_pairs(pairs: list[dict[str, str]], data_dir: Path) -> tuple[dict, list, Counter]:
    """The model's a/b ratios of TPOT and tokens/s/GPU against the measured ones (each line
    carries its `group`, `pair_group`)."""
    archs, lines, skipped = {}, [], Counter()
    for pair in pairs:
        try:
            a, b = (evaluate_row(_pair_row(pair, side), data_dir, archs) for side in "ab")
        except Skip as reason:
            skipped[str(reason)] += 1
            continue
        concurrency = "" if _number(pair["concurrency"]) is None else f" c{pair['concurrency']}"
        line = {"pair": f"{pair['model']} {pair['gpu']} {engine_of(pair) or pair['framework']} "
                        f"{a.deployment} {pair['isl']}/{pair['osl']}{concurrency} "
                        f"{pair['format_a']}/{pair['format_b']}", "group": pair_group(pair)}
        for metric in PAIR_METRICS:
            key = "tpot_s" if metric == "tpot" else metric
            if a.measured[key] and b.measured[key]:
                line[metric] = (a.predicted[metric] / b.predicted[metric],
                                a.measured[key] / b.measured[key])
        lines.append(line)
    return _pair_summary(lines), lines, skipped


PAIR_METRICS = ("tpot", "tokens_per_s_per_gpu")


def _pair_summary(lines: list[dict]) -> dict:
    """`format_pair_ratio_errors` per metric over the lines that have it."""
    out = {}
    for metric in PAIR_METRICS:
        have = [line[metric] for line in lines if metric in line]
        pred, meas = (np.array([p[i] for p in have]) for i in (0, 1))
        out[metric] = format_pair_ratio_errors(pred, meas)
    return out


def pair_groups(lines: list[dict]) -> dict:
    """The pair figures per group (`pair_group`)."""
    return {g: _pair_summary([line for line in lines if line["group"] == g])
            for g in sorted({line["group"] for line in lines})}


def _read_pairs(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _fmt_table(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def print_sources(table: dict, totals: dict | None = None) -> None:
    print("source table: rows in the CSVs (scored) by family, engine and GPU")
    for kind, t in table.items():
        print(f"  {kind}: {t['rows']} rows ({t['scored']} scored)")
        for axis in ("family", "engine", "gpu"):
            print(f"      {axis:<7} {_fmt_table(t[axis])}")
        if t.get("scored") and t.get("scored_by"):
            for axis in ("family", "engine", "gpu"):
                print(f"      scored {axis:<7} {_fmt_table(t['scored_by'][axis])}")
        for reason, n in t.get("skipped", {}).items():
            print(f"      skipped {n:>4}  {reason}")
    if totals:
        print("  all scored rows:")
        for axis in ("family", "engine", "gpu"):
            print(f"      {axis:<7} {len(totals[axis])}: {_fmt_table(totals[axis])}")
        print(f"      largest model share {totals['largest_model_share']:.0%}, after the cap "
              f"{totals['largest_model_share_capped']:.0%}")


def print_per_source(errors: dict) -> None:
    print("\nper-source errors (n per metric: TPOT / TTFT / tok/s/GPU)")
    print(_header(f"{'source / models':<34} {'n':>13}"))
    for kind, kinds in errors.items():
        for models, stats in kinds.items():
            counts = "/".join(str(stats[m]["n"]) for m in METRICS)
            if any(stats[m]["n"] for m in METRICS):
                print(f"{kind[:28] + ' ' + models:<34} {counts:>13}{_cells(stats)}")


def print_statistics(stats: dict, p99: dict) -> None:
    print("\nby the statistic each row reports (model: steady-state TPOT, benchmark TTFT)")
    for key, st in stats.items():
        print(f"  {key:<16} n {st['n']:>4}   median |error| {_abs_pct(st['median_abs_error_frac'])}"
              f"   bias {_pct(st['median_error_frac'])}")
    ratios = ", ".join(f"{m.upper()} {v:.2f}" for m, v in p99.items() if v is not None)
    print(f"  p99/mean in the MLPerf logs (median over rows): {ratios or '-'}; the SLA scoring "
          "takes p99 = the model's value (_predict_sla)")


def print_pairs(summary: dict, lines: list, skipped: Counter, groups: dict | None = None) -> None:
    print("\nformat pairs (tests/data/serving/format_pairs.csv): ratio a/b, predicted vs measured")
    for line in lines:
        cells = "  ".join(f"{m.split('_')[0]} {line[m][0]:.2f} vs {line[m][1]:.2f}"
                          for m in PAIR_METRICS if m in line)
        print(f"  {line['pair']}: {cells}")
    for group, by_metric in (groups or {}).items():
        print(f"  group {group}:")
        _print_pair_figures(by_metric, "    ")
    print("  all pairs:")
    _print_pair_figures(summary, "    ")
    for reason, count in skipped.items():
        print(f"  skipped {count}: {reason}")


def _print_pair_figures(summary: dict, indent: str) -> None:
    for metric, st in summary.items():
        if not st["pairs"]:
            continue
        agree = "-" if st["faster_agree_frac"] is None else f"{st['faster_agree_frac']:.0%}"
        err = "-" if st["median_abs_ratio_error"] is None else f"{st['median_abs_ratio_error']:.3f}"
        medians = f"measured median {st['median_measured_ratio'] or 0:.2f}, " \
                  f"model {st['median_predicted_ratio'] or 0:.2f}"
        print(f"{indent}{metric}: {st['pairs']} pairs, faster format agrees {agree} of the "
              f"{st['decided']} outside ±{FORMAT_PAIR_BAND:.0%}, median |ratio error| {err} "
              f"({medians})")


def grown_report(all_rows, all_results, all_skipped, grown_rows, grown_results, grown_skipped,
                 data_dir: Path, skipped_by_source: Counter | None = None) -> dict:
    kept, cut = capped(all_results)
    pairs, pair_lines, pair_skipped = score_format_pairs(_read_pairs(FORMAT_PAIRS_CSV), data_dir)
    return {"grown": {**summarize(grown_results, grown_skipped)},
            "sources": source_table(all_rows, all_results, skipped_by_source),
            "scored_totals": scored_totals(all_results),
            "per_source": per_source(all_results),
            "by_statistic": by_statistic(all_results),
            "p99_over_mean": _p99_over_mean(all_rows),
            "capped": {"cut": {m: list(v) for m, v in cut.items()}, "overall": _by_kind(kept),
                       "rows": len(kept)},
            "format_pairs": pairs, "format_pair_lines": pair_lines,
            "format_pair_groups": pair_groups(pair_lines),
            "format_pair_skipped": dict(pair_skipped), "all_skipped": dict(all_skipped)}


def print_grown(report: dict, paths: list[Path]) -> None:
    print("grown development set: " + " + ".join(p.name for p in paths))
    g = report["grown"]
    print(f"rows evaluated {g['rows_evaluated']}, skipped {g['rows_skipped']}\n")
    _print_overall(g)
    print("\n" + "=" * 100 + "\n\nall sources together (published + development + grown)\n")
    print_sources(report["sources"], report.get("scored_totals"))
    print_per_source(report["per_source"])
    print_statistics(report["by_statistic"], report["p99_over_mean"])
    cap = report["capped"]
    cut = ", ".join(f"{m.split(':')[-1]} {n}→{k}" for m, (n, k) in cap["cut"].items())
    print(f"\ncapped at {MAX_MODEL_SHARE:.0%} of the rows per model ({cut or 'none cut'}; "
          f"{cap['rows']} rows)")
    print(_header(f"{'models':<26} {'n':>21}"))
    for kind, stats in cap["overall"].items():
        counts = "/".join(str(stats[m]["n"]) for m in METRICS)
        print(f"{kind:<26} {counts:>21}{_cells(stats)}")
    print("\nskipped rows by reason (all sources)")
    for reason, count in sorted(report["all_skipped"].items(), key=lambda kv: -kv[1]):
        print(f"{count:>5}  {reason}")
    print_pairs(report["format_pairs"], report["format_pair_lines"],
                Counter(report["format_pair_skipped"]), report.get("format_pair_groups"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"folder holding {CSV_NAME} and model_configs/ (default: %(default)s)")
    parser.add_argument("--dev-set", type=Path, default=DEV_SET_CSV,
                        help="development-set CSV scored beside it (default: %(default)s)")
    parser.add_argument("--no-dev-set", action="store_true", help="score the published CSV only")
    parser.add_argument("--no-grown", action="store_true",
                        help="leave out the grown development set (the other CSVs of "
                             "tests/data/serving/) and the format pairs")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of tables"
    )
    args = parser.parse_args(argv)
    data_path = args.data / CSV_NAME
    rows = _read_rows(data_path, "--data")
    if rows is None:
        return 2
    dev_rows = None if args.no_dev_set else _read_rows(args.dev_set, "--dev-set")
    if dev_rows is None and not args.no_dev_set:
        return 2
    by_source = Counter()  # skipped rows by (source_kind, reason), for the grown-set table
    results, skipped = evaluate_all(rows, args.data, by_source)
    summary = summarize(results, skipped)
    dev_summary = combined = None
    if dev_rows is not None:
        dev_results, dev_skipped = evaluate_all(dev_rows, args.data, by_source)
        dev_summary = summarize(dev_results, dev_skipped)
        combined = summarize(results + dev_results, skipped + dev_skipped)
    grown = None
    if dev_rows is not None and not args.no_grown:
        grown_paths = grown_csvs()
        grown_rows = [r for path in grown_paths for r in _read_rows(path, str(path)) or []]
        grown_results, grown_skipped = evaluate_all(grown_rows, args.data, by_source)
        grown = grown_report(rows + dev_rows + grown_rows,
                             results + dev_results + grown_results,
                             skipped + dev_skipped + grown_skipped, grown_rows, grown_results,
                             grown_skipped, args.data, by_source)
    if args.json:
        document = {"data": str(data_path), **summary}
        if dev_summary is not None:
            document["dev_set"] = {"data": str(args.dev_set), **dev_summary}
            document["combined"] = {"data": [str(data_path), str(args.dev_set)],
                                    **{k: v for k, v in combined.items() if k != "rows"}}
        if grown is not None:
            document["grown_set"] = {"data": [str(p) for p in grown_paths], **grown}
        print(json.dumps(document, indent=1))
    else:
        print_report(summary, data_path)
        if dev_summary is not None:
            print("\n" + "=" * 100 + "\n")
            print_report(dev_summary, args.dev_set)
            print("\n" + "=" * 100 + "\n")
            _print_combined(combined, [data_path, args.dev_set])
        if grown is not None:
            print("\n" + "=" * 100 + "\n")
            print_grown(grown, grown_paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
