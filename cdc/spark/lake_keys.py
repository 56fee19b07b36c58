"""Which of the pass's kept lines have a key the lake already holds, found in C (Latest.in_lake, _lakekeys.c).

The compaction must know, per event, whether the lake had its key (`_in_lake`: an INSERT of a key the lake had is an
update in Snowflake, a delete of a key it never had nets out to nothing). Spark finds it with a hash table of every
key of the lake version, built on the driver and broadcast (cdc.spark.compact.last_changes): for 1M lake rows ~0.4 s
of a warm 1M merge in which the cores wait (docs/performance.md, 2026-12-03). The pass holds a hash table of the run's
keys already; for a table whose kept lines hold one event per key (Fewer.unique), each lake key read here (Parquet's
key columns, through pyarrow) is looked up in it, and the kept lines whose key it finds are written to JSON files of
their own (IN_LAKE), or in flat form with one field more (cdc.spark.flat), which the compaction reads as `_in_lake`
true. The same keys, so the same events, as Spark's join.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.schema import SchemaHistory
    from cdc.spark.scan import TableStats

log = logging.getLogger(__name__)

# The pass's JSON files of kept lines whose key the lake holds start with this (cdc.spark.sources reads the name).
IN_LAKE = "inlake-"
# (db, table) -> the lake version (a directory) whose keys the table's kept lines are looked up in; None: not looked up
LakeOf = Callable[[str, str], Path | None]


def mark(latest: Any, table: int, version: Path, keys: list[str], kinds: str) -> bool:
    """Every kept line of listed table `table` whose key a row of lake `version` holds, marked (Latest.in_lake);
    False where a key column cannot be given to C (not an integer or text in Arrow, a null, no pyarrow): the
    compaction then joins with the lake's keys as without this, and the marks made are only where its lines go."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False

    def look_up(path: Path) -> bool:
        for batch in pq.ParquetFile(path).iter_batches(columns=keys, batch_size=1 << 20):
            columns = [_column(pa, batch.column(name), kind) for name, kind in zip(keys, kinds, strict=True)]
            if any(c is None for c in columns):
                return False
            latest.in_lake(table, batch.num_rows, columns)
        return True

    try:  # two files at once: the read and in_lake run without the interpreter lock
        with ThreadPoolExecutor(2) as pool:
            return all(list(pool.map(look_up, sorted(version.glob("*.parquet")))))
    except (OSError, ValueError, pa.ArrowException, KeyError) as exc:  # Spark's own read of the lake says what is wrong
        log.info("spark-merge: %s's keys not looked up in C (%s)", version, exc)
        return False


def _column(pa: Any, values: Any, kind: str) -> tuple[Any, ...] | None:
    """One key column of a batch as in_lake takes it: (ints,) or (offsets, data); None if it cannot be."""
    if values.null_count:
        return None  # a key column is never NULL in a lake version: not taken on trust
    if kind == "i":
        if not pa.types.is_integer(values.type) or values.type == pa.uint64():
            return None
        values = values.cast(pa.int64())
        return (values.buffers()[1].slice(values.offset * 8),)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    try:
        values = values.cast(pa.string())  # 32-bit offsets
    except pa.ArrowInvalid:
        return None
    _, offsets, data = values.buffers()
    return (offsets.slice(values.offset * 4), data if data is not None else b"")


def lake_versions(target: Path, run: int, history: SchemaHistory, infos: list[TableStats]) -> LakeOf:
    """Per table of the run, the lake version its compaction joins with (cdc.spark.lake.base_version), where that
    version's schema is the one the table's lines are merged with: its key columns then hold the values the
    compaction's typed keys would (cdc.spark.evolve.read_base changes nothing). None otherwise, or for a new table."""
    from cdc.spark import lake

    last = {(i.db, i.table): i.last_position for i in infos}

    def version(db: str, table: str) -> Path | None:
        final = history.at(db, table, last[db, table]) if (db, table) in last else None
        directory = lake.table_dir(target, db, table)
        name = lake.base_version(directory, run)
        if final is None or name is None or lake.base_schema_position(directory, run) != final.position:
            return None
        return directory / name

    return version
