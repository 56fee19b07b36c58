"""Versioned lake tables: per table a directory of Parquet versions and a pointer file.

    <target>/<db>.<table>/v000000000007/part-*.parquet    the table as of batch b000000000007
    <target>/<db>.<table>/_current.json                    {"current": "v...7", "previous": "v...6", ...}

A merge writes a new version beside the current one and then replaces the pointer atomically
(temp file, fsync, rename): a reader that follows the pointer never sees half a merge, and a
crash leaves the previous version in place. The version a run reads as "before" is derived from
the run number, so a rerun after a crash that already switched the pointer reads the same base.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.errors import PositionError
from cdc.s3keys import table_component
from cdc.state import read_json, write_json_atomic

POINTER = "_current.json"
POINTER_VERSION = 1


def table_dir(target: Path, db: str, table: str) -> Path:
    """Directory of one lake table; names percent-encoded so `a.b`/`c` and `a`/`b.c` never collide."""
    return Path(target) / table_component(db, table)


def version_name(run: int) -> str:
    return f"v{run:012d}"


def read_pointer(directory: Path) -> dict[str, Any] | None:
    return read_json(directory / POINTER)


def base_version(directory: Path, run: int) -> str | None:
    """The version run `run` merges onto: the current one, or the previous one if this run already switched."""
    pointer = read_pointer(directory)
    if pointer is None:
        return None
    mine = version_name(run)
    if pointer["current"] == mine:
        return pointer.get("previous")
    if pointer["current"] > mine:
        raise PositionError(
            f"lake table {directory} is at {pointer['current']}, ahead of this merge run ({mine})",
            hint="the merge checkpoint (merge.json) is older than the lake: restore it, or use a fresh --target",
        )
    return str(pointer["current"])


def version_rows(version: Path) -> int:
    """Rows of a written lake version, from its Parquet footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(path).metadata.num_rows for path in version.glob("*.parquet"))


def switch(directory: Path, pointer: dict[str, Any]) -> None:
    """Make `pointer["current"]` the table's version (atomic), then drop versions nobody can need."""
    write_json_atomic(directory / POINTER, {"version": POINTER_VERSION, **pointer})
    keep = {pointer["current"], pointer.get("previous")}
    for child in directory.iterdir():
        if child.is_dir() and child.name.startswith("v") and child.name not in keep:
            shutil.rmtree(child, ignore_errors=True)


@dataclass(frozen=True)
class LakeTable:
    """One lake table as of its current version, values as Python objects."""

    db: str
    table: str
    version: str
    columns: list[str]
    primary_key: list[str]
    rows: list[dict[str, Any]]

    def by_key(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """Rows by primary key; a keyless table (a multiset: identical rows repeat) is read from `rows` instead."""
        if not self.primary_key:
            raise ValueError(f"{self.db}.{self.table} has no key: its rows are a multiset, read LakeTable.rows")
        return {tuple(row[k] for k in self.primary_key): row for row in self.rows}


def read_lake_table(target: Path | str, db: str, table: str) -> LakeTable | None:
    """Read a lake table's current version with pyarrow (no Spark needed); None if it was never merged.

    Types: DECIMAL -> Decimal, DATETIME -> naive datetime, TIMESTAMP -> aware UTC datetime,
    BLOB -> bytes, SET -> list[str], DATE -> date.
    """
    import pyarrow.parquet as pq

    directory = table_dir(Path(target), db, table)
    pointer = read_pointer(directory)
    if pointer is None:
        return None
    files = sorted((directory / pointer["current"]).glob("*.parquet"))
    names = [c["name"] for c in pointer["columns"]] + ["_cdc_op", "_cdc_position", "_cdc_commit_ts"]
    rows: list[dict[str, Any]] = []
    for path in files:
        rows.extend(pq.read_table(path).select(names).to_pylist())
    return LakeTable(db, table, pointer["current"], names, list(pointer["primary_key"]), rows)
