"""The serving engine's host (CPU) time per scheduled sequence per forward step.

Every engine's scheduler does Python/C++ work on the host for each sequence it puts in a step:
admission and KV-block bookkeeping, building the step's input and sampling metadata, reading
back and appending the sampled token. At small batches that is microseconds per step; at the
thousands of sequences a maximum-throughput run keeps in flight it is milliseconds per step and
sets the step time of small-active models. TensorRT-LLM's own tables show it: the same B200
GPU serves Qwen3-30B-A3B at 39,827 output tokens/s/GPU on a DGX B200 (x86 host) and 24,107 on
GB200 NVL72 (Grace host) at ISL/OSL 128/128, yet GB200 is the faster system for Llama-3.3-70B
(12,189 vs 11,147), where the GPU step dwarfs the host's
(github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md, v1.0). The cost is
    t_host = h_cpu · n
per step of a micro-batch, n the sequences its busiest attention-DP rank schedules (each rank
runs its own scheduler), h_cpu per host CPU kind (`HardwareSpec.host_cpu`), added to the
step's GPU time: what the engines' overlap schedulers hide is already in the fitted h (it is
the share the measured rows still show). Fitted on every source's published end-to-end
measurements, never on kernel tables (`cost_model/data/serving/host.toml`,
`tests/benchmarks/fit_host_overhead.py`), and validated leave-one-source-out
(tests/benchmarks/validate_serving.py): fitted on all sources h is small (2 µs on x86, 0 on
Grace: the rows above are a few among thousands, and the folds' fits range 0–5 µs on x86); a
fit on a declared half of fewer sources (14 and 18 µs) did not survive being left out.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

import numpy as np

from cost_model.errors import ConfigError
from cost_model.sourced import is_number, sourced_value
from cost_model.units import US_PER_S

_PACKAGE = "cost_model.data.serving"
_FILE = "host.toml"
HOST_CPUS = ("x86", "grace")  # host CPU kinds with fitted terms; x86 is the catalog default
DEFAULT_HOST_CPU = "x86"


@cache
def _document() -> dict:
    return tomllib.loads(resources.files(_PACKAGE).joinpath(_FILE).read_text())


@cache
def request_step_s(host_cpu: str) -> float:
    """h_cpu: host seconds per scheduled sequence per step, shipped with the package."""
    if host_cpu not in HOST_CPUS:
        raise ConfigError(f"`host_cpu` must be one of {', '.join(HOST_CPUS)}; got {host_cpu!r}")
    value = sourced_value(_document(), f"{host_cpu}.request_step_us", {}, "host")
    if not is_number(value) or value < 0:
        raise ConfigError(f"`{host_cpu}.request_step_us` must be >= 0; got {value!r}")
    return float(value) / US_PER_S


def host_step_s(sequences, host_cpu: str):
    """t_host = h_cpu · n for a step that schedules `sequences` on its busiest rank."""
    return request_step_s(host_cpu) * np.asarray(sequences, dtype=np.float64)
