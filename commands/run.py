"""`cdc run`: snapshot (first run only), tail, ship, spark-merge, snowflake-apply, chained."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Optional

import typer

from cdc.capture import StartRequest
from cdc.commands import logs, ui
from cdc.commands.logs import StatusIntervalOpt, log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, mysql_options, settings_from
from cdc.errors import ExitCode
from cdc.pipeline.run import STAGES, RunOptions, RunSummary, StageResult, run_pipeline
from cdc.pipeline.run_stages import NOTHING, SKIPPED, StageProgress
from cdc.signals import stop_on_signals

_CHAIN, _START = "Chain", "Start (tail's first run, instead of a snapshot)"
StagesOpt = Annotated[Optional[list[str]], typer.Option(
    "--stages", help=f"Only these stages (comma-separated or repeated): {', '.join(STAGES)}; ship, snowflake.",
    rich_help_panel=_CHAIN)]
SkipOpt = Annotated[Optional[list[str]], typer.Option("--skip-stage", help="Leave this stage out (repeatable).",
                                                      rich_help_panel=_CHAIN)]


@log_options
@mysql_options
def run(
    follow: Annotated[bool, typer.Option("--follow/--until-now", help="Tail continuously and cycle the other "
                                         "stages until SIGTERM/Ctrl-C, or bring every stage up to what is current "
                                         "at start and exit.")] = False,
    stages: StagesOpt = None,
    skip_stage: SkipOpt = None,
    no_snapshot: Annotated[bool, typer.Option("--no-snapshot", help="Never snapshot; tail needs a checkpoint or a "
                                              "start option.", rich_help_panel=_CHAIN)] = False,
    start_position: Annotated[Optional[str], typer.Option(
        "--start-position", help="FILE:POS at a transaction boundary.", rich_help_panel=_START)] = None,
    start_gtid: Annotated[Optional[str], typer.Option(
        "--start-gtid", help="Start after these MariaDB GTIDs.", rich_help_panel=_START)] = None,
    from_now: Annotated[bool, typer.Option(
        "--from-now", help="Start at the server's current position.", rich_help_panel=_START)] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="--follow: the longest wait after a cycle "
                                                 "when nothing new was sealed (a segment sealed ends it).")] = 1.0,
    allow_no_pk: Annotated[bool, typer.Option("--allow-no-pk", help="Snapshot tables without a primary key too "
                                              "(replicated as multisets of whole rows).", rich_help_panel=_CHAIN)]
    = False,
    status_interval: StatusIntervalOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, Any],
) -> None:
    """Run the stages in order (snapshot, tail, ship, spark-merge, snowflake-apply) once or continuously."""
    settings = settings_from(config, state_dir, mysql_flags, **{"log.status_interval": status_interval})
    options = RunOptions(follow, tuple(stages or ()), tuple(skip_stage or ()), not no_snapshot,
                         StartRequest(start_position, start_gtid, from_now), poll_interval, allow_no_pk)
    with stop_on_signals() as stop, _view(as_json, settings.log.status_seconds()) as view:
        summary = run_pipeline(settings, options, stop=stop, on_progress=view.progress, on_stage=view.stage,
                               on_cycle=view.cycle)
    _render(summary, as_json)
    if not summary.complete and not follow:
        ui.note("stopped before the chain caught up; state is consistent, rerun `cdc run` to continue")
        raise typer.Exit(int(stop.exit_code))
    raise typer.Exit(int(ExitCode.OK))


class _View:
    """JSON lines (--json), a live table at a TTY, else a log line per stage that did something and a status
    line every `status_interval` seconds."""

    def __init__(self, as_json: bool, live: Any = None, status_interval: float = 0.0) -> None:
        self.as_json, self.live = as_json, live
        self.rows: dict[str, list[str]] = {}
        self.shown = 0.0
        self.status = _RunStatus(status_interval if live is None else 0.0)
        # --follow: tail's progress comes from its thread (cdc.pipeline.tail_beside) while a later stage reports.
        self._lock = threading.Lock()

    def progress(self, p: StageProgress) -> None:
        with self._lock:
            self._progress(p)

    def stage(self, r: StageResult) -> None:
        with self._lock:
            self._stage(r)

    def _progress(self, p: StageProgress) -> None:
        self.status.progress(p)
        if self.live is None:
            return
        rate = "-" if p.rate is None else f"{p.rate:,.0f}/s"
        self.rows[p.stage] = ["running", p.reached or "-", f"{p.count:,}", rate, _lag(p.lag_seconds), "-"]
        if time.monotonic() - self.shown >= 0.25:  # progress comes per event; redraw a few times a second
            self._draw()

    def _stage(self, r: StageResult) -> None:
        self.status.stage(r)
        if self.as_json:
            ui.print_json_line(r.to_dict())
        elif self.live is None:
            fields = {"stage": r.stage, "cycle": r.cycle, "status": r.status, "position": r.reached, "count": r.count,
                      "unit": r.unit, "seconds": round(r.seconds, 3), "lag_seconds": r.lag_seconds}
            if r.status in (NOTHING, SKIPPED):  # an idle --follow cycle says so every second: for debug only
                logs.command_log().debug(_line(r), extra=fields)
            else:
                ui.note(_line(r), **fields)
        else:
            done = r.error is None  # a failure's message follows the table, once
            self.rows[r.stage] = [r.status, r.reached or "-", f"{r.count:,} {r.unit}" if done else "-",
                                  f"{r.rate:,.0f}/s" if done else "-", _lag(r.lag_seconds), f"{r.seconds:,.1f}s"]
            self._draw()

    def cycle(self, summary: RunSummary) -> None:
        with self._lock:
            self._cycle(summary)

    def _cycle(self, summary: RunSummary) -> None:
        self.status.cycle(summary)
        if self.as_json and summary.follow:
            ui.print_json_line({"event": "cycle", "cycle": summary.cycles, "seconds": round(summary.seconds, 3),
                                "totals": dict(summary.totals)})

    def _draw(self) -> None:
        from rich.table import Table

        grid = Table(title="cdc run", expand=False)
        for column in ("stage", "status", "reached", "count", "rate", "lag", "time"):
            grid.add_column(column, overflow="fold")
        for stage, cells in self.rows.items():
            grid.add_row(ui.escape(stage), *(ui.escape(c) for c in cells))
        self.live.update(grid, refresh=True)
        self.shown = time.monotonic()


class _RunStatus:
    """A status log record every `interval` seconds (0: never): tail's position, lag and rows/s, each stage's reach."""

    def __init__(self, interval: float) -> None:
        self.every = logs.Every(interval)
        self.every.last = self.every.clock()  # the first after one interval: at the start there is nothing to say
        self.cycles = 0
        self.current: Optional[str] = None  # the stage running now
        self.reached: dict[str, Optional[str]] = {}
        self.position: Optional[str] = None
        self.lag: Optional[float] = None
        self.rows_done, self.rows_running = 0, 0  # tail's rows: finished stage runs, the one running
        self.rows_at, self.at = 0, time.monotonic()

    def progress(self, p: StageProgress) -> None:
        self.current = p.stage
        self.reached[p.stage] = p.reached
        if p.stage == "tail":
            self.position, self.rows_running = p.reached, p.count
            self.lag = p.lag_seconds if p.lag_seconds is not None else self.lag
        self._maybe()

    def stage(self, r: StageResult) -> None:
        self.current, self.cycles = None, r.cycle
        if r.reached:
            self.reached[r.stage] = r.reached
        if r.stage == "tail":
            self.rows_done, self.rows_running = self.rows_done + r.count, 0
            self.position = r.reached or self.position
            self.lag = r.lag_seconds if r.lag_seconds is not None else self.lag
        self._maybe()

    def cycle(self, summary: RunSummary) -> None:
        self.cycles = summary.cycles
        self._maybe()

    def _maybe(self) -> None:
        if not self.every.due():
            return
        now, rows = time.monotonic(), self.rows_done + self.rows_running
        rate = (rows - self.rows_at) / (now - self.at) if now > self.at else 0.0
        self.rows_at, self.at = rows, now
        where = ", ".join(f"{stage} at {at}" for stage, at in self.reached.items() if at and stage != "tail")
        logs.command_log().info(
            f"run cycle {self.cycles}: tail at {self.position or '-'}, lag {_lag(self.lag)}, {rate:,.1f} rows/s; "
            f"{rows:,} rows so far" + (f"; {where}" if where else "") + (f"; running {self.current}" if self.current else ""),
            extra={"stage": self.current or "run", "cycle": self.cycles, "position": self.position,
                   "lag_seconds": self.lag, "rows": rows, "rows_per_second": round(rate, 1), "reached": dict(self.reached)})


@contextmanager
def _view(as_json: bool, status_interval: float) -> Iterator[_View]:
    if as_json or not logs.live():
        yield _View(as_json, status_interval=status_interval)
        return
    from rich.live import Live

    with Live(console=ui.err, refresh_per_second=4) as live:
        yield _View(as_json, live)


def _lag(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds:,.0f}s"


def _line(r: StageResult) -> str:
    if r.error is not None:
        return f"[cycle {r.cycle}] {r.stage}: {r.status} after {r.seconds:,.1f}s"
    where = f" at {r.reached}" if r.reached else ""
    return f"[cycle {r.cycle}] {r.stage}: {r.status}{where}; {r.count:,} {r.unit} in {r.seconds:,.1f}s"


def _render(summary: RunSummary, as_json: bool) -> None:
    if as_json:
        ui.print_json_line(summary.to_dict())
        return
    totals = ", ".join(f"{stage} {count:,}" for stage, count in summary.totals.items())
    ui.note(f"cdc run {summary.stopped} after {summary.cycles} cycle(s), {summary.seconds:,.1f}s: {totals}")
