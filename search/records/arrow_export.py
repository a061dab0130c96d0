"""The Pareto set as a table with an explicit, versioned pyarrow schema: Parquet or CSV.

One row per Pareto-optimal architecture (the `pareto --json` items), in rank order, with the
serving figures people compare designs by (`serving_figures`): TPOT and TTFT at concurrency 1
on the row's deployment (its `deployment` label and the tp … kv_precision columns), the peak
tokens/s/GPU of the design's frontier with the concurrency and deployment that reach it, and
the loss proxy's band (low / central / high, nats) beside the ranked loss. The schema's
metadata names the table and its version; a change of columns or types bumps the version
(2: the serving figures and the loss band). CSV has no list type: `flags` is joined with "; "
there (`CSV_SCHEMA`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import optuna
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from optuna.trial import TrialState

from cost_model import MS_PER_S
from objectives import predict_loss
from search.atomic import write_atomic
from search.study.evaluation import deployment_label, score_valid, trial_candidate
from search.study.space import Candidate
from search.study.spec import StudySpec

SCHEMA_METADATA = {"archscout_schema": "pareto", "archscout_schema_version": "2"}
FLAGS_SEPARATOR = "; "
ARCHITECTURE_COLUMNS = (
    "hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim",
    "intermediate_size", "vocab_size", "num_experts", "experts_per_token", "moe_intermediate_size",
    "num_shared_experts", "first_dense_layers",
)  # fmt: skip
DEPLOYMENT_COLUMNS = ("tp", "ep", "pp", "dp", "gpus")
# Parquet names a list's item field "element" (its LogicalType spec); the schema says so, so a
# table read back has exactly this schema.
_FLAGS_TYPE = pa.list_(pa.field("element", pa.string()))

PARETO_SCHEMA = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("trial", pa.int64(), nullable=False),
        pa.field("architecture", pa.string(), nullable=False),
        pa.field("frontier_area", pa.float64()),  # tokens/s/GPU × decades of tokens/s/user
        pa.field("loss_proxy", pa.float64()),  # nats
        pa.field("params_total", pa.int64()),
        pa.field("params_active", pa.int64()),
        *(pa.field(name, pa.int32()) for name in ARCHITECTURE_COLUMNS),
        *(pa.field(name, pa.int32()) for name in DEPLOYMENT_COLUMNS),
        pa.field("precision", pa.string()),
        pa.field("kv_precision", pa.string()),
        pa.field("deployment", pa.string()),  # the row's deployment label (kvp, mtp, disagg…)
        pa.field("tpot_at_1_ms", pa.float64()),  # null where one request does not fit memory
        pa.field("ttft_at_1_ms", pa.float64()),  # steady-state TTFT of one request
        pa.field("peak_tokens_per_s_per_gpu", pa.float64()),  # the frontier's highest point
        pa.field("peak_concurrency", pa.int64()),  # requests (per decode instance if disagg)
        pa.field("peak_deployment", pa.string()),  # the deployment that reaches the peak
        pa.field("loss_low", pa.float64()),  # nats: optimistic end of the band
        pa.field("loss_central", pa.float64()),  # nats: the central prediction
        pa.field("loss_high", pa.float64()),  # nats: pessimistic end of the band
        pa.field("flags", _FLAGS_TYPE),
    ],
    metadata=SCHEMA_METADATA,
)
CSV_SCHEMA = PARETO_SCHEMA.set(
    PARETO_SCHEMA.get_field_index("flags"), pa.field("flags", pa.string())
)


SERVING_COLUMNS = ("deployment", "tpot_at_1_ms", "ttft_at_1_ms", "peak_tokens_per_s_per_gpu",
                   "peak_concurrency", "peak_deployment", "loss_low", "loss_central",
                   "loss_high")


def _ms(seconds: float) -> float | None:
    """Seconds as milliseconds; None for a time the cost model could not give (NaN)."""
    value = float(seconds) * MS_PER_S
    return value if math.isfinite(value) else None


def _item_candidates(spec: StudySpec, study: optuna.Study, items: list[dict]) -> list[Candidate]:
    """The candidate (architecture and deployment) of each item's trial, rebuilt as `show`
    rebuilds one (`trial_candidate`)."""
    by_number = {t.number: t for t in study.get_trials(deepcopy=False,
                                                        states=(TrialState.COMPLETE,))}
    trials = [by_number[item["trial"]] for item in items]
    return [trial_candidate(spec, t.params, t.user_attrs) for t in trials]


def _at_one_request(spec: StudySpec, cands: list[Candidate]) -> list[dict]:
    """TPOT and TTFT (ms) of each candidate serving one request (the sweep's first column is
    concurrency 1; None where that request does not fit memory)."""
    points = score_valid(spec, cands).points
    fits = (points.concurrency[:, 0] == 1) & points.fits_memory[:, 0]
    return [{"tpot_at_1_ms": _ms(points.tpot_s[i, 0]) if fits[i] else None,
             "ttft_at_1_ms": _ms(points.ttft_s[i, 0]) if fits[i] else None}
            for i in range(len(cands))]


def _peak(item: dict) -> dict:
    """The highest throughput point of the item's frontier (the envelope over its usable
    deployments, every concurrency up to the memory limit), and what realizes it."""
    peak = max(item["frontier"], key=lambda p: p["tokens_per_s_per_gpu"], default=None)
    if peak is None:
        return {"peak_tokens_per_s_per_gpu": None, "peak_concurrency": None,
                "peak_deployment": None}
    return {"peak_tokens_per_s_per_gpu": peak["tokens_per_s_per_gpu"],
            "peak_concurrency": peak["concurrency"], "peak_deployment": peak["deployment"]}


def _loss_band(spec: StudySpec, cand: Candidate) -> dict:
    loss = predict_loss(cand.arch, spec.budget.training_tokens, spec.budget.training_precision)
    return {"loss_low": loss.band_low_nats, "loss_central": loss.loss_nats,
            "loss_high": loss.band_high_nats}


def serving_figures(spec: StudySpec, study: optuna.Study, items: list[dict]) -> list[dict]:
    """For each `pareto --json` item of `study` (`spec`: the spec it ran with): the serving
    figures and loss band of `SERVING_COLUMNS`, in the items' order."""
    if not items:
        return []
    cands = _item_candidates(spec, study, items)
    return [{"deployment": deployment_label(cand.deployment), **one, **_peak(item),
             **_loss_band(spec, cand)}
            for item, cand, one in zip(items, cands, _at_one_request(spec, cands))]


def pareto_row(item: dict, figures: dict) -> dict:
    arch, dep = item["architecture"], item["deployment"]
    return {
        "rank": item["rank"], "trial": item["trial"], "architecture": arch["name"],
        "frontier_area": item["frontier_area"], "loss_proxy": item["loss_proxy"],
        "params_total": item["params_total"], "params_active": item["params_active"],
        **{name: arch[name] for name in ARCHITECTURE_COLUMNS},
        **{name: dep[name] for name in DEPLOYMENT_COLUMNS},
        "precision": dep["precision"], "kv_precision": dep["kv_precision"],
        **{name: figures[name] for name in SERVING_COLUMNS},
        "flags": list(item["flags"]),
    }  # fmt: skip


def pareto_table(doc: dict, spec: StudySpec, study: optuna.Study) -> pa.Table:
    """The `pareto --json` document's items of `study` as a table of `PARETO_SCHEMA`."""
    items = doc["pareto"]
    rows = [pareto_row(i, f) for i, f in zip(items, serving_figures(spec, study, items))]
    return pa.Table.from_pylist(rows, schema=PARETO_SCHEMA)


def csv_table(table: pa.Table) -> pa.Table:
    """`table` with `flags` joined into one string, as `CSV_SCHEMA`."""
    flags = [FLAGS_SEPARATOR.join(f or []) for f in table.column("flags").to_pylist()]
    index = table.schema.get_field_index("flags")
    return table.set_column(index, CSV_SCHEMA.field("flags"), pa.array(flags, pa.string()))


def write_parquet(table: pa.Table, path: Path, option: str = "--parquet") -> Path:
    return write_atomic(path, lambda tmp: pq.write_table(table, tmp), option)


def write_csv(table: pa.Table, path: Path, option: str = "--csv") -> Path:
    flat = csv_table(table)
    return write_atomic(path, lambda tmp: pa_csv.write_csv(flat, tmp), option)


def read_csv(path: Path) -> pa.Table:
    """A CSV written by `write_csv`, typed by `CSV_SCHEMA`."""
    types = {f.name: f.type for f in CSV_SCHEMA}
    options = pa_csv.ConvertOptions(column_types=types, strings_can_be_null=False)
    table = pa_csv.read_csv(path, convert_options=options)
    return table.select(CSV_SCHEMA.names).cast(CSV_SCHEMA)


def write_pareto_files(doc: dict, parquet: str | None, csv: str | None, spec: StudySpec,
                       study: optuna.Study) -> None:
    """`pareto --parquet/--csv`: the Pareto table of `study` (run with `spec`) to files
    (notices on stderr: stdout may hold the --json document)."""
    if not (parquet or csv):
        return
    table = pareto_table(doc, spec, study)
    for path, write in ((parquet, write_parquet), (csv, write_csv)):
        if path:
            write(table, Path(path))
            print(f"wrote {table.num_rows} rows to {path}", file=sys.stderr)
