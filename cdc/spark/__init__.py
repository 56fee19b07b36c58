"""spark-merge: change log -> compacted per-key changes -> versioned lake tables + Snowflake-ready batches.

    summary = merge(StateDir(".cdc"))                 # starts (and stops) its own SparkSession
    summary = merge(StateDir(".cdc"), spark=session)  # or uses the caller's
    table = read_lake_table(".cdc/lake", "shop", "customers")   # pyarrow, no Spark

Heavy imports (pyspark) happen inside the functions that need them, so `cdc --help` stays fast.
"""

from cdc.spark.job import MergeSummary, TableResult, merge
from cdc.spark.lake import LakeTable, read_lake_table

__all__ = ["LakeTable", "MergeSummary", "TableResult", "merge", "read_lake_table"]
