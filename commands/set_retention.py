"""`cdc set-retention`: keep binlogs long enough for the pipeline's runway (RDS/Aurora, MySQL, MariaDB)."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from typing import Annotated, Any

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, DryRunOpt, JsonOpt, YesOpt, mysql_options, settings_from
from cdc.errors import UsageError
from cdc.source import retention

HoursOpt = Annotated[int, typer.Option("--hours", help="Keep binlogs this many hours (e.g. 72).", show_default=False)]


@mysql_options
def set_retention(
    hours: HoursOpt,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, Any],
) -> None:
    """Set how long the server keeps binlogs; shows the statement first, asks unless --yes."""
    settings = settings_from(config, None, mysql_flags)

    def confirm(plan: retention.RetentionPlan) -> bool:
        if not as_json:
            _show_plan(plan)
        if yes:
            return True
        if not ui.is_tty():
            raise UsageError("set-retention changes the server and there is no terminal to confirm at; "
                             "nothing was changed", hint="rerun with --yes (or --dry-run to only see the plan)")
        return _ask(plan)

    result = retention.change_retention(settings.mysql, hours, dry_run=dry_run, confirm=confirm)
    if as_json:
        ui.print_json(result.to_dict())
    elif dry_run:
        _show_plan(result.plan)
        ui.note("dry run: nothing changed")
    elif result.after is not None:
        ui.note(f"binlog retention is now {result.after.describe()}")
    if not result.applied and not dry_run:
        raise typer.Abort()


def _show_plan(plan: retention.RetentionPlan) -> None:
    rows = [("server", f"{plan.server.flavour} {plan.server.version}"), ("current", plan.current.describe()),
            ("requested", f"{plan.hours}h"), ("statement", plan.statement), *(("note", n) for n in plan.notes)]
    ui.table("set-retention plan", ["", ""], rows)


def _ask(plan: retention.RetentionPlan) -> bool:
    import questionary

    answer = questionary.confirm(f"Run `{plan.statement}`?", default=False).ask()
    if answer is None:  # Ctrl-C at the prompt
        raise typer.Abort()
    return bool(answer)
