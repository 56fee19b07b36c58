"""What a merge tells its caller: each table's result, the run's summary, and its progress as it goes.

The job (cdc/spark/job.py) fills these in; the command line renders them, and `cdc run` forwards them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cdc.checkpoints import MergeCheckpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableResult:
    table: str  # "db.table"
    changes: int  # change lines read (duplicates included)
    lake_rows: int
    batch_rows: int
    inserts: int
    deletes: int
    schema_position: str
    cascaded: int = 0  # changes derived from foreign-key cascades (counted in `changes` too)


@dataclass
class MergeSummary:
    batch_id: str | None
    segments: list[str] = field(default_factory=list)
    tables: list[TableResult] = field(default_factory=list)
    seconds: float = 0.0
    lake: str = ""
    batch_dir: str | None = None
    resumed: bool = False  # the batch was sealed by a run that crashed before its checkpoint
    # Where the time went (seconds): scan = the per-table stats (a first Spark read of the JSON lines; in a
    # run that starts its own session on local input, a Python child process running beside the session's
    # start, scan_wait = the part of it the start did not hide), latest = the superseded-lines pass
    # (cdc.spark.latest; in such a run on a thread beside the start, after the scan, also within scan_wait),
    # cascades = deriving the child changes of foreign-key cascades (cdc.spark.cascades; ~0 without any),
    # compact = the table's read + per-key last state of events and lake rows (cached), lake/batch =
    # Parquet writes; session = SparkSession start.
    phases: dict[str, float] = field(default_factory=dict)
    # What the run could not do exactly and says so (a cascade into a table that is not captured, issue #24).
    warnings: list[str] = field(default_factory=list)
    # The run ended just before this position, where a table's primary key changes (cdc.spark.rekey): the next
    # run merges on from there under the new key.
    key_change: str | None = None
    # Spark jobs the run started (a warm session's count; with its own session, the session's): what a follow
    # cycle's latency grows with on a loaded machine, more than with its changes.
    spark_jobs: int = 0
    # Change lines the compaction did not read: each superseded by a later change of its key, or merged by an earlier
    # run (cdc.spark.latest).
    superseded: int = 0
    # Spark queries the cascade replay made (cdc.spark.cascade_reads): 0 without cascading foreign keys.
    cascade_lookups: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changes": sum(t.changes for t in self.tables)}


# A run's phases, in order (a run skips those it does not need: `starting` with the caller's session, all but
# `writing` when it finishes a batch a crashed run sealed; nothing new: `listing`, then `done`).
PHASES = ("listing", "starting", "scanning", "merging", "writing", "done")
# Of `merging`, per table: read + per-key state, lake version, batch files (cdc.spark.table_merge writes a table's
# batch files beside its lake version, within `lake`; a follow cycle's small tables take the two steps in turn).
STEPS = ("compacting", "lake", "batch")


@dataclass(frozen=True)
class MergeProgress:
    """What a merge is doing, handed to the progress callback at each phase, table and step."""

    phase: str  # one of PHASES
    batch_id: str | None = None
    segments: int = 0  # segments in this run
    tables_total: int = 0  # known once scanned
    tables_done: int = 0
    table: str | None = None  # merging: the table ("db.table")
    step: str | None = None  # merging: one of STEPS; None once the table is done
    changes_total: int = 0  # change lines of every table in the run (known once scanned)
    changes_done: int = 0  # of the tables merged so far
    result: TableResult | None = None  # merging, once the table is done (step None)
    seconds: float = 0.0  # since the merge started


Progress = Callable[[MergeProgress], None]


class Reporter:
    """Keeps the progress so far; each update goes to the callback (and the debug log)."""

    def __init__(self, callback: Progress | None, started: float) -> None:
        self.callback, self.started = callback, started
        self.now = MergeProgress("listing")

    def set(self, **changes: Any) -> None:
        """Known from now on, told with the next phase."""
        self.now = replace(self.now, **changes)

    def __call__(self, phase: str, **changes: Any) -> None:
        self.now = replace(self.now, phase=phase, **changes, seconds=round(time.monotonic() - self.started, 3))
        p = self.now
        table = f" {p.table} ({p.tables_done + (1 if p.step else 0)}/{p.tables_total}) {p.step or 'done'}"
        log.debug(f"spark-merge {p.phase}" + (table if p.phase == "merging" else ""),
                  extra={"stage": MergeCheckpoint.STAGE, "phase": p.phase, "table": p.table, "step": p.step,
                         "tables_done": p.tables_done, "tables_total": p.tables_total, "rows": p.changes_done})
        if self.callback is not None:
            self.callback(p)


@contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block takes to phases[name] (a run's "where the time went")."""
    started = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.monotonic() - started, 3)
