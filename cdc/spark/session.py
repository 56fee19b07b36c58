"""A SparkSession with one-machine defaults that runs unchanged on a cluster.

Defaults (each overridable with `--conf k=v`): UI off, UTC everywhere, quiet logs, Parquet
timestamps as INT64 micros (readable by Snowflake and pyarrow, unlike Spark's INT96 default),
proleptic-Gregorian dates (0001-01-01 sentinels must not be "rebased").
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from cdc.config import SparkSettings
from cdc.errors import ConfigError

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.shuffle.partitions": "4",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    # A hash of every shuffled row (~5% of a merge's CPU in a profile), kept only to notice a retried map
    # task writing different rows; the merge's shuffles are deterministic functions of their input.
    "spark.sql.shuffle.orderIndependentChecksum.enabled": "false",
}
# Bytes of change-log JSON per shuffle partition: small data must not pay for 200 empty tasks.
BYTES_PER_PARTITION = 64 * 1024 * 1024


def parse_conf(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`k=v` strings (from --conf or [spark] conf) -> dict; ConfigError naming the bad one."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"spark conf {pair!r} is not key=value", hint="e.g. --conf spark.executor.memory=4g")
        conf[key.strip()] = value.strip()
    return conf


def build_session(settings: SparkSettings, app_name: str = "cdc spark-merge") -> SparkSession:
    """Start (or join) the SparkSession; under spark-submit, the submitter's master and memory win."""
    conf = dict(DEFAULT_CONF)
    java_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={_quiet_log4j()}"
    conf["spark.driver.extraJavaOptions"] = java_options
    conf["spark.executor.extraJavaOptions"] = "-Duser.timezone=UTC"
    builder = SparkSession.builder.appName(app_name)
    if not is_spark_submit():
        conf["spark.driver.memory"] = settings.driver_memory
        builder = builder.master(settings.master)
    conf.update(parse_conf(settings.conf))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def is_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands the gateway to Python through this variable.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def tune_for_input(spark: SparkSession, input_bytes: int) -> int:
    """Scale shuffle partitions to the data: one per ~64 MiB, at least the cores, at most 200."""
    cores = spark.sparkContext.defaultParallelism
    partitions = max(cores, min(200, math.ceil(input_bytes / BYTES_PER_PARTITION)))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


def _quiet_log4j() -> Path:
    path = Path(tempfile.gettempdir()) / f"cdc-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        path.write_text(_QUIET_LOG4J)
    return path
