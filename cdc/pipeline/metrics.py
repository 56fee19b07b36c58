"""`cdc status --metrics-file`: the status figures in Prometheus' text exposition format, for node-exporter's
textfile collector (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).

- Every family has its HELP and TYPE lines, then its samples; a family whose value is unknown (no server with
  --offline, a rate before the second sample) has no sample rather than a guessed one. No timestamps: the
  textfile collector refuses them. A runway without age-based expiry is +Inf.
- Every sample carries a `state_dir` label (the absolute path), so two pipelines on one host, each writing its
  own file into the collector's directory, never expose the same series twice (node-exporter fails the scrape
  on a duplicate). Label values are escaped as the format says: backslash, double quote and newline.
- The file is replaced atomically (temp file in the same directory, rename): the collector reads the old file or
  the new one, never half of one. It is readable by all (0644), the collector usually runs as its own user; the
  temp file's name starts with a dot and does not end in .prom, so the collector never reads it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cdc.errors import CdcError, UsageError
from cdc.pipeline.status import StatusReport
from cdc.state import is_disk_full, write_bytes_atomic

METRICS_MODE = 0o644
Labels = dict[str, str]


@dataclass
class Family:
    name: str
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)
    kind: str = "gauge"

    def add(self, labels: Labels, value: float | bool | None) -> None:
        if value is not None:
            self.samples.append((labels, float(value)))


def metrics_text(report: StatusReport) -> str:
    """The report's figures as Prometheus text (one family per figure, by stage where it is a stage's)."""
    base = {"state_dir": _absolute(report.state_dir)}
    f = _families()
    f["cdc_status_up"].add(base, 1)
    f["cdc_status_timestamp_seconds"].add(base, report.generated_at)
    if not report.offline:
        f["cdc_server_up"].add(base, report.server_error is None)
    for view in report.stages:
        labels = {**base, "stage": view.stage}
        f["cdc_stage_has_checkpoint"].add(labels, view.ran)
        f["cdc_stage_last_success_timestamp_seconds"].add(labels, view.checkpoint_at)
        f["cdc_stage_lag_seconds"].add(labels, view.lag_seconds)
        f["cdc_rows_per_second"].add(labels, view.rows_per_second)
        f["cdc_pending_segments"].add(labels, view.pending_segments)
        f["cdc_pending_bytes"].add(labels, view.pending_bytes)
        f["cdc_pending_batches"].add(labels, view.pending_batches)
        failure = view.last_error
        f["cdc_stage_failing"].add(labels, failure is not None)
        if failure is not None:
            f["cdc_stage_last_error_timestamp_seconds"].add(labels, failure.failed_at)
            f["cdc_stage_last_error_exit_code"].add(labels, failure.exit_code)
            f["cdc_stage_consecutive_failures"].add(labels, failure.failures)
    f["cdc_binlog_bytes_behind"].add(base, report.lag.bytes)
    f["cdc_binlog_files_behind"].add(base, report.lag.files)
    f["cdc_retention_runway_min_seconds"].add(base, report.min_runway_seconds)
    if report.runway is not None:
        runway = report.runway
        never = runway.seconds is None and runway.unknown is None and not runway.purged
        f["cdc_retention_runway_seconds"].add(base, math.inf if never else runway.seconds)
        f["cdc_retention_runway_low"].add(base, report.runway_low or runway.purged)
    return render(f.values())


def failure_metrics_text(state_dir: str, error: CdcError, now: float) -> str:
    """What the metrics file says when the state directory could not be read (a corrupt checkpoint...)."""
    base = {"state_dir": _absolute(state_dir)}
    families = _families()
    families["cdc_status_up"].add(base, 0)
    families["cdc_status_timestamp_seconds"].add(base, now)
    families["cdc_status_error_exit_code"].add(base, int(error.exit_code))
    return render(families.values())


def _families() -> dict[str, Family]:
    every = [
        Family("cdc_status_up", "1 if cdc status could read the state directory, 0 if not (its error: "
               "cdc_status_error_exit_code and the status command's stderr)."),
        Family("cdc_status_error_exit_code", "Exit code of the error that kept cdc status from reading the state "
               "directory (docs/exit-codes.md)."),
        Family("cdc_status_timestamp_seconds", "When cdc status took these figures (unix time)."),
        Family("cdc_server_up", "1 if the MySQL server answered cdc status, 0 if it could not be asked "
               "(absent with --offline)."),
        Family("cdc_stage_has_checkpoint", "1 if the stage has a checkpoint in this state directory (it has run here)."),
        Family("cdc_stage_last_success_timestamp_seconds", "When the stage last committed a unit of work: the mtime "
               "of its checkpoint (unix time)."),
        Family("cdc_stage_lag_seconds", "Age of the oldest change the stage has not processed: tail, the oldest "
               "transaction it has not read; later stages, the oldest change they have not consumed, at least tail's."),
        Family("cdc_rows_per_second", "Change lines the stage processed per second over the last minute "
               "(docs/guide.md, cdc status)."),
        Family("cdc_pending_segments", "Sealed change-log segments the stage has not consumed yet."),
        Family("cdc_pending_bytes", "Bytes of sealed change-log segments the stage has not consumed yet."),
        Family("cdc_pending_batches", "Merged batches snowflake-apply has not applied yet."),
        Family("cdc_stage_failing", "1 if the stage's last run failed and it has committed no work since."),
        Family("cdc_stage_last_error_timestamp_seconds", "When the stage's last run failed (unix time); present "
               "while the error stands."),
        Family("cdc_stage_last_error_exit_code", "Exit code of the stage's last failed run (docs/exit-codes.md)."),
        Family("cdc_stage_consecutive_failures", "Failed runs of the stage since it last committed work or succeeded."),
        Family("cdc_binlog_bytes_behind", "Bytes of binlog between tail's position and the server's current end."),
        Family("cdc_binlog_files_behind", "Binlog files between tail's file and the server's current file."),
        Family("cdc_retention_runway_seconds", "Seconds until the server purges the oldest binlog file the pipeline "
               "still needs (+Inf: binlogs never expire by age; 0: already purged)."),
        Family("cdc_retention_runway_min_seconds", "The runway below which cdc status alerts (--min-runway-hours)."),
        Family("cdc_retention_runway_low", "1 if the runway is below cdc_retention_runway_min_seconds or the needed "
               "binlog is already purged."),
    ]
    return {family.name: family for family in every}


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for family in families:
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in family.samples:
            body = ",".join(f'{name}="{escape_label(text)}"' for name, text in labels.items())
            lines.append(f"{family.name}{{{body}}} {format_value(value)}" if body else f"{family.name} {format_value(value)}")
    return "\n".join(lines) + "\n"


def escape_label(value: str) -> str:
    """A label value as the text format writes it: \\ -> \\\\, " -> \\", newline -> \\n."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: \\ -> \\\\, newline -> \\n (quotes stay)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _absolute(state_dir: str) -> str:
    return os.path.abspath(state_dir)


def check_metrics_path(path: Path) -> None:
    """Refuse, before any work, a metrics file that could never be written where it is asked."""
    if path.is_dir():
        raise UsageError(f"--metrics-file {path} is a directory", hint="name the file, e.g. DIR/cdc.prom")
    if not path.parent.is_dir():
        raise UsageError(f"--metrics-file {path}: directory {path.parent} does not exist",
                         hint="point it at node-exporter's --collector.textfile.directory (it must exist)")


def write_metrics(path: Path, text: str) -> None:
    """Replace the metrics file atomically (temp file in its directory, fsync, rename), readable by all."""
    try:
        write_bytes_atomic(path, text.encode("utf-8"), mode=METRICS_MODE)
    except OSError as exc:
        what = "no space left on device" if is_disk_full(exc) else (exc.strerror or str(exc))
        raise CdcError(f"cannot write the metrics file {path}: {what}",
                       hint=f"check {path.parent}: it must exist and be writable by this user") from exc
