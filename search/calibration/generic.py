"""The generic kernels: what a step without a named engine runs (`cost_model/data/efficiency/
generic/`). Per GPU and part (each format's dense GEMMs, each format's fused MoE, attention, the
all-reduce), the entry of the engine whose fitted model is the fastest on a fixed reference set of
shapes (geometric mean of what a serving step pays: the GEMM kernel, the fused MoE layer, prefill
and decode attention calls, all-reduces), copied with `kernels = "<engine>"` and the comparison
that chose it. A GEMM entry whose op floor beside the kernel (`quantize_fixed_us`) exceeds
MAX_QUANTIZE_FIXED_US is no candidate: no quantization kernel takes that long (aiconfigurator-core
0.12.0's quantize tables, scale + pass at M = 1, K = 8192 on B200: TensorRT-LLM 10.4 µs, vLLM 3.4,
SGLang 7.1), so its kernel is not separable from the rest of its op (vLLM 0.24.0's block FP8:
60-360 µs). The engines' tables time different libraries for one format (TensorRT-
LLM's CUTLASS flows, FlashInfer's CuTe-DSL and TensorRT-LLM-gen kernels, DeepGEMM, sgl-kernel): a
design without a named engine is priced on the best measured kernel of each part.
"""

from __future__ import annotations

import copy
import numpy as np

from cost_model.communication import all_reduce_s
from cost_model.efficiency import Efficiency
from cost_model.gemm import GemmRates, gemm_time_s
from cost_model.hardware import HardwareSpec
from cost_model.precision import get_precision
from search.calibration import attention as attention_fit
from search.calibration import moe as moe_fit

GEMM_M = (1, 4, 16, 64, 1024, 4096, 16384)  # decode and prefill token counts
GEMM_NK = (2048, 4096, 8192, 16384)  # model widths
MOE_LAYERS = ((7168, 2048, 256, 8), (2048, 768, 128, 8), (2880, 2880, 128, 4))
# (hidden, expert H', experts, top-k): DeepSeek-V3, Qwen3-30B-A3B, gpt-oss-120b
MOE_TOKENS = (1, 16, 64, 256, 1024, 4096)
MOE_SPLITS = ((1, 8), (8, 1))  # (moe_tp, moe_ep)
ATTENTION_DECODE = ((1, 16, 128), (1024, 8192, 32768))  # batch, context
ATTENTION_PREFILL = ((1, 4), (1024, 4096, 16384))  # batch, prompt tokens
ATTENTION_HEADS = (32, 8, 128)  # query heads, KV heads, head width on one GPU
ALL_REDUCE_BYTES = tuple(2.0 ** np.arange(10, 27, 2))
ALL_REDUCE_GPUS = (2, 4, 8)
MAX_QUANTIZE_FIXED_US = 25.0


def _geomean(values: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=np.float64)))))


def gemm_score_s(hw: HardwareSpec, eff: Efficiency, fmt: str) -> float | None:
    """Geometric mean of the predicted GEMM kernel over the reference grid (None: no candidate,
    module docstring)."""
    if eff.gemm[fmt].quantize_fixed_s * 1e6 > MAX_QUANTIZE_FIXED_US:
        return None
    m, n, k = (x.ravel() for x in np.meshgrid(GEMM_M, GEMM_NK, GEMM_NK, indexing="ij"))
    rates = GemmRates.of(hw, get_precision(fmt), eff=eff.gemm[fmt], efficiency=eff)
    return _geomean(gemm_time_s(m, n, k, 1.0, hw, rates))


def moe_score_s(hw: HardwareSpec, eff: Efficiency, fmt: str) -> float:
    """Geometric mean of the predicted fused MoE layer over the reference layers and loads."""
    rows = [(t, h, i, k, e, tp, ep) for h, i, e, k in MOE_LAYERS for t in MOE_TOKENS
            for tp, ep in MOE_SPLITS]
    cols = np.array(rows, dtype=np.float64).T
    data = moe_fit.MeasuredMoe(fmt, *cols, time_s=np.ones(len(rows)))
    return _geomean(moe_fit.predicted_s(data, hw, eff))


def attention_score_s(hw: HardwareSpec, eff: Efficiency) -> float:
    """Geometric mean of predicted decode and prefill attention calls (BF16 and FP8 KV)."""
    heads, kv_heads, width = ATTENTION_HEADS
    times = []
    for phase, (batches, tokens) in (("decode", ATTENTION_DECODE),
                                      ("prefill", ATTENTION_PREFILL)):
        for kv_bytes in (2.0, 1.0):
            grid = np.array([(b, t) for b in batches for t in tokens], dtype=np.float64).T
            ones = np.ones(grid.shape[1])
            data = attention_fit.MeasuredAttention(
                phase, grid[0], grid[1], heads * ones, kv_heads * ones, width * ones, 0 * ones,
                kv_bytes * ones, ones)
            times.append(attention_fit.predicted_s(data, hw, eff))
    return _geomean(np.concatenate(times))


def comm_score_s(hw: HardwareSpec, eff: Efficiency) -> float:
    size, gpus = np.meshgrid(ALL_REDUCE_BYTES, ALL_REDUCE_GPUS)
    return _geomean(all_reduce_s(size.ravel(), gpus.ravel(), hw, eff))


def _choose(scores: dict[str, float]) -> tuple[str, str]:
    """(fastest engine, why): the scores in µs."""
    best = min(scores, key=scores.get)
    listed = ", ".join(f"{e} {s * 1e6:.4g} µs" for e, s in scores.items())
    return best, f"fastest geometric mean on the reference set (search/calibration/" \
                 f"generic.py): {listed}"


def _parts(effs: dict[str, Efficiency]) -> list[str]:
    """Every part some engine has: "gemm.<fmt>", "moe.<fmt>", "attention", "communication"."""
    return [f"{section}.{fmt}" for section in ("gemm", "moe")
            for fmt in dict.fromkeys(f for e in effs.values() for f in getattr(e, section))] \
        + ["attention", "communication"]


def _score(part: str, hw: HardwareSpec, eff: Efficiency) -> float | None:
    section, _, fmt = part.partition(".")
    if section in ("gemm", "moe") and fmt not in getattr(eff, section):
        return None
    if section == "gemm":
        return gemm_score_s(hw, eff, fmt)
    if section == "moe":
        return moe_score_s(hw, eff, fmt) if hw.supports(get_precision(fmt)) else None
    return attention_score_s(hw, eff) if section == "attention" else comm_score_s(hw, eff)


def generic_doc(hw: HardwareSpec, docs: dict[str, dict],
                effs: dict[str, Efficiency]) -> tuple[dict, dict[str, str]]:
    """(the generic file of one GPU built from its engines' files, {part: chosen engine})."""
    base = next(iter(docs.values()))
    out = {"hardware": base["hardware"], "kernels": "generic",
           "version": "generic: per part the fastest of " + ", ".join(
               f"{e} ({d.get('version', '')})" for e, d in docs.items()),
           "gemm": {}, "moe": {}}
    chosen = {}
    for part in _parts(effs):
        scores = {e: s for e, eff in effs.items() if (s := _score(part, hw, eff)) is not None}
        if not scores:
            continue
        engine, why = _choose(scores)
        chosen[part] = engine
        section, _, fmt = part.partition(".")
        table = copy.deepcopy(docs[engine][section][fmt] if fmt else docs[engine][section])
        table.update(kernels=engine, chosen_because=why)
        if fmt:
            out[section][fmt] = table
        else:
            out[section] = table
    return out, chosen
