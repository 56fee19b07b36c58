"""Will the binlogs outlive the snapshot? Estimate the copy time against the retention runway.

Tail must start at the hand-over position after the snapshot ends; if the server purges the
hand-over binlog file first, the snapshot is worthless. The estimate is: rows to copy
(information_schema.TABLES.TABLE_ROWS, an InnoDB approximation) divided by the rate measured
over one chunk read and encoded like the real copy. The snapshot warns (or with --strict
refuses) when the estimate exceeds RUNWAY_SHARE of the retention: tail also needs time to
start and catch up before the files it needs age out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.capture.snapshot_rows import CompiledTable, LineParts, compile_table
from cdc.capture.snapshot_tables import TablePlan, select_sql
from cdc.capture.snapshot_wire import read_rows
from cdc.source.connect import query, variables
from cdc.source.server import ServerInfo

RUNWAY_SHARE = 0.5
PROBE_ROWS = 2000  # enough for a stable rate, small beside any table worth estimating
# The probe's lines are thrown away: any position and source will do.
_PROBE_PARTS = LineParts(b"0000000000:000000000000:s", b',"src":{"row":', b'},"table":', b',"v":1}\n')
# RDS with `binlog retention hours` NULL purges binlogs as soon as no replica needs them
# (within minutes): treat that as a five-minute runway.
RDS_NULL_RETENTION_SECONDS = 300.0


@dataclass(frozen=True)
class Runway:
    rows: int
    data_bytes: int
    rows_per_second: float | None
    seconds: float | None  # estimated copy time; None when it could not be measured
    retention_seconds: float | None  # None = binlogs never expire
    retention_source: str

    @property
    def is_short(self) -> bool:
        if self.seconds is None or self.retention_seconds is None:
            return False
        return self.seconds > self.retention_seconds * RUNWAY_SHARE

    def message(self) -> str:
        retention = "never expire" if self.retention_seconds is None else f"expire after {human_duration(self.retention_seconds)}"
        estimate = "unknown" if self.seconds is None else human_duration(self.seconds)
        return (f"snapshot of ~{self.rows} rows estimated at {estimate}; binlogs {retention} "
                f"({self.retention_source})")

    def to_dict(self) -> dict[str, object]:
        return {"rows": self.rows, "data_bytes": self.data_bytes, "rows_per_second": self.rows_per_second,
                "seconds": self.seconds, "retention_seconds": self.retention_seconds,
                "retention_source": self.retention_source, "short": self.is_short}


def retention_from(variables_found: dict[str, str], rds_hours: str | None, is_managed: bool) -> tuple[float | None, str]:
    """Binlog retention in seconds (None: never purged) and where it comes from."""
    if is_managed:
        if rds_hours is None or rds_hours.strip().upper() in ("", "NULL"):
            return RDS_NULL_RETENTION_SECONDS, "RDS binlog retention hours is NULL"
        return float(rds_hours) * 3600, "RDS binlog retention hours"
    seconds = float(variables_found.get("binlog_expire_logs_seconds") or 0)
    if seconds > 0:
        return seconds, "binlog_expire_logs_seconds"
    days = float(variables_found.get("expire_logs_days") or 0)
    if days > 0:
        return days * 86400, "expire_logs_days"
    return None, "binlog_expire_logs_seconds and expire_logs_days are 0"


def read_retention(conn: pymysql.Connection, info: ServerInfo) -> tuple[float | None, str]:
    found = variables(conn, ["binlog_expire_logs_seconds", "expire_logs_days"])
    rds_hours = None
    if info.is_managed:
        try:
            rows = query(conn, "CALL mysql.rds_show_configuration")
        except pymysql.err.MySQLError:
            rows = []
        for row in rows:
            if str(row.get("name", "")).lower() == "binlog retention hours":
                rds_hours = None if row.get("value") is None else str(row["value"])
    return retention_from(found, rds_hours, info.is_managed)


def measure_rate(conn: pymysql.Connection, plans: Sequence[TablePlan], chunk_size: int) -> float | None:
    """Rows per second turning the first chunk (at most PROBE_ROWS) of the biggest table into lines like the copy."""
    biggest = max(plans, key=lambda p: p.info.data_length, default=None)
    if biggest is None:
        return None
    started = [0.0]

    def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
        compiled = compile_table(biggest, _PROBE_PARTS, fields, converters)
        started[0] = time.perf_counter()  # compiling is once per table, not per row: not part of the rate
        return compiled

    sql = select_sql(biggest, after_key=False, limit=min(chunk_size, PROBE_ROWS))
    count, _ = read_rows(conn, sql, None, compiled_for, 0, lambda n, lines: None)
    elapsed = time.perf_counter() - started[0]
    if count == 0 or elapsed <= 0:
        return None
    # Writing the segments, fsync and checkpoints add up to as much again (bench_snapshot.py --profile).
    return count / elapsed / 2


def estimate_runway(
    conn: pymysql.Connection, info: ServerInfo, plans: Sequence[TablePlan], chunk_size: int
) -> Runway:
    rows = sum(p.info.est_rows for p in plans)
    data_bytes = sum(p.info.data_length for p in plans)
    rate = measure_rate(conn, plans, chunk_size)
    seconds = rows / rate if rate else None
    retention, source = read_retention(conn, info)
    return Runway(rows, data_bytes, rate, seconds, retention, source)


def human_duration(seconds: float) -> str:
    """A duration as people read it in a status line: 45s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
