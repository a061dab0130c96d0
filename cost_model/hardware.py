"""Hardware catalog: sourced GPU specs in TOML package data, loaded into frozen pydantic models.

Catalog files use human units in their key names (`_tflop_per_s`, `_tb_per_s`, `_gb`, `_us`) and
every number is a table `{ value = …, source = "…" }`. They are converted to SI here, once.
A user may pass a path to their own TOML file with the same schema instead of a name.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cost_model.errors import ConfigError
from cost_model.host import DEFAULT_HOST_CPU, HOST_CPUS
from cost_model.precision import PRECISIONS, Precision
from cost_model.sourced import (
    first_line,
    is_number,
    key_shown,
    shown,
    sourced_value,
    unknown_key_message,
)  # fmt: skip
from cost_model.units import GIB_BYTES, GIGA, TERA, US_PER_S

_CATALOG_PACKAGE = "cost_model.data.hardware"


# Bounds a kernel geometry can have: CUTLASS's largest output tiles are 256 wide (4x that here);
# a thread-block cluster holds at most 16 blocks (CUDA programming guide, "Thread Block Clusters":
# 8 portable, 16 with the non-portable opt-in on H100/B200).
TILE_MAX = 1024
CLUSTER_TILES_MAX = 16


class GemmKernel(BaseModel):
    """One GEMM kernel geometry the library can pick: output tile, SMs per tile, cluster shape."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    tile_m: int = Field(ge=8, le=TILE_MAX)
    tile_n: int = Field(ge=8, le=TILE_MAX)
    sms_per_tile: int = Field(default=1, ge=1, le=2)  # 2 = Blackwell clusterMMA (2-SM UMMA)
    cluster_tiles_m: int = Field(default=1, ge=1, le=CLUSTER_TILES_MAX)  # CGA shape, in tiles
    cluster_tiles_n: int = Field(default=1, ge=1, le=CLUSTER_TILES_MAX)
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


class Rule(NamedTuple):
    """What a catalog number must be, in the file's own units: above `low` (or at it, when
    `low_inclusive`), at most `high` (`why` says where that bound comes from), whole if
    `integer`."""

    low: float
    high: float
    why: str
    low_inclusive: bool = False
    integer: bool = False

    def holds(self, value) -> bool:
        if not is_number(value) or not math.isfinite(value) or value > self.high:
            return False
        if self.integer and not float(value).is_integer():
            return False
        return value >= self.low if self.low_inclusive else value > self.low

    def text(self) -> str:
        kind = "a whole number" if self.integer else "a number"
        low = f"{'>=' if self.low_inclusive else '>'} {self.low:g}"
        return f"{kind} {low} and <= {self.high:g} ({self.why})"


# Upper bounds: generous, 10x the catalog's largest figure (none is near one), so that a typo or
# an `inf` is refused while any real or planned GPU passes; the latencies 100x the catalog's
# NCCL priors (8-15 us: a collective step slower than 1 ms is no GPU interconnect).
_TEN_X = "10x the catalog's largest, {}"
PEAK_RULE = Rule(0, 150_000, _TEN_X.format("GB300's dense FP4 15,000 TFLOP/s"))
_LATENCY = Rule(0, 1_000, "1 ms: 100x the catalog's 8-15 us", low_inclusive=True)
# catalog key -> (HardwareSpec field, factor to SI, rule); HBM "GB" on datasheets are GiB
SCALAR_FIELDS = {
    "memory.hbm_tb_per_s": ("hbm_bytes_per_s", TERA,
                            Rule(0, 80, _TEN_X.format("GB200/GB300's 8 TB/s"))),
    "memory.hbm_capacity_gib": ("hbm_capacity_bytes", GIB_BYTES,
                                Rule(0, 2_880, _TEN_X.format("B300/GB300's 288 GiB"))),
    "compute.sm_count": ("sm_count", 1, Rule(0, 1_880, _TEN_X.format("RTX PRO 6000's 188 SMs"),
                                             integer=True)),
    "interconnect.scale_up_domain_gpus": ("scale_up_domain_gpus", 1, Rule(
        0, 720, _TEN_X.format("NVL72's 72 GPUs"), integer=True)),
    "interconnect.scale_up_gb_per_s": ("scale_up_bytes_per_s", GIGA,
                                       Rule(0, 9_000, _TEN_X.format("NVLink 5's 900 GB/s"))),
    "interconnect.scale_up_latency_us": ("scale_up_latency_s", 1 / US_PER_S, _LATENCY),
    "interconnect.scale_out_gb_per_s": ("scale_out_bytes_per_s", GIGA, Rule(
        0, 1_000, _TEN_X.format("a ConnectX-8 800 Gb/s NIC's 100 GB/s"))),
    "interconnect.scale_out_latency_us": ("scale_out_latency_s", 1 / US_PER_S, _LATENCY),
    "overheads.kernel_launch_us": ("kernel_launch_s", 1 / US_PER_S, _LATENCY),
}
HOST_CPU_KEY = "system.host_cpu"
RATE_CLASSES = sorted({p.tensor_core_rate for p in PRECISIONS.values()})  # bf16, fp4, fp8, tf32
PATH_SHOWN_CHARS = 120  # a path quoted in an error is cut to this
TEXT_KEYS = ("name", "description")
TEXT_MAX_CHARS = 1_000  # a name or description longer than this is a mistake
ENTRY_KEYS = ("value", "source")
KERNEL_KEYS = (*GemmKernel.model_fields, "source")


def _layout() -> dict[str, tuple[str, ...]]:
    """The known keys of each table of a hardware file ("" = the top level)."""
    sections: dict[str, list[str]] = {}
    for key in (*SCALAR_FIELDS, HOST_CPU_KEY):
        section, name = key.split(".")
        sections.setdefault(section, []).append(name)
    sections["peak_dense_tflop_per_s"] = RATE_CLASSES
    return {"": (*TEXT_KEYS, *sections, "gemm_kernels"),
            **{name: tuple(keys) for name, keys in sections.items()}}


LAYOUT = _layout()


def check_keys(doc: dict) -> None:
    """Every key of a hardware document is one the schema knows: a misspelt or unknown key is
    refused, naming the nearest known one (it would otherwise be silently ignored)."""
    for section, known in LAYOUT.items():
        table = doc if not section else doc.get(section)
        for key, value in (table.items() if isinstance(table, dict) else ()):
            path = f"{section}.{key_shown(key)}" if section else key_shown(key)
            if key not in known:
                raise ConfigError(unknown_key_message(section, key, known))
            if section and isinstance(value, dict):
                _check_table(path, value, ENTRY_KEYS)
    kernels = doc.get("gemm_kernels")
    for i, kernel in enumerate(kernels if isinstance(kernels, list) else ()):
        if isinstance(kernel, dict):
            _check_table(f"gemm_kernels[{i}]", kernel, KERNEL_KEYS)


def _check_table(path: str, table: dict, known: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            raise ConfigError(unknown_key_message(path, key, known))


def _sourced(table: dict, key: str, sources: dict[str, str], rule: Rule = PEAK_RULE):
    """Value of a `{ value, source }` entry, checked against `rule` in the file's own units;
    records its source; a clear error naming the key otherwise."""
    scratch: dict[str, str] = {}
    value = sourced_value(table, key, scratch, "hardware")
    if not rule.holds(value):
        raise ConfigError(f"`{key}` must be {rule.text()}; got {shown(value)}")
    sources.update(scratch)
    return value


def _host_cpu(doc: dict, sources: dict[str, str]) -> str:
    """`system.host_cpu` (one of cost_model.host.HOST_CPUS); x86 when the file has none."""
    value = sourced_value(doc, HOST_CPU_KEY, sources, "hardware", DEFAULT_HOST_CPU)
    if not isinstance(value, str) or value not in HOST_CPUS:
        raise ConfigError(f"`{HOST_CPU_KEY}` must be one of {', '.join(HOST_CPUS)}; got "
                          f"{shown(value)}")
    return value


def _text(doc: dict, key: str) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str) or len(value) > TEXT_MAX_CHARS:
        raise ConfigError(f"`{key}` must be text of at most {TEXT_MAX_CHARS} characters; got "
                          f"{shown(value)}")
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
        raise ConfigError(f"`gemm_kernels[{i}].{field}`: {err['msg']}; got "
                          f"{shown(err.get('input'))}") from None


def spec_from_toml(doc: dict) -> HardwareSpec:
    """Build a `HardwareSpec` from a parsed catalog document (edge units -> SI)."""
    check_keys(doc)
    sources: dict[str, str] = {}
    peaks_table = doc.get("peak_dense_tflop_per_s")
    if not isinstance(peaks_table, dict) or not peaks_table:
        raise ConfigError("`peak_dense_tflop_per_s` must be a table with at least one rate")
    peaks = {rate: _sourced(doc, f"peak_dense_tflop_per_s.{rate}", sources) * TERA
             for rate in peaks_table}
    fields = {name: _sourced(doc, key, sources, rule) * factor
              for key, (name, factor, rule) in SCALAR_FIELDS.items()}
    fields["host_cpu"] = _host_cpu(doc, sources)
    for name in ("sm_count", "scale_up_domain_gpus"):
        fields[name] = int(fields[name])
    try:
        return HardwareSpec(
            name=_text(doc, "name"), description=_text(doc, "description"),
            peak_flop_per_s=peaks, gemm_kernels=_kernels(doc, sources), sources=sources, **fields,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"`{loc}`: {err['msg']}; got {shown(err.get('input'))}") from None


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
        text = path.read_text(encoding="utf-8")
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else first_line(exc)
        raise ConfigError(f"`hardware` file {path} is not valid TOML: {why}") from None
    except OSError as exc:
        raise ConfigError(f"`hardware` file {path} cannot be read: {exc.strerror}") from None
    return spec_from_toml(doc)


def get_hardware(name_or_path: str) -> HardwareSpec:
    """A catalog entry by name (`h200`, `gb300`, …) or a user's TOML file by path."""
    if not isinstance(name_or_path, str):
        raise ConfigError(f"`hardware` must be a catalog name or a .toml path; got "
                          f"{shown(name_or_path)}")
    key = name_or_path.strip().lower()
    if key in catalog_names():
        return _load_named(key)
    path = Path(name_or_path)
    if path.suffix == ".toml" and _is_file(path):
        return _load_path(path)
    if path.suffix == ".toml":
        what = "a directory" if path.is_dir() else "no file"
        raise ConfigError(f"`hardware` file {shown(name_or_path, PATH_SHOWN_CHARS)} is {what} "
                          "(a hardware TOML file, or a catalog name)")
    known = ", ".join(catalog_names())
    raise ConfigError(f"`hardware` {shown(name_or_path)} is unknown; known: {known} (or a .toml "
                      "path)")


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; a name the system refuses (past its length limit) is an
    error naming it."""
    try:
        return path.is_file()
    except OSError as exc:
        raise ConfigError(f"`hardware` path {shown(str(path))} cannot be used: "
                          f"{exc.strerror}") from None
