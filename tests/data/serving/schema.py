"""Columns of the grown development set (the CSVs the extract_*.py scripts here write).

The first columns are those of ../serving_published.csv (validate_serving.py reads both with the
same loader); the rest say how each row was measured, so it is scored as what it is:

- `scenario`: `concurrency` (a closed-loop client at a fixed concurrency), `offline` (every
  request queued at once; a run of `requests` requests), `server` / `interactive` (MLPerf:
  Poisson arrivals at the largest rate whose p99 TTFT and p99 TPOT meet `ttft_limit_ms` /
  `tpot_limit_ms`), `poisson_rate` (Poisson arrivals at `request_rate_per_s`, no limit).
- `tpot_stat` / `ttft_stat`: the statistic `tpot_ms` / `ttft_ms` hold (`mean`, `median`), empty
  when the row has none; `tpot_p99_ms` / `ttft_p99_ms` the 99th percentiles where published.
- `nodes`, `total_gpus`: the whole system; `num_gpus` (= tp·pp·dp) is one serving instance, and
  `output_tokens_per_s_per_gpu` is the system's output tokens/s over `total_gpus`.
- `dp`: attention data-parallel ranks of one instance (1 without attention DP).
- `moe_precision`, `kv_precision`: the routed experts' and the KV cache's formats where they
  differ from `precision` (empty: as `precision`, or the engine's default).
- `max_batch`: the engine's request cap per instance where the run states it.
"""

import csv
from pathlib import Path

BASE_COLUMNS = (
    "model", "gpu", "num_gpus", "framework", "precision", "tp", "ep", "pp", "isl", "osl",
    "concurrency", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user", "tpot_ms", "ttft_ms",
    "source_url", "date", "source_kind", "mode", "attention_dp", "spec_decode", "prefill_config",
    "decode_config", "framework_version", "total_output_tokens_per_s", "derived_fields", "notes",
)
EXTRA_COLUMNS = (
    "scenario", "tpot_stat", "ttft_stat", "tpot_p99_ms", "ttft_p99_ms", "tpot_limit_ms",
    "ttft_limit_ms", "requests", "request_rate_per_s", "nodes", "total_gpus", "dp",
    "moe_precision", "kv_precision", "max_batch",
)
COLUMNS = BASE_COLUMNS + EXTRA_COLUMNS


def write_rows(path: Path, rows: list[dict[str, str]], columns: tuple[str, ...] = COLUMNS,
               noun: str = "rows") -> None:
    """`rows` as a CSV of `columns` (the grown set's by default) at `path`, and one line saying
    so."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} {noun} -> {path}")


def blank_row() -> dict[str, str]:
    """A row with every column present and empty (mode agg, no speculative decoding)."""
    row = dict.fromkeys(COLUMNS, "")
    row.update(mode="agg", spec_decode="none", attention_dp="False", pp="1", ep="1", dp="1",
               nodes="1")
    return row
