"""The serving modes against their published anchors (nothing here is fitted to them).

1. Speculative decoding: DeepSeek-V3 technical report (arXiv 2412.19437) §5.4.3 — one MTP token
   accepted 85-90% of the time gives "1.8 times TPS". Modelled: 8× H200, FP8 block-scaled,
   EP 8, chat 1k/1k, concurrency 1, acceptance 0.85 and 0.90.
2. Helix: Bhatia et al. 2025 (arXiv 2507.07120) — for DeepSeek-R1 at multi-million-token
   context, "reduces TTL by up to 1.5x at fixed batch sizes and supports up to 32x larger
   batches under the same latency budget". Modelled: 64 GB200 (one NVL72), 1M context,
   NVFP4, decode pool alone; the best plain mapping (TP×EP, attention DP×TP, attention DP)
   against Helix (kvp 64 × EP 64): TTL at batch 1, and the largest batch each reaches within
   the plain mapping's TTL at batch 1, 2, 4 …
3. Disaggregated serving: the published disaggregated rows of tests/data (NVIDIA Dynamo with
   TensorRT-LLM / SGLang, InferenceX) at their own xPyD ratios, scored by validate_serving.py;
   InferenceX's aggregated-vs-disaggregated pair for DeepSeek-R1 on H200 at 1k/1k; and the
   aggregated vs disaggregated frontier area of DeepSeek-R1 on 8× H200 at 8k/1k.

Usage: python tests/benchmarks/serving_mode_anchors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cost_model import (  # noqa: E402
    Deployment, PoolLimits, Workload, evaluate_disaggregated, evaluate_points, get_hardware,
    load_architecture,
)
from tests.data_paths import MODEL_CONFIGS  # noqa: E402

DEEPSEEK = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
BATCHES = np.array([1.0, 2, 4, 8, 16, 32, 64, 128, 256, 512])


def mtp() -> None:
    dep = Deployment(tp=8, ep=8, precision="fp8_block")
    hw, chat = get_hardware("h200"), Workload(isl_tokens=1024, osl_tokens=1024)
    tpot = lambda d: float(evaluate_points([DEEPSEEK], [d], hw, chat,  # noqa: E731
                                           np.array([1.0])).tpot_s[0, 0])
    plain = tpot(dep)
    for acceptance in (0.85, 0.90):
        sped = tpot(dep.model_copy(update={"spec_tokens": 1, "spec_acceptance_frac": acceptance}))
        print(f"MTP, 1 token at acceptance {acceptance:.2f}: {plain / sped:.2f}x tokens/s per "
              f"user (published: 1.8x)")


def _decode_tpot(dep: Deployment, workload: Workload) -> tuple[np.ndarray, float]:
    p = evaluate_disaggregated([DEEPSEEK], [Deployment(tp=8, ep=8, precision="nvfp4")], [dep],
                               get_hardware("gb200"), workload, BATCHES, PoolLimits(ratio=(1, 1)))
    limit = float(p.max_concurrency[0, 0])
    return np.where(BATCHES <= limit, p.tpot_s[0], np.nan), limit


def helix() -> None:
    workload = Workload(isl_tokens=1_000_000, osl_tokens=1024)
    plain_deps = (Deployment(tp=64, ep=64, precision="nvfp4"),
                  Deployment(tp=8, dp=8, ep=64, precision="nvfp4"),
                  Deployment(tp=1, dp=64, ep=64, precision="nvfp4"))
    stacked = np.stack([_decode_tpot(d, workload)[0] for d in plain_deps])
    plain = np.where(np.isfinite(stacked).any(axis=0),
                     np.min(np.where(np.isfinite(stacked), stacked, np.inf), axis=0), np.nan)
    helix_tpot, _ = _decode_tpot(Deployment(tp=1, kvp=64, ep=64, precision="nvfp4"), workload)
    print(f"Helix, DeepSeek-R1 at 1M tokens on 64 GB200: TTL at batch 1 {plain[0] * 1e3:.1f} → "
          f"{helix_tpot[0] * 1e3:.1f} ms, {plain[0] / helix_tpot[0]:.2f}x lower "
          f"(published: up to 1.5x)")
    gains = []
    for budget in plain[np.isfinite(plain)]:
        def within(t, budget=budget):
            return BATCHES[np.isfinite(t) & (t <= budget * (1 + 1e-9))]

        gains.append(within(helix_tpot).max() / within(plain).max())
    print(f"  largest batch within the plain mapping's TTL: up to {max(gains):.0f}x larger "
          f"(published: up to 32x)")


def disaggregated() -> None:
    import validate_serving

    data = validate_serving.DEFAULT_DATA_DIR
    published = validate_serving._read_rows(data / validate_serving.CSV_NAME, "--data")
    results, _ = validate_serving.evaluate_all(published, data)
    rows = [r.__dict__ for r in results if r.regime == "disagg"]
    for metric in ("tpot", "ttft", "tokens_per_s_per_gpu"):
        errs = np.array([r["error_frac"][metric] for r in rows
                         if r["error_frac"][metric] is not None])
        print(f"disaggregated published rows ({len(errs)}): {metric} median |error| "
              f"{np.median(np.abs(errs)):.0%}, bias {np.median(errs):+.0%}")
    _published_pair()
    hw, long = get_hardware("h200"), Workload(isl_tokens=8192, osl_tokens=1024)
    dep = Deployment(tp=8, ep=8, precision="fp8_block")
    agg = evaluate_points([DEEPSEEK], [dep], hw, long).frontier_area(10.0, 1000.0)[0]
    dis = evaluate_disaggregated([DEEPSEEK], [dep], [dep], hw, long).frontier_area(10.0, 1000.0)[0]
    print(f"DeepSeek-R1 8k/1k on H200 (tp8 ep8 instances): frontier area aggregated {agg:.4g}, "
          f"disaggregated {dis:.4g} ({dis / agg - 1:+.0%})")


def _published_pair() -> None:
    """InferenceX, DeepSeek-R1-0528 FP8 on H200 at 1k/1k: aggregated TensorRT-LLM TP8 EP8 vs
    Dynamo + TensorRT-LLM 1P (attention DP 8, EP 8) + 9D (TP8 EP8), tokens/s/GPU at matched
    concurrency per decode instance (published: 95.33 vs 91.33 at 16, 228.08 vs 235.83 at 64)."""
    hw, chat = get_hardware("h200"), Workload(isl_tokens=1024, osl_tokens=1024)
    dec = Deployment(tp=8, ep=8, precision="fp8_block")
    pre = Deployment(tp=1, dp=8, ep=8, precision="fp8_block")
    c = np.array([16.0, 64.0])
    agg = evaluate_points([DEEPSEEK], [dec], hw, chat, c).tokens_per_s_per_gpu[0]
    dis = evaluate_disaggregated([DEEPSEEK], [pre], [dec], hw, chat, c,
                                 PoolLimits(ratio=(1, 9))).tokens_per_s_per_gpu[0]
    for i, (published_agg, published_dis) in enumerate(((95.33, 91.33), (228.08, 235.83))):
        print(f"disaggregated / aggregated tokens/s/GPU at {c[i]:.0f} per decode instance: "
              f"model {dis[i] / agg[i]:.3f}, published {published_dis / published_agg:.3f}")


def main() -> int:
    mtp()
    helix()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    disaggregated()
    return 0


if __name__ == "__main__":
    sys.exit(main())
