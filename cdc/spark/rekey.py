"""A change of a table's primary key, merged exactly: a run never spans one (issue #30).

`ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b)` (a key widened, narrowed, or moved to a UNIQUE
NOT NULL column) changes no row in MySQL, and the ALTER succeeds only if every row is unique under the new
key. So the exact outcome is: every change before the ALTER merged by the old key, the table then re-keyed,
every later change merged by the new key. Re-keying costs nothing here, because neither the lake nor
Snowflake stores rows by key: a lake version is a set of rows with their columns, and a Snowflake table a
table whose MERGE names the key columns. The key only says which rows a change replaces.

The design: a merge run ends just before the first key change that has row changes of its table on both
sides inside the run (`key_change_cut`). The run merges the lines before it under the old key, writes its
lake versions and its batch (whose schema position, hence its MERGE key in snowflake-apply, is the old
key's), and does not advance merge.json's segment past the input it cut (only `last_position`), so the
next run reads the rest of those segments again, from the ALTER on, under the new key, onto the lake
version the first run wrote. In the next run the table's row changes all lie after the ALTER, so its
versions in force share one key and nothing cuts it again: the runs always make progress.

Why not split inside one run: the batch would need two MERGEs of one table under two keys, and the
compaction two passes with an intermediate lake; a second batch does both with the code that exists.
A key whose values MySQL assigned at ALTER time (`ADD COLUMN id INT AUTO_INCREMENT PRIMARY KEY`) is not in
the binlog: the schema history flags the table for a re-snapshot (cdc.pipeline.auto_resnapshot).
"""

from __future__ import annotations

from cdc.schema import SchemaHistory
from cdc.spark.scan import TableStats


def key_change_cut(history: SchemaHistory, stats: list[TableStats]) -> str | None:
    """The earliest position where a table's primary key changes with row changes of it before, in this run."""
    cut = None
    for info in stats:
        if not info.rows or info.min_position is None:
            continue
        versions = history.versions(info.db, info.table)
        for before, version in zip(versions, versions[1:], strict=False):
            if version.position > info.last_position:
                break
            if info.min_position < version.position and not version.same_key(before):
                cut = version.position if cut is None else min(cut, version.position)
                break
    return cut
