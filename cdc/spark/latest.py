"""The change lines a merge need not read: each one superseded by a later change of the same key.

The compaction keeps each key's last change (cdc.spark.compact); every earlier change of a key is read, parsed,
shuffled and sorted only to lose. On 1,000,000 changes to 450,000 keys that is more than half of the input, and
Spark's JSON parse of it was the largest part of a merge (docs/performance.md, "spark-merge"). The C reader
(cdc/spark/_latest.c) finds those lines by their `key`'s bytes, and the lines left are copied to files that the
compaction reads instead of the input. Its winners are the same: only lines that lose to a later change of the
same key are left out, and only where nothing else reads them (for_run picks the tables; cdc.spark.job, the runs).
Where the run's table facts are read in C too (scan.local_stats), the same read of each line feeds the pass
(scan_and_feed): one parse of the input instead of two. The pass also tells which tables' lines left hold one event
per key (Fewer.unique): their compaction need not search for each key's last change (compact.last_changes).
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from cdc.changelog import segment_key
from cdc.errors import DataError, PositionError
from cdc.schema import SchemaHistory, TableSchema
from cdc.spark import lake_keys, scan
from cdc.spark.lake_keys import IN_LAKE, LakeOf
from cdc.spark.scan import TableStats

log = logging.getLogger(__name__)

# Input from this size on is first read in C for the lines the compaction need not read: below it, Spark's parse of
# the whole input costs less than a second read and a copy.
FEWER_LINES_BYTES = 16 * 1024 * 1024
# Below this share of lines to skip, copying the others costs more than Spark's parse of the skipped ones saves.
SKIP_AT_LEAST = 0.25
# Row changes recorded at most (~100 bytes each until resolved): past it, lines are kept, so a huge backlog stays
# bounded in memory.
MAX_RECORDS = 4_000_000
# At most this many tables of a run (those with the most row changes) have their plain kept lines written flat, in two
# files each: a run touching hundreds of tables opens and creates no more files than this allows.
FLAT_TABLES = 64

# db, table, its primary-key columns, their kinds (key_kinds), the other columns the compaction reads (flat form)
Listed = tuple[str, str, list[str], str | None, list[str] | None]

INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
TEXTS = frozenset({"char", "varchar", "enum"})


class FlatFiles(NamedTuple):
    """A table's kept lines in flat form (_flat.c): their layout (key columns, then the others) and files."""

    keys: list[str]
    values: list[str]
    files: list[Path]


class Fewer(NamedTuple):
    """A pass's result: the files the compaction reads instead of the input, the lines left out, the tables
    whose lines in those files hold one event per key (the C reader's unique(), for tables with key_kinds), per
    table the files of its kept lines in flat form (cdc.spark.flat), which the files of JSON lines then lack, and the
    unique tables whose kept lines were looked up in their lake version (cdc.spark.lake_keys): those whose key it
    holds are in JSON files named IN_LAKE... or flat lines with one field more, and no other line of the table's has a
    key the lake holds."""

    files: list[Path]
    skipped: int
    unique: frozenset[tuple[str, str]]
    flat: dict[tuple[str, str], FlatFiles] = {}
    in_lake: frozenset[tuple[str, str]] = frozenset()


def key_kinds(schema: TableSchema) -> str | None:
    """Per primary-key column, 'i' for an integer, 's' for text (char, varchar, enum); None if any is another type.

    For these, a key in the change log's form (docs/formats.md) is the same key exactly when its bytes are: an
    integer is written one way, a text as itself. A DATETIME or DECIMAL key is written one way too, but its typed
    value is the compaction's, so it is not taken on trust here.
    """
    kinds = ["i" if c.data_type in INTEGERS else "s" if c.data_type in TEXTS else "" for c in
             (schema.column(k) for k in schema.primary_key)]
    return "".join(kinds) if kinds and all(kinds) else None


def listed(db: str, table: str, schema: TableSchema) -> Listed:
    keys = list(schema.primary_key)
    return (db, table, keys, key_kinds(schema), [c for c in schema.column_names if c not in keys])


def unique_keys(fewer: Fewer | None, db: str, table: str) -> bool:
    """Whether the compaction reads `fewer`'s files and they hold one event per key of this table."""
    return fewer is not None and (db, table) in fewer.unique


def lake_known(fewer: Fewer | None, db: str, table: str) -> bool:
    """Whether `fewer`'s files say which of this table's lines have a key its lake version holds (IN_LAKE files)."""
    return fewer is not None and (db, table) in fewer.in_lake


def superseded_left_out(files: list[str], merged_upto: str | None, tables: list[Listed],
                        out_dir: Path, flat_for: set[tuple[str, str]] | None = None,
                        lakes: LakeOf | None = None) -> Fewer | None:
    """The lines of `files` a merge must read, written to one file per input file in `out_dir` (0600), and how many
    lines are left out (superseded, or at or before merged_upto); None if not worth it (nothing written).

    None also when the C reader is not built (or CDC_NATIVE=0), a file is not local plain/gzip JSON lines, or the
    pass fails for want of memory or disk (logged): the merge then reads `files` as before. Two files are read (and
    written) at once.
    """
    latest = _new(files, merged_upto, tables)
    if latest is None:
        return None

    def feed(index: int) -> None:
        for block, cut in scan.whole_lines(files[index]):
            latest.feed(index, block, cut)

    try:
        with ThreadPoolExecutor(min(2, len(files))) as pool:  # feed() runs without the interpreter lock
            list(pool.map(feed, range(len(files))))
    except (OSError, MemoryError) as exc:
        log.warning("spark-merge: reading every change line (the pass for superseded ones failed: %s)", exc)
        return None
    return _resolved(latest, files, out_dir, tables, flat_for, lakes)


def _new(files: list[str], merged_upto: str | None, tables: list[Listed]) -> Any:
    """A Latest for these files' lines (one part each), or None where the pass cannot be made."""
    native = scan.native_module()
    if native is None or not tables or not files or not scan.is_local(files) \
            or (merged_upto is not None and len(merged_upto.encode()) > native.POS_MAX):
        return None
    return native.Latest(merged_upto, tables, len(files), MAX_RECORDS)


def _resolved(latest: Any, files: list[str], out_dir: Path, tables: list[Listed],
              flat_for: set[tuple[str, str]] | None = None, lakes: LakeOf | None = None) -> Fewer | None:
    """superseded_left_out's end, every part fed: the lines left written to out_dir, or None (nothing written).

    Each listed table with flat columns (of flat_for, if given) gets its plain kept lines in flat form (_flat.c), in
    one file per writing thread: the files and open descriptors are two per table, however many parts. Where a unique
    table's lines are looked up in its lake version (lakes, cdc.spark.lake_keys), those whose key it holds go to JSON
    files of their own (IN_LAKE...), or in flat form with one field more.
    """
    flat_tables = [n for n, t in enumerate(tables)
                   if len(t) > 4 and t[4] is not None and (flat_for is None or (t[0], t[1]) in flat_for)]
    workers = min(2, len(files))  # write() runs without the interpreter lock: two parts at once
    outs: dict[str, list[Path]] = {}
    flats = {(worker, n): out_dir / f"flat-{worker}-{n:06d}.tsv" for worker in range(workers) for n in flat_tables}

    def write(worker: int) -> None:
        opened: dict[int, int] = {}
        try:
            for n in flat_tables:  # change lines hold rows: private
                opened[n] = os.open(flats[worker, n], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            flat = [opened.get(n, -1) for n in range(len(tables))]
            for index in range(worker, len(files), workers):
                fds = {kind: os.open(paths[index], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                       for kind, paths in outs.items()}
                try:
                    for block, cut in scan.whole_lines(files[index]):
                        latest.write(index, block, fds[""], cut, flat, fds.get(IN_LAKE, -1))
                finally:
                    for fd in fds.values():
                        os.close(fd)
        finally:
            for fd in opened.values():
                os.close(fd)

    try:
        with ThreadPoolExecutor(workers) as pool:
            lines, skipped = latest.resolve()
            if skipped < lines * SKIP_AT_LEAST:
                return None
            unique = frozenset((t[0], t[1]) for t, one in zip(tables, latest.unique(), strict=True) if one)
            in_lake, tried = _looked_up(latest, tables, unique, lakes)
            for kind in ("", IN_LAKE) if tried else ("",):  # a lookup that failed half way may have marked lines
                outs[kind] = [out_dir / f"{kind}latest-{index:06d}.jsonl" for index in range(len(files))]
            list(pool.map(write, range(workers)))
    except (OSError, MemoryError) as exc:  # a full disk, say: the merge reads every line instead, as without the pass
        log.warning("spark-merge: reading every change line (the pass for superseded ones failed: %s)", exc)
        for path in [*(p for paths in outs.values() for p in paths), *flats.values()]:
            with contextlib.suppress(OSError):
                path.unlink()
        return None
    flat: dict[tuple[str, str], FlatFiles] = {}
    for (_, n), path in sorted(flats.items()):
        if path.stat().st_size:
            db, table, keys, _, values = tables[n]
            flat.setdefault((db, table), FlatFiles(keys, values or [], [])).files.append(path)
        else:
            path.unlink()
    marked = []
    for path in outs.get(IN_LAKE, []):
        if path.stat().st_size:
            marked.append(path)
        else:
            path.unlink()
    return Fewer(outs[""] + marked, skipped, unique, flat, in_lake)


def _looked_up(latest: Any, tables: list[Listed], unique: frozenset[tuple[str, str]],
               lakes: LakeOf | None) -> tuple[frozenset[tuple[str, str]], bool]:
    """The unique tables whose kept lines were looked up in their lake version (cdc.spark.lake_keys), and whether any
    lookup was made."""
    done, tried = set(), False
    for n, (db, table, keys, *rest) in enumerate(tables):
        kinds = rest[0] if rest and isinstance(rest[0], str) else None
        version = lakes(db, table) if lakes is not None and kinds and (db, table) in unique else None
        tried = tried or version is not None
        if version is not None and kinds and lake_keys.mark(latest, n, version, keys, kinds):
            done.add((db, table))
    return frozenset(done), tried


def worth_a_pass(infos: list[TableStats], input_bytes: int) -> bool:
    """Whether a run of this size whose tables have these stats is worth the pass (the lines read as keyed structs).

    A key's later lines are its updates and deletes, or inserts after a delete: without enough of those to leave out
    SKIP_AT_LEAST of the lines (a snapshot's first merge) the pass could only cost its read.
    """
    return input_bytes >= FEWER_LINES_BYTES \
        and 2 * sum(i.removals for i in infos) >= SKIP_AT_LEAST * sum(i.rows for i in infos)


@dataclass(frozen=True)
class FedByScan:
    """A Latest that scan.local_stats fed as it read the run's lines (alongside_scan), and the tables it was given."""

    latest: Any
    tables: list[Listed]


def scan_and_feed(files: list[str], merged_upto: str | None, history: SchemaHistory,
                  segment_names: list[str]) -> tuple[list[TableStats], FedByScan | None]:
    """scan.local_stats of the run's files, feeding the superseded-lines pass from the same read of each line where
    alongside_scan makes one (for_run then uses it); a scan that runs out of memory feeding it counts again without."""
    fed = alongside_scan(files, merged_upto, history, any(_starts_in_binlog(n) for n in segment_names))
    if fed is not None:
        try:
            return scan.local_stats(files, merged_upto, fed.latest), fed
        except MemoryError as exc:
            log.warning("spark-merge: the scan fed no pass for superseded lines (%s); counting again without", exc)
    return scan.local_stats(files, merged_upto), None


def _starts_in_binlog(segment_name: str) -> bool:
    """Whether a segment's first line is a binlog change, not a snapshot's row (False for a name not of that form)."""
    try:
        return segment_key(segment_name)[2] == "b"
    except PositionError:
        return False


def alongside_scan(files: list[str], merged_upto: str | None, history: SchemaHistory,
                   binlog_changes: bool) -> FedByScan | None:
    """A Latest for scan.local_stats to feed from its own read of each line, before the run's tables are known; None
    where the pass would not be made (not the C reader, little input, a snapshot's rows alone: binlog_changes false).

    Its tables are those whose schema cannot change inside a run after merged_upto (their last version at or before
    it, with a primary key): each is one for_run would choose too, which it checks before using the Latest.
    """
    if merged_upto is None or not binlog_changes or not scan.is_local(files) \
            or sum(os.path.getsize(f) for f in files) < FEWER_LINES_BYTES:
        return None
    tables = []
    for db, table in history.tables():
        last = history.versions(db, table)[-1:]
        if last and last[0].position <= merged_upto and last[0].primary_key:
            tables.append(listed(db, table, last[0]))
    latest = _new(files, merged_upto, tables)
    return None if latest is None else FedByScan(latest, tables)


def for_run(files: list[str], merged_upto: str | None, history: SchemaHistory, infos: list[TableStats],
            staging: Path, fed: FedByScan | None = None, lakes: LakeOf | None = None) -> Fewer | None:
    """The lines a run's compaction must read, in files under `staging`, and how many it leaves out; None: read
    `files`.

    Only tables whose run holds one schema version with a primary key take part: their key columns' names and
    types are the same in every line, so the same key bytes are the same key (a keyless table's lines are all
    counted: cdc.spark.multiset). fed: the pass already fed by the scan (alongside_scan), used when each of its
    tables with lines in the run is one chosen here, with the same key; else the lines are read again.
    """
    from cdc.spark.compact import version_ranges

    tables = []
    for info in infos:
        final = history.at(info.db, info.table, info.last_position)
        if final is None or not info.rows:
            continue
        try:
            ranges = version_ranges(history.versions(info.db, info.table), final, info.as_input())
        except DataError:
            continue  # the compaction says what is wrong
        if len(ranges) == 1 and ranges[0][0].primary_key:
            tables.append(listed(info.db, info.table, ranges[0][0]))
    staging.mkdir(mode=0o700, parents=True, exist_ok=True)
    rows = {(i.db, i.table): i.rows for i in infos}
    flat_for = {(t[0], t[1]) for t in sorted(tables, key=lambda t: -rows[t[0], t[1]])[:FLAT_TABLES]}
    # Not named _* or .*: Spark's reader would pass over such a file without a word.
    if fed is not None and tables and _agrees(fed.tables, tables, infos):
        return _resolved(fed.latest, files, staging, fed.tables, flat_for, lakes)
    return superseded_left_out(files, merged_upto, tables, staging, flat_for, lakes)


def _agrees(fed: list[Listed], chosen: list[Listed], infos: list[TableStats]) -> bool:
    """Whether each table the scan's Latest took, with lines in the run, is one for_run chose, with the same key
    (and key kinds, and flat columns)."""
    run = {(i.db, i.table) for i in infos if i.rows}
    wanted = {(t[0], t[1]): t[2:] for t in chosen}
    return all(wanted.get((t[0], t[1])) == t[2:] for t in fed if (t[0], t[1]) in run)


def discard(fewer: Fewer | None) -> None:
    """A pass's files removed: after its run, or when the run does not read them (a cascade, known once Spark ran)."""
    for path in [*fewer.files, *(p for table in fewer.flat.values() for p in table.files)] if fewer else []:
        path.unlink(missing_ok=True)
