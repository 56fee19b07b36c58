"""Write Snowflake-ready batches the way spark-merge does (docs/formats.md), with pyarrow.

Column types follow the lake: decimal, timestamp (UTC for TIMESTAMP and _CDC_COMMIT_TS, naive
for DATETIME), binary, list<string> for SET, string for JSON / TIME / ENUM.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cdc.schema import Column, SchemaHistory, TableSchema

UTC = dt.UTC
POSITION0 = "0000000001:000000000004:s000000000000"

# A compact table with the types whose transport is hardest (Parquet <-> Snowflake types).
COLUMNS = (
    Column("id", "int(11)", "int", nullable=False),
    Column("name", "varchar(64)", "varchar", charset="utf8mb4"),
    Column("amount", "decimal(18,4)", "decimal", precision=18, scale=4),
    Column("big", "bigint(20) unsigned", "bigint", unsigned=True),
    Column("seen", "timestamp(6)", "timestamp", fsp=6),
    Column("raw", "varbinary(16)", "varbinary"),
    Column("tags", "set('a','b','c')", "set", set_values=("a", "b", "c")),
    Column("doc", "json", "json"),
)
ARROW = pa.schema([
    ("id", pa.int32()), ("name", pa.string()), ("amount", pa.decimal128(18, 4)), ("big", pa.decimal128(20, 0)),
    ("seen", pa.timestamp("us", tz="UTC")), ("raw", pa.binary()), ("tags", pa.list_(pa.string())),
    ("doc", pa.string()),
    ("METADATA$ACTION", pa.string()), ("METADATA$ISUPDATE", pa.bool_()), ("_CDC_POSITION", pa.string()),
    ("_CDC_COMMIT_TS", pa.timestamp("us", tz="UTC")), ("_CDC_OP", pa.string()),
])


def record_schema(state: Path, db: str, table: str, columns: Sequence[Column] = COLUMNS,
                  key: Sequence[str] = ("id",), position: str = POSITION0) -> TableSchema:
    schema = TableSchema(db, table, tuple(columns), tuple(key), position)
    SchemaHistory(state / "schema").record(schema)
    return schema


def position(n: int) -> str:
    return f"0000000002:{n:012d}:b000000000000"


def row(key: int, n: int, op: str = "u", **values: Any) -> dict[str, Any]:
    """One compacted change: op c/u/r upsert, d delete; n orders changes (position and commit time)."""
    base = {"id": key, "name": None, "amount": None, "big": None, "seen": None, "raw": None, "tags": None,
            "doc": None}
    base.update(values)
    base.update({"METADATA$ACTION": "DELETE" if op == "d" else "INSERT", "METADATA$ISUPDATE": op == "u",
                 "_CDC_POSITION": position(n), "_CDC_COMMIT_TS": dt.datetime(2026, 1, 1, tzinfo=UTC)
                 + dt.timedelta(seconds=n), "_CDC_OP": op})
    return base


def write_batch(state: Path, number: int, tables: dict[str, list[dict[str, Any]]],
                schema: pa.Schema = ARROW) -> Path:
    """batches/b<number>/<db.table>/part-00000.parquet + manifest.json (written last)."""
    batch_id = f"b{number:012d}"
    root = state / "batches" / batch_id
    manifest: dict[str, Any] = {"version": 1, "batch_id": batch_id, "segments": ["seg-a", "seg-b"], "tables": {}}
    for key, rows in tables.items():
        (root / key).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / key / "part-00000.parquet")
        manifest["tables"][key] = {
            "files": ["part-00000.parquet"], "rows": len(rows),
            "inserts": sum(r["METADATA$ACTION"] == "INSERT" for r in rows),
            "deletes": sum(r["METADATA$ACTION"] == "DELETE" for r in rows),
            "schema_position": POSITION0, "columns": [f.name for f in schema],
        }
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


HOSTILE = ["O'Brien", "trailing\\", "None", "emoji 🎉", "nul\x00byte", "x'), ('99', 'injected", "", "\"q\""]


def value(i: int) -> dict[str, Any]:
    """Distinct, awkward values for key i."""
    return {"name": HOSTILE[i % len(HOSTILE)], "amount": Decimal(f"{i}.0001"), "big": Decimal(18446744073709551615 - i),
            "seen": dt.datetime(2026, 1, 2, 3, 4, 5, i, tzinfo=UTC), "raw": bytes([0, i % 256, 255]),
            "tags": ["a", "c"] if i % 2 else [], "doc": json.dumps({"i": i, "n": None})}
