"""A deployment's formats: the flags a user gave, else the checkpoint's (`checkpoint_formats`)
on this GPU, else a default — and the line that says which came from the checkpoint.

The deployment has one `precision` for attention, dense MLPs and shared experts: when the
checkpoint keeps those apart (NVIDIA's NVFP4 DeepSeek: BF16 attention, NVFP4 shared experts),
the part with more weights sets it, and the line says so. A format the GPU has no tensor cores
for runs weight-only on it, as engines do: FP4 weights with BF16 math on Hopper (vLLM's Marlin
FP4/MXFP4 kernels, vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py; gpt-oss's
MXFP4 experts on H100), FP8 weights on a GPU without FP8 (marlin_utils_fp8.py): w4a16 / w8a16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cost_model.architecture import Architecture
from cost_model.hardware import HardwareSpec
from cost_model.hf.modules import ATTENTION, DENSE, EXPERTS
from cost_model.hf.quantization import UNQUANTIZED, WEIGHT_ONLY, CheckpointFormats
from cost_model.params import count_params
from cost_model.precision import PRECISIONS, get_precision

_ATTENTION_PARTS = ("attention/q", "attention/kv", "attention/o", "linear_attention/in_proj",
                    "linear_attention/out_proj")
_DENSE_PARTS = ("mlp/gate", "mlp/up", "mlp/down", "moe/shared")


@dataclass(frozen=True)
class DeploymentFormats:
    """`fields`: the make_deployment keywords (precision, moe_precision, kv_precision; a
    component absent lets the Deployment derive it); `note`: the line saying what came from the
    checkpoint (None: nothing)."""

    fields: dict[str, str]
    note: str | None
    checkpoint: dict[str, str]  # component -> format taken from the checkpoint


def deployment_formats(checkpoint: CheckpointFormats | None, arch: Architecture,
                       hw: HardwareSpec, precision: str | None = None,
                       moe_precision: str | None = None, kv_precision: str | None = None,
                       default: str = "fp8") -> DeploymentFormats:
    """Each component: its flag; for experts and KV, `precision`'s flag (which they follow, as
    documented for the flags); else the checkpoint's on `hw`; else `default` (precision) or the
    Deployment's own derivation (experts: precision; KV: fp8 when precision is 8-bit or less)."""
    fields: dict[str, str] = {}
    taken: dict[str, str] = {}
    why: list[str] = []
    ck = _on_gpu(checkpoint, arch, hw, why) if checkpoint is not None else {}
    fields["precision"] = precision or ck.get("precision") or default
    if precision is None and "precision" in ck:
        taken["precision"] = ck["precision"]
    experts_flag = moe_precision or precision
    if experts_flag:
        fields["moe_precision"] = experts_flag
    elif arch.ffn.is_moe and "moe_precision" in ck:
        fields["moe_precision"] = taken["moe_precision"] = ck["moe_precision"]
    if kv_precision:
        fields["kv_precision"] = kv_precision
    elif precision is None and "kv_precision" in ck:
        fields["kv_precision"] = taken["kv_precision"] = ck["kv_precision"]
    note = None if checkpoint is None or not taken else _note(checkpoint, taken, fields, why)
    return DeploymentFormats(fields, note, taken)


def _on_gpu(ck: CheckpointFormats, arch: Architecture, hw: HardwareSpec,
            why: list[str]) -> dict[str, str]:
    """The checkpoint's formats as deployment fields on `hw` (components it has none for are
    absent); `why` collects the explanations the note gives."""
    linear = _linear_format(ck, arch, why)
    out = {"precision": linear, "moe_precision": ck.experts, "kv_precision": ck.kv}
    for field in ("precision", "moe_precision"):
        fmt = out[field]
        if fmt is not None:
            out[field] = _runnable(fmt, hw, why)
    return {k: v for k, v in out.items() if v is not None}


def _linear_format(ck: CheckpointFormats, arch: Architecture, why: list[str]) -> str | None:
    """Attention's format, or the dense layers' when they hold more weights."""
    if ck.attention == ck.dense or ck.dense is None:
        return ck.attention
    parts = count_params(arch).parts
    attention = sum(parts[p] for p in _ATTENTION_PARTS)
    dense = sum(parts[p] for p in _DENSE_PARTS)
    if dense == 0:
        return ck.attention
    bigger, other = (ATTENTION, DENSE) if attention >= dense else (DENSE, ATTENTION)
    chosen, rest = getattr(ck, bigger), getattr(ck, other)
    if rest is not None:
        why.append(f"the checkpoint's {_NAMES[other]} are {rest}, priced as {chosen} with the "
                   f"{_NAMES[bigger]}, which hold more weights")
    return chosen


def _runnable(fmt: str, hw: HardwareSpec, why: list[str]) -> str:
    """`fmt`, or its weight-only form when `hw` has no tensor cores for it."""
    if fmt not in PRECISIONS or hw.supports(get_precision(fmt)):
        return fmt
    precision = get_precision(fmt)
    fallback = WEIGHT_ONLY.get(int(precision.value_bits), "bf16")
    why.append(f"{fmt} weights run as {fallback} on {hw.name}, which has no "
               f"{precision.tensor_core_rate} tensor cores")
    return fallback


_NAMES = {ATTENTION: "attention layers", DENSE: "dense layers and shared experts",
          EXPERTS: "routed experts"}
_FIELD_NAMES = {"precision": "attention and dense layers", "moe_precision": "routed experts",
                "kv_precision": "KV cache"}


def _note(ck: CheckpointFormats, taken: dict[str, str], fields: dict[str, str],
          why: list[str]) -> str:
    source = f"the checkpoint's {ck.origin} ({ck.scheme})"
    parts = [f"{_FIELD_NAMES[f]} {fmt}" for f, fmt in taken.items()]
    if ck.kv in UNQUANTIZED and "kv_precision" in taken:
        parts[-1] += " (not quantized by the checkpoint)"
    line = f"precision from {source}: {', '.join(parts)}"
    if ck.unmodelled is not None:
        missing = [_FIELD_NAMES[f] for f in ("precision", "moe_precision")
                   if f not in taken and f in fields]
        line += (f"; {' and '.join(missing) or 'some layers'}: {fields['precision']} (the "
                 f"cost model has no format for {ck.unmodelled})")
    return line + "".join(f"; {reason}" for reason in why)


def formats_document(formats: DeploymentFormats) -> dict[str, Any]:
    """What `--json` outputs carry: the formats taken from the checkpoint and the note."""
    return {"from_checkpoint": dict(formats.checkpoint), "note": formats.note}
