"""`cdc tail`: binlog -> local change log (sealed segments) + checkpoint."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Optional

import typer

from cdc.capture import Filters, Progress, StartRequest, TailOptions, TailSummary, run_tail
from cdc.capture.heap import keep_freed_heap
from cdc.commands import logs, ui
from cdc.commands.logs import StatusIntervalOpt, log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, complete_tables, mysql_options, runs_stage, settings_from
from cdc.errors import ExitCode
from cdc.signals import stop_on_signals

_START, _FILTERS = "Start", "Filters"
ListOpt = Optional[list[str]]


def _names(values: ListOpt) -> tuple[str, ...]:
    return tuple(part.strip() for item in values or () for part in item.split(",") if part.strip())


@log_options
@mysql_options
def tail(
    start_position: Annotated[Optional[str], typer.Option("--start-position", help="FILE:POS at a transaction boundary (first run only).", rich_help_panel=_START)] = None,
    start_gtid: Annotated[Optional[str], typer.Option("--start-gtid", help="Start after these MariaDB GTIDs (first run only).", rich_help_panel=_START)] = None,
    from_now: Annotated[bool, typer.Option("--from-now", help="Start at the server's current position (first run only).", rich_help_panel=_START)] = False,
    rebase: Annotated[bool, typer.Option("--rebase", help="After a failover: go on at a promoted replica from the GTIDs already captured (never the old file:pos).", rich_help_panel=_START)] = False,
    follow: Annotated[bool, typer.Option("--follow/--until-now", help="Stream until Ctrl-C/SIGTERM, or catch up to the position current at start and exit.")] = False,
    databases: Annotated[ListOpt, typer.Option("--databases", help="Databases to capture (globs; repeatable or comma-separated).", rich_help_panel=_FILTERS)] = None,
    tables: Annotated[ListOpt, typer.Option("--tables", help="DB.TABLE globs to capture.", rich_help_panel=_FILTERS, autocompletion=complete_tables)] = None,
    exclude_tables: Annotated[ListOpt, typer.Option("--exclude-tables", help="DB.TABLE globs to skip.", rich_help_panel=_FILTERS, autocompletion=complete_tables)] = None,
    exclude_columns: Annotated[ListOpt, typer.Option("--exclude-columns", help="DB.TABLE.COLUMN never written.", rich_help_panel=_FILTERS)] = None,
    hash_columns: Annotated[ListOpt, typer.Option("--hash-columns", help="DB.TABLE.COLUMN written as HMAC-SHA-256 hex (key: CDC_MYSQL_HASH_KEY or hash_key_file).", rich_help_panel=_FILTERS)] = None,
    flush_interval: Annotated[float, typer.Option("--flush-interval", help="Seal a segment at most this many seconds after a commit.")] = 0.5,
    segment_mib: Annotated[int, typer.Option("--segment-size", help="Seal a segment past this many MiB.")] = 64,
    read_timeout: Annotated[float, typer.Option("--read-timeout", help="Seconds of silence (no event, no heartbeat) before reconnecting.")] = 10.0,
    reconnect_timeout: Annotated[float, typer.Option("--reconnect-timeout", help="Give up after this many seconds without a working connection.")] = 60.0,
    to_stdout: Annotated[bool, typer.Option("--stdout", help="Also write the committed change lines to stdout.")] = False,
    decode_workers: Annotated[Optional[int], typer.Option("--decode-workers", min=0, help="Processes decoding rows beside the binlog reader (default: 0 with the C row decoder; without it 1 on a multi-core machine; 0 = decode in the tail process).")] = None,
    status_interval: StatusIntervalOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, Any],
) -> None:
    """Capture row changes from the binlog into the change log, then checkpoint."""
    settings = settings_from(config, state_dir, mysql_flags, **{
        "mysql.databases": _names(databases), "mysql.tables": _names(tables),
        "mysql.exclude_tables": _names(exclude_tables), "mysql.exclude_columns": _names(exclude_columns),
        "mysql.hash_columns": _names(hash_columns), "log.status_interval": status_interval})
    runs_stage(settings, "tail", "cdc tail")
    filters = Filters.from_settings(settings.mysql)
    options = TailOptions(StartRequest(start_position, start_gtid, from_now), follow, rebase, filters, flush_interval,
                          segment_mib * 2**20, heartbeat=min(1.0, read_timeout / 4), read_timeout=read_timeout,
                          reconnect_timeout=reconnect_timeout, decode_workers=decode_workers)
    # This process runs tail alone: its buffers may keep their pages (cdc.capture.heap). `cdc run` shares its
    # process with Spark's driver and the apply, and keeps malloc's defaults.
    keep_freed_heap()
    # Reconnects and the like are logged by the library (cdc.capture.tail): no on_note.
    with stop_on_signals() as stop, _progress(as_json, to_stdout, settings.log.status_seconds()) as on_progress:
        summary = run_tail(settings, options, should_stop=stop.is_set, on_progress=on_progress,
                           stdout=sys.stdout.buffer if to_stdout else None)
    _render(summary, as_json, to_stdout)
    # --follow ends on a signal by design; --until-now stopped before its target is incomplete (rerun to go on).
    interrupted = not follow and summary.stopped != "caught up"
    raise typer.Exit(int(stop.exit_code if interrupted else ExitCode.OK))


@contextmanager
def _progress(as_json: bool, to_stdout: bool, status_interval: float) -> Iterator[Optional[Callable[[Progress], None]]]:
    """A live status line at a TTY, else a status log record every `status_interval` seconds; with --json also
    JSON status lines (stdout) about every second."""
    last = [0.0]

    def throttled(render: Callable[[Progress], None]) -> Callable[[Progress], None]:
        def update(p: Progress) -> None:
            if time.monotonic() - last[0] >= 0.9:  # heartbeats come every second: do not skip every other one
                last[0] = time.monotonic()
                render(p)
        return update

    if as_json or not logs.live():
        renders: list[Callable[[Progress], None]] = [StatusLog(status_interval)]
        if as_json:  # one JSON object per line; with --stdout the change lines own stdout, so status goes to stderr
            stream = sys.stderr if to_stdout else sys.stdout
            renders.append(throttled(lambda p: ui.print_json_line({"status": p.__dict__}, stream)))

        def both(p: Progress) -> None:
            for render in renders:
                render(p)

        yield both
        return
    with ui.err.status("tail starting") as live:
        yield throttled(lambda p: live.update(ui.escape(_status(p))))


class StatusLog:
    """One log record every `interval` seconds (the first at once): position, lag, rows/s (0: never)."""

    def __init__(self, interval: float) -> None:
        self.every = logs.Every(interval)
        self.rows, self.at = 0, time.monotonic()

    def __call__(self, p: Progress) -> None:
        if not self.every.due():
            return
        now = time.monotonic()
        rate = (p.rows - self.rows) / (now - self.at) if now > self.at else 0.0
        self.rows, self.at = p.rows, now
        logs.command_log().info(
            f"tail at {p.position}, lag {_lag(p)}, {rate:,.1f} rows/s; {p.rows:,} rows, {p.transactions:,} transactions, "
            f"{p.segments} segments so far",
            extra={"stage": "tail", "position": p.position, "lag_seconds": p.lag_seconds, "lag_bytes": p.lag_bytes,
                   "rows": p.rows, "rows_per_second": round(rate, 1), "transactions": p.transactions,
                   "segments": p.segments, "events_per_second": round(p.events_per_second, 1)})


def _lag(p: Progress) -> str:
    lag = "?" if p.lag_seconds is None else f"{p.lag_seconds:,.0f}s"
    return lag if p.lag_bytes is None else f"{lag} / {p.lag_bytes:,} bytes"


def _status(p: Progress) -> str:
    lag = "?" if p.lag_seconds is None else f"{p.lag_seconds:,.0f}s"
    behind = "?" if p.lag_bytes is None else f"{p.lag_bytes:,} bytes"
    return (f"at {p.position}  {p.events_per_second:,.0f} events/s  {p.rows:,} rows  {p.transactions:,} txns  "
            f"{p.segments} segments  lag {lag} / {behind}")


def _render(summary: TailSummary, as_json: bool, to_stdout: bool) -> None:
    if as_json:  # the last JSON line (after any {"status": ...} lines): the run's summary
        ui.print_json_line(summary.to_dict(), sys.stderr if to_stdout else sys.stdout)
        return
    ui.note(f"tail {summary.stopped}: {summary.start} -> {summary.end} ({summary.origin}); {summary.transactions:,} "
            f"transactions, {summary.rows:,} rows in {summary.segments} segment(s), {summary.reconnects} reconnect(s), "
            f"{summary.seconds:,.1f}s", stage="tail", position=summary.end, rows=summary.rows,
            transactions=summary.transactions, segments=summary.segments, seconds=round(summary.seconds, 3),
            stopped=summary.stopped)
