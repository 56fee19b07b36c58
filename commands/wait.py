"""`cdc wait`: a gate for runbooks: block until a stage has caught up, or exit 9 after --timeout."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from typing import Annotated, Optional

import typer

from cdc.commands import logs, ui
from cdc.commands.logs import StatusIntervalOpt, log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, choices, mysql_options, settings_from
from cdc.durations import parse_duration
from cdc.errors import ExitCode
from cdc.pipeline.wait import WAIT_STAGES, Gate, Observation, parse_position, wait_for

_GATE = "Gate (exactly one)"


@log_options
@mysql_options
def wait(
    lag_below: Annotated[Optional[str], typer.Option(
        "--lag-below", help="Wait until the stage lags the server by less than this (5s, 500ms, 2m).",
        rich_help_panel=_GATE)] = None,
    position: Annotated[Optional[str], typer.Option(
        "--position", help="FILE:POS: wait until the stage has consumed everything before it.",
        rich_help_panel=_GATE)] = None,
    gtid: Annotated[Optional[str], typer.Option(
        "--gtid", help="GTID set (MariaDB 0-1-57 or MySQL uuid:1-57): wait until the stage has consumed it.",
        rich_help_panel=_GATE)] = None,
    stage: Annotated[Optional[str], typer.Option(
        "--stage", help=f"{' | '.join(WAIT_STAGES)} (default: the furthest stage with a checkpoint).",
        autocompletion=choices(WAIT_STAGES))] = None,
    timeout: Annotated[Optional[str], typer.Option("--timeout", help="Give up (exit 9) after this long, e.g. 10m.")]
    = None,
    interval: Annotated[str, typer.Option("--interval", help="Time between polls.")] = "1s",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress notes on stderr.")] = False,
    status_interval: StatusIntervalOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Wait until a stage reaches a lag bound, a binlog position or a GTID set; exit 9 on --timeout."""
    gate = Gate(lag_below=None if lag_below is None else parse_duration(lag_below, "--lag-below"),
                position=None if position is None else parse_position(position), gtid=gtid)
    limit = None if timeout is None else parse_duration(timeout, "--timeout")
    every = parse_duration(interval, "--interval")
    settings = settings_from(config, state_dir, mysql_flags, **{"log.status_interval": status_interval})
    result = wait_for(settings, gate, stage=stage, timeout=limit, interval=every,
                      on_poll=None if quiet or as_json else _Notes(settings.log.status_seconds()).show)
    if as_json:
        ui.print_json(result.to_dict())
    else:
        ui.note(f"{result.stage} reached {result.gate} after {result.seconds:.1f}s: {result.detail}",
                stage=result.stage, state="reached", polls=result.polls, seconds=round(result.seconds, 3))
    raise typer.Exit(int(ExitCode.OK))


class _Notes:
    """A note on stderr when what keeps the gate closed changes (the stage, or the state: "tail behind",
    "segments pending"...), else one every `heartbeat` seconds: a wait can last hours, polled every second,
    and a lag or a position moves at nearly every poll."""

    def __init__(self, heartbeat: float) -> None:
        self.last: tuple[str, str] | None = None
        self.every = logs.Every(heartbeat)

    def show(self, observation: Observation) -> None:
        if observation.reached:
            return
        key = (observation.stage, observation.state)
        if key != self.last or self.every.due():
            self.every.last = self.every.clock()  # the heartbeat counts from the last note, whatever its cause
            ui.note(f"waiting for {observation.stage}: {observation.detail}", stage=observation.stage,
                    state=observation.state, detail=observation.detail)
        self.last = key
