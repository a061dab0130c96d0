"""What `cost_model.evaluate.evaluate_points` returns: the operating points of candidates,
arrays of shape (candidates, concurrencies), whatever their serving mode (aggregated points from
`cost_model.evaluate`, disaggregated ones from `cost_model.disaggregated`), and how the rows of
the two modes merge back into one record in the candidates' order."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from cost_model.frontier import frontier_area, pareto_mask


@dataclass(frozen=True)
class OperatingPoints:
    """Arrays of shape (candidates, concurrencies); NaN concurrency = no point there."""

    concurrency: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray  # steady-state TTFT of one request (the engine's prefill path)
    benchmark_ttft_s: np.ndarray  # TTFT a benchmark client at this concurrency measures
    prompt_queue_s: np.ndarray  # the other prompts of its attention group, drained
    tokens_per_s_per_user: np.ndarray  # interactivity x = 1 / TPOT
    tokens_per_s_per_gpu: np.ndarray  # throughput y, prefill included
    fits_memory: np.ndarray
    max_concurrency: np.ndarray  # (candidates, 1): fits memory and the engine's batch cap
    gemm_s: np.ndarray  # TPOT breakdown (NVIDIA, AI Model Co-Design (2026), Figure 2)
    attention_s: np.ndarray
    communication_s: np.ndarray
    other_s: np.ndarray
    # disaggregated candidates: the xPyD ratio realizing each point (NaN for aggregated ones)
    prefill_instances: np.ndarray | None = None
    decode_instances: np.ndarray | None = None
    # of `attention_s`, the linear-attention layers' state updates and scans (a roofline:
    # `cost_model.step.uncalibrated_components`); None where not split out
    linear_attention_s: np.ndarray | None = None
    # parts of `benchmark_ttft_s` (cost_model.benchmark_ttft): the attention-DP balancer's round
    # wait W_round before its fitted share, and the request-queue polling wait W_poll
    round_wait_s: np.ndarray | None = None
    poll_wait_s: np.ndarray | None = None
    # the median request's benchmark TTFT (`benchmark_ttft_s` is the mean over a benchmark's
    # requests), and the wait for a slot once the concurrency exceeds what the engine admits
    benchmark_ttft_median_s: np.ndarray | None = None
    slot_wait_s: np.ndarray | None = None
    # the p99 request's benchmark TTFT where the client's arrivals model it (Poisson arrivals, an
    # offline run: cost_model.arrival_queue); None for a closed-loop client
    benchmark_ttft_p99_s: np.ndarray | None = None

    def frontier_area(self, x_lo: float, x_hi: float, log_x: bool = True) -> np.ndarray:
        y = np.where(self.fits_memory, self.tokens_per_s_per_gpu, np.nan)
        return frontier_area(self.tokens_per_s_per_user, y, x_lo, x_hi, log_x)

    def ratio(self, i: int, j: int) -> str | None:
        """`3P5D` for a disaggregated point, None for an aggregated one."""
        prefill, decode = self.prefill_instances, self.decode_instances
        if prefill is None or decode is None or not np.isfinite(prefill[i, j]):
            return None
        return f"{prefill[i, j]:.0f}P{decode[i, j]:.0f}D"

    def pareto_mask(self) -> np.ndarray:
        y = np.where(self.fits_memory, self.tokens_per_s_per_gpu, np.nan)
        return pareto_mask(self.tokens_per_s_per_user, y)


def merge_rows(parts: dict[str, OperatingPoints], rows: dict[str, list[int]],
               candidates: int) -> OperatingPoints:
    """One record of `candidates` rows from the `parts` of each serving mode, part `mode`'s rows
    going to `rows[mode]`; a field only some parts have (the xPyD ratio) is NaN elsewhere and
    rows with fewer concurrency columns are NaN-padded."""
    columns = max(part.concurrency.shape[1] for part in parts.values())
    merged = {}
    for f in fields(OperatingPoints):
        if any(getattr(part, f.name) is None for part in parts.values()):
            merged[f.name] = _partial_column(parts, rows, candidates, columns, f.name)
            continue
        sample = getattr(next(iter(parts.values())), f.name)
        width = 1 if f.name == "max_concurrency" else columns
        out = np.full((candidates, width), False if sample.dtype == bool else np.nan,
                      dtype=sample.dtype)
        for mode, part in parts.items():
            values = getattr(part, f.name)
            out[rows[mode], :values.shape[1]] = values
        merged[f.name] = out
    return OperatingPoints(**merged)


def _partial_column(parts: dict[str, OperatingPoints], rows: dict[str, list[int]],
                    candidates: int, columns: int, name: str) -> np.ndarray:
    """A field only some parts have, NaN in the rows of the others."""
    out = np.full((candidates, columns), np.nan)
    for mode, part in parts.items():
        values = getattr(part, name)
        if values is not None:
            out[rows[mode], :values.shape[1]] = values
    return out
