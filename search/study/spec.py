"""Study specification: a TOML file validated into a frozen pydantic `StudySpec`.

Unknown keys are errors naming their path; ranges are checked (min ≤ max, steps > 0), every
searched integer against its bounds and every number for being finite, so a study no search can
run fails here, before anything is written; every error becomes one `SpecError` line naming the
field, the rule and the bad value.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)  # fmt: skip

from constraints import CONSTRAINT_NAMES
from constraints.engines import ENGINE_NAMES, format_refusal
from cost_model.deployment import SERVING_MODES, Deployment
from cost_model.hardware import get_hardware
from cost_model.precision import get_precision
from objectives.serving import OBJECTIVES
from search.study.errors import SpecError

OBJECTIVE_DIRECTIONS = {name: o.direction for name, o in OBJECTIVES.items()}
# strict: TOML has real integers and booleans, so `trials = true` or `isl_tokens = 1e3` is a
# mistake, not a number; finite: `inf` is no budget or window.
_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
# Samplers seed numpy (seeds < 2**32); runs add offsets to the study's seed (the trials already
# finished, 7919 per extra worker), so study seeds stop at 2**31 - 1 to leave them room.
SEED_MAX = 2**31 - 1


class Dimension(BaseModel):
    """One searched quantity: `{ value = x }`, `{ choices = [...] }` or `{ min, max, step }`."""

    model_config = _FROZEN

    value: StrictInt | StrictStr | None = None  # strict: `true` or `128.0` is not a size
    choices: list[StrictInt] | list[StrictStr] | None = Field(default=None, min_length=1)
    min: StrictInt | None = None
    max: StrictInt | None = None
    step: StrictInt = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _one_form(self) -> Dimension:
        forms = [self.value is not None, self.choices is not None,
                 self.min is not None or self.max is not None]
        if sum(forms) != 1:
            raise ValueError("give exactly one of `value`, `choices` or `min`/`max`")
        if forms[2] and (self.min is None or self.max is None):
            raise ValueError("a range needs both `min` and `max`")
        if forms[2] and self.min > self.max:
            raise ValueError(f"`min` ({self.min}) must be <= `max` ({self.max})")
        if forms[2] and (self.max - self.min) % self.step:
            raise ValueError(f"`max` − `min` ({self.max - self.min}) must be a multiple of "
                             f"`step` ({self.step})")
        return self

    @property
    def options(self) -> list | range:
        """Every value this dimension can take, in order (a range is not materialized)."""
        if self.value is not None:
            return [self.value]
        if self.choices is not None:
            return list(self.choices)
        return range(self.min, self.max + 1, self.step)

    def extremes(self) -> list[tuple[str, Any]]:
        """(label, value) of each option a bound check must see: the value, every choice, or
        a range's ends (labelled "`min` = ", "`max` = ")."""
        if self.value is not None:
            return [("", self.value)]
        if self.choices is not None:
            return [("", c) for c in self.choices]
        return [("`min` = ", self.min), ("`max` = ", self.max)]


def _fixed(value) -> Dimension:
    return Dimension(value=value)


def _deployment_bounds(field: str) -> tuple[int, int]:
    """The (ge, le) bounds the cost model's `Deployment` puts on a parallelism degree."""
    limits = {type(m).__name__: m for m in Deployment.model_fields[field].metadata}
    return limits["Ge"].ge, limits["Le"].le


# Inclusive bounds of each searched integer. Lower bounds are the architecture's (0 where 0 means
# "none"); upper bounds lie far beyond released models (DeepSeek-V3: hidden 7168, 61 layers, 256
# experts; vocabularies up to ~262k) and stop a typo (1e9 layers) before it costs time or memory.
DIMENSION_BOUNDS = {
    "hidden_size": (1, 2**20), "num_layers": (1, 100_000), "head_dim": (1, 4096),
    "num_kv_heads": (1, 4096), "q_per_kv": (1, 1024), "intermediate_size": (0, 2**22),
    "vocab_size": (1, 2**24), "num_experts": (0, 2**16), "experts_per_token": (1, 2**16),
    "moe_intermediate_size": (0, 2**22), "num_shared_experts": (0, 1024),
    "first_dense_layers": (0, 100_000),
    # attention kind and layer pattern (issue 15): MLA ranks, the full-attention period, the
    # sliding window (0: none) and the linear mixers' heads, widths and conv taps
    "kv_lora_rank": (1, 2**16), "q_lora_rank": (0, 2**16), "qk_rope_head_dim": (1, 4096),
    "full_attention_period": (1, 100_000), "sliding_window": (0, 10_000_000),
    "linear_num_value_heads": (1, 4096), "linear_value_head_dim": (1, 4096),
    "linear_num_key_heads": (1, 4096), "linear_key_head_dim": (1, 4096),
    "linear_conv_kernel": (1, 64),
    **{field: _deployment_bounds(field) for field in ("tp", "ep", "pp", "dp", "kvp",
                                                      "spec_tokens")},
}
FORMAT_DIMENSIONS = ("precision", "kv_precision", "moe_precision")
# options of the dimensions of names (other than formats and serving modes)
NAMED_OPTIONS = {"attention_kind": ("gqa", "mla"),
                 "linear_mixer": ("none", "gated_deltanet", "mamba2")}
SAME_FORMAT = "same"  # `moe_precision`: the routed experts in the linear layers' `precision`


def _dimension_table(value: Any) -> Any:
    """A dimension must be a table; a bare value or list gets the form it probably meant."""
    if isinstance(value, (dict, Dimension)):
        return value
    form = "choices" if isinstance(value, list) else "value"
    shown = _toml(value)
    raise ValueError(f"a dimension is a table, not {shown}; write `{{ {form} = {shown} }}`, "
                     "`{ choices = [...] }` or `{ min = ..., max = ..., step = ... }`")


def _toml(value: Any) -> str:
    """A value as the study file writes it (error messages quote the user's own syntax)."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)


def _check_integers(dim: Dimension, low: int, high: int) -> None:
    for label, value in dim.extremes():
        if not isinstance(value, int):  # a string (Dimension's ints are strict: no bools)
            raise ValueError(f"every option must be an integer; got {label}{_toml(value)}")
        if value < low:
            raise ValueError(f"every option must be an integer >= {low}; got {label}{value}")
        if value > high:
            raise ValueError(f"every option must be an integer <= {high}; got {label}{value}")


def _largest(dim: Dimension) -> int:
    return max(value for _, value in dim.extremes())


def _check_formats(dim: Dimension, field: str) -> None:
    for _, value in dim.extremes():
        if not isinstance(value, str):
            raise ValueError(f"every option must be a format name (a string); got {_toml(value)}")
        if not (field == "moe_precision" and value == SAME_FORMAT):
            get_precision(value, f"space.{field}")


class Space(BaseModel):
    """Searched architecture and deployment. Query heads = num_kv_heads × q_per_kv, so GQA
    divisibility holds by construction; EP is reduced to a divisor of TP·DP."""

    model_config = _FROZEN

    hidden_size: Dimension
    num_layers: Dimension
    head_dim: Dimension = _fixed(128)
    num_kv_heads: Dimension = _fixed(8)
    q_per_kv: Dimension = _fixed(4)
    intermediate_size: Dimension = _fixed(0)  # dense FFN H′ (0: no dense layers in an MoE)
    vocab_size: Dimension = _fixed(128256)
    num_experts: Dimension = _fixed(0)  # 0 = dense model
    experts_per_token: Dimension = _fixed(1)
    moe_intermediate_size: Dimension = _fixed(0)
    num_shared_experts: Dimension = _fixed(0)
    first_dense_layers: Dimension = _fixed(0)
    # attention and layer pattern (search/study/space.py `_attention_fields`, `_pattern_fields`):
    # GQA or MLA (DeepSeek-V3's ranks 512 / 1536 / 64); every `full_attention_period`-th layer
    # full attention, the others the `linear_mixer` or, with "none", sliding-window attention of
    # `sliding_window` tokens (0: every layer full); linear heads and widths of Qwen3-Next-80B
    attention_kind: Dimension = _fixed("gqa")
    kv_lora_rank: Dimension = _fixed(512)
    q_lora_rank: Dimension = _fixed(0)  # 0: uncompressed queries
    qk_rope_head_dim: Dimension = _fixed(64)
    full_attention_period: Dimension = _fixed(1)  # 1: every layer full attention
    linear_mixer: Dimension = _fixed("none")
    sliding_window: Dimension = _fixed(0)
    linear_num_value_heads: Dimension = _fixed(32)
    linear_value_head_dim: Dimension = _fixed(128)
    linear_num_key_heads: Dimension = _fixed(16)
    linear_key_head_dim: Dimension = _fixed(128)  # Mamba-2: the SSM state size
    linear_conv_kernel: Dimension = _fixed(4)
    tp: Dimension = _fixed(1)
    ep: Dimension = _fixed(1)
    pp: Dimension = _fixed(1)
    dp: Dimension = _fixed(1)
    precision: Dimension = _fixed("fp8")
    kv_precision: Dimension = _fixed("fp8")
    moe_precision: Dimension = _fixed(SAME_FORMAT)  # routed experts' format ("same": precision)
    kvp: Dimension = _fixed(1)  # Helix KV parallelism (1: plain TP)
    spec_tokens: Dimension = _fixed(0)  # speculative (MTP) tokens per step (0: none)
    serving: Dimension = _fixed("aggregated")  # or "disaggregated" prefill/decode pools

    @field_validator("*", mode="before")
    @classmethod
    def _is_table(cls, value: Any) -> Any:
        return _dimension_table(value)

    @field_validator(*DIMENSION_BOUNDS)
    @classmethod
    def _integers_in_bounds(cls, dim: Dimension, info: ValidationInfo) -> Dimension:
        _check_integers(dim, *DIMENSION_BOUNDS[info.field_name])
        return dim

    @field_validator("serving")
    @classmethod
    def _known_serving_modes(cls, dim: Dimension) -> Dimension:
        for option in dim.options:
            if option not in SERVING_MODES:
                raise ValueError(f"options must be {' or '.join(SERVING_MODES)}; got "
                                 f"{_toml(option)}")
        return dim

    @field_validator(*NAMED_OPTIONS)
    @classmethod
    def _known_names(cls, dim: Dimension, info: ValidationInfo) -> Dimension:
        known = NAMED_OPTIONS[info.field_name]
        for option in dim.options:
            if option not in known:
                raise ValueError(f"options must be {', '.join(map(_toml, known))}; got "
                                 f"{_toml(option)}")
        return dim

    @field_validator(*FORMAT_DIMENSIONS)
    @classmethod
    def _known_formats(cls, dim: Dimension, info: ValidationInfo) -> Dimension:
        _check_formats(dim, info.field_name)
        return dim

    @model_validator(mode="after")
    def _dense_models_have_an_ffn(self) -> Space:
        """Every trial would be an invalid shape (space.py: a dense model needs H′ > 0)."""
        if _largest(self.num_experts) == 0 and _largest(self.intermediate_size) == 0:
            raise ValueError("`intermediate_size` must have an option > 0 for a dense model "
                             "(every `num_experts` option is 0); got only 0")
        return self


class Budget(BaseModel):
    model_config = _FROZEN

    total_params: float | None = Field(default=None, gt=0)
    active_params: float | None = Field(default=None, gt=0)
    tolerance_frac: float = Field(default=0.1, gt=0, le=10)
    training_tokens: float = Field(gt=0)
    training_precision: str = "bf16"  # the format the model is trained in (serving may quantize)

    @model_validator(mode="after")
    def _known_precision(self) -> Budget:
        get_precision(self.training_precision, "budget.training_precision")
        return self


class Hardware(BaseModel):
    model_config = _FROZEN

    gpu: str
    max_gpus: int = Field(default=8, ge=1, le=100_000)  # GPUs one model instance may use
    gpus: int | None = Field(default=None, ge=1, le=100_000)  # exactly this many per instance
    # the fleet's GPUs: no instance larger; throughput per GPU counts the GPUs left over when
    # the fleet holds ⌊total_gpus / instance GPUs⌋ instances (objectives/serving.py)
    total_gpus: int | None = Field(default=None, ge=1, le=10_000_000)

    @model_validator(mode="before")
    @classmethod
    def _instance_size_caps(cls, data: Any) -> Any:
        """`gpus` alone also caps the instance (`max_gpus` defaults to it)."""
        if isinstance(data, dict) and data.get("gpus") is not None and "max_gpus" not in data:
            return {**data, "max_gpus": data["gpus"]}
        return data

    @model_validator(mode="after")
    def _known(self) -> Hardware:
        get_hardware(self.gpu)
        if self.gpus is not None and self.gpus > self.max_gpus:
            raise ValueError(f"`gpus` ({self.gpus}) must be <= `max_gpus` ({self.max_gpus})")
        if self.total_gpus is not None and self.gpus is not None and \
                self.total_gpus < self.gpus:
            raise ValueError(f"`total_gpus` ({self.total_gpus}) must be >= `gpus` "
                             f"({self.gpus}): the fleet holds at least one instance")
        return self


class Sla(BaseModel):
    """What every operating point on a frontier must meet (`[sla]`): the frontier, its area
    and the Pareto set count only points that do. The cost model predicts mean latencies, so
    these are limits on means (no percentile)."""

    model_config = _FROZEN

    ttft_max_ms: float | None = Field(default=None, gt=0)  # benchmark TTFT at the concurrency
    tpot_max_ms: float | None = Field(default=None, gt=0)  # time per output token
    interactivity_min: float | None = Field(default=None, gt=0)  # tokens/s/user = 1000/TPOT ms

    @model_validator(mode="after")
    def _one_tpot_form(self) -> Sla:
        if self.tpot_max_ms is not None and self.interactivity_min is not None:
            raise ValueError("give `tpot_max_ms` or `interactivity_min`, not both (one is "
                             "1000 / the other)")
        if self.ttft_max_ms is None and self.tpot_max_ms is None and \
                self.interactivity_min is None:
            raise ValueError("`[sla]` needs `ttft_max_ms`, `tpot_max_ms` or "
                             "`interactivity_min`")
        return self


class WorkloadSpec(BaseModel):
    model_config = _FROZEN

    isl_tokens: int = Field(ge=1, le=10_000_000)
    osl_tokens: int = Field(ge=1, le=10_000_000)
    interactivity_min: float = Field(default=10.0, gt=0)  # tokens/s/user, the window's x_lo
    interactivity_max: float = Field(default=1000.0, gt=0)  # x_hi
    x_scale: Literal["log", "linear"] = "log"
    prefix_cached_frac: float = Field(default=0.0, ge=0.0, lt=1.0)  # prompt share reused (cached)

    @model_validator(mode="after")
    def _window(self) -> WorkloadSpec:
        if self.interactivity_min >= self.interactivity_max:
            raise ValueError(f"`interactivity_min` ({self.interactivity_min}) must be < "
                             f"`interactivity_max` ({self.interactivity_max})")
        return self


class Constraints(BaseModel):
    model_config = _FROZEN

    alignment: Literal[128, 256, 512] = 128
    hard: list[str] | None = None  # None: every constraint but kv_replication is hard
    aspect_ratio_min: float | None = Field(default=None, gt=0)  # hidden_size / num_layers
    aspect_ratio_max: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _known(self) -> Constraints:
        for name in self.hard or []:
            if name not in CONSTRAINT_NAMES:
                raise ValueError(f"`{name}` is not a constraint; known: "
                                 f"{', '.join(CONSTRAINT_NAMES)}")
        return self

    @model_validator(mode="after")
    def _band_is_ordered(self) -> Constraints:
        low, high = self.aspect_ratio_min, self.aspect_ratio_max
        if low is not None and high is not None and low > high:
            raise ValueError(f"`aspect_ratio_min` ({low}) must be <= `aspect_ratio_max` ({high})")
        return self


class Objectives(BaseModel):
    model_config = _FROZEN

    names: list[str] = Field(default=["frontier_area", "loss"], min_length=1)
    ttft_concurrency: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _known(self) -> Objectives:
        for name in self.names:
            if name not in OBJECTIVE_DIRECTIONS:
                known = ", ".join(OBJECTIVE_DIRECTIONS)
                raise ValueError(f"`{name}` is not an objective; known: {known}")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"objectives must not repeat; got {self.names}")
        return self

    @property
    def directions(self) -> list[str]:
        return [OBJECTIVE_DIRECTIONS[n] for n in self.names]


class StudySpec(BaseModel):
    """A whole study: what to search, for which hardware and workload, scored how."""

    model_config = _FROZEN

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,80}$")
    description: str = ""
    # "exhaustive": every design of an enumerable space: its exact front (study/exhaustive.py)
    sampler: Literal["nsga2", "tpe", "random", "exhaustive"] = "nsga2"
    trials: int = Field(ge=1, le=10_000_000)
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    batch_size: int = Field(default=64, ge=1, le=4096)
    budget: Budget
    hardware: Hardware
    workload: WorkloadSpec
    space: Space
    constraints: Constraints = Constraints()
    objectives: Objectives = Objectives()
    # How deployments are searched: "sweep" scores every deployment the space allows for each
    # sampled architecture (its frontier is the envelope over all of them; Optuna samples
    # shapes only); "sampled" makes the deployment dimensions Optuna dimensions like the rest;
    # "auto" sweeps them too; a space of more combinations than
    # `search.study.space.SWEEP_MAX_DEPLOYMENTS` is an error unless the study says "sampled".
    deployments: Literal["auto", "sweep", "sampled"] = "auto"
    # The serving engine the deployments must run on (constraints/engines.py): deployments it
    # cannot run are neither sampled nor swept. None: any mapping the cost model evaluates.
    engine: Literal[ENGINE_NAMES] | None = None
    sla: Sla | None = None  # limits every frontier point must meet (none: every point counts)

    @model_validator(mode="after")
    def _formats_run_on_the_engine(self) -> StudySpec:
        """Every format option of the space is one the study's engine runs."""
        for name in () if self.engine is None else FORMAT_DIMENSIONS:
            for option in getattr(self.space, name).options:
                if option != SAME_FORMAT and (why := format_refusal(self.engine, name, option)):
                    raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _formats_run_on_the_gpu(self) -> StudySpec:
        """Every linear-layer and expert format the space offers has tensor cores on the GPU."""
        hw = get_hardware(self.hardware.gpu)
        for name in ("precision", "moe_precision"):
            for option in getattr(self.space, name).options:
                if option != SAME_FORMAT and not hw.supports(get_precision(option)):
                    raise ValueError(f"`space.{name}` option {option!r} does not run on "
                                     f"{hw.name} (its tensor-core rates: "
                                     f"{', '.join(sorted(hw.peak_flop_per_s))})")
        return self


def _is_field(part: str | int) -> bool:
    """Whether a part of pydantic's error location is a key or index (not a union member's
    type tag such as `int` or `list[str]`)."""
    return part != "__root__" and not (isinstance(part, str) and (
        part in ("int", "str", "float", "bool") or "[" in part))


def _describe(err: dict[str, Any]) -> str:
    path = ".".join(str(p) for p in err["loc"] if _is_field(p))
    if err["type"] == "value_error":
        message = str(err["ctx"]["error"])
        named = not path or message.startswith(f"`{path}`")
        return message if named else f"`{path}`: {message}"
    if err["type"] == "extra_forbidden":
        return f"`{path}` is not a known key"
    if err["type"] == "missing":
        return f"`{path}` is required"
    return f"`{path}` ({err.get('input')!r}): {err['msg']}"


def spec_from_dict(doc: dict[str, Any], source: str = "study") -> StudySpec:
    try:
        return StudySpec.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(f"{source}: {_describe(exc.errors()[0])}") from None


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a study TOML file."""
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"study file {str(file)!r} does not exist")
    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{file}: not valid TOML: {exc}") from None
    return spec_from_dict(doc, str(file))
