"""A deployment's formats as the `quantization_config` a checkpoint in them would carry — the
inverse of `checkpoint_formats` (a test checks the round trip for every format pair).

The scheme is the one serving engines load for such checkpoints:
- one quantized format: block FP8 as DeepSeek-V3 ships it (`quant_method` fp8,
  `weight_block_size` [128, 128]); MXFP4 experts as gpt-oss (`quant_method` mxfp4); FP8 and
  NVFP4 as NVIDIA's ModelOpt checkpoints (`quant_method` modelopt, `quant_algo`,
  `kv_cache_quant_algo`, `exclude_modules`);
- anything else (two quantized formats, weight-only W4A16/W8A16, a quantized KV cache with
  block FP8 or MXFP4): compressed-tensors `config_groups` with regex targets per component.
Unquantized components are excluded by module patterns; the LM head and routers stay BF16.
"""

from __future__ import annotations

from typing import Any

from cost_model.errors import ConfigError
from cost_model.hf.modules import ATTENTION, COMPONENTS, DENSE, EXPERTS
from cost_model.hf.quantization import UNQUANTIZED

# module patterns of each component (globs for ModelOpt / transformers, regexes for
# compressed-tensors); experts are `mlp.experts` (Qwen, DeepSeek, gpt-oss) or
# `block_sparse_moe.experts` (Mixtral, MiniMax)
_GLOBS = {ATTENTION: ["*self_attn*", "*linear_attn*"],
          DENSE: ["*shared_expert*", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj"],
          EXPERTS: ["*experts.*"]}
_REGEXES = {ATTENTION: [r"re:.*self_attn\..*", r"re:.*linear_attn\..*"],
            DENSE: [r"re:.*shared_experts?\..*", r"re:.*mlp\.(gate|up|down)_proj$"],
            EXPERTS: [r"re:.*experts\.\d+\..*"]}
_ALWAYS_BF16 = ["lm_head", "*router*", "*mlp.gate", "*block_sparse_moe.gate"]
_MODELOPT = {"fp8": "FP8", "nvfp4": "NVFP4"}
_KV_MODELOPT = {"fp8": "FP8", "nvfp4": "NVFP4"}
_FLOAT8 = {"num_bits": 8, "type": "float", "symmetric": True}
_FLOAT4 = {"num_bits": 4, "type": "float", "symmetric": True}
# compressed-tensors presets (llm-compressor's FP8_DYNAMIC, FP8_BLOCK, NVFP4, MXFP4, W4A16, W8A16)
_CT_GROUPS: dict[str, dict[str, Any]] = {
    "fp8": {"weights": {**_FLOAT8, "strategy": "channel", "dynamic": False},
            "input_activations": {**_FLOAT8, "strategy": "token", "dynamic": True}},
    "fp8_block": {"weights": {**_FLOAT8, "strategy": "block", "block_structure": [128, 128],
                              "dynamic": False},
                  "input_activations": {**_FLOAT8, "strategy": "group", "group_size": 128,
                                        "dynamic": True}},
    "nvfp4": {"weights": {**_FLOAT4, "strategy": "tensor_group", "group_size": 16},
              "input_activations": {**_FLOAT4, "strategy": "tensor_group", "group_size": 16,
                                    "dynamic": "local"}},
    "mxfp4": {"weights": {**_FLOAT4, "strategy": "group", "group_size": 32},
              "input_activations": {**_FLOAT4, "strategy": "group", "group_size": 32,
                                    "dynamic": True}},
    "w4a16": {"weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                          "group_size": 128}, "input_activations": None},
    "w8a16": {"weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"},
              "input_activations": None},
}
_CT_KV = {"fp8": {**_FLOAT8, "strategy": "tensor", "dynamic": False},
          "nvfp4": {**_FLOAT4, "strategy": "tensor_group", "group_size": 16, "dynamic": False}}


def quantization_config_for(precision: str, moe_precision: str | None = None,
                            kv_precision: str | None = None) -> dict[str, Any] | None:
    """The `quantization_config` of a checkpoint whose attention, dense and shared-expert
    layers are in `precision`, routed experts in `moe_precision` (default: `precision`) and KV
    cache in `kv_precision` (None or 16-bit: not quantized); None when nothing is quantized."""
    formats = {ATTENTION: precision, DENSE: precision, EXPERTS: moe_precision or precision}
    for component, fmt in formats.items():
        if fmt not in _CT_GROUPS and fmt not in UNQUANTIZED:
            raise ConfigError(f"`{_FIELD[component]}` ({fmt!r}) has no checkpoint format: one of "
                              f"{', '.join(sorted((*_CT_GROUPS, *UNQUANTIZED)))}")
    kv = None if kv_precision in (None, *UNQUANTIZED) else kv_precision
    if kv is not None and kv not in _CT_KV:
        raise ConfigError(f"`kv_precision` ({kv!r}) has no checkpoint format: one of "
                          f"{', '.join(sorted(_CT_KV))}, bf16")
    quantized = {c: f for c, f in formats.items() if f not in UNQUANTIZED}
    if not quantized and kv is None:
        return None
    kept = [c for c in COMPONENTS if c not in quantized]
    single = set(quantized.values())
    if len(single) == 1:
        fmt = single.pop()
        if fmt == "fp8_block" and kv is None:
            return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                    "weight_block_size": [128, 128], "modules_to_not_convert": _globs(kept)}
        if fmt == "mxfp4" and kv is None:
            return {"quant_method": "mxfp4", "modules_to_not_convert": _globs(kept)}
        if fmt in _MODELOPT:
            return {"quant_method": "modelopt", "quant_algo": _MODELOPT[fmt],
                    "kv_cache_quant_algo": None if kv is None else _KV_MODELOPT.get(kv),
                    "exclude_modules": _globs(kept)}
    if not quantized and kv is not None:  # only the KV cache
        return {"quant_method": "modelopt", "quant_algo": None,
                "kv_cache_quant_algo": _KV_MODELOPT[kv], "exclude_modules": []}
    return _compressed_tensors(quantized, kept, kv)


_FIELD = {ATTENTION: "precision", DENSE: "precision", EXPERTS: "moe_precision"}


def _globs(components: list[str]) -> list[str]:
    return [*_ALWAYS_BF16, *(g for c in components for g in _GLOBS[c])]


def _compressed_tensors(quantized: dict[str, str], kept: list[str],
                        kv: str | None) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for fmt in dict.fromkeys(quantized.values()):
        targets = [r for c, f in quantized.items() if f == fmt for r in _REGEXES[c]]
        groups[f"group_{len(groups)}"] = {**_CT_GROUPS[fmt], "targets": targets}
    ignore = ["lm_head", r"re:.*mlp\.gate$", r"re:.*router.*",
              *(r for c in kept for r in _REGEXES[c])]
    return {"quant_method": "compressed-tensors", "format": "mixed-precision",
            "quantization_status": "compressed", "config_groups": groups, "ignore": ignore,
            "kv_cache_scheme": None if kv is None else _CT_KV.get(kv)}
