"""Hardware catalog: sourced GPU specs in TOML package data, loaded into frozen pydantic models.

Catalog files use human units in their key names (`_tflop_per_s`, `_tb_per_s`, `_gb`, `_us`) and
every number is a table `{ value = …, source = "…" }`. They are converted to SI here, once.
A user may pass a path to their own TOML file with the same schema instead of a name.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cost_model.errors import ConfigError
from cost_model.host import DEFAULT_HOST_CPU, HOST_CPUS
from cost_model.precision import Precision
from cost_model.sourced import is_number, sourced_value
from cost_model.units import GIB_BYTES, GIGA, TERA, US_PER_S

_CATALOG_PACKAGE = "cost_model.data.hardware"


class GemmKernel(BaseModel):
    """One GEMM kernel geometry the library can pick: output tile, SMs per tile, cluster shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tile_m: int = Field(ge=8)
    tile_n: int = Field(ge=8)
    sms_per_tile: int = Field(default=1, ge=1, le=2)  # 2 = Blackwell clusterMMA (2-SM UMMA)
    cluster_tiles_m: int = Field(default=1, ge=1)  # CGA shape, in tiles
    cluster_tiles_n: int = Field(default=1, ge=1)
    relative_peak_frac: float = Field(default=1.0, gt=0, le=1)  # vs the best kernel's ceiling


class HardwareSpec(BaseModel):
    """One GPU (and the system around it), SI units throughout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    peak_flop_per_s: dict[str, float]  # dense tensor-core peak by rate class (bf16, fp8, fp4, tf32)
    hbm_bytes_per_s: float = Field(gt=0)
    hbm_capacity_bytes: float = Field(gt=0)
    sm_count: int = Field(ge=1)
    gemm_kernels: tuple[GemmKernel, ...] = Field(min_length=1)
    scale_up_domain_gpus: int = Field(ge=1)  # GPUs on one NVLink domain (8 HGX, 72 NVL72)
    scale_up_bytes_per_s: float = Field(gt=0)  # per GPU, per direction
    scale_up_latency_s: float = Field(ge=0)  # one collective step inside the domain
    scale_out_bytes_per_s: float = Field(gt=0)  # per GPU, per direction (NIC)
    scale_out_latency_s: float = Field(ge=0)
    kernel_launch_s: float = Field(ge=0)  # per kernel, CUDA-graph launched
    host_cpu: str = DEFAULT_HOST_CPU  # the serving host's CPU kind (cost_model.host.HOST_CPUS)
    sources: dict[str, str]

    def supports(self, precision: Precision) -> bool:
        return precision.tensor_core_rate in self.peak_flop_per_s

    def peak_for(self, precision: Precision) -> float:
        """Dense peak FLOP/s for GEMMs whose inputs are in `precision`."""
        if not self.supports(precision):
            have = ", ".join(sorted(self.peak_flop_per_s))
            raise ConfigError(
                f"`dtype` {precision.name} needs {precision.tensor_core_rate} tensor cores, which "
                f"{self.name} does not have (it has: {have})"
            )
        return self.peak_flop_per_s[precision.tensor_core_rate]

    def ridge_flop_per_byte(self, precision: Precision) -> float:
        """Ridge point I* = peak FLOP/s / peak bytes/s."""
        return self.peak_for(precision) / self.hbm_bytes_per_s


# catalog key -> (HardwareSpec field, factor to SI, rule); HBM "GB" on datasheets are GiB
_POSITIVE, _NON_NEGATIVE, _COUNT = "> 0", ">= 0", "a positive integer"
_SCALAR_FIELDS = {
    "memory.hbm_tb_per_s": ("hbm_bytes_per_s", TERA, _POSITIVE),
    "memory.hbm_capacity_gib": ("hbm_capacity_bytes", GIB_BYTES, _POSITIVE),
    "compute.sm_count": ("sm_count", 1, _COUNT),
    "interconnect.scale_up_domain_gpus": ("scale_up_domain_gpus", 1, _COUNT),
    "interconnect.scale_up_gb_per_s": ("scale_up_bytes_per_s", GIGA, _POSITIVE),
    "interconnect.scale_up_latency_us": ("scale_up_latency_s", 1 / US_PER_S, _NON_NEGATIVE),
    "interconnect.scale_out_gb_per_s": ("scale_out_bytes_per_s", GIGA, _POSITIVE),
    "interconnect.scale_out_latency_us": ("scale_out_latency_s", 1 / US_PER_S, _NON_NEGATIVE),
    "overheads.kernel_launch_us": ("kernel_launch_s", 1 / US_PER_S, _NON_NEGATIVE),
}
HOST_CPU_KEY = "system.host_cpu"
_RULES = {
    _POSITIVE: lambda v: v > 0,
    _NON_NEGATIVE: lambda v: v >= 0,
    _COUNT: lambda v: v > 0 and float(v).is_integer(),
}


def _sourced(table: dict, key: str, sources: dict[str, str], rule: str = _POSITIVE):
    """Value of a `{ value, source }` entry, checked against `rule` in the file's own units;
    records its source; a clear error naming the key otherwise."""
    scratch: dict[str, str] = {}
    value = sourced_value(table, key, scratch, "hardware")
    if not is_number(value) or not _RULES[rule](value):
        raise ConfigError(f"`{key}` must be {rule}; got {value!r}")
    sources.update(scratch)
    return value


def _host_cpu(doc: dict, sources: dict[str, str]) -> str:
    """`system.host_cpu` (one of cost_model.host.HOST_CPUS); x86 when the file has none."""
    value = sourced_value(doc, HOST_CPU_KEY, sources, "hardware", DEFAULT_HOST_CPU)
    if value not in HOST_CPUS:
        raise ConfigError(f"`{HOST_CPU_KEY}` must be one of {', '.join(HOST_CPUS)}; got {value!r}")
    return value


def _kernels(doc: dict, sources: dict[str, str]) -> tuple[GemmKernel, ...]:
    kernels = doc.get("gemm_kernels")
    if not isinstance(kernels, list) or not kernels:
        raise ConfigError("`gemm_kernels` must be a non-empty array of tables")
    return tuple(_kernel(i, kernel, sources) for i, kernel in enumerate(kernels))


def _kernel(i: int, kernel, sources: dict[str, str]) -> GemmKernel:
    if not isinstance(kernel, dict) or not kernel.get("source"):
        raise ConfigError(f"`gemm_kernels[{i}].source` is required")
    sources[f"gemm_kernels[{i}]"] = str(kernel["source"])
    try:
        return GemmKernel(**{k: v for k, v in kernel.items() if k != "source"})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"`gemm_kernels[{i}].{field}`: {err['msg']}; got {err.get('input')!r}") \
            from None


def spec_from_toml(doc: dict) -> HardwareSpec:
    """Build a `HardwareSpec` from a parsed catalog document (edge units -> SI)."""
    sources: dict[str, str] = {}
    peaks_table = doc.get("peak_dense_tflop_per_s")
    if not isinstance(peaks_table, dict) or not peaks_table:
        raise ConfigError("`peak_dense_tflop_per_s` must be a table with at least one rate")
    peaks = {rate: _sourced(doc, f"peak_dense_tflop_per_s.{rate}", sources) * TERA
             for rate in peaks_table}
    fields = {name: _sourced(doc, key, sources, rule) * factor
              for key, (name, factor, rule) in _SCALAR_FIELDS.items()}
    fields["host_cpu"] = _host_cpu(doc, sources)
    for name in ("sm_count", "scale_up_domain_gpus"):
        fields[name] = int(fields[name])
    try:
        return HardwareSpec(
            name=str(doc.get("name", "")), description=str(doc.get("description", "")),
            peak_flop_per_s=peaks, gemm_kernels=_kernels(doc, sources), sources=sources, **fields,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"`{loc}`: {err['msg']}; got {err.get('input')!r}") from None


def catalog_names() -> list[str]:
    """Names of the shipped hardware specs, sorted."""
    files = resources.files(_CATALOG_PACKAGE).iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


@cache
def _load_named(name: str) -> HardwareSpec:
    text = resources.files(_CATALOG_PACKAGE).joinpath(f"{name}.toml").read_text()
    return spec_from_toml(tomllib.loads(text))


def _load_path(path: Path) -> HardwareSpec:
    try:
        return spec_from_toml(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"`hardware` file {path} is not valid TOML: {exc}") from None


def get_hardware(name_or_path: str) -> HardwareSpec:
    """A catalog entry by name (`h200`, `gb300`, …) or a user's TOML file by path."""
    key = name_or_path.strip().lower()
    if key in catalog_names():
        return _load_named(key)
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        return _load_path(path)
    known = ", ".join(catalog_names())
    raise ConfigError(f"`hardware` {name_or_path!r} is unknown; known: {known} (or a .toml path)")
