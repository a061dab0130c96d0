"""How one model instance is deployed, and the workload it serves.

Parallelism (TensorRT-LLM's mapping, written as four degrees):
- `tp`: tensor parallelism of attention and dense FFNs inside one attention group;
- `dp`: attention data parallelism: `dp` attention groups, each with its own requests (and KV);
- `ep`: expert parallelism of MoE layers over the tp·dp GPUs of a stage; the remaining factor
  `moe_tp = tp·dp / ep` shards each expert's intermediate dimension;
- `pp`: pipeline stages;
- `kvp`: Helix KV parallelism (Bhatia et al. 2025, arXiv 2507.07120; TensorRT-LLM's Helix
  mapping): attention runs on tp × kvp GPUs with each sequence's KV split along the sequence
  over the kvp ranks (per GPU 2·L·⌈n_kv/tp⌉·d_h·b·S/kvp), partial results combined by an
  all-to-all of outputs and log-sum-exp; the same GPUs then run the output projection and the
  FFN as one TP group of tp·kvp (experts: EP over tp·dp·kvp). kvp = 1 is plain TP.
GPUs per instance = tp · dp · pp · kvp.

Number formats per component: `precision` for the linear layers of attention, dense FFNs and
shared experts; `moe_precision` for the routed experts (default: `precision`), as checkpoints
ship them (DeepSeek-R1 NVFP4: NVFP4 experts, FP8 attention; gpt-oss: MXFP4 experts, BF16
attention); `kv_precision` for the KV cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cost_model.architecture import Architecture, config_error_from
from cost_model.errors import ConfigError
from cost_model.precision import get_precision

# TensorRT-LLM's default `max_num_tokens` (tokens per forward, so the prefill chunk size):
# TensorRT-LLM docs, "Tuning Max Batch Size and Max Num Tokens" (default 8192).
DEFAULT_PREFILL_CHUNK_TOKENS = 8192
# Prior: share of the hottest GPU's routed tokens above the mean with an expert load balancer
# (DeepSeek EPLB / TensorRT-LLM Wide-EP); the (1+δ) factor of the GEMM model. Without one it is
# larger.
DEFAULT_MOE_IMBALANCE_FRAC = 0.1
# Sequences one engine instance (attention group) batches at most: TensorRT-LLM's trtllm-bench
# caps max_batch_size at 4096 (tensorrt_llm/bench/build/tuning.py, finetune_setting()).
DEFAULT_MAX_BATCH_SEQUENCES = 4096
# Per-token acceptance of speculative tokens when none is given: DeepSeek-V3 technical report
# (arXiv 2412.19437) §5.4.3: "the acceptance rate of the second token prediction ranges between
# 85% and 90%" for its one-token MTP module; the lower end.
DEFAULT_SPEC_ACCEPTANCE_FRAC = 0.85
SPEC_METHODS = ("mtp", "eagle")  # both draft with one transformer block and the model's LM head
# in-flight batching, or prefill and decode pools of instances (cost_model/disaggregated.py)
AGGREGATED, DISAGGREGATED = "aggregated", "disaggregated"
SERVING_MODES = (AGGREGATED, DISAGGREGATED)
FP8_BITS = 8  # activations this narrow (FP8, FP4) get an FP8 KV cache by default
# Serving engines whose scheduling the benchmark-TTFT terms know (cost_model/benchmark_ttft.py);
# None: a generic engine. The engines' mapping rules are in constraints/engines.py.
ENGINES = ("vllm", "sglang", "trtllm")
# how a benchmark's client sends requests (`Workload.arrivals`, cost_model.arrival_queue)
ARRIVALS = ("closed_loop", "poisson", "offline")
# SGLang polls its request queue every `--scheduler-recv-interval` forward steps; the default is 1
# (github.com/sgl-project/sglang, python/sglang/srt/server_args.py: `scheduler_recv_interval`).
DEFAULT_SCHEDULER_RECV_INTERVAL_STEPS = 1


class Deployment(BaseModel):
    """Parallelism and number formats of one model instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, ge=1, le=1024)
    ep: int = Field(default=1, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=256)
    dp: int = Field(default=1, ge=1, le=1024)
    precision: str = "fp8"  # weights and GEMM activations of the linear layers
    moe_precision: str | None = None  # routed experts; default: `precision`
    kv_precision: str | None = None  # KV cache; default: fp8 when `precision` is 8-bit or less
    moe_imbalance_frac: float = Field(default=DEFAULT_MOE_IMBALANCE_FRAC, ge=0, le=10)
    # speculative decoding: `spec_tokens` draft tokens per step, verified together by the model;
    # each is accepted with `spec_acceptance_frac` given that the ones before it were
    spec_tokens: int = Field(default=0, ge=0, le=16)
    spec_acceptance_frac: float = Field(default=DEFAULT_SPEC_ACCEPTANCE_FRAC, ge=0, le=1)
    spec_method: str = "mtp"
    kvp: int = Field(default=1, ge=1, le=1024)
    # aggregated in-flight batching, or disaggregated prefill and decode pools of instances of
    # this shape (cost_model/disaggregated.py sizes the xPyD ratio per operating point)
    serving: str = AGGREGATED

    @model_validator(mode="after")
    def _check(self) -> Deployment:
        get_precision(self.precision, "precision")
        get_precision(self.expert_precision, "moe_precision")
        get_precision(self.kv_cache_precision, "kv_precision")
        if self.serving not in SERVING_MODES:
            raise ConfigError(f"`serving` must be one of {', '.join(SERVING_MODES)}; got "
                              f"{self.serving!r}")
        if self.spec_method not in SPEC_METHODS:
            raise ConfigError(f"`spec_method` must be one of {', '.join(SPEC_METHODS)}; got "
                              f"{self.spec_method!r}")
        stage = self.tp * self.dp * self.kvp
        if stage % self.ep:
            raise ConfigError(f"`ep` ({self.ep}) must divide the GPUs of a stage, "
                              f"`tp`·`dp`{'·`kvp`' if self.kvp > 1 else ''} = {stage}")
        return self

    @property
    def kv_cache_precision(self) -> str:
        """The KV format: `kv_precision`, else fp8 when attention's activations are 8-bit or
        less (a weight-only `precision` computes in BF16, so its KV stays BF16)."""
        if self.kv_precision is not None:
            return self.kv_precision
        low = get_precision(self.precision).activation_bits <= FP8_BITS
        return "fp8" if low else "bf16"

    @property
    def expert_precision(self) -> str:
        """The routed experts' format: `moe_precision`, else `precision`."""
        return self.precision if self.moe_precision is None else self.moe_precision

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp * self.kvp

    @property
    def ffn_tp(self) -> int:
        """TP of the output projection, dense FFN, shared experts and LM head (tp·kvp)."""
        return self.tp * self.kvp

    @property
    def moe_tp(self) -> int:
        return self.tp * self.dp * self.kvp // self.ep


def expected_tokens_per_step(spec_tokens, acceptance_frac):
    """Expected tokens each sequence gains per decode step with k speculative tokens at
    per-token acceptance a: Σ_{i=0..k} a^i = 1 + a + … + a^k (a token counts only if all before
    it were accepted; the verified step always yields one); k+1 at a = 1, 1 at a = 0. Arrays
    broadcast."""
    k = np.asarray(spec_tokens, dtype=np.float64)
    a = np.asarray(acceptance_frac, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a >= 1.0, k + 1.0, geometric)


class Workload(BaseModel):
    """Request shape: input (ISL) and output (OSL) sequence lengths in tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    isl_tokens: int = Field(default=1024, ge=1, le=10_000_000)
    osl_tokens: int = Field(default=1024, ge=1, le=10_000_000)
    prefill_chunk_tokens: int = Field(default=DEFAULT_PREFILL_CHUNK_TOKENS, ge=64)
    max_batch_sequences: int = Field(default=DEFAULT_MAX_BATCH_SEQUENCES, ge=1)  # per DP group
    # share of each prompt served from the prefix cache (a system prompt or an agent's history
    # that every request repeats): neither prefilled again nor stored per sequence
    prefix_cached_frac: float = Field(default=0.0, ge=0.0, lt=1.0)
    # the serving engine (one of ENGINES; None: generic): keys the benchmark-TTFT terms
    engine: str | None = None
    # forward steps between two polls of the engine's request queue (SGLang
    # `--scheduler-recv-interval`): a new request waits (N − 1)/2 steps on average before it is seen
    scheduler_recv_interval_steps: int = Field(default=DEFAULT_SCHEDULER_RECV_INTERVAL_STEPS, ge=1,
                                               le=10_000)
    # TensorRT-LLM's attention-DP balancer (`attention_dp_config.enable_balance` with
    # `timeout_iters`): new context requests wait for one per DP rank, at most this many
    # iterations; 0 = balancer off (TensorRT-LLM's default, AttentionDpConfig.enable_balance False)
    adp_balance_timeout_steps: int = Field(default=0, ge=0, le=100_000)
    # how the benchmark's client sends requests (cost_model.arrival_queue.ARRIVALS): a closed
    # loop at the point's concurrency, Poisson arrivals at the rate the point completes, or an
    # offline run with every request queued at once; it sets the benchmark TTFT only
    arrivals: str = "closed_loop"
    # the spread of input lengths under Poisson arrivals (cost_model.arrival_queue): equally
    # likely request lengths as fractions of `isl_tokens` (their mean 1), e.g. quantiles of a
    # benchmark dataset's input lengths; empty: every request at `isl_tokens`
    isl_mix_frac: tuple[float, ...] = Field(default=(), max_length=1000)

    @model_validator(mode="after")
    def _check_engine(self) -> Workload:
        if self.engine is not None and self.engine not in ENGINES:
            raise ConfigError(f"`engine` must be one of {', '.join(ENGINES)} (or unset); got "
                              f"{self.engine!r}")
        if self.arrivals not in ARRIVALS:
            raise ConfigError(f"`arrivals` must be one of {', '.join(ARRIVALS)}; got "
                              f"{self.arrivals!r}")
        _check_isl_mix(self.isl_mix_frac)
        return self

    @property
    def cached_prefix_tokens(self) -> int:
        """The cached leading tokens of each prompt: ⌊ISL · prefix_cached_frac⌋."""
        return int(self.isl_tokens * self.prefix_cached_frac)

    @property
    def mean_decode_context_tokens(self) -> float:
        """Average context a decode step attends to: ISL plus half the output."""
        return self.isl_tokens + self.osl_tokens / 2.0

    @property
    def max_context_tokens(self) -> int:
        return self.isl_tokens + self.osl_tokens


def _check_isl_mix(mix: tuple[float, ...]) -> None:
    """`Workload.isl_mix_frac`: positive finite fractions whose mean is 1 (±1%), or none."""
    if not mix:
        return
    values = np.asarray(mix, dtype=np.float64)
    if not (np.all(np.isfinite(values)) and np.all(values > 0.0)
            and abs(values.mean() - 1.0) <= 0.01):
        raise ConfigError("`isl_mix_frac` must be positive finite fractions of `isl_tokens` "
                          f"whose mean is 1 (±1%); got mean {values.mean():.4g}, "
                          f"min {values.min():.4g}")


def make_deployment(**fields: Any) -> Deployment:
    """Build a `Deployment`; invalid fields become one `ConfigError` naming each of them."""
    try:
        return Deployment(**fields)
    except ValidationError as exc:
        raise config_error_from(exc, "deployment") from None


def make_workload(**fields: Any) -> Workload:
    """Build a `Workload`; invalid fields become one `ConfigError` naming each of them."""
    try:
        return Workload(**fields)
    except ValidationError as exc:
        raise config_error_from(exc, "workload") from None


def validate_deployment(arch: Architecture, dep: Deployment) -> None:
    """Raise `ConfigError` naming the first sharding rule `dep` breaks for `arch`."""
    for message in deployment_violations(arch, dep):
        raise ConfigError(message)


def deployment_violations(arch: Architecture, dep: Deployment) -> list[str]:
    """Every divisibility rule of the deployment that the architecture breaks, as messages."""
    att = arch.attention
    rules = [
        (att.num_attention_heads % dep.tp == 0,
         f"`tp` ({dep.tp}) must divide `num_attention_heads` ({att.num_attention_heads})"),
        (att.num_kv_heads % dep.tp == 0 or dep.tp % att.num_kv_heads == 0,
         f"`tp` ({dep.tp}) and `num_kv_heads` ({att.num_kv_heads}) must divide one another"),
        (arch.num_dense_layers == 0 or arch.ffn.intermediate_size % dep.ffn_tp == 0,
         f"`tp`{'·`kvp`' if dep.kvp > 1 else ''} ({dep.ffn_tp}) must divide "
         f"`intermediate_size` ({arch.ffn.intermediate_size})"),
        (dep.kvp == 1 or arch.attention.num_attention_heads % dep.ffn_tp == 0,
         f"`tp`·`kvp` ({dep.ffn_tp}) must divide `num_attention_heads` "
         f"({arch.attention.num_attention_heads}): the output projection is sharded over them"),
        (dep.pp <= arch.num_layers,
         f"`pp` ({dep.pp}) must not exceed `num_layers` ({arch.num_layers})"),
    ]
    if arch.ffn.is_moe:
        rules += [
            (arch.ffn.num_experts % dep.ep == 0,
             f"`ep` ({dep.ep}) must divide `num_experts` ({arch.ffn.num_experts})"),
            (arch.ffn.moe_intermediate_size % dep.moe_tp == 0,
             f"`tp`·`dp`{'·`kvp`' if dep.kvp > 1 else ''}/`ep` ({dep.moe_tp}) must divide "
             f"`moe_intermediate_size` "
             f"({arch.ffn.moe_intermediate_size})"),
        ]
    elif dep.ep > 1:
        rules.append((False, f"`ep` ({dep.ep}) must be 1 for a dense model"))
    return [message for ok, message in rules if not ok]
