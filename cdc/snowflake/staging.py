"""A batch's Parquet files for one table -> a staging table in Snowflake (snowflake-apply's load half).

All of a batch's files are PUT to the internal stage in one statement, under the batch's and the run's folder,
each named after its table's prefix; then each table's COPY INTO a transient staging table of the run's own
(FILE_FORMAT = PARQUET, MATCH_BY_COLUMN_NAME), reused batch after batch; the loaded row count is checked
against the batch manifest. What the rows then do to the target (MERGE, SCD2) is cdc.snowflake.apply's business.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from cdc import sql
from cdc.errors import DataError, TransientError
from cdc.snowflake import ddl, names
from cdc.snowflake.loaders import Loaders

_Q = sql.quote_ident
Execute = Callable[[str], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Batch:
    batch_id: str
    path: Path
    manifest: dict[str, Any]


@dataclass(frozen=True)
class Table:
    """One table of a batch, ready to stage: its manifest entry, files, Parquet schema and (evolved) target."""

    key: str
    spec: dict[str, Any]
    files: list[Path]
    arrow: pa.Schema
    target: ddl.Target


@dataclass(frozen=True)
class Prepared:
    """A staging table made ready for a table's files: `statement` empties it (TRUNCATE) or creates it."""

    name: str  # quoted
    statement: str
    slot: tuple[str, str] | None  # a new table's (batch table, column definitions), recorded once it exists


class StagingTables:
    """One Applier's staging tables: one per batch table and Parquet shape, created on first use and then reused
    batch after batch, emptied by TRUNCATE before each COPY. Creating and dropping one per table and batch cost two
    round trips more per table (issue #25). The names carry the run id, so a killed run's tables are left to the
    next run's start (which drops every `_CDC_STG_` table) and never met by another run; and a serial number never
    given twice, so a CREATE whose answer was lost never leaves a table of other columns under a name reused."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.tables: dict[tuple[str, str], str] = {}  # (batch table, column definitions) -> quoted name
        self._serial = 0

    def plan(self, key: str, arrow: pa.Schema) -> Prepared:
        """The staging table for table `key`'s files of this Parquet schema, and the statement that readies it."""
        columns = ", ".join(f"{_Q(column_name(f.name))} {arrow_type(f.type, key)}" for f in arrow)
        name = self.tables.get((key, columns))
        if name is not None:
            return Prepared(name, f"TRUNCATE TABLE {name}", None)  # what an earlier batch (or attempt) loaded
        self._serial += 1
        name = _Q(f"{names.STAGING_PREFIX}{self.run_id}_{self._serial}")
        # IF NOT EXISTS: the name is this run's own, so it exists only when the connector resent this very
        # statement after losing its answer (an HTTP 500 or a reset link); it is still empty then.
        return Prepared(name, f"CREATE TRANSIENT TABLE IF NOT EXISTS {name} ({columns})", (key, columns))

    def created(self, prepared: Prepared) -> None:
        """`prepared`'s statement ran: a new table is reused from now on."""
        if prepared.slot is not None:
            self.tables[prepared.slot] = prepared.name

    def drop(self, execute: Execute) -> None:
        """Drop them all (the run is over); the next use creates them anew."""
        while self.tables:
            execute(f"DROP TABLE IF EXISTS {self.tables.popitem()[1]}")


def load(loaders: Loaders, registry: StagingTables, batch: Batch, tables: list[Table],
         location: str) -> list[tuple[str, ddl.Target, str]]:
    """Stage every table of the batch: its files PUT to `location` in one statement on the apply's own session,
    meanwhile each staging table readied on the other sessions, then each table's COPY, tables side by side
    (cdc.snowflake.loaders). (key, target, staging table) per table."""
    prefixes = [f"t{number:05d}-" for number in range(len(tables))]
    prepared = [registry.plan(table.key, table.arrow) for table in tables]

    def put_files() -> None:
        if tables:  # a batch of renames only has no files (and a PUT matching nothing fails)
            put(loaders.own, batch.path / ".put", [(p, t.files) for p, t in zip(prefixes, tables, strict=True)],
                location)

    loaders.run([partial(_run, p.statement) for p in prepared], beside=put_files)
    for ready in prepared:
        registry.created(ready)
    loaders.run([partial(_copy, batch, t, p.name, location + prefix)
                 for t, p, prefix in zip(tables, prepared, prefixes, strict=True)])
    return [(t.key, t.target, p.name) for t, p in zip(tables, prepared, strict=True)]


def _run(statement: str, execute: Execute) -> None:
    execute(statement)


def _copy(batch: Batch, table: Table, name: str, source: str, execute: Execute) -> None:
    copy(execute, batch, table.key, table.spec, name, source)


def put(execute: Execute, scratch: Path, groups: list[tuple[str, list[Path]]], location: str) -> None:
    """Upload every group's files to the stage `location` in one PUT, each file named after its group's prefix.

    One PUT per batch, not per file: a wildcard PUT uploads every file its pattern matches
    (https://docs.snowflake.com/en/sql-reference/sql/put), and COPY then picks a table's files by the prefix of
    their names (a stage path loads the files whose names begin with it:
    https://docs.snowflake.com/en/user-guide/data-load-considerations-stage).
    """
    with plain_names(groups, scratch) as folder:
        execute(f"PUT {sql.quote_literal('file://' + str(folder) + '/*')} {location} "
                "AUTO_COMPRESS = FALSE OVERWRITE = TRUE")


def copy(execute: Execute, batch: Batch, key: str, spec: dict[str, Any], table: str, source: str) -> None:
    """COPY the files at stage path `source` into staging `table`; the loaded rows must be the manifest's."""
    result = execute(f"COPY INTO {table} FROM {source} FILE_FORMAT = (TYPE = PARQUET) "
                     "MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE FORCE = TRUE")
    loaded = sum(int(r[3] or 0) for r in result if len(r) > 3)
    if "rows" in spec and loaded != int(spec["rows"]):
        raise DataError(f"batch {batch.batch_id} table {key}: COPY loaded {loaded} rows, manifest says "
                        f"{spec['rows']}", hint="the batch files are damaged: rerun spark-merge for this batch")


@contextmanager
def plain_names(groups: list[tuple[str, list[Path]]], scratch: Path) -> Iterator[Path]:
    """A scratch folder holding every group's files as `<prefix><index>.parquet`, names PUT reads literally: the
    connector URL-decodes a local path, so a table folder percent-encoded by spark-merge (`Sel%60ect`) would be
    looked for as `Sel`ect` and not found. Hard links (a copy across filesystems), removed afterwards."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        for prefix, files in groups:
            for index, path in enumerate(files):
                link = scratch / f"{prefix}{index:05d}.parquet"
                try:
                    os.link(path, link)
                except OSError:
                    shutil.copyfile(path, link)
        yield scratch.resolve()
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


def check_staged(execute: Execute, batch: Batch, staged: list[tuple[str, ddl.Target, str]]) -> None:
    """Each staging table holds its manifest's rows once: one query for the whole batch.

    The connector resends a statement whose answer it lost, and Snowflake does not always treat the resent request
    as the one it ran (snowflake-connector-nodejs#1189; the stand-in never does): a resent COPY then loads the
    files twice, while its answer counts them once. A keyless table's rows would be inserted twice, a keyed MERGE
    refused as nondeterministic. The soak with faults on the Snowflake link met it. Nothing is merged yet, and a
    rerun stages the batch afresh: transient.
    """
    specs = batch.manifest.get("tables", {})
    checked = [(i, key, table) for i, (key, _, table) in enumerate(staged) if "rows" in specs[key]]
    if not checked:
        return
    found: dict[Any, Any] = dict(execute(" UNION ALL ".join(f"SELECT {i}, COUNT(*) FROM {table}" for i, _, table in checked)))
    for i, key, table in checked:
        if int(found.get(i, -1)) != int(specs[key]["rows"]):
            raise TransientError(f"batch {batch.batch_id} table {key}: staging table {table} holds {found.get(i)} "
                                 f"rows, the batch {specs[key]['rows']} (a COPY resent after its answer was lost "
                                 "loads the files twice)",
                                 hint="nothing was merged; a rerun stages the batch afresh (cdc run --follow retries "
                                 "by itself)")
