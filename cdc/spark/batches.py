"""Snowflake-ready batches (docs/formats.md): per merge run one sealed directory.

    <state>/batches/b000000000007/<db>.<table>/part-00000.parquet
    <state>/batches/b000000000007/manifest.json        written last: its presence seals the batch

(StateDir knows where: batches, batch_dir, manifest_path, sealed_batches.)

Spark names its files with random UUIDs; they are renamed to part-NNNNN in name order so a rerun
of the same batch id writes the same names (Snowpipe/COPY never load a file twice by name).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc.s3keys import table_component
from cdc.schema import TableSchema
from cdc.state import BATCH_PREFIX, fsync_dir, read_json, write_json_atomic

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

MANIFEST_VERSION = 1


def batch_id(run: int) -> str:
    return f"{BATCH_PREFIX}{run:012d}"


def run_number(batch: str | None) -> int:
    return int(batch[1:]) if batch else 0


def batch_frame(result: DataFrame, final: TableSchema) -> DataFrame:
    """Rows of the batch: the table's columns (a DELETE carries only the key) plus the stream metadata."""
    from pyspark.sql import functions as F

    is_delete = F.col("_action") == "DELETE"
    pk = set(final.primary_key or final.column_names)  # a keyless table's DELETE names its whole row
    values = [
        (F.col(f"c{i}") if c.name in pk else F.when(is_delete, F.lit(None)).otherwise(F.col(f"c{i}"))).alias(c.name)
        for i, c in enumerate(final.columns)
    ]
    return result.filter(F.col("_action").isNotNull()).select(
        *values,
        F.col("_action").alias("METADATA$ACTION"),
        F.col("_isupdate").alias("METADATA$ISUPDATE"),
        F.col("_cdc_position").alias("_CDC_POSITION"),
        F.col("_cdc_commit_ts").alias("_CDC_COMMIT_TS"),
        F.col("_cdc_op").alias("_CDC_OP"),
    )


def lake_frame(changed: DataFrame, untouched: DataFrame | None, final: TableSchema) -> DataFrame:
    """Rows of the new lake version: the kept changed rows, plus the untouched rows of the previous version."""
    from pyspark.sql import functions as F

    names: list[SparkColumn | str] = [*[F.col(f"c{i}").alias(c.name) for i, c in enumerate(final.columns)],
                                      "_cdc_op", "_cdc_position", "_cdc_commit_ts"]
    kept = changed.filter(F.col("_keep")).select(*names)
    return kept if untouched is None else untouched.select(*names).unionByName(kept)


def table_folder(db: str, table: str) -> str:
    return table_component(db, table)


def staging_dir(batches: Path, batch: str) -> Path:
    return batches / f".{batch}.tmp"


def publish_files(staged: Path, final_dir: Path) -> list[str]:
    """Move Spark's part files to deterministic names; return them relative to the batch directory."""
    if final_dir.exists():
        shutil.rmtree(final_dir)
    final_dir.mkdir(parents=True)
    names = []
    for index, path in enumerate(sorted(staged.glob("part-*.parquet"))):
        name = f"part-{index:05d}.parquet"
        path.replace(final_dir / name)
        names.append(f"{final_dir.name}/{name}")
    fsync_dir(final_dir)
    return names


def write_manifest(path: Path, batch: str, segments: tuple[str, str], tables: dict[str, Any],
                   renames: list[dict[str, list[str]]] | None = None) -> dict[str, Any]:
    """Seal the batch (StateDir.manifest_path(batch)): written last, after every file of it.

    renames: the tables the batch's run renamed ({"from": [db, table], "to": [db, table]}), done before its rows.
    """
    document: dict[str, Any] = {"version": MANIFEST_VERSION, "batch_id": batch, "segments": list(segments),
                                "tables": tables}
    if renames:
        document["renames"] = renames
    write_json_atomic(path, document)
    return document


def read_manifest(path: Path) -> dict[str, Any] | None:
    return read_json(path)

