"""Where the serving comparison reads its rows and how it reads them: paths, the model configs,
the source, engine and scenario vocabularies, and the benchmark clients' settings (each constant
with the page or script it comes from)."""

from __future__ import annotations

import re

import numpy as np

from tests.data_paths import HF_CONFIGS, TEST_DATA

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
# Measurements a regime takes as input, not as a prediction: a Poisson-rate run's output tokens/s
# is its request rate × OSL (every request is served), so it is not scored. Every regime's TTFT is
# scored as its client measured it (cost_model.arrival_queue: Poisson arrivals, offline runs).
NOT_SCORED = {"rate": {"tokens_per_s_per_gpu": "output tokens/s of a Poisson-rate run: its "
                                                "request rate × OSL, the model's input"}}
# Regimes whose client is not a closed loop: their TTFT is the arrival model's (nothing fitted), so
# it is scored but never fitted on (the benchmark-TTFT terms are the closed-loop client's)
OPEN_LOOP_REGIMES = ("rate", "sla", "max")
RATE_ABOVE_CAPACITY = ("the row's request rate is above the model's capacity (no steady state "
                       "under Poisson arrivals)")
# the concurrencies a Poisson-arrival row is read on (4 per octave, 1 … 65,536): Little's law's
# fixed point for the row's rate and an SLA's largest throughput are interpolated on them
RATE_GRID = np.unique(np.round(2.0 ** (np.arange(0, 16 * 4 + 1) / 4.0)))
# An engine gets benchmark-TTFT terms of its own from this many rows with a measured TTFT (fewer:
# the generic table's): leave-one-source-out showed a few rows' table (the vLLM blog's 4 rows
# setting vLLM's t_request for InferenceX's 463) is a few rows' client, not the engine's
MIN_ENGINE_TTFT_ROWS = 20
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
# source_kind -> source: one independent publisher's run set. A source is what leave-one-source-out
# leaves out (tests/benchmarks/serving/loso.py); kinds not named here are their own source.
SOURCE_OF_KIND = {
    "trtllm_tech_blog": "nvidia_blogs", "nvidia_blog": "nvidia_blogs",  # NVIDIA's blog posts
}
# the published CSV's `mlperf` rows: the round their `framework` names (MLPerf Inference v5.1, v6.0)
MLPERF_ROUNDS = (("v5.1", "mlperf_v5_1"), ("v6.0", "mlperf_v6_0"))
