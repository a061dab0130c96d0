"""Study specification: a TOML file validated into a frozen pydantic `StudySpec`.

Unknown keys are errors naming their path and the nearest known key; ranges are checked
(min ≤ max, steps > 0), every searched integer against its bounds, every number for being finite
and within what physics and released models allow, and the cross-field rules (a deployment fits
`max_gpus`, top-k ≤ experts, active ≤ total parameters), so a study no search can run fails here,
before anything is written; every error becomes one `SpecError` line naming the field, the rule
and the bad value (search/study/messages.py). A dimension is search/study/dimension.py's.

To add a section (e.g. `[sla]`): a frozen model with `model_config = FROZEN`, bounded fields, and
a field of `StudySpec` with a default, so that studies without it still validate.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)  # fmt: skip

from constraints import CONSTRAINT_NAMES, ENGINE_NAMES, format_refusal
from cost_model import SERVING_MODES, Deployment, get_hardware, get_precision
from objectives import OBJECTIVES
from search.study.dimension import (  # noqa: F401 - Dimension and SAME_FORMAT re-exported
    FROZEN,
    SAME_FORMAT,
    Dimension,
    OptionName,
    check_formats,
    check_integers,
    dimension_table,
    fixed,
    largest,
)
from search.study.errors import SpecError
from search.study.messages import describe, first_error, read_study_document
from search.study.messages import toml_value as _toml

OBJECTIVE_DIRECTIONS = {name: o.direction for name, o in OBJECTIVES.items()}
# Samplers seed numpy (seeds < 2**32); runs add offsets to the study's seed (the trials already
# finished, 7919 per extra worker), so study seeds stop at 2**31 - 1 to leave them room.
SEED_MAX = 2**31 - 1


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
GPU_DIMENSIONS = ("tp", "pp", "dp", "kvp")  # a deployment's GPUs: their product
PARALLEL_DIMENSIONS = (*GPU_DIMENSIONS, "ep")  # none can exceed the GPUs a study may use
# A study's name names its storage folder (out/<name>/): no separators, no `.` or `..`, no
# leading `.` (hidden) or `-` (read as an option); 80 characters, far below any file system's
# 255-byte name limit.
NAME_MAX_CHARS = 80
NAME_PATTERN = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{NAME_MAX_CHARS - 1}}}")
# options of the dimensions of names (other than formats and serving modes)
NAMED_OPTIONS = {"attention_kind": ("gqa", "mla"),
                 "linear_mixer": ("none", "gated_deltanet", "mamba2")}



class Space(BaseModel):
    """Searched architecture and deployment. Query heads = num_kv_heads × q_per_kv, so GQA
    divisibility holds by construction; EP is reduced to a divisor of TP·DP."""

    model_config = FROZEN

    hidden_size: Dimension
    num_layers: Dimension
    head_dim: Dimension = fixed(128)
    num_kv_heads: Dimension = fixed(8)
    q_per_kv: Dimension = fixed(4)
    intermediate_size: Dimension = fixed(0)  # dense FFN H′ (0: no dense layers in an MoE)
    vocab_size: Dimension = fixed(128256)
    num_experts: Dimension = fixed(0)  # 0 = dense model
    experts_per_token: Dimension = fixed(1)
    moe_intermediate_size: Dimension = fixed(0)
    num_shared_experts: Dimension = fixed(0)
    first_dense_layers: Dimension = fixed(0)
    # attention and layer pattern (search/study/space.py `_attention_fields`, `_pattern_fields`):
    # GQA or MLA (DeepSeek-V3's ranks 512 / 1536 / 64); every `full_attention_period`-th layer
    # full attention, the others the `linear_mixer` or, with "none", sliding-window attention of
    # `sliding_window` tokens (0: every layer full); linear heads and widths of Qwen3-Next-80B
    attention_kind: Dimension = fixed("gqa")
    kv_lora_rank: Dimension = fixed(512)
    q_lora_rank: Dimension = fixed(0)  # 0: uncompressed queries
    qk_rope_head_dim: Dimension = fixed(64)
    full_attention_period: Dimension = fixed(1)  # 1: every layer full attention
    linear_mixer: Dimension = fixed("none")
    sliding_window: Dimension = fixed(0)
    linear_num_value_heads: Dimension = fixed(32)
    linear_value_head_dim: Dimension = fixed(128)
    linear_num_key_heads: Dimension = fixed(16)
    linear_key_head_dim: Dimension = fixed(128)  # Mamba-2: the SSM state size
    linear_conv_kernel: Dimension = fixed(4)
    tp: Dimension = fixed(1)
    ep: Dimension = fixed(1)
    pp: Dimension = fixed(1)
    dp: Dimension = fixed(1)
    precision: Dimension = fixed("fp8")
    kv_precision: Dimension = fixed("fp8")
    moe_precision: Dimension = fixed(SAME_FORMAT)  # routed experts' format ("same": precision)
    kvp: Dimension = fixed(1)  # Helix KV parallelism (1: plain TP)
    spec_tokens: Dimension = fixed(0)  # speculative (MTP) tokens per step (0: none)
    serving: Dimension = fixed("aggregated")  # or "disaggregated" prefill/decode pools

    @field_validator("*", mode="before")
    @classmethod
    def _is_table(cls, value: Any) -> Any:
        return dimension_table(value)

    @field_validator(*DIMENSION_BOUNDS)
    @classmethod
    def _integers_in_bounds(cls, dim: Dimension, info: ValidationInfo) -> Dimension:
        check_integers(dim, *DIMENSION_BOUNDS[info.field_name])
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
        check_formats(dim, info.field_name)
        return dim

    @model_validator(mode="after")
    def _dense_models_have_an_ffn(self) -> Space:
        """Every trial would be an invalid shape (space.py: a dense model needs H′ > 0)."""
        if largest(self.num_experts) == 0 and largest(self.intermediate_size) == 0:
            raise ValueError("`intermediate_size` must have an option > 0 for a dense model "
                             "(every `num_experts` option is 0); got only 0")
        return self


# Upper bounds of a budget, far past any model trained so far, so that a typo (1e30) is refused:
# parameters 5x Llama 4 Behemoth's announced ~2T total (Meta, "The Llama 4 herd", 2025); training
# tokens ~28x Qwen3's 36T (Qwen3 technical report, arXiv 2505.09388 §3).
PARAMS_MAX = 1e13
TRAINING_TOKENS_MAX = 1e15


class Budget(BaseModel):
    model_config = FROZEN

    total_params: float | None = Field(default=None, gt=0, le=PARAMS_MAX)
    active_params: float | None = Field(default=None, gt=0, le=PARAMS_MAX)
    tolerance_frac: float = Field(default=0.1, gt=0, le=10)
    training_tokens: float = Field(gt=0, le=TRAINING_TOKENS_MAX)
    training_precision: OptionName = "bf16"  # the format trained in (serving may quantize)

    @model_validator(mode="after")
    def _known_precision(self) -> Budget:
        get_precision(self.training_precision, "budget.training_precision")
        return self

    @model_validator(mode="after")
    def _active_within_total(self) -> Budget:
        total, active = self.total_params, self.active_params
        if total is not None and active is not None and active > total:
            raise ValueError(f"`budget.active_params` ({active:g}) must be <= "
                             f"`budget.total_params` ({total:g})")
        return self


STUDY_DIR = "study_dir"  # validation context: the study file's folder (None: the working one)
PATH_MAX_CHARS = 4096  # Linux's PATH_MAX


class Hardware(BaseModel):
    model_config = FROZEN

    gpu: str = Field(max_length=PATH_MAX_CHARS)  # a catalog name or a hardware file's path
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

    @field_validator("gpu")
    @classmethod
    def _path_from_the_study(cls, gpu: str, info: ValidationInfo) -> str:
        """A relative path to a hardware file is read against the study file's folder (and
        stored absolute in the study's record), never against the working directory."""
        folder = (info.context or {}).get(STUDY_DIR)
        if folder is None or not gpu.endswith(".toml") or Path(gpu).is_absolute():
            return gpu
        return os.path.normpath(Path(folder) / gpu)

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

    model_config = FROZEN

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


# tokens/s/user: ~400x the fastest single-stream decode published (~2,500 tokens/s/user,
# Cerebras on Llama 4 Maverick, 2025): no window needs more
INTERACTIVITY_MAX = 1e6


class WorkloadSpec(BaseModel):
    model_config = FROZEN

    isl_tokens: int = Field(ge=1, le=10_000_000)
    osl_tokens: int = Field(ge=1, le=10_000_000)
    interactivity_min: float = Field(default=10.0, gt=0, le=INTERACTIVITY_MAX)  # tokens/s/user
    interactivity_max: float = Field(default=1000.0, gt=0, le=INTERACTIVITY_MAX)  # the window
    x_scale: Literal["log", "linear"] = "log"
    prefix_cached_frac: float = Field(default=0.0, ge=0.0, lt=1.0)  # prompt share reused (cached)
    # attention-DP balancer's timeout in forward steps (0: off): new requests wait until every
    # DP group has one, so the groups prefill together (cost_model.deployment.Workload)
    adp_balance_timeout_steps: int = Field(default=0, ge=0, le=100_000)

    @model_validator(mode="after")
    def _window(self) -> WorkloadSpec:
        if self.interactivity_min >= self.interactivity_max:
            raise ValueError(f"`interactivity_min` ({self.interactivity_min}) must be < "
                             f"`interactivity_max` ({self.interactivity_max})")
        return self


ASPECT_RATIO_MAX = DIMENSION_BOUNDS["hidden_size"][1]


class Constraints(BaseModel):
    model_config = FROZEN

    alignment: Literal[128, 256, 512] = 128
    hard: list[str] | None = None  # None: every constraint but kv_replication is hard
    # hidden_size / num_layers: at most the largest hidden size the space allows
    aspect_ratio_min: float | None = Field(default=None, gt=0, le=ASPECT_RATIO_MAX)
    aspect_ratio_max: float | None = Field(default=None, gt=0, le=ASPECT_RATIO_MAX)

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
    model_config = FROZEN

    names: list[str] = Field(default=["frontier_area", "loss"], min_length=1)
    ttft_concurrency: int = Field(default=1, ge=1, le=1_000_000)

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

    model_config = FROZEN

    name: str  # names the folder of its storage, out/<name>/ (`_file_name_safe`)
    description: str = Field(default="", max_length=10_000)
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

    @field_validator("name")
    @classmethod
    def _file_name_safe(cls, name: str) -> str:
        if not NAME_PATTERN.fullmatch(name):
            shown = _toml(name if len(name) <= NAME_MAX_CHARS else name[:NAME_MAX_CHARS] + "…")
            raise ValueError(f"`name` must be file-name-safe: 1 to {NAME_MAX_CHARS} letters, "
                             "digits, `_`, `.` or `-`, starting with a letter, digit or `_` "
                             f"(not `.`, `..` or a path); got {shown}")
        return name

    @model_validator(mode="after")
    def _deployments_fit_the_gpus(self) -> StudySpec:
        """Every parallel degree the space offers fits `hardware.max_gpus`, and so does its
        smallest deployment (TP·PP·DP·KVP GPUs)."""
        limit = self.hardware.max_gpus
        for name in PARALLEL_DIMENSIONS:
            if (most := largest(getattr(self.space, name))) > limit:
                raise ValueError(f"`space.{name}` option {most} exceeds `hardware.max_gpus` "
                                 f"({limit}): no deployment could use it")
        least = math.prod(min(v for _, v in getattr(self.space, name).extremes())
                          for name in GPU_DIMENSIONS)
        if least > limit:
            raise ValueError(f"the smallest deployment of the space ({'·'.join(GPU_DIMENSIONS)} "
                             f"= {least} GPUs) exceeds `hardware.max_gpus` ({limit})")
        return self

    @model_validator(mode="after")
    def _top_k_within_experts(self) -> StudySpec:
        """No `experts_per_token` option larger than every `num_experts` option (an MoE)."""
        experts, top_k = largest(self.space.num_experts), largest(self.space.experts_per_token)
        if experts and top_k > experts:
            raise ValueError(f"`space.experts_per_token` option {top_k} exceeds every "
                             f"`space.num_experts` option (at most {experts})")
        return self

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


def spec_from_dict(doc: dict[str, Any], source: str = "study",
                   study_dir: Path | None = None) -> StudySpec:
    """The validated spec of a parsed study document; `study_dir`: the folder of its file, that
    relative paths in it (`hardware.gpu`) are read against."""
    try:
        return StudySpec.model_validate(doc, context={STUDY_DIR: study_dir})
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe(first_error(exc.errors()), StudySpec)}") from None
    except RecursionError:
        raise SpecError(f"{source}: nested too deeply to be a study") from None


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a study TOML file."""
    file = Path(path)
    return spec_from_dict(read_study_document(file), str(file), file.resolve().parent)
