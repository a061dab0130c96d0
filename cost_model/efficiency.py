"""The efficiency layer: per GPU and rate class, the coefficients that turn a roofline into a
prediction. They are data (TOML package data under `data/efficiency/`), not code, so that
`archscout calibrate` can refit them; each carries its source (a measurement or a stated prior).

Coefficients (all interpretable):
- `compute_ceiling_frac`: best sustained fraction of dense peak FLOP/s for large aligned GEMMs;
- `bandwidth_ceiling_frac`: best sustained fraction of HBM bandwidth for streaming kernels;
- `fixed_overhead_us`: time every GEMM pays regardless of size (launch, pipeline fill and drain);
- `n_half_dim`, `k_half_dim`: small-dimension saturation: the math rate is scaled by
  N/(N + n_half)·K/(K + k_half) (a thin tile or a short K loop cannot keep the tensor cores fed);
- attention: `decode_bandwidth_frac` (KV streaming), `prefill_compute_frac` (flash attention);
- communication: `scale_up_bandwidth_frac`, `scale_out_bandwidth_frac` (achieved bus bandwidth).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from cost_model.errors import ConfigError
from cost_model.units import US_PER_S

_PACKAGE = "cost_model.data.efficiency"
DEFAULT_FILE = "default"  # used for hardware without a file of its own (e.g. a user's TOML)


class GemmEfficiency(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    compute_ceiling_frac: float = Field(gt=0, le=1)
    bandwidth_ceiling_frac: float = Field(gt=0, le=1)
    fixed_overhead_s: float = Field(ge=0)
    n_half_dim: float = Field(ge=0)
    k_half_dim: float = Field(ge=0)


class Efficiency(BaseModel):
    """All efficiency coefficients of one GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hardware: str
    version: str
    gemm: dict[str, GemmEfficiency]  # by tensor-core rate class: bf16, fp8, fp4
    decode_attention_bandwidth_frac: float = Field(gt=0, le=1)
    prefill_attention_compute_frac: float = Field(gt=0, le=1)
    scale_up_bandwidth_frac: float = Field(gt=0, le=1)
    scale_out_bandwidth_frac: float = Field(gt=0, le=1)
    sources: dict[str, str]

    def for_rate(self, rate: str) -> GemmEfficiency:
        if rate not in self.gemm:
            return self.gemm["bf16"]  # a rate class without data falls back to the bf16 fit
        return self.gemm[rate]


def _value(table: dict, path: str, sources: dict[str, str]) -> float:
    entry = table
    for part in path.split("."):
        if not isinstance(entry, dict) or part not in entry:
            raise ConfigError(f"`{path}` is missing from the efficiency file")
        entry = entry[part]
    if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
        raise ConfigError(f"`{path}` must be a table {{ value = …, source = \"…\" }}")
    sources[path] = str(entry["source"])
    return float(entry["value"])


def _gemm(doc: dict, rate: str, sources: dict[str, str]) -> GemmEfficiency:
    prefix = f"gemm.{rate}"
    return GemmEfficiency(
        compute_ceiling_frac=_value(doc, f"{prefix}.compute_ceiling_frac", sources),
        bandwidth_ceiling_frac=_value(doc, f"{prefix}.bandwidth_ceiling_frac", sources),
        fixed_overhead_s=_value(doc, f"{prefix}.fixed_overhead_us", sources) / US_PER_S,
        n_half_dim=_value(doc, f"{prefix}.n_half_dim", sources),
        k_half_dim=_value(doc, f"{prefix}.k_half_dim", sources),
    )


def efficiency_from_toml(doc: dict) -> Efficiency:
    sources: dict[str, str] = {}
    gemm = {rate: _gemm(doc, rate, sources) for rate in doc.get("gemm", {})}
    if "bf16" not in gemm:
        raise ConfigError("`gemm.bf16` efficiency is required (the fallback for other rates)")
    return Efficiency(
        hardware=str(doc.get("hardware", "")), version=str(doc.get("version", "")), gemm=gemm,
        decode_attention_bandwidth_frac=_value(doc, "attention.decode_bandwidth_frac", sources),
        prefill_attention_compute_frac=_value(doc, "attention.prefill_compute_frac", sources),
        scale_up_bandwidth_frac=_value(doc, "communication.scale_up_bandwidth_frac", sources),
        scale_out_bandwidth_frac=_value(doc, "communication.scale_out_bandwidth_frac", sources),
        sources=sources,
    )


def efficiency_names() -> list[str]:
    files = resources.files(_PACKAGE).iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


@cache
def get_efficiency(hardware_name: str) -> Efficiency:
    """The shipped coefficients of a GPU, or the generic priors when it has none."""
    name = hardware_name if hardware_name in efficiency_names() else DEFAULT_FILE
    text = resources.files(_PACKAGE).joinpath(f"{name}.toml").read_text()
    return efficiency_from_toml(tomllib.loads(text))
