"""The Pareto set as a table with an explicit, versioned pyarrow schema: Parquet or CSV.

One row per Pareto-optimal architecture (the `pareto --json` items), in rank order. The schema's
metadata names the table and its version; a change of columns or types bumps the version. CSV
has no list type: `flags` is joined with "; " there (`CSV_SCHEMA`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from search.atomic import write_atomic

SCHEMA_METADATA = {"archscout_schema": "pareto", "archscout_schema_version": "1"}
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
        pa.field("flags", _FLAGS_TYPE),
    ],
    metadata=SCHEMA_METADATA,
)
CSV_SCHEMA = PARETO_SCHEMA.set(
    PARETO_SCHEMA.get_field_index("flags"), pa.field("flags", pa.string())
)


def pareto_row(item: dict) -> dict:
    arch, dep = item["architecture"], item["deployment"]
    return {
        "rank": item["rank"], "trial": item["trial"], "architecture": arch["name"],
        "frontier_area": item["frontier_area"], "loss_proxy": item["loss_proxy"],
        "params_total": item["params_total"], "params_active": item["params_active"],
        **{name: arch[name] for name in ARCHITECTURE_COLUMNS},
        **{name: dep[name] for name in DEPLOYMENT_COLUMNS},
        "precision": dep["precision"], "kv_precision": dep["kv_precision"],
        "flags": list(item["flags"]),
    }  # fmt: skip


def pareto_table(doc: dict) -> pa.Table:
    """The `pareto --json` document's items as a table of `PARETO_SCHEMA`."""
    return pa.Table.from_pylist([pareto_row(item) for item in doc["pareto"]], schema=PARETO_SCHEMA)


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


def write_pareto_files(doc: dict, parquet: str | None, csv: str | None) -> None:
    """`pareto --parquet/--csv`: the Pareto table to files (notices on stderr: stdout may hold
    the --json document)."""
    if not (parquet or csv):
        return
    table = pareto_table(doc)
    for path, write in ((parquet, write_parquet), (csv, write_csv)):
        if path:
            write(table, Path(path))
            print(f"wrote {table.num_rows} rows to {path}", file=sys.stderr)
