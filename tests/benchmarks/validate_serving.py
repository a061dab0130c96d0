"""Compare the cost model's operating points with published serving measurements.

Reads `tests/data/serving_published.csv` (published results, each row with its source URL; see
tests/data/SOURCES.md), the development set `tests/data/serving/published_ttft_tpot.csv` and the
grown development set (every other CSV of tests/data/serving/; its SOURCES.md), evaluates every
aggregated-serving row on a catalog GPU whose model the importer supports, and reports the
relative error pred/meas − 1 of TPOT, TTFT (the benchmark client's TTFT, `benchmark_ttft_s`:
what published measurements report) and output tokens/s/GPU.

The headline is leave-one-source-out (tests/benchmarks/serving/loso.py): a source is one
publisher's run set (`rows.source_of`: InferenceX, each version of TensorRT-LLM's performance
overview, its v0.14 online table, each MLPerf round, the vLLM blog, NIM, NVIDIA's blogs, ...); for
each source, every fitted serving term (the host time per scheduled sequence per host CPU kind,
tests/benchmarks/fit_host_overhead.py; the benchmark-TTFT terms per engine,
tests/benchmarks/fit_benchmark_ttft.py) is fitted on the other sources' rows and the source's rows
are scored with that fit. Printed: those left-out figures for dense and MoE models apart, per
source and per engine, with the in-sample figures (every term fitted on all rows) and the shipped
constants' beside them; the same with each term switched off or held as shipped (ablations); the
terms of every fold; the ranking of deployments by tokens/s/GPU (Kendall τ-b); then each CSV's
figures by model × GPU, dense vs MoE, per source, by statistic, capped per model, the rows left out
and why, the source table and the format pairs. The declared fit half (`split_half`, still in
`--json` rows) is no longer the validation: leave-one-source-out is.

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
- MLPerf rows carry their dataset's input-length spread (`Workload.isl_mix_frac`: 50 quantiles
  of the per-sample input tokens, tests/benchmarks/serving/isl_mixes.py): under Poisson
  arrivals (Server / Interactive) the prompt queue is M/G/1 and the p99 TTFT includes the own
  prefill of long prompts (`cost_model.arrival_queue`). The SLA rows' TPOT is printed at the SLA
  criterion's point and at the closed-loop proxy's (the closed loop's mean TTFT as the p99).

`--json` keeps the published set's summary at the top level, with `dev_set`, `combined`,
`grown_set` and `loso` beside it.

Usage: python tests/benchmarks/validate_serving.py [--data DIR] [--dev-set CSV | --no-dev-set]
[--no-grown] [--no-loso | --no-ablations] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repository root: tests.*

# The package tests/benchmarks/serving/ holds the code; these names are what the fit scripts
# (fit_host_overhead.py, fit_benchmark_ttft.py), serving_mode_anchors.py and the tests import
# from here.
from tests.benchmarks.serving.cli import main  # noqa: E402
from tests.benchmarks.serving.config import (  # noqa: E402, F401
    CSV_NAME, DEFAULT_DATA_DIR, DEV_SET_CSV, HALVES, METRICS, MIN_ENGINE_TTFT_ROWS,
    PERF_OVERVIEW,
)
from tests.benchmarks.serving.metrics import log_error_summary, summarize  # noqa: E402, F401
from tests.benchmarks.serving.rows import (  # noqa: E402, F401
    Result, Skip, _hardware, _read_rows, engine_of, split_half,
)
from tests.benchmarks.serving.scenarios import (  # noqa: E402, F401
    benchmark_drain_factor, evaluate_all, evaluate_row, offline_requests, offline_run_tokens_per_s,
)

if __name__ == "__main__":
    sys.exit(main())
