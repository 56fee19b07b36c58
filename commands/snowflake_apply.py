"""`cdc snowflake-apply`: MERGE each new spark-merge batch into Snowflake, exactly once."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cdc.commands import logs, ui
from cdc.commands.logs import log_options
from cdc.commands.options import (
    ConfigOpt,
    JsonOpt,
    SfConnectionOpt,
    SfDatabaseOpt,
    SfRoleOpt,
    SfSchemaOpt,
    StateDirOpt,
    runs_stage,
    settings_from,
)
from cdc.errors import ExitCode
from cdc.signals import stop_on_signals
from cdc.snowflake import apply as sf_apply
from cdc.snowflake.connect import connect, connection_params, secret_values
from cdc.state import StateDir

_SF = "Snowflake"


@log_options
def snowflake_apply(
    connection_name: SfConnectionOpt = None,
    database: SfDatabaseOpt = None,
    schema: SfSchemaOpt = None,
    warehouse: Annotated[Optional[str], typer.Option("--warehouse", help="Warehouse.", rich_help_panel=_SF)] = None,
    role: SfRoleOpt = None,
    follow: Annotated[bool, typer.Option("--follow/--until-now", help="Keep applying new batches (poll) until "
                                         "SIGTERM/Ctrl-C, or apply what is sealed and exit.")] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between polls with --follow.")] = 2.0,
    load_sessions: Annotated[Optional[int], typer.Option(
        "--load-sessions", help="Snowflake sessions that stage a batch's tables at once (PUT, TRUNCATE, COPY): this "
        "one and up to N-1 more (default 4; 1: one after the other; cdc.toml \\[snowflake] load_sessions).",
        rich_help_panel=_SF)] = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load new spark-merge batches into Snowflake and MERGE them, recording each batch once."""
    settings = settings_from(config, state_dir, **{
        "snowflake.connection": connection_name, "snowflake.database": database, "snowflake.schema": schema,
        "snowflake.warehouse": warehouse, "snowflake.role": role, "snowflake.load_sessions": load_sessions})
    logs.add_secrets(secret_values(connection_params(settings.snowflake)))  # connections.toml's too
    runs_stage(settings, "snowflake-apply", "cdc snowflake-apply")
    conn = connect(settings.snowflake)
    try:
        with stop_on_signals() as stop:
            summary = sf_apply.run(conn, StateDir(settings.state_dir), follow=follow, poll_interval=poll_interval,
                                   stop=stop, on_batch=None if as_json else _progress,
                                   open_connection=lambda: connect(settings.snowflake),
                                   load_sessions=settings.snowflake.load_sessions)
    finally:
        conn.close()
    _render(summary, as_json)
    raise typer.Exit(int(stop.exit_code if summary.stopped and not follow else ExitCode.OK))


def _progress(batch_id: str, counts: dict[str, sf_apply.Counts]) -> None:
    detail = ", ".join(f"{table} +{c.inserted} ~{c.updated} -{c.deleted}" for table, c in sorted(counts.items()))
    ui.note(f"applied {batch_id}: {detail or 'no tables'}", stage="snowflake-apply", position=batch_id,
            rows=sum(c.inserted + c.updated + c.deleted for c in counts.values()))


def _render(summary: sf_apply.Summary, as_json: bool) -> None:
    if as_json:
        ui.print_json(summary.to_dict())
        return
    ui.table("snowflake-apply", ["table", "inserted", "updated", "deleted"],
             [(t, c.inserted, c.updated, c.deleted) for t, c in sorted(summary.tables.items())])
    mode = "" if summary.transactional else " (engine without MERGE in transactions: idempotent replay mode)"
    ui.note(f"applied {len(summary.applied)} batch(es), {len(summary.skipped)} already applied; "
            f"last batch {summary.last_batch or '(none)'}{mode}")
