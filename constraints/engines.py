"""Serving engines as constraints: which deployments vLLM, SGLang and TensorRT-LLM can run.

A study may name its engine (`engine = "vllm" | "sglang" | "trtllm"`); deployments the engine
cannot run are then never proposed. Each rule below reads one engine's own argument or mapping
code (paths inside the engine's repository, as of the snapshots read for this module) and
returns one message naming the rule and the numbers, or None when the deployment passes.

The cost model's mapping (cost_model/deployment.py) is TensorRT-LLM's written as degrees: `tp`
GPUs per attention group, `dp` attention groups, `ep` expert parallelism over the stage's
tp·dp·kvp GPUs (the rest shards each expert: moe_tp), `kvp` Helix KV parallelism, `pp` stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cost_model import ENGINES, Architecture, Deployment

ENGINE_NAMES = ENGINES  # the serving engines, named in one place (cost_model/deployment.py)
BF16_LINEAR = frozenset({"bf16", "fp16"})  # unquantized linear layers


@dataclass(frozen=True)
class EngineFormats:
    """The number formats one engine runs, by component."""

    linear: frozenset[str]  # attention, dense FFN and shared-expert linear layers
    experts: frozenset[str]  # routed experts
    kv_cache: frozenset[str]
    # expert formats whose checkpoints leave every other linear layer unquantized
    experts_only: frozenset[str] = frozenset()


# vLLM 0.33.0 (the version of tests/data/engine_args/vllm.json, read from its own parser):
# `--quantization` methods (QuantizationMethods, vllm/model_executor/layers/quantization/
# __init__.py: "fp8" also reads block-scaled FP8, "modelopt_fp4" NVFP4, "gptq_marlin" 4/8-bit
# weight-only, "mxfp4"); vllm/model_executor/layers/quantization/mxfp4.py quantizes FusedMoE
# only (its linear layers fall back to unquantized: "MXFP4 linear layer is not implemented");
# `--kv-cache-dtype` (CacheDType, vllm/config/cache.py): auto, bfloat16, fp8, fp8_e4m3, …,
# nvfp4 (NVFP4 KV: E2M1 values in 16-value blocks, archscout's nvfp4 KV layout).
_VLLM = EngineFormats(
    linear=frozenset({"bf16", "fp16", "fp8", "fp8_block", "nvfp4", "w4a16", "w8a16"}),
    experts=frozenset({"bf16", "fp16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16", "w8a16"}),
    kv_cache=frozenset({"bf16", "fp16", "fp8", "nvfp4"}), experts_only=frozenset({"mxfp4"}))
# SGLang 0.5.23 (tests/data/engine_args/sglang.json): QUANTIZATION_CHOICES in
# python/sglang/srt/server_args.py ("fp8", "modelopt_fp4", "gptq_marlin"/"awq_marlin", "mxfp4"
# marked "MOE-only"); `--kv-cache-dtype` choices fp8_e4m3, fp8_e5m2, nvfp4 (E2M1 values in
# 16-value blocks, archscout's nvfp4 KV layout), fp4_mx_block16, mxfp8, bf16.
_SGLANG = EngineFormats(
    linear=_VLLM.linear, experts=_VLLM.experts,
    kv_cache=frozenset({"bf16", "fp16", "fp8", "nvfp4"}), experts_only=frozenset({"mxfp4"}))
# TensorRT-LLM: QuantAlgo in tensorrt_llm/quantization/mode.py (FP8, FP8_BLOCK_SCALES, NVFP4,
# W4A16/W8A16 weight-only; MXFP4 only as W4A16_MXFP4 / W4A8_MXFP4_* weights, the gpt-oss MoE
# path) and KV_CACHE_QUANT_ALGO_LIST = [FP8, INT8, NVFP4].
_TRTLLM = EngineFormats(
    linear=_VLLM.linear, experts=_VLLM.experts,
    kv_cache=frozenset({"bf16", "fp16", "fp8", "nvfp4"}))
ENGINE_FORMATS = {"vllm": _VLLM, "sglang": _SGLANG, "trtllm": _TRTLLM}
ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}

Rule = Callable[[str, Architecture, Deployment], "str | None"]


def _formats(engine: str, arch: Architecture, dep: Deployment) -> str | None:
    """Every component's format is one the engine runs."""
    table, name = ENGINE_FORMATS[engine], ENGINE_LABELS[engine]
    checks = [("precision", dep.precision, table.linear),
              ("kv_precision", dep.kv_cache_precision, table.kv_cache)]
    if arch.ffn.is_moe:
        checks.append(("moe_precision", dep.expert_precision, table.experts))
    for field, value, allowed in checks:
        if value not in allowed:
            return (f"`{field}` {value} does not run on {name} (its formats for this component: "
                    f"{', '.join(sorted(allowed))})")
    return None


def _experts_only_formats(engine: str, arch: Architecture, dep: Deployment) -> str | None:
    """vLLM's and SGLang's MXFP4 quantizes the routed experts and leaves the linear layers
    unquantized (vllm/model_executor/layers/quantization/mxfp4.py; SGLang's "mxfp4" choice is
    "MOE-only"), so MXFP4 experts come with BF16 linear layers."""
    only = ENGINE_FORMATS[engine].experts_only
    if arch.ffn.is_moe and dep.expert_precision in only and dep.precision not in BF16_LINEAR:
        return (f"`moe_precision` {dep.expert_precision} on {ENGINE_LABELS[engine]} quantizes "
                f"the experts only: the linear layers run unquantized, not `precision` "
                f"{dep.precision} (use bf16)")
    return None


def _vllm_expert_parallel_spans_tp_dp(engine, arch: Architecture, dep: Deployment) -> str | None:
    """vLLM shards MoE layers over TP·DP (vllm/config/parallel.py, `data_parallel_size`: "MoE
    layers will be sharded according to the product of the tensor, prefill-context, and data
    parallel sizes"); `--enable-expert-parallel` turns that whole group into the EP group ("The
    EP group spans the TP x PCP x DP ranks"): EP is 1 or TP·DP, no expert-TP beside it.
    Decode context parallelism reuses the TP ranks, so TP there is tp·kvp."""
    span = dep.tp * dep.dp * dep.kvp
    if arch.ffn.is_moe and dep.ep not in (1, span):
        return (f"vLLM's expert parallelism spans TP·DP = {span} GPUs: `ep` must be 1 or {span}, "
                f"got {dep.ep} (experts also sharded {dep.moe_tp}-way, a TensorRT-LLM mapping)")
    return None


def _sglang_no_decode_context_parallel(engine, arch, dep: Deployment) -> str | None:
    """SGLang's context parallelism splits prefill only (python/sglang/srt/server_args.py:
    PREFILL_CP_SPLIT_CHOICES, the DSA prefill CP); it has no decode KV sharding like Helix."""
    if dep.kvp > 1:
        return (f"`kvp` {dep.kvp}: SGLang has no Helix / decode context parallelism (its "
                "context parallelism splits prefill only)")
    return None


def _trtllm_attention_dp_is_per_rank(engine, arch: Architecture, dep: Deployment) -> str | None:
    """TensorRT-LLM's attention DP makes every rank of the TP group its own attention group
    (tensorrt_llm/mapping.py, MappingBase.dp_size: `tp_size if enable_attention_dp else 1`), so
    an MoE instance with attention DP has one GPU per attention group. (A dense model's DP
    groups share nothing: they run as separate instances.)"""
    if arch.ffn.is_moe and dep.dp > 1 and dep.tp > 1:
        return (f"TensorRT-LLM's attention DP gives each GPU its own requests: `dp` {dep.dp} "
                f"with `tp` {dep.tp} (attention TP inside a DP group) is not a TensorRT-LLM "
                "mapping; use tp 1 or dp 1")
    return None


ENGINE_RULES: dict[str, tuple[Rule, ...]] = {
    "vllm": (_formats, _experts_only_formats, _vllm_expert_parallel_spans_tp_dp),
    "sglang": (_formats, _experts_only_formats, _sglang_no_decode_context_parallel),
    "trtllm": (_formats, _trtllm_attention_dp_is_per_rank),
}


def engine_violations(engine: str | None, arch: Architecture, dep: Deployment) -> list[str]:
    """One message per rule of `engine` that `dep` of `arch` breaks ([] when it runs, or when
    no engine is named)."""
    if engine is None:
        return []
    return [m for rule in ENGINE_RULES[engine] if (m := rule(engine, arch, dep)) is not None]


def format_refusal(engine: str, field: str, value: str) -> str | None:
    """Why a study's format option can never run on `engine` (None when some deployment can):
    the check a study file gets at load time."""
    table = ENGINE_FORMATS[engine]
    allowed = {"precision": table.linear, "moe_precision": table.experts,
               "kv_precision": table.kv_cache}[field]
    if value in allowed:
        return None
    return (f"`space.{field}` option {value!r} does not run on {ENGINE_LABELS[engine]} (its "
            f"formats for this component: {', '.join(sorted(allowed))})")
