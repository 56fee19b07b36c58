"""A batch's Parquet files for one table -> a staging table in Snowflake (snowflake-apply's load half).

The files are PUT to the internal stage under the batch's folder, then COPY INTO a transient table with a
per-run unique name (FILE_FORMAT = PARQUET, MATCH_BY_COLUMN_NAME); the loaded row count is checked against the
batch manifest. What the rows then do to the target (MERGE, SCD2) is cdc.snowflake.apply's business.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from cdc import sql
from cdc.errors import DataError

_Q = sql.quote_ident
Execute = Callable[[str], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Batch:
    batch_id: str
    path: Path
    manifest: dict[str, Any]


def load(execute: Execute, batch: Batch, key: str, spec: dict[str, Any], files: list[Path], arrow: pa.Schema,
         staging: str, location: str) -> None:
    """Create the staging table `staging` (quoted) for the files' columns, PUT them to `location`, COPY them in."""
    columns = ", ".join(f"{_Q(column_name(f.name))} {arrow_type(f.type, key)}" for f in arrow)
    # IF NOT EXISTS: the name is this run's own, so it exists only when the connector resent this very
    # statement after losing its answer (an HTTP 500 or a reset link); it is still empty then.
    execute(f"CREATE TRANSIENT TABLE IF NOT EXISTS {staging} ({columns})")
    with plain_names(files, batch.path / ".put") as uploads:
        for path in uploads:
            execute(f"PUT {sql.quote_literal('file://' + str(path))} {location} "
                    "AUTO_COMPRESS = FALSE OVERWRITE = TRUE")
    result = execute(f"COPY INTO {staging} FROM {location} FILE_FORMAT = (TYPE = PARQUET) "
                     "MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE FORCE = TRUE")
    loaded = sum(int(r[3] or 0) for r in result if len(r) > 3)
    if "rows" in spec and loaded != int(spec["rows"]):
        raise DataError(f"batch {batch.batch_id} table {key}: COPY loaded {loaded} rows, manifest says "
                        f"{spec['rows']}", hint="the batch files are damaged: rerun spark-merge for this batch")


@contextmanager
def plain_names(files: list[Path], scratch: Path) -> Iterator[list[Path]]:
    """The files under names PUT reads literally: the connector URL-decodes a local path, so a table folder
    percent-encoded by spark-merge (`Sel%60ect`) would be looked for as `Sel`ect` and not found.
    Hard links (a copy across filesystems) in a scratch folder, removed afterwards."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        links = []
        for index, path in enumerate(files):
            link = scratch / f"{index:05d}.parquet"
            try:
                os.link(path, link)
            except OSError:
                shutil.copyfile(path, link)
            links.append(link.resolve())
        yield links
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def column_name(parquet_name: str) -> str:
    """The staging table's column for a Parquet column."""
    # COPY ... MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE pairs Parquet columns with these; upper case matches
    # in Snowflake and in fakesnow alike (which upper-cases the file's names, then binds them exactly). Two
    # MySQL columns cannot differ only in case, so this never merges two columns into one.
    return parquet_name.upper()


def batch_files(batch: Batch, key: str, spec: dict[str, Any]) -> list[Path]:
    """The Parquet files of table `key` in the batch: the manifest's list, else the table folder's part files."""
    files = []
    for name in spec.get("files") or []:
        candidates = [batch.path / name, batch.path / key / name]
        path = next((p for p in candidates if p.exists()), None)
        if path is None:
            raise DataError(f"batch {batch.batch_id}: file {name} of {key} is missing",
                            hint="the batch directory is incomplete: rerun spark-merge")
        files.append(path)
    if not files:
        files = sorted((batch.path / key).glob("part-*.parquet"))
    if not files:
        raise DataError(f"batch {batch.batch_id}: no Parquet files for {key}")
    return files


def arrow_type(kind: pa.DataType, where: str) -> str:
    """Staging column type for a Parquet column as spark-merge writes it."""
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    if pa.types.is_integer(kind):
        return "NUMBER(20,0)" if pa.types.is_uint64(kind) else "NUMBER(19,0)"
    if pa.types.is_decimal(kind):
        return f"NUMBER({kind.precision},{kind.scale})"
    if pa.types.is_floating(kind):
        return "FLOAT"
    if pa.types.is_date(kind):
        return "DATE"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP_TZ(6)" if kind.tz else "TIMESTAMP_NTZ(6)"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return "BINARY"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return "ARRAY"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "VARCHAR"
    raise DataError(f"batch table {where}: Parquet type {kind} has no Snowflake staging type")
