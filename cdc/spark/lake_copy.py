"""The untouched rows of a lake version copied into the next with pyarrow, beside Spark's write of the kept rows.

Every merge writes a whole new lake version (copy-on-write): the rows no change touched are read from the previous
version and written again. In Spark that is a broadcast anti join (the run's touched keys collected to the driver,
a hash table built, every lake row probed) and a Parquet write, whose code runs cold in a fresh JVM. For 718k
untouched of 1M lake rows, warm: Spark 0.85 s, pyarrow 0.38 s on the same two cores (docs/performance.md,
"Session of 2026-12-04 (20:05 UTC on)"). For a table merged on its own (cdc.spark.table_merge), the touched keys
come out of Spark as Arrow, and each file of the previous version is read, its rows of a touched key left out (a
lookup in Arrow's hash set, or its hash join for a composite key) and written into the new version's directory:
the rows Spark's join would give, taken only where the two cannot differ:
- the version is local and was written under the run's final schema (no column to evolve on the way);
- the key columns are integers, text, binary, decimals, dates or timestamps: types whose equality is their
  bytes' in both engines (a float's is not: Spark makes -0.0 equal 0.0 and NaN equal NaN);
- the files Spark writes for the kept rows have the previous version's column types, which the copies then carry.
Anything else keeps Spark's own join. The rows copied must number what the counts say (the lake's rows less the
touched keys it held); where they do not, or Arrow fails on a row (a null where the kept rows' files say none can
be), the version is written by Spark's join after all (cdc.spark.table_merge), with a warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc.errors import DataError
from cdc.state import fsync_dir

# Names of the copied files: after Spark's own part files when sorted, never one of them.
PREFIX = "part-u"
ROW = "__cdc_row"  # a row's number in its file, beside the key columns of a composite key's join


def key_types_fit(schema: pa.Schema, keys: Iterable[str]) -> bool:
    """Whether every key column's type compares by its bytes in Arrow's join and in Spark's alike."""
    for name in keys:
        kind = schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_decimal(kind)
                or pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
            return False
    return True


def first_file(version: Path) -> Path | None:
    """The first of a version's Parquet files by name (None: it has none)."""
    return next(iter(sorted(version.glob("*.parquet"))), None)


def same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """The same column names and types, in order (nullability and metadata aside)."""
    return a.names == b.names and all(x.type == y.type for x, y in zip(a, b, strict=True))


def copy_untouched(base: Path, version: Path, touched: pa.Table, keys: list[str], schema: pa.Schema) -> int:
    """Write the rows of `base` whose key is not in `touched` into `version` as `schema`; returns the rows written.

    Two files at once (pyarrow's read, join and write hold no interpreter lock); each written file is made durable
    before the pointer can name the version (cdc.spark.lake.switch).
    """
    files = sorted(base.glob("*.parquet"))
    wanted = pa.table({k: touched.column(k).cast(schema.field(k).type) for k in keys})

    def one(numbered: tuple[int, Path]) -> int:
        number, path = numbered
        out, written = version / f"{PREFIX}{number:05d}.parquet", 0
        source = pq.ParquetFile(path)
        with pq.ParquetWriter(out, schema, compression="snappy") as writer:
            for group in range(source.num_row_groups):  # a row group at a time: memory bounded by one, not a file
                rows = source.read_row_group(group)
                rest = rows.filter(_untouched(rows, wanted, keys))
                writer.write_table(rest.cast(schema))
                written += rest.num_rows
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return written

    with ThreadPoolExecutor(2, thread_name_prefix="cdc-lake-copy") as pool:
        written = sum(pool.map(one, enumerate(files)))
    fsync_dir(version)
    return written


def _untouched(rows: pa.Table, wanted: pa.Table, keys: list[str]) -> pa.Array:
    """A mask of the rows whose key is not one of `wanted`'s (keys are never null in a lake version)."""
    if len(keys) == 1:
        return pc.invert(pc.is_in(rows.column(keys[0]), value_set=wanted.column(keys[0])))
    # Arrow's join carries no list column (a SET), so it joins the keys and each row's number alone.
    numbers = pa.array(range(rows.num_rows), pa.int64())
    numbered = pa.table({**{k: rows.column(k) for k in keys}, ROW: numbers})
    kept = numbered.join(wanted, keys=keys, join_type="left anti", use_threads=False).column(ROW)
    return pc.is_in(numbers, value_set=kept)


def check_count(written: int, expected: int, version: Path) -> None:
    if written != expected:
        raise DataError(f"{version}: {written} untouched lake rows copied where the merge counted {expected}",
                        hint="nothing is switched to this version; report it with the state directory")


def spark_schema_of(version: Path) -> pa.Schema | None:
    """The Arrow schema of the first Parquet file Spark wrote into `version` (None if it wrote none)."""
    path = first_file(version)
    return None if path is None else pq.read_schema(path)
