"""`cdc status`: every stage's checkpoint, what waits between stages, lag, and the binlog retention runway."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, mysql_options, settings_from
from cdc.durations import human_duration
from cdc.errors import CdcError
from cdc.escapes import json_safe
from cdc.pipeline.failures import iso_time
from cdc.pipeline.status import DEFAULT_MIN_RUNWAY_HOURS, StageView, StatusReport
from cdc.pipeline.watch import DEFAULT_WATCH_INTERVAL, StatusOptions, publish_status, watch_status
from cdc.signals import stop_on_signals

_WATCH = "Watch and metrics"


@mysql_options
def status(
    offline: Annotated[bool, typer.Option("--offline", help="Local state only; do not connect to the server.")] = False,
    min_runway_hours: Annotated[float, typer.Option(
        "--min-runway-hours", help="Exit 8 when the binlog the pipeline needs is purged sooner than this.")]
    = DEFAULT_MIN_RUNWAY_HOURS,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every --interval until Ctrl-C (exit 130) or SIGTERM (143): a live view at a terminal, else one line (with --json one JSON object) per refresh.", rich_help_panel=_WATCH)] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between refreshes with --watch.", rich_help_panel=_WATCH)] = DEFAULT_WATCH_INTERVAL,
    metrics_file: Annotated[Optional[Path], typer.Option("--metrics-file", help="Also write the figures in Prometheus' text format to this file (e.g. node-exporter's textfile directory, NAME.prom), replaced atomically; with --watch at every refresh.", rich_help_panel=_WATCH)] = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Show every stage's position, lag, rows/s and last error, the backlog between stages and the binlog runway."""
    settings = settings_from(config, state_dir, mysql_flags)
    options = StatusOptions(offline, min_runway_hours, metrics_file, interval)
    if watch:
        with stop_on_signals() as stop, _watch_view(as_json, stop) as view:
            watch_status(settings, options, stop=stop, on_report=view.report, on_error=view.error)
        raise typer.Exit(int(stop.exit_code))  # no end of its own: 130 after Ctrl-C (or a closed pipe), 143 after SIGTERM
    report = publish_status(settings, options)
    if report.server_error is not None:
        raise report.server_error
    if as_json:
        ui.print_json(report.to_dict())
    else:
        _render(report)
    raise typer.Exit(int(report.exit_code))


def _render(report: StatusReport) -> None:
    ui.sized(ui.out).print(_table(report))
    for line in _summary(report):
        ui.out.print(line)
    for note in report.notes:
        ui.note(note)


def _table(report: StatusReport) -> Any:
    from rich.table import Table

    grid = Table(title=f"cdc status ({ui.escape(report.state_dir)})", expand=False)
    for column in ("stage", "state", "at", "lag", "waiting", "rows/s", "detail"):
        # Folding long positions and details keeps the stage names whole in 80 columns (a pipe, a cron mail).
        grid.add_column(column, overflow="fold", no_wrap=column in ("stage", "state", "lag", "rows/s"))
    for s in report.stages:
        state = "fail" if s.last_error else "ok" if s.ran else "skip"
        grid.add_row(ui.escape(s.stage), ui.status_text(state), ui.escape(s.at or "-"), _seconds(s.lag_seconds),
                     ui.escape(_pending(s, report)), _rate(s.rows_per_second), ui.escape(s.detail))
    return grid


def _summary(report: StatusReport) -> list[str]:
    """The lines under the table: lag, server, runway, and each stage's standing error."""
    lag = report.lag
    behind = "" if lag.bytes is None else f", {lag.bytes:,} bytes in {lag.files} binlog file(s) behind"
    seconds = "unknown" if lag.seconds is None else human_duration(lag.seconds)
    lines = [f"lag: {seconds} ({ui.escape(lag.seconds_source)}){behind}"]
    if report.server is not None:
        lines.append(f"server: {ui.escape(report.server.describe)} at {ui.escape(report.server.file)}:{report.server.pos}")
    if report.server_error is not None:
        lines.append(f"server: [bold red]not reachable[/] - {ui.escape(report.server_error.message)}")
    if report.runway is not None:
        lines.append(_runway_line(report))
    if report.kept:
        lines.append(_kept_line(report.kept))
    for s in report.stages:
        if s.last_error is not None:
            e = s.last_error
            again = f", {e.failures} times in a row" if e.failures > 1 else ""
            hint = f"\n  fix: {ui.escape(e.hint)}" if e.hint else ""
            lines.append(f"[bold red]{ui.escape(s.stage)} failed[/] at {iso_time(e.failed_at)} (`{ui.escape(e.command)}`, "
                         f"exit {e.exit_code}{again}): {ui.escape(e.message)}{hint}")
    for flag in report.needs_resnapshot:
        lines.append(f"[yellow]{ui.escape(flag['table'])} needs a re-snapshot[/]: {ui.escape(flag['reason'])}"
                     f"\n  fix: {ui.escape(flag['repair'])}")
    return lines


def _kept_line(kept: dict[str, Any]) -> str:
    pruned = kept["pruned_through"]
    folded = kept["batches_folded_through"]
    return (f"kept: {kept['segments']:,} change-log segment(s) ("
            + (f"pruned through {ui.escape(pruned)}" if pruned else "never pruned")
            + f"), {kept['batches']:,} batch(es) ("
            + (f"folded through {ui.escape(folded)}" if folded else "none folded") + ")")


def _pending(stage: StageView, report: StatusReport) -> str:
    parts = []
    if stage.stage == "tail" and report.lag.bytes is not None:
        parts.append(f"{report.lag.bytes:,} B of binlog")
    if stage.pending_segments is not None:
        parts.append(f"{stage.pending_segments} seg / {stage.pending_bytes or 0:,} B")
    if stage.pending_batches is not None:
        parts.append(f"{stage.pending_batches} batch(es)")
    return ", ".join(parts) or "-"


def _seconds(value: Optional[float]) -> str:
    return "-" if value is None else human_duration(value)


def _rate(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _runway_line(report: StatusReport) -> str:
    runway = report.runway
    assert runway is not None
    needed = ui.escape(runway.needed_file)
    if runway.purged:
        return f"runway: [bold red]{needed} is already purged[/] - recover with `cdc resnapshot --all`"
    if runway.seconds is None:
        why = runway.unknown or f"binlogs never expire ({runway.retention_source})"
        return f"runway: {needed} - {ui.escape(why)}"
    style = "bold red" if report.runway_low else "green"
    return (f"runway: [{style}]{human_duration(runway.seconds)}[/] until {needed} is purged "
            f"({ui.escape(runway.retention_source)}; alert below {human_duration(report.min_runway_seconds)})")


class _WatchView:
    """--watch: a rich Live view at a terminal; else one line per refresh (--json: one JSON object) on stdout."""

    def __init__(self, as_json: bool, stop: threading.Event, live: Any = None) -> None:
        self.as_json, self.stop, self.live = as_json, stop, live

    def report(self, report: StatusReport) -> None:
        if self.as_json:
            self._print(json_safe(json.dumps(report.to_dict(), sort_keys=True, default=str, ensure_ascii=False)))
        elif self.live is None:
            self._print(status_line(report))
        else:
            from rich.console import Group

            self.live.update(Group(_table(report), *_summary(report), *(f"[dim]{ui.escape(n)}[/]" for n in report.notes),
                                   f"[dim]{iso_time(report.generated_at)} - Ctrl-C to stop[/]"), refresh=True)

    def error(self, error: CdcError) -> None:
        if self.as_json:
            self._print(json.dumps({"error": error.message, "hint": error.hint, "exit_code": int(error.exit_code)}))
        elif self.live is None:
            self._print(f"error (exit {int(error.exit_code)}): {_one_line(str(error))}")
        else:
            self.live.update(f"[bold red]error:[/] {ui.escape(str(error))}\n[dim]retrying - Ctrl-C to stop[/]",
                             refresh=True)


    def _print(self, line: str) -> None:
        """One whole line on stdout (not through rich, whose console folds at 80 columns without a terminal)."""
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`| head -5`): the watch stops as if told to
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
            self.stop.set()


@contextmanager
def _watch_view(as_json: bool, stop: threading.Event) -> Iterator[_WatchView]:
    if as_json or not ui.out.is_terminal:
        yield _WatchView(as_json, stop)
        return
    from rich.live import Live

    with Live(console=ui.out, auto_refresh=False, transient=False) as live:
        yield _WatchView(as_json, stop, live)


def status_line(report: StatusReport) -> str:
    """One line per refresh for logs and pipes: `key=value` per stage that has run, then the runway and errors."""
    parts = [iso_time(report.generated_at)]
    for s in report.stages:
        if not s.ran and s.last_error is None:
            continue
        fields = [s.stage, f"at={s.at or '-'}", f"lag={_seconds(s.lag_seconds).replace(' ', '')}"]
        if s.stage == "tail" and report.lag.bytes is not None:
            fields.append(f"binlog_behind={report.lag.bytes}B/{report.lag.files}files")
        if s.pending_segments is not None:
            fields.append(f"pending={s.pending_segments}seg/{s.pending_bytes or 0}B")
        if s.pending_batches is not None:
            fields.append(f"batches={s.pending_batches}")
        fields.append(f"rows/s={_rate(s.rows_per_second).replace(',', '')}")
        if s.last_error is not None:
            fields.append(f"FAILED exit={s.last_error.exit_code} at={iso_time(s.last_error.failed_at)} "
                          f"error={_one_line(s.last_error.message)!r}")
        parts.append(" ".join(fields))
    if len(parts) == 1:
        parts.append("no stage has run")
    if report.runway is not None:
        r = report.runway
        runway = "purged" if r.purged else "unknown" if r.unknown else "never" if r.seconds is None else \
            human_duration(r.seconds).replace(" ", "")
        parts.append(f"runway={runway}{' LOW' if report.runway_low else ''}")
    if report.server_error is not None:
        parts.append(f"server=unreachable error={_one_line(report.server_error.message)!r}")
    return " | ".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())
