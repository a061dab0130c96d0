"""Reading one published row: the CSVs, the checks that leave a row out (`Skip`, with the
reason), and the model, GPU, deployment, workload, regime and source each row names."""

from __future__ import annotations

import csv
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from cost_model import (
    MS_PER_S, Architecture, Deployment, HardwareSpec, Workload, catalog_names, config_error_from,
    deployment_violations, get_hardware, load_architecture,
)
from tests.benchmarks.serving.isl_mixes import isl_mix_frac
from tests.benchmarks.serving.config import (
    AGG_MODES, DISAGG_MODE, ENGINE_WORDS, FAMILIES, HALVES, HF_CONFIG_DIR, INFERENCEX,
    INFERENCEX_SGLANG_POLL_FROM_CONCURRENCY, INFERENCEX_SGLANG_POLL_GPUS,
    INFERENCEX_SGLANG_POLL_STEPS, INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS,
    INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS_BY_MODEL, MAX_CONCURRENCY_PREFIX, MODEL_CONFIGS,
    NOT_GROWN, PERF_OVERVIEW, POOL_PATTERN, REQUIRED_COLUMNS, SCENARIO_REGIMES, SERVING_DIR,
    MLPERF_ROUNDS, SOURCE_OF_KIND, SPEC_DECODE_NONE,
)

class Skip(Exception):
    """A row the comparison leaves out; the message is the reason."""


@dataclass(frozen=True)
class Measured:
    tpot_s: float | None
    ttft_s: float | None
    tokens_per_s_per_gpu: float | None
    ttft_p99_s: float | None = None  # where published (MLPerf's logs): printed beside, not scored


@dataclass
class Result:
    engine: str | None
    model: str
    gpu: str
    regime: str
    is_moe: bool
    deployment: str
    isl_tokens: int
    osl_tokens: int
    concurrency: float
    measured: dict[str, float | None]
    predicted: dict[str, float]
    error_frac: dict[str, float | None] = field(default_factory=dict)
    source_kind: str = ""
    statistic: dict[str, str] = field(default_factory=dict)  # tpot / ttft -> mean, median, ...
    source: str = ""  # the independent source the row comes from (`source_of`)

    @property
    def half(self) -> str:
        return split_half(self.model, self.gpu, self.deployment, self.isl_tokens,
                          self.osl_tokens, self.concurrency)


def split_half(model: str, gpu: str, deployment: str, isl_tokens, osl_tokens,
               concurrency) -> str:
    """`fit` or `holdout`: the declared split of the scored rows by configuration (SHA-256 of
    model, GPU, deployment, ISL, OSL and concurrency; even first byte: fit), so a configuration
    measured on several dates stays on one side. The benchmark-TTFT terms are fitted on the fit
    half only (tests/benchmarks/fit_benchmark_ttft.py)."""
    key = f"{model}|{gpu}|{deployment}|{isl_tokens}|{osl_tokens}|{concurrency}"
    return HALVES[hashlib.sha256(key.encode()).digest()[0] % 2]


# ---- parsing ---------------------------------------------------------------------------------


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _int_or(text: str, default: int) -> int:
    value = _number(text)
    return default if value is None else int(value)


def _measured(row: dict[str, str]) -> Measured:
    tpot_ms, ttft_ms = _number(row["tpot_ms"]), _number(row["ttft_ms"])
    p99_ms = _number(row.get("ttft_p99_ms", ""))
    return Measured(
        tpot_s=None if tpot_ms is None else tpot_ms / MS_PER_S,
        ttft_s=None if ttft_ms is None else ttft_ms / MS_PER_S,
        tokens_per_s_per_gpu=_number(row["output_tokens_per_s_per_gpu"]),
        ttft_p99_s=None if p99_ms is None else p99_ms / MS_PER_S,
    )


def _formats(row: dict[str, str], arch: Architecture) -> dict[str, str]:
    """The deployment's `precision` (and `moe_precision` where the checkpoint mixes formats)."""
    text = row["precision"].strip().lower()
    deepseek = arch.family == "deepseek_v3"
    explicit = {k: row[k].strip() for k in ("moe_precision", "kv_precision")
                if row.get(k, "").strip()}
    if explicit.get("kv_precision", "") not in ("", "fp8", "bf16", "fp16"):
        raise Skip(f"KV format not a deployment field: {explicit['kv_precision']!r}")
    if text in ("bf16", "fp16"):
        return {"precision": text, **explicit}
    if text.startswith("fp4"):
        # NVIDIA's DeepSeek FP4 checkpoints keep MLA in DeepSeek's block-scaled FP8: Model
        # Optimizer's examples/deepseek/ptq.py disables the `*attn*` quantizers unless asked
        # (github.com/NVIDIA/TensorRT-Model-Optimizer); the experts are NVFP4.
        return {"precision": "fp8_block", "moe_precision": "nvfp4"} if deepseek \
            else {"precision": "nvfp4", **explicit}
    if text == "fp8_block":  # a row that names the checkpoint's block scaling
        return {"precision": text, **explicit}
    if text.startswith("fp8"):
        return {"precision": "fp8_block" if deepseek else "fp8", **explicit}
    raise Skip(f"precision not mapped: {row['precision']!r}")


def _perf_overview_moe(row: dict[str, str], arch: Architecture) -> bool:
    """A TensorRT-LLM performance-overview row of an MoE model that states no attention DP:
    its documented options turn attention DP on, with EP over the same ranks (`PERF_OVERVIEW`)."""
    return (row.get("source_kind", "").strip() == PERF_OVERVIEW and arch.ffn.is_moe
            and not row["attention_dp"].strip())


def _deployment(row: dict[str, str], arch: Architecture) -> Deployment:
    if row.get("scenario", "").strip() and not row["tp"].strip():
        raise Skip("parallelism not stated (no launch config published with the result)")
    tp, ep, pp = _int_or(row["tp"], 1), _int_or(row["ep"], 1), _int_or(row["pp"], 1)
    dp = 1
    if _perf_overview_moe(row, arch):
        tp, ep, dp = 1, tp, tp
    elif row["attention_dp"].strip().lower() == "true":
        tp, dp = 1, tp
    try:
        return Deployment(tp=tp, ep=ep, pp=pp, dp=dp, **_formats(row, arch))
    except ValidationError as exc:  # Deployment's own rules surface as pydantic errors
        raise Skip(str(config_error_from(exc, "invalid deployment"))) from exc


def engine_of(row: dict[str, str]) -> str | None:
    """The serving engine the row ran on, from its `framework` (None: not one we model apart)."""
    text = row.get("framework", "").strip().lower()
    return next((engine for word, engine in ENGINE_WORDS if word in text), None)


def _run_settings(row: dict[str, str], engine: str | None) -> dict[str, int]:
    """The scheduler settings of the row's launch script (InferenceX only; engine defaults else)."""
    if row.get("source_kind", "").strip() != INFERENCEX:
        return {}
    if engine == "sglang" and row["gpu"].strip().lower() in INFERENCEX_SGLANG_POLL_GPUS:
        c = _number(row["concurrency"]) or 1.0
        low, high = INFERENCEX_SGLANG_POLL_STEPS
        return {"scheduler_recv_interval_steps":
                high if c >= INFERENCEX_SGLANG_POLL_FROM_CONCURRENCY else low}
    if engine == "trtllm" and row["attention_dp"].strip().lower() == "true":
        return {"adp_balance_timeout_steps": INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS_BY_MODEL.get(
            row["model"].strip(), INFERENCEX_TRTLLM_ADP_TIMEOUT_STEPS)}
    return {}


def _workload(row: dict[str, str]) -> Workload:
    isl, osl = _number(row["isl"]), _number(row["osl"])
    if isl is None and osl is not None:
        raise Skip("no ISL in the row (its source does not publish the mean input length)")
    if isl is None or osl is None:
        raise Skip("no ISL/OSL in the row")
    engine = engine_of(row)
    return Workload(isl_tokens=int(isl), osl_tokens=int(osl), engine=engine,
                    isl_mix_frac=_isl_mix(row), **_run_settings(row, engine))


def _isl_mix(row: dict[str, str]) -> tuple[float, ...]:
    """An MLPerf row's dataset input lengths (`isl_mixes`: its ISL is that dataset's mean);
    () for every other source (one length, or a spread its source does not publish)."""
    if not source_of(row).startswith("mlperf"):
        return ()
    return isl_mix_frac(row["model"].strip())


def _regime(row: dict[str, str]) -> tuple[str, float | None]:
    scenario = row.get("scenario", "").strip()
    if scenario:
        return _scenario_regime(row, scenario)
    text = row["concurrency"].strip()
    if text.lower().startswith(MAX_CONCURRENCY_PREFIX):
        return "max", None
    value = _number(text)
    if value is None or value < 1:
        raise Skip(f"concurrency not a number: {text!r}")
    return "fixed", value


def _scenario_regime(row: dict[str, str], scenario: str) -> tuple[str, float | None]:
    """(regime, concurrency) of a grown-set row by its `scenario` (tests/data/serving/schema.py)."""
    if scenario not in SCENARIO_REGIMES:
        raise Skip(f"scenario not modelled: {scenario!r}")
    regime = SCENARIO_REGIMES[scenario]
    if regime == "fixed":
        value = _number(row["concurrency"])
        if value is None or value < 1:
            raise Skip(f"concurrency not a number: {row['concurrency']!r}")
        return regime, value
    if regime == "rate":
        instance_rate_per_s(row)  # checked here: the row needs its rate
    return regime, None


def little_concurrency(rate_per_s: float, ttft_s: float, tpot_s: float, osl_tokens: float) -> float:
    """Requests in flight at a Poisson rate λ (Little's law): L = λ · W, W the mean request
    latency TTFT + (OSL − 1) · TPOT."""
    return rate_per_s * (ttft_s + (osl_tokens - 1.0) * tpot_s)


def instance_rate_per_s(row: dict[str, str]) -> float:
    """The Poisson request rate one serving instance of the row receives: its
    `request_rate_per_s` (the system's) over its instances, `total_gpus` / `num_gpus`."""
    rate = _number(row.get("request_rate_per_s", ""))
    if rate is None or rate <= 0:
        raise Skip("Poisson-arrival row without its request rate")
    return rate / ((_number(row.get("total_gpus", "")) or 1) / (_number(row["num_gpus"]) or 1))


# ---- checks that leave a row out -------------------------------------------------------------


def _check_serving_mode(row: dict[str, str]) -> None:
    mode = row["mode"].strip().lower()
    if mode not in AGG_MODES and mode != DISAGG_MODE:
        raise Skip(f"{row['mode']} serving (not modelled)")
    spec = row["spec_decode"].strip().lower()
    if spec not in SPEC_DECODE_NONE or "speculative" in row["precision"].lower():
        raise Skip("speculative decoding: the row does not state its draft tokens or acceptance")


# CSV GPU name -> catalog name where they differ (lower case)
GPU_ALIASES = {"rtx pro 6000 blackwell server": "rtx-pro-6000"}


def _hardware(row: dict[str, str]) -> HardwareSpec:
    name = row["gpu"].strip().lower()
    name = GPU_ALIASES.get(name, name)
    if name not in catalog_names():
        raise Skip(f"GPU not in catalog: {row['gpu']}")
    return get_hardware(name)


def _config_path(model: str, data_dir: Path) -> Path:
    if model not in MODEL_CONFIGS:
        raise Skip(f"no config for model: {model}")
    where, name = MODEL_CONFIGS[model].split(":", 1)
    return data_dir / name if where == "data" else HF_CONFIG_DIR / name


def _check_deployment(row: dict[str, str], arch: Architecture, dep: Deployment) -> None:
    violations = deployment_violations(arch, dep)
    if violations:
        raise Skip(f"invalid deployment: {violations[0]}")
    num_gpus = _number(row["num_gpus"])
    if num_gpus is not None and int(num_gpus) != dep.gpus:
        raise Skip(f"num_gpus ({int(num_gpus)}) differs from tp·dp·pp ({dep.gpus})")


def _statistic(row: dict[str, str]) -> dict[str, str]:
    """What `tpot_ms` / `ttft_ms` hold: the row's `tpot_stat` / `ttft_stat`, else as its
    `derived_fields` say (InferenceX: mean or median TPOT, median TTFT); `unstated` otherwise."""
    derived = row.get("derived_fields", "")
    out = {}
    for metric in ("tpot", "ttft"):
        stated = row.get(f"{metric}_stat", "").strip()
        inferred = next((s for s in ("mean", "median") if f"{s}_{metric}" in derived), "")
        out[metric] = stated or inferred or "unstated"
    return out


def _describe(dep: Deployment) -> str:
    experts = "" if dep.moe_precision is None else f" moe-{dep.moe_precision}"
    return f"tp{dep.tp} ep{dep.ep} pp{dep.pp} dp{dep.dp} {dep.precision}{experts}"


def _pool(text: str, arch: Architecture, row: dict[str, str]) -> tuple[int, Deployment]:
    """(instances, deployment) of one pool written as "2x(tp8,ep8,dp_attn=True)"."""
    match = POOL_PATTERN.match(text or "")
    if not match:
        raise Skip(f"disaggregated pool not understood: {text!r}")
    count, tp, ep, dp_attn = match.groups()
    tp, dp = (1, int(tp)) if dp_attn == "True" else (int(tp), 1)
    try:
        return int(count), Deployment(tp=tp, ep=int(ep), dp=dp, **_formats(row, arch))
    except ValidationError as exc:
        raise Skip(str(config_error_from(exc, "invalid deployment"))) from exc


def _source_kind(row: dict[str, str]) -> str:
    return row.get("source_kind", "").strip() or "?"


def source_of(row: dict[str, str]) -> str:
    """The independent source of a row: one publisher's run set (`SOURCE_OF_KIND`); the
    `mlperf` rows of the published CSV belong to the MLPerf round their framework names."""
    kind = _source_kind(row)
    if kind == "mlperf":
        text = row.get("framework", "")
        return next((source for version, source in MLPERF_ROUNDS if version in text), kind)
    return SOURCE_OF_KIND.get(kind, kind)


def _read_rows(path: Path, option: str) -> list[dict[str, str]] | None:
    """The CSV's rows, or None (the reason printed) when it is missing or lacks a column."""
    if not path.is_file():
        print(f"`{option}`: {path} does not exist", file=sys.stderr)
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
        rows = list(reader)
    if missing:
        print(f"`{option}`: {path} lacks the column(s) {', '.join(missing)}", file=sys.stderr)
        return None
    return rows


def grown_csvs(folder: Path = SERVING_DIR) -> list[Path]:
    """The grown development set's CSVs (every CSV in tests/data/serving/ but `NOT_GROWN`)."""
    return sorted(p for p in folder.glob("*.csv") if p.name not in NOT_GROWN)


def family_of(model: str) -> str:
    return next((family for prefix, family in FAMILIES if model.startswith(prefix)), model)


@dataclass(frozen=True)
class Prepared:
    """A row read into what the cost model takes: the deployment (aggregated rows) or the two
    pools with their instance counts (disaggregated rows), at the row's regime."""

    row: dict[str, str]
    arch: Architecture
    hw: HardwareSpec
    workload: Workload
    regime: str  # fixed, max, sla, rate, disagg
    concurrency: float | None
    dep: Deployment | None = None
    pools: tuple[int, Deployment, int, Deployment] | None = None  # x, prefill, y, decode

    @property
    def source(self) -> str:
        return source_of(self.row)

    @property
    def ttft_statistic(self) -> str:
        """What the row's TTFT is: mean, median or unstated (`_statistic`)."""
        return _statistic(self.row)["ttft"]


def prepare_row(row: dict[str, str], data_dir: Path, archs: dict[Path, Architecture]) -> Prepared:
    """The row read and checked; raises `Skip` with the reason when it cannot be scored."""
    path = _config_path(row["model"], data_dir)
    hw = _hardware(row)
    _check_serving_mode(row)
    workload, (regime, concurrency) = _workload(row), _regime(row)
    if path not in archs:
        archs[path] = load_architecture(path)
    arch = archs[path]
    if row["mode"].strip().lower() == DISAGG_MODE:
        return Prepared(row, arch, hw, workload, "disagg", concurrency,
                        pools=_disaggregated_pools(row, arch, concurrency))
    dep = _deployment(row, arch)
    _check_deployment(row, arch, dep)
    return Prepared(row, arch, hw, workload, regime, concurrency, dep=dep)


def _disaggregated_pools(row, arch: Architecture, concurrency: float | None):
    """(x, prefill, y, decode) of a disaggregated row; its concurrency must be stated."""
    x, prefill = _pool(row["prefill_config"], arch, row)
    y, decode = _pool(row["decode_config"], arch, row)
    if concurrency is None:
        raise Skip("disaggregated row without a concurrency")
    for dep in (prefill, decode):
        violations = deployment_violations(arch, dep)
        if violations:
            raise Skip(f"invalid deployment: {violations[0]}")
    return x, prefill, y, decode
