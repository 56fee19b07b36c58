"""`cdc status`: every stage's checkpoint, what waits between stages, lag, and the binlog retention runway."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from typing import Annotated

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, mysql_options, settings_from
from cdc.durations import human_duration
from cdc.pipeline.status import DEFAULT_MIN_RUNWAY_HOURS, StageView, StatusReport, collect_status


@mysql_options
def status(
    offline: Annotated[bool, typer.Option("--offline", help="Local state only; do not connect to the server.")] = False,
    min_runway_hours: Annotated[float, typer.Option(
        "--min-runway-hours", help="Exit 8 when the binlog the pipeline needs is purged sooner than this.")]
    = DEFAULT_MIN_RUNWAY_HOURS,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Show every stage's checkpoint, the backlog between stages, the lag and the retention runway."""
    settings = settings_from(config, state_dir, mysql_flags)
    report = collect_status(settings, offline=offline, min_runway_hours=min_runway_hours)
    if as_json:
        ui.print_json(report.to_dict())
    else:
        _render(report)
    raise typer.Exit(int(report.exit_code))


def _render(report: StatusReport) -> None:
    rows = [(s.stage, "ok" if s.ran else "skip", s.at or "-", _pending(s), s.detail) for s in report.stages]
    ui.table(f"cdc status ({report.state_dir})", ["stage", "state", "at", "waiting", "detail"], rows, status_column=1)
    lag = report.lag
    behind = "" if lag.bytes is None else f", {lag.bytes:,} bytes in {lag.files} binlog file(s) behind"
    seconds = "unknown" if lag.seconds is None else human_duration(lag.seconds)
    ui.out.print(f"lag: {seconds} ({ui.escape(lag.seconds_source)}){behind}")
    if report.server is not None:
        ui.out.print(f"server: {ui.escape(report.server.describe)} at {ui.escape(report.server.file)}:{report.server.pos}")
    if report.runway is not None:
        ui.out.print(_runway_line(report))
    for note in report.notes:
        ui.note(note)


def _pending(stage: StageView) -> str:
    parts = []
    if stage.pending_segments is not None:
        parts.append(f"{stage.pending_segments} seg / {stage.pending_bytes or 0:,} B")
    if stage.pending_batches is not None:
        parts.append(f"{stage.pending_batches} batch(es)")
    return ", ".join(parts) or "-"


def _runway_line(report: StatusReport) -> str:
    runway = report.runway
    assert runway is not None
    needed = ui.escape(runway.needed_file)
    if runway.purged:
        return f"runway: [bold red]{needed} is already purged[/] - re-snapshot needed"
    if runway.seconds is None:
        why = runway.unknown or f"binlogs never expire ({runway.retention_source})"
        return f"runway: {needed} - {ui.escape(why)}"
    style = "bold red" if report.runway_low else "green"
    return (f"runway: [{style}]{human_duration(runway.seconds)}[/] until {needed} is purged "
            f"({ui.escape(runway.retention_source)}; alert below {human_duration(report.min_runway_seconds)})")
