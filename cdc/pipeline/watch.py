"""`cdc status` once or `--watch`: a report, and the metrics file written with the same figures each time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cdc.config import Settings
from cdc.errors import CdcError
from cdc.pipeline.metrics import check_metrics_path, failure_metrics_text, metrics_text, write_metrics
from cdc.pipeline.rates import RowRates
from cdc.pipeline.status import DEFAULT_MIN_RUNWAY_HOURS, StatusReport, collect_status

DEFAULT_WATCH_INTERVAL = 2.0


@dataclass(frozen=True)
class StatusOptions:
    offline: bool = False
    min_runway_hours: float = DEFAULT_MIN_RUNWAY_HOURS
    metrics_file: Path | None = None  # Prometheus text for node-exporter's textfile collector (cdc.pipeline.metrics)
    interval: float = DEFAULT_WATCH_INTERVAL  # --watch


def publish_status(settings: Settings, options: StatusOptions, rates: RowRates | None = None) -> StatusReport:
    """collect_status, then the metrics file (if asked) rewritten atomically with the same figures.

    When the state directory cannot be read, the metrics file still says so (cdc_status_up 0) before the error
    is raised: an alert must not keep reading the last good figures.
    """
    if options.metrics_file is not None:
        check_metrics_path(options.metrics_file)
    try:
        report = collect_status(settings, offline=options.offline, min_runway_hours=options.min_runway_hours,
                                rates=rates)
    except CdcError as exc:
        if options.metrics_file is not None:
            write_metrics(options.metrics_file, failure_metrics_text(settings.state_dir, exc, time.time()))
        raise
    if options.metrics_file is not None:
        write_metrics(options.metrics_file, metrics_text(report))
    return report


def watch_status(settings: Settings, options: StatusOptions, *, stop: threading.Event,
                 on_report: Callable[[StatusReport], None], on_error: Callable[[CdcError], None]) -> None:
    """publish_status every `options.interval` seconds until `stop` is set.

    An error in one round (a corrupt checkpoint being rewritten by hand, an unwritable metrics file) goes to
    on_error and the watch goes on: it is the operator's view of a pipeline that may be failing.
    """
    rates = RowRates()
    due = time.monotonic()
    while not stop.is_set():
        try:
            report = publish_status(settings, options, rates)
        except CdcError as exc:
            on_error(exc)
        else:
            on_report(report)
        due += options.interval
        if time.monotonic() > due:  # a round slower than the interval (a server timing out): no burst to catch up
            due = time.monotonic()
        stop.wait(max(due - time.monotonic(), 0.0))
