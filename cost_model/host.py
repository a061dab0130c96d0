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
`tests/benchmarks/fit_host_overhead.py`, the fit in `search.calibration.serving`; a user's own
runs refit it with `archscout calibrate --source RESULTS…`, into the calibration folder's
`serving/host.toml`, read before the package's: `cost_model.serving_files`), and validated
leave-one-source-out (tests/benchmarks/validate_serving.py). Fitted on all sources h is small
(2 µs on x86, 0 on Grace: the rows above are a few among thousands, and the folds' fits range
0–5 µs on x86), and it does not survive being left out: the rows of each source scored at the
h fitted without it miss by more (mean |log error| 0.180) than at h = 0 (0.176), so the fit
ships 0 for both kinds (`tests/benchmarks/fit_host_overhead.py` keeps a fitted h only where
it beats 0 left out). The term stays for a user's own runs (`archscout calibrate`), where one
host's rows may show it; a fit on a declared half of fewer sources (14 and 18 µs) did not
survive being left out either.
"""

from __future__ import annotations

import contextlib

import numpy as np

from cost_model.errors import ConfigError
from cost_model.serving_files import serving_file
from cost_model.sourced import is_number, sourced_value
from cost_model.units import US_PER_S

_FILE = "host.toml"
HOST_CPUS = ("x86", "grace")  # host CPU kinds with fitted terms; x86 is the catalog default
DEFAULT_HOST_CPU = "x86"
_TRIAL_US: dict[str, float] = {}  # candidate values a calibration is scoring (`trial_host_us`)


def request_step_s(host_cpu: str) -> float:
    """h_cpu: host seconds per scheduled sequence per step: the value a calibration is trying
    (`trial_host_us`), else the user's calibrated file's, else the package's."""
    if host_cpu not in HOST_CPUS:
        raise ConfigError(f"`host_cpu` must be one of {', '.join(HOST_CPUS)}; got {host_cpu!r}")
    if host_cpu in _TRIAL_US:
        return _TRIAL_US[host_cpu] / US_PER_S
    doc, origin = serving_file(_FILE)
    value = sourced_value(doc, f"{host_cpu}.request_step_us", {}, f"host ({origin})")
    if not is_number(value) or value < 0:
        raise ConfigError(f"`{host_cpu}.request_step_us` must be >= 0; got {value!r}")
    return float(value) / US_PER_S


@contextlib.contextmanager
def trial_host_us(values_us: dict[str, float]):
    """Within the block, the cost model prices the host time per sequence per step at these
    values (µs, by host CPU kind): how `archscout calibrate` scores a candidate value through the
    whole serving evaluation. Not thread-safe (one CLI process, one fit at a time)."""
    saved = dict(_TRIAL_US)
    _TRIAL_US.update(values_us)
    try:
        yield
    finally:
        _TRIAL_US.clear()
        _TRIAL_US.update(saved)


def host_step_s(sequences, host_cpu: str):
    """t_host = h_cpu · n for a step that schedules `sequences` on its busiest rank."""
    return request_step_s(host_cpu) * np.asarray(sequences, dtype=np.float64)
