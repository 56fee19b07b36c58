"""The online re-snapshot's contract between `cdc resnapshot` and `cdc tail` (docs/formats.md, "Re-snapshots").

`cdc resnapshot` writes marks into a small table of the source (the watermark table, `mysql.watermark_table`),
so that they reach tail through the binlog, in order with every other change:

    low   a chunk's window opens: tail notes every key of the table that changes from here on
    high  the window closes: tail emits the chunk file's rows minus the noted keys, as `r` lines at this position
    end   the table is done: tail emits a `resnapshot` control line that removes every older row not read again
    cancel  `cdc resnapshot --cancel`: tail closes the table's open window without emitting anything

Each mark is one row `(slot, mark)` written with INSERT ... ON DUPLICATE KEY UPDATE, `mark` a JSON object
(`Mark`). The chunk files sit in `<state>/resnapshot/<run>/`; tail writes `<chunk file stem>.redo` beside one
it could not emit (a DDL of the table inside its window, a missing file), and `cdc resnapshot` reads it again.
This module is shared by both stages and does no MySQL I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cdc.errors import UsageError
from cdc.schema import Column, TableSchema
from cdc.state import StateDir, read_json, write_bytes_atomic, write_json_atomic

LOW, HIGH, END, CANCEL = "low", "high", "end", "cancel"
CHUNK_VERSION = 1
DEFAULT_TABLE = "cdc.watermarks"
# What the user creates (docs/guide.md): any database, this shape. `mark` holds a JSON object (Mark).
CREATE_SQL = ("CREATE TABLE {name} (\n  slot VARCHAR(64) NOT NULL PRIMARY KEY,\n  mark TEXT NOT NULL\n)"
              " ENGINE=InnoDB")
_FILE_NAME = re.compile(r"^chunk-\d{6,}-[0-9a-f]{8}\.jsonl$")
_SORT = orjson.OPT_SORT_KEYS


def split_table_name(name: str) -> tuple[str, str]:
    """`db.table` of the watermark table setting -> (db, table); the table may not contain a dot."""
    db, dot, table = name.rpartition(".")
    if not dot or not db or not table:
        raise UsageError(f"watermark table {name!r} is not DB.TABLE",
                         hint="set mysql.watermark_table (CDC_MYSQL_WATERMARK_TABLE) to e.g. cdc.watermarks")
    return db, table


@dataclass(frozen=True)
class Mark:
    """One watermark as `cdc resnapshot` writes it and tail reads it from the binlog."""

    run: str
    mark: str  # low | high | end
    db: str
    table: str
    chunk: int = 0
    file: str | None = None  # high: the chunk file's name in the run's directory
    cut: tuple[str, int] | None = None  # end: binlog (file, pos) read before the table's first low mark
    at: float = 0.0  # when written: two marks are never the same row image (an unchanged row writes no event)
    add: bool = False  # `cdc snapshot --add-table`: tail starts capturing the table at its first low mark

    def to_json(self) -> str:
        body: dict[str, Any] = {"at": self.at, "chunk": self.chunk, "db": self.db, "mark": self.mark,
                                "run": self.run, "table": self.table}
        if self.add:
            body["add"] = True
        if self.file is not None:
            body["file"] = self.file
        if self.cut is not None:
            body["cut"] = {"file": self.cut[0], "pos": self.cut[1]}
        return orjson.dumps(body, option=_SORT).decode()

    @classmethod
    def parse(cls, text: Any) -> Mark | None:
        """A mark from the row's `mark` value; None for anything else (a row a person wrote, another version)."""
        try:
            body = orjson.loads(text)
            cut = body.get("cut")
            mark = cls(str(body["run"]), str(body["mark"]), str(body["db"]), str(body["table"]),
                       int(body.get("chunk", 0)), body.get("file"),
                       None if cut is None else (str(cut["file"]), int(cut["pos"])), float(body.get("at", 0.0)),
                       body.get("add") is True)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None
        if mark.mark not in (LOW, HIGH, END, CANCEL) or (mark.file is not None and not _FILE_NAME.match(mark.file)):
            return None
        return mark


def run_dir(state: StateDir, run: str) -> Path:
    return state.root / "resnapshot" / run


def chunk_name(chunk: int, token: str) -> str:
    return f"chunk-{chunk:06d}-{token}.jsonl"


def redo_path(directory: Path, chunk_file: str) -> Path:
    return directory / (chunk_file.removesuffix(".jsonl") + ".redo")


def write_chunk(path: Path, schema: TableSchema, rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """A chunk file: a header line (the table's schema as read), then one `{"after", "key"}` line per row.

    Values are in change-log form and already masked (excluded columns dropped, hashed ones hashed);
    the schema is the unmasked one, as the schema history holds it.
    """
    header = {"db": schema.db, "rows": len(rows), "schema": schema.version_dict(), "table": schema.table,
              "version": CHUNK_VERSION}
    lines = [orjson.dumps(header, option=_SORT)]
    lines += [orjson.dumps({"after": after, "key": key}, option=_SORT) for key, after in rows]
    write_bytes_atomic(path, b"\n".join(lines) + b"\n")


@dataclass(frozen=True)
class Chunk:
    schema: TableSchema
    rows: list[tuple[dict[str, Any], dict[str, Any]]]  # (key, after)


def read_chunk(path: Path) -> Chunk | None:
    """A chunk file as write_chunk wrote it; None if it is missing or not whole (tail then asks for a redo)."""
    try:
        lines = path.read_bytes().splitlines()
        header = orjson.loads(lines[0])
        if header.get("version") != CHUNK_VERSION or len(lines) != header["rows"] + 1:
            return None
        version = header["schema"]
        schema = TableSchema(header["db"], header["table"], tuple(Column.from_dict(c) for c in version["columns"]),
                             tuple(version["primary_key"]), version["position"])
        rows = [(body["key"], body["after"]) for body in map(orjson.loads, lines[1:])]
    except (OSError, IndexError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    return Chunk(schema, rows)


def key_bytes(key: dict[str, Any]) -> bytes:
    """A key in change-log form as comparable bytes (the same value from the binlog and a SELECT compares equal)."""
    return orjson.dumps(key, option=_SORT)


ADDED_FILE = "added-tables.json"  # tail's: tables `cdc snapshot --add-table` added to its filters


def read_added(state: StateDir) -> list[tuple[str, str]]:
    """The tables tail captures beyond its filters (added by `cdc snapshot --add-table`), in the order added."""
    document = read_json(state.root / ADDED_FILE) or {}
    return [(str(db), str(table)) for db, table in document.get("tables", [])]


def record_added(state: StateDir, db: str, table: str) -> None:
    """Remember an added table (before tail's checkpoint passes the mark that added it: a restart keeps it)."""
    known = read_added(state)
    if (db, table) not in known:
        write_json_atomic(state.root / ADDED_FILE, {"version": 1, "tables": [list(t) for t in [*known, (db, table)]]})


def redo_chunks(directory: Path) -> Iterator[int]:
    """Numbers of the chunks tail asked to read again."""
    if directory.is_dir():
        for path in directory.glob("chunk-*.redo"):
            yield int(path.name.split("-")[1])
