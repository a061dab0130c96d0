"""Hybrid vs full-attention throughput: the cost model's ratios next to the published ones
(issue 15, "Must show"). Not collected by pytest; run
`python tests/benchmarks/hybrid_throughput.py`.

Each pair runs through `cost_model.evaluate.evaluate_points`, the path `archscout evaluate` takes,
sweeping concurrency from 1 to each candidate's memory limit. A model's throughput is its best
output tokens/s/GPU over the pair's deployments (each model in its own best deployment, as the
publications compare tuned deployments), prefill included (aggregated serving). The ratio is
hybrid / full-attention model. Linear-attention layers are costed by a roofline (no measured
kernel table: `cost_model.step.uncalibrated_components`), so these ratios carry the
roofline's uncertainty on the Mamba-2 / Gated DeltaNet share.

Published figures:
- Qwen3-Next-80B-A3B vs Qwen3-32B: "more than 10x higher throughput" in prefill and decode beyond
  32k tokens of context (Qwen team, "Qwen3-Next: Towards Ultimate Training & Inference
  Efficiency", qwen.ai blog, Sept 2025). Hardware and engine not stated: 8x H200, BF16 here.
- Nemotron-H-56B-Base vs Llama-3.1-70B: "up to 3x faster inference" at 65,536 input / 1,024
  output tokens on H100 GPUs (NVIDIA, "Nemotron-H: A Family of Accurate and Efficient Hybrid
  Mamba-Transformer Models", arXiv 2504.03624, Figure 1 and §1). FP8 on 8x H100 here.
- Nemotron-3-Nano-30B-A3B vs Qwen3-30B-A3B: 3.3x higher throughput on one H200 at 8k input /
  16k output (NVIDIA, "Nemotron 3 Nano" technical report, arXiv 2512.20848, Figure 1). FP8 both.
Each pair prints which published setting it mirrors (`Pair.mirrors`) and what the publication
leaves open. Dense DP groups are replicas and MoE ones step in lockstep
(cost_model/serving_steps.py); no attention-DP balancer is assumed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cost_model import (  # noqa: E402
    Deployment, Workload, evaluate_points, get_hardware, load_architecture,
    uncalibrated_components,
)

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS  # noqa: E402


@dataclass(frozen=True)
class Pair:
    hybrid: str  # config stem under tests/data
    baseline: str
    hardware: str
    isl_tokens: int
    osl_tokens: int
    max_gpus: int
    precision: str
    published_ratio: float
    source: str
    mirrors: str  # the published setting the pair reproduces, and what it leaves open


PAIRS = (
    Pair("Qwen3-Next-80B-A3B-Instruct", "Qwen3-32B", "h200", 32768, 1024, 8, "bf16", 10.0,
         "Qwen3-Next blog (qwen.ai, 2025): >10x beyond 32k context",
         "the blog's throughput at >= 32k of context, neither GPU, engine nor parallelism "
         "stated; here one 8x H200 node in the checkpoints' BF16, aggregated serving, each "
         "model's best TP x DP (attention DP with EP = TP for the MoE) and concurrency"),
    Pair("Nemotron-H-56B-Base-8K", "Llama-3.1-70B", "h100-sxm", 65536, 1024, 8, "fp8", 3.0,
         "Nemotron-H, arXiv 2504.03624 Fig. 1: up to 3x at 65,536/1,024 on H100",
         "the paper's tokens/s/GPU at 65,536 in / 1,024 out on H100 (FP8, the 56B's training "
         "format; engine and parallelism not stated): one 8x H100 node, each model's best "
         "TP x DP (dense DP = replicas) and concurrency"),
    Pair("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Qwen3-30B-A3B", "h200", 8192, 16384, 1, "fp8",
         3.3, "Nemotron 3 Nano, arXiv 2512.20848 Fig. 1: 3.3x on one H200 at 8k/16k",
         "the report's single-H200 throughput at 8k in / 16k out: one H200, FP8 both, each at "
         "its best concurrency up to its memory limit (the report's batch is not stated)"),
)


def _config(stem: str):
    path = HF_CONFIGS / f"{stem}.json"
    return load_architecture(path if path.exists() else MODEL_CONFIGS / f"{stem}.json")


def _deployments(arch, max_gpus: int, precision: str) -> list[Deployment]:
    """TP (and, for an MoE, EP = TP) over powers of two up to `max_gpus`; DP fills the rest."""
    out = []
    tp = 1
    while tp <= max_gpus:
        ep = tp if arch.ffn.is_moe else 1
        out.append(Deployment(tp=tp, ep=ep, dp=max_gpus // tp, precision=precision,
                              kv_precision=precision))
        tp *= 2
    return out


def best_throughput(arch, pair: Pair) -> tuple[float, Deployment, float]:
    """(best output tokens/s/GPU, its deployment, its concurrency) over the pair's deployments."""
    hw = get_hardware(pair.hardware)
    workload = Workload(isl_tokens=pair.isl_tokens, osl_tokens=pair.osl_tokens)
    deps = [d for d in _deployments(arch, pair.max_gpus, pair.precision) if _valid(arch, d)]
    points = evaluate_points([arch] * len(deps), deps, hw, workload)
    y = np.where(points.fits_memory, points.tokens_per_s_per_gpu, np.nan)
    i, j = np.unravel_index(np.nanargmax(y), y.shape)
    return float(y[i, j]), deps[i], float(points.concurrency[i, j])


def throughput_at(arch, dep: Deployment, pair: Pair, concurrency: float) -> float:
    """Output tokens/s/GPU of `arch` under `dep` at one concurrency (NaN beyond memory)."""
    workload = Workload(isl_tokens=pair.isl_tokens, osl_tokens=pair.osl_tokens)
    points = evaluate_points([arch], [dep], get_hardware(pair.hardware), workload,
                             np.array([concurrency]))
    return float(np.where(points.fits_memory, points.tokens_per_s_per_gpu, np.nan)[0, 0])


def _valid(arch, dep: Deployment) -> bool:
    from cost_model import deployment_violations

    return not deployment_violations(arch, dep)


def main() -> int:
    header = (f"{'hybrid':<38}{'baseline':<16}{'hw':<10}{'ISL/OSL':<13}{'hybrid tok/s/GPU':>18}"
              f"{'base tok/s/GPU':>16}{'predicted':>11}{'published':>11}")
    print(header)
    for pair in PAIRS:
        hybrid, base = _config(pair.hybrid), _config(pair.baseline)
        y_h, dep_h, c_h = best_throughput(hybrid, pair)
        y_b, dep_b, c_b = best_throughput(base, pair)
        print(f"{pair.hybrid:<38}{pair.baseline:<16}{pair.hardware:<10}"
              f"{f'{pair.isl_tokens}/{pair.osl_tokens}':<13}{y_h:>18.1f}{y_b:>16.1f}"
              f"{y_h / y_b:>10.2f}x{pair.published_ratio:>10.1f}x")
        print(f"    hybrid: tp{dep_h.tp} ep{dep_h.ep} dp{dep_h.dp} {pair.precision} "
              f"at c={c_h:.0f}; "
              f"baseline: tp{dep_b.tp} ep{dep_b.ep} dp{dep_b.dp} at c={c_b:.0f}; "
              f"uncalibrated: {', '.join(uncalibrated_components(hybrid)) or 'none'}")
        same_c = throughput_at(hybrid, dep_h, pair, c_b * dep_h.dp / dep_b.dp)
        print(f"    at the baseline's concurrency per DP group ({c_b / dep_b.dp:.0f}) the hybrid "
              f"gives {same_c:.1f} tok/s/GPU: {same_c / y_b:.2f}x (the rest of the predicted "
              "ratio is the hybrid's higher memory limit on concurrency)")
        print(f"    source: {pair.source}")
        print(f"    mirrors: {pair.mirrors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
