"""spark-merge: change log -> compacted per-key changes -> versioned lake tables + Snowflake-ready batches.

    summary = merge(StateDir(".cdc"))                 # starts (and stops) its own SparkSession
    summary = merge(StateDir(".cdc"), spark=session)  # or uses the caller's
    table = read_lake_table(".cdc/lake", "shop", "customers")   # pyarrow, no Spark

The names below are imported on first use (PEP 562): pyspark loads only when a session is built, so
`cdc --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.spark.job import merge
    from cdc.spark.lake import LakeTable, read_lake_table, read_pointer, table_dir
    from cdc.spark.report import MergeProgress, MergeSummary, TableResult
    from cdc.spark.session import build_session, stop_session

_HOMES = {"MergeProgress": "cdc.spark.report", "MergeSummary": "cdc.spark.report", "TableResult": "cdc.spark.report",
          "merge": "cdc.spark.job",
          "LakeTable": "cdc.spark.lake", "read_lake_table": "cdc.spark.lake", "read_pointer": "cdc.spark.lake",
          "table_dir": "cdc.spark.lake", "build_session": "cdc.spark.session",
          "stop_session": "cdc.spark.session"}

__all__ = ["LakeTable", "MergeProgress", "MergeSummary", "TableResult", "build_session", "merge", "read_lake_table",
           "read_pointer", "stop_session", "table_dir"]

__getattr__ = exports(__name__, _HOMES)
