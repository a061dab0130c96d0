"""Number formats: storage bytes per value (scales included) and which tensor-core rate they use.

Bytes per element are floats (4-bit = 0.5 bytes) so that block-scaled formats carry their scale
overhead: NVFP4 is E2M1 values with an E4M3 scale per 16 values (and one FP32 scale per tensor,
negligible): 4 + 8/16 = 4.5 bits/value. MXFP4 uses 32-value blocks with E8M0 scales:
4 + 8/32 = 4.25 bits/value. Sources: NVIDIA, AI Model Co-Design (2026), "Quantization as a
performance lever", and the OCP Microscaling Formats (MX) v1.0 specification.

Weight-only formats store low-bit weights and run BF16 math: the GEMM kernel dequantizes each
weight tile in registers (Marlin / TensorRT-LLM weight-only kernels; gpt-oss's MXFP4 experts on
Hopper, which has no FP4 tensor cores). Their activations are BF16 (`activation_value_bits`),
they run at the BF16 tensor-core rate with the BF16 GEMM efficiency of the GPU, and only the
weight bytes shrink: `w4a16` holds MXFP4 weights (4 + 8/32 = 4.25 bits/value, as gpt-oss ships;
INT4 with one BF16 scale per 128-value group is 4.125, within 3%), `w8a16` FP8/INT8 weights with
per-channel scales (8 bits/value; one scale per output row is negligible).

Which measured kernels price each format (`cost_model.efficiency`): BF16, FP8 (per-tensor), FP8
block-scaled and NVFP4 have dense GEMM and fused-MoE tables of their own in every engine that runs
them; `w4a16` experts are priced on the engines' `w4a16_mxfp4` fused-MoE kernels (gpt-oss on
Hopper); `mxfp4` experts on their `w4a8_mxfp4_mxfp8` kernels, which is how every engine runs MXFP4
weights on Blackwell (MXFP8 activations on the block-scaled tensor cores; the fit absorbs the
difference from this format's 4.25-bit activations); dense MXFP4 GEMMs have no table and run on
NVFP4's kernels, which every output says (`uncalibrated: …`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cost_model.errors import ConfigError
from cost_model.units import BITS_PER_BYTE


class Precision(BaseModel):
    """One number format as stored in memory and fed to the tensor cores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value_bits: float = Field(gt=0)  # bits of a stored weight (and activation, unless below)
    activation_value_bits: float | None = Field(default=None, gt=0)  # weight-only: BF16's 16
    weight_scale_bits_per_value: float = Field(ge=0)  # scale storage amortized per weight value
    activation_scale_bits_per_value: float = Field(ge=0)  # … per activation value
    tensor_core_rate: str  # key of HardwareSpec.peak_flop_per_s whose rate this format runs at
    block_size: int = Field(default=1, ge=1)  # K must be a multiple of this for block scaling

    @property
    def weight_bytes_per_value(self) -> float:
        return (self.value_bits + self.weight_scale_bits_per_value) / BITS_PER_BYTE

    @property
    def activation_bits(self) -> float:
        """Bits of one activation value, scales excluded."""
        return self.value_bits if self.activation_value_bits is None else self.activation_value_bits

    @property
    def activation_bytes_per_value(self) -> float:
        return (self.activation_bits + self.activation_scale_bits_per_value) / BITS_PER_BYTE

    @property
    def weight_only(self) -> bool:
        """Low-bit weights, activations (and math) in a wider format."""
        return self.activation_value_bits is not None

    @property
    def bits_per_value(self) -> float:
        """Storage bits per value of an activation-style tensor (4.5 for NVFP4)."""
        return self.activation_bytes_per_value * BITS_PER_BYTE


# DeepSeek-V3 technical report (arXiv 2412.19437) §3.3.2: FP8 activations carry one FP32 scale per
# 1×128 tile, weights one FP32 scale per 128×128 block.
_FP8_BLOCK = 128
_FP32_BITS = 32.0
_E4M3_BITS = 8.0
_E8M0_BITS = 8.0
_NVFP4_BLOCK = 16  # NVIDIA, AI Model Co-Design (2026): one E4M3 scale per 16 values
_MXFP4_BLOCK = 32  # OCP MX v1.0: 32-element blocks with an E8M0 shared scale
_BF16_BITS = 16.0

PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision(name="fp32", value_bits=32, weight_scale_bits_per_value=0,
                  activation_scale_bits_per_value=0, tensor_core_rate="tf32"),
        Precision(name="bf16", value_bits=16, weight_scale_bits_per_value=0,
                  activation_scale_bits_per_value=0, tensor_core_rate="bf16"),
        Precision(name="fp16", value_bits=16, weight_scale_bits_per_value=0,
                  activation_scale_bits_per_value=0, tensor_core_rate="bf16"),
        Precision(name="fp8", value_bits=8, weight_scale_bits_per_value=0,
                  activation_scale_bits_per_value=0, tensor_core_rate="fp8"),
        Precision(name="fp8_block", value_bits=8,
                  weight_scale_bits_per_value=_FP32_BITS / (_FP8_BLOCK * _FP8_BLOCK),
                  activation_scale_bits_per_value=_FP32_BITS / _FP8_BLOCK,
                  tensor_core_rate="fp8", block_size=_FP8_BLOCK),
        Precision(name="mxfp4", value_bits=4, weight_scale_bits_per_value=_E8M0_BITS / _MXFP4_BLOCK,
                  activation_scale_bits_per_value=_E8M0_BITS / _MXFP4_BLOCK,
                  tensor_core_rate="fp4", block_size=_MXFP4_BLOCK),
        Precision(name="nvfp4", value_bits=4, weight_scale_bits_per_value=_E4M3_BITS / _NVFP4_BLOCK,
                  activation_scale_bits_per_value=_E4M3_BITS / _NVFP4_BLOCK,
                  tensor_core_rate="fp4", block_size=_NVFP4_BLOCK),
        # weight-only (module docstring): BF16 activations and math, low-bit weights
        Precision(name="w4a16", value_bits=4, activation_value_bits=_BF16_BITS,
                  weight_scale_bits_per_value=_E8M0_BITS / _MXFP4_BLOCK,
                  activation_scale_bits_per_value=0, tensor_core_rate="bf16",
                  block_size=_MXFP4_BLOCK),
        Precision(name="w8a16", value_bits=8, activation_value_bits=_BF16_BITS,
                  weight_scale_bits_per_value=0, activation_scale_bits_per_value=0,
                  tensor_core_rate="bf16"),
    )
}
ALIASES = {"fp4": "nvfp4", "e4m3": "fp8", "float8": "fp8", "bfloat16": "bf16", "float16": "fp16"}


def get_precision(name: str, field: str = "precision") -> Precision:
    """The named format; a clear `ConfigError` naming `field` and the known names otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in PRECISIONS:
        known = ", ".join(sorted(PRECISIONS))
        raise ConfigError(f"`{field}` must be one of {known}; got {name!r}")
    return PRECISIONS[key]
