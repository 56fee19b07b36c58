"""`cdc check-binlog`: is the server ready for row-based change capture? Every check with its fix."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from typing import Annotated, Any, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, mysql_options, settings_from
from cdc.errors import ExitCode
from cdc.source import preflight

DatabasesOpt = Annotated[Optional[list[str]], typer.Option(
    "--databases", help="Schema to replicate (grants, primary keys); repeatable or comma-separated.")]
MinRetentionOpt = Annotated[float, typer.Option(
    "--min-retention-hours", help="Binlog retention below this fails (it is the pipeline's runway).")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 4).")]


@mysql_options
def check_binlog(
    databases: DatabasesOpt = None,
    min_retention_hours: MinRetentionOpt = 24,
    strict: StrictOpt = False,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, Any],
) -> None:
    """Check that the server is ready for row-based change capture (read-only; changes nothing)."""
    names = tuple(part.strip() for item in databases or () for part in item.split(",") if part.strip())
    settings = settings_from(config, state_dir, mysql_flags, **{"mysql.databases": names})
    report = preflight.run(settings, min_retention_hours=min_retention_hours, strict=strict)
    if as_json:
        ui.print_json(report.to_dict())
    else:
        server = report.server
        ui.table(f"{server['flavour']} {server['version']} at {server['address']} as {server['user']}",
                 ["check", "status", "value", "expected", "fix"],
                 [(c.name, c.status, c.value, c.expected, c.fix) for c in report.checks], status_column=1)
        if report.tls is not None:
            ui.note(f"connection: {report.tls.describe()}")
        if report.cascades:
            ui.table("cascading foreign keys", ["child", "columns", "parent", "on delete", "on update", "cdc"],
                     [(f"{k['db']}.{k['table']}", ", ".join(k["columns"]), f"{k['ref_db']}.{k['ref_table']}",
                       k["on_delete"], k["on_update"], k["handling"]) for k in report.cascades])
        verdict = "ready" if report.ok else "not ready" + (" (--strict)" if strict and not report.count("fail") else "")
        ui.note(f"{report.count('fail')} failed, {report.count('warn')} warning(s): {verdict}")
    raise typer.Exit(int(ExitCode.OK if report.ok else ExitCode.PRECONDITION))
