"""A SparkSession with one-machine defaults that runs unchanged on a cluster.

Defaults (each overridable with `--conf k=v`): UI off, UTC everywhere, quiet logs, Parquet
timestamps as INT64 micros (readable by Snowflake and pyarrow, unlike Spark's INT96 default),
proleptic-Gregorian dates (0001-01-01 sentinels must not be "rebased").

Start-up: a driver JVM this process launches loads Spark's classes from a class-data-sharing
archive (Java's AppCDS) kept in ~/.cache/cdc/: the first run records the archive when its JVM
exits (stop_session), later runs map it instead of loading and verifying Spark's classes from the
jars. Measured: a 100,000-change merge in a fresh process took 15-19 s with it, 22-43 s without (docs/performance.md,
"spark-merge"). A stale archive only costs that speed (the JVM ignores it); a damaged one makes the
JVM fail at start, so build_session drops it and starts again without.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

from cdc.config import SparkSettings
from cdc.errors import ConfigError
from cdc.spark.java import java_path, require_java
from cdc.spark.private import local_dir, private_dir, quiet_log4j

# What the driver JVM (and the Python workers it starts) print, line by line: `cdc.spark.jvm`.
jvm_log = logging.getLogger("cdc.spark.jvm")
# Printed at every start, nothing to act on: debug.
_JVM_CHATTER = ("Setting default log level to", "To adjust logging level use", "WARNING: Using incubator modules")
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
    # Hadoop sets the mode of every file and directory it writes itself (0644/0755 under its default umask
    # 022, whatever the process umask): lake and batch files hold rows, so owner only (#26).
    "spark.hadoop.fs.permissions.umask-mode": "077",
    # A hash of every shuffled row (~5% of a merge's CPU in a profile), kept only to notice a retried map
    # task writing different rows; the merge's shuffles are deterministic functions of their input.
    "spark.sql.shuffle.orderIndependentChecksum.enabled": "false",
    # PySpark 4 sends the Python call site of every DataFrame/Column call to the JVM (for error messages): ~5 Py4J
    # round trips each; a 16-table follow cycle's query took ~4 s of them to build (docs/performance.md).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # A merge's caches (the compaction's outcomes, a many-table run's lines) are read once or twice, soon after they
    # are built: compressing their columns costs more CPU than the reads save. 1M changes, warm: bench_merge.py
    # 5.2x -> 5.0x DuckDB's time (2 of 3 pairs faster; a harness's 9 of 9), fresh within noise (docs/performance.md,
    # "spark-merge"); the cache takes more memory (and disk, past the driver's memory: MEMORY_AND_DISK).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}
# HotSpot's optimizing compiler (C2) for a driver that runs one merge and exits (one_shot): with its default
# thresholds, a fresh 1M-change merge spent ~50 s of compiler-thread time in C2 (-XX:+CITime), most of it on
# planning, serialization and class-generation code that runs briefly, while the tasks wanted the same 2
# cores. 10x its thresholds leaves C2 the methods that stay hot (JSON parsing, generated code, Parquet);
# the rest keeps C1's code. Measured (docs/performance.md, "spark-merge"): a fresh process's CPU ~72-76 s -> ~55 s.
# C1 alone (TieredStopAtLevel=1) was slower at 1M changes: the merge outlives the JIT's warm-up.
# SerialGC too: G1's concurrent threads and costlier write barriers (in every compiled method) cost a one-shot
# merge ~2.5 s of ~34 s CPU at 1M changes on 2 cores (docs/performance.md, "spark-merge"); its pauses are short at
# this heap size. Long-lived sessions keep G1.
# Shallower C2 inlining (depth 6 instead of 15, smaller inlined bodies): C2 spent ~15 s on ~1,500 methods
# (~10 ms each) of a fresh 1M merge's ~40 s CPU (-XX:+CITime), its parse and optimize steps growing with
# what is inlined; the hot loops (copyMemory, JSON tokens, sort) are intrinsics or short either way.
# Measured (docs/performance.md, "spark-merge"): cold 1M, interleaved x3, 22.7 -> 20.5 s (12.0x -> 11.1x DuckDB).
JIT_OPTIONS = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
               "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000 -XX:+UseSerialGC "
               "-XX:MaxInlineLevel=6 -XX:InlineSmallCode=1000 -XX:FreqInlineSize=100")
# A one-shot merge of little input (a follow cycle's few changes, merged by a fresh `cdc spark-merge`) is over
# before C2's code would pay back its compiling: C1 only. In a fresh 8-change/16-table merge (-XX:+CITime) C2
# took ~4 s of ~14 s of CPU on ~630 methods; C1 only cut the process tree's CPU ~13.6-14.5 s -> ~10.5 s
# (docs/performance.md, "Freshness"). Bigger merges keep C2: at 1M changes C1 alone was slower ("spark-merge").
C1_ONLY_BYTES = 16 * 1024 * 1024
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


# Set while this process's driver JVM records a class archive: (the file it writes at exit, the archive).
_recording: tuple[Path, Path] | None = None


def build_session(settings: SparkSettings, app_name: str = "cdc spark-merge", *, record_classes: bool = False,
                  one_shot: bool = False, follow: bool = False, input_bytes: int | None = None) -> SparkSession:
    """Start (or join) the SparkSession; under spark-submit, the submitter's master and memory win.

    record_classes: the caller ends the session with stop_session, so a JVM started here may record
    the class archive when none exists yet (the JVM writes it as it exits).
    one_shot: the session runs one merge (or a few) and ends (a fresh `cdc spark-merge`, `cdc run --until-now`):
    its JVM gets JIT_OPTIONS. A long-lived session (`cdc run --follow`) keeps HotSpot's defaults: warm merges with
    JIT_OPTIONS measured mixed against without (4.9x -> 5.0x and 5.0x -> 5.5x DuckDB), so peak speed is not traded for them.
    input_bytes: a one-shot merge's input (its JSON bytes); up to C1_ONLY_BYTES its JVM runs C1 only.
    follow: the session of `cdc run --follow`, which lives as long as the run: its JVM gets `follow_driver_memory`
    and `follow_java_options` (bounded metaspace, a heap given back after a burst: docs/config.md).
    """
    global _recording
    from pyspark.errors import PySparkRuntimeError

    if not is_spark_submit() and SparkContext._gateway is None:
        require_java()  # else PySpark fails with a page of traceback ending in JAVA_GATEWAY_EXITED
    conf = dict(DEFAULT_CONF)
    java_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={quiet_log4j()}"
    conf["spark.executor.extraJavaOptions"] = "-Duser.timezone=UTC"
    if not is_spark_submit():
        conf["spark.driver.memory"] = settings.follow_driver_memory if follow else settings.driver_memory
        # Shuffle and spill files hold rows: in the private directory, not world-readable in /tmp (#26).
        conf["spark.local.dir"] = str(local_dir())
        if follow:
            java_options = f"{java_options} {settings.follow_java_options}"
    user = parse_conf(settings.conf)
    archive: Path | None = None
    if not is_spark_submit() and SparkContext._gateway is None and "spark.driver.extraJavaOptions" not in user:
        options, archive, _recording = _class_archive_options(record_classes)
        java_options = f"{java_options} {_jit_options(one_shot, input_bytes)} {options}"
    try:
        spark = _start({**conf, "spark.driver.extraJavaOptions": java_options, **user}, settings, app_name)
    except PySparkRuntimeError:
        if archive is None or not archive.exists():
            raise
        # A damaged archive stops the JVM at start: drop it and start without (the next run records one).
        archive.unlink(missing_ok=True)
        _recording = None
        java_options = java_options.split(" -XX:SharedArchiveFile=")[0]
        spark = _start({**conf, "spark.driver.extraJavaOptions": java_options, **user}, settings, app_name)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _jit_options(one_shot: bool, input_bytes: int | None) -> str:
    small = one_shot and input_bytes is not None and input_bytes <= C1_ONLY_BYTES
    return f"{JIT_OPTIONS} -XX:TieredStopAtLevel=1" if small else JIT_OPTIONS if one_shot else ""


def _start(conf: dict[str, str], settings: SparkSettings, app_name: str) -> SparkSession:
    builder = SparkSession.builder.appName(app_name)
    if not is_spark_submit():
        builder = builder.master(settings.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if SparkContext._gateway is not None:
        return builder.getOrCreate()
    with _children_print_to_stderr(), _jvm_dies_with_an_interrupted_start():
        return builder.getOrCreate()


@contextlib.contextmanager
def _jvm_dies_with_an_interrupted_start() -> Any:
    """Kill the driver JVM when its start is interrupted (Ctrl-C, SIGTERM) or fails.

    The JVM leaves by itself when our end of its stdin closes, but only once its gateway runs: interrupted
    earlier, it finds the connection file PySpark removed, its main thread dies and its other threads keep it
    alive, an orphan holding 1-2 GB and our stdout/stderr (a caller reading them until EOF waits forever).
    """
    from pyspark import java_gateway

    started: list[subprocess.Popen[bytes]] = []
    launch = java_gateway.__dict__["Popen"]  # PySpark's own reference to subprocess.Popen, which it launches with

    def recording(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process: subprocess.Popen[bytes] = launch(*args, **kwargs)
        started.append(process)
        return process

    setattr(java_gateway, "Popen", recording)  # noqa: B010  (the attribute is PySpark's, not in its stubs)
    try:
        yield
    except BaseException:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        raise
    finally:
        setattr(java_gateway, "Popen", launch)  # noqa: B010


@contextlib.contextmanager
def _children_print_to_stderr() -> Any:
    """Start processes (the driver JVM) whose stdout and stderr are a pipe, each line of which is logged (cdc.spark.jvm).

    Whatever the JVM prints there for its whole life (a crash header when it cannot map the class archive, a
    warning of the JDK's, log4j's errors) would otherwise land in the middle of `--json` output, through a
    progress display, or between the JSON lines of `--log-format json`. Our own writes to sys.stderr meanwhile
    go to the real stderr (a duplicate of it), so a log record is never read back from the pipe.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    threading.Thread(target=_log_lines, args=(read_end,), name="cdc-jvm-output", daemon=True).start()
    saved_out, saved_err = os.dup(1), os.dup(2)
    ours = sys.stderr
    sys.stderr = os.fdopen(os.dup(saved_err), "w", buffering=1, encoding="utf-8", errors="replace")
    try:
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        yield
    finally:
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, write_end):
            os.close(fd)
        # Not closed here: a progress display's refresh thread may be writing to it; it closes once unreferenced.
        sys.stderr.flush()
        sys.stderr = ours


def _log_lines(read_end: int) -> None:
    """Until every process holding the pipe has exited (the JVM's end of life)."""
    with os.fdopen(read_end, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                jvm_log.log(jvm_level(line), line)


def jvm_level(line: str) -> int:
    """A JVM line's level: log4j's (`12:00:00 ERROR Executor: ...`), the JVM's own (`WARNING:`, `#` crash header)."""
    if line.startswith(_JVM_CHATTER):
        return logging.DEBUG
    words = line.split(maxsplit=2)[:2]
    if line.startswith("#") or any(w.rstrip(":") in ("ERROR", "FATAL", "Exception", "Error") for w in words):
        return logging.ERROR
    if any(w.rstrip(":") in ("WARN", "WARNING") for w in words):
        return logging.WARNING
    return logging.INFO


def stop_session(spark: SparkSession) -> None:
    """Stop a session build_session started; if its JVM records a class archive, let it exit and keep the archive.

    The JVM writes the archive as it exits, so the first run pays a few seconds for it once. Later
    sessions in this process start a new JVM (which then maps the archive).
    """
    global _recording
    spark.stop()
    if _recording is None or SparkContext._gateway is None:
        return
    written, archive = _recording
    _recording = None
    proc: Any = getattr(SparkContext._gateway, "proc", None)
    SparkContext._gateway, SparkContext._jvm = None, None  # the next build_session launches a JVM
    if proc is None or proc.stdin is None:
        return
    proc.stdin.close()  # the gateway JVM exits when its stdin closes (pyspark's PythonGatewayServer)
    try:
        if proc.wait(timeout=120) == 0 and written.exists():
            os.replace(written, archive)
    except (OSError, TimeoutError, subprocess.TimeoutExpired):
        pass  # no archive this time: the next run records one
    finally:
        written.unlink(missing_ok=True)


def class_archive() -> Path:
    """Where a driver JVM started by this process maps (or records) Spark's class archive."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cdc"
    # An archive only fits the JVM and the jars that wrote it: both are in its name.
    key = hashlib.sha256(f"{os.path.realpath(java_path())}|{pyspark.__version__}|{pyspark.__file__}".encode()).hexdigest()[:16]
    return cache / f"spark-classes-{key}.jsa"


def _class_archive_options(record: bool) -> tuple[str, Path | None, tuple[Path, Path] | None]:
    """JVM options mapping the class archive if there is one (and its path), else recording it (and where)."""
    archive = class_archive()
    cache = archive.parent
    # CDS notes go to stdout by default (--json must stay clean); a crash report (it lists the environment)
    # goes to the private directory.
    quiet = f"-Xlog:disable -Xlog:all=error:stderr -XX:ErrorFile={private_dir()}/cdc-jvm-error-%p.log"
    _drop_stale_recordings(cache)
    if archive.exists():
        return f"{quiet} -XX:SharedArchiveFile={archive}", archive, None
    if not record:
        return "", None, None
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return "", None, None
    written = cache / f".{archive.name}.{os.getpid()}.tmp"
    return f"{quiet} -XX:ArchiveClassesAtExit={written}", None, (written, archive)


def _drop_stale_recordings(cache: Path) -> None:
    """Remove archives a recording JVM wrote but nobody adopted (its run was killed, or it outlived stop_session's wait)."""
    try:
        for stale in cache.glob(".spark-classes-*.tmp"):
            if time.time() - stale.stat().st_mtime > 600:  # older than any dump still being written
                stale.unlink(missing_ok=True)
    except OSError:
        pass


def is_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands the gateway to Python through this variable.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def tune_for_input(spark: SparkSession, input_bytes: int) -> int:
    """Scale shuffle partitions to the data: one per ~64 MiB, at least the cores, at most 200."""
    cores = spark.sparkContext.defaultParallelism
    partitions = max(cores, min(200, math.ceil(input_bytes / BYTES_PER_PARTITION)))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions
