"""`cdc snowflake-bootstrap`: create the Snowflake objects the pipeline needs, from the MySQL schema."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

import sys
from typing import Annotated, Any, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import (
    ConfigOpt,
    DryRunOpt,
    JsonOpt,
    SfConnectionOpt,
    SfDatabaseOpt,
    SfRoleOpt,
    SfSchemaOpt,
    StateDirOpt,
    mysql_options,
    runs_stage,
    settings_from,
)
from cdc.errors import ExitCode
from cdc.escapes import visible
from cdc.masking import masked_history
from cdc.snowflake import bootstrap as sf_bootstrap
from cdc.snowflake.connect import connect
from cdc.source.connect import connection
from cdc.state import StateDir

_SF = "Snowflake"
_S3 = "S3 path (ship --to s3)"
TableOpt = Annotated[Optional[list[str]], typer.Option("--table", help="DB.TABLE to bootstrap (repeatable; default: "
                                                       "every table of the schema history).")]


@mysql_options
def snowflake_bootstrap(
    table: TableOpt = None,
    from_mysql: Annotated[bool, typer.Option("--from-mysql", help="Read information_schema instead of the schema "
                                             "history in the state directory.")] = False,
    connection_name: SfConnectionOpt = None,
    database: SfDatabaseOpt = None,
    schema: SfSchemaOpt = None,
    warehouse: Annotated[Optional[str], typer.Option("--warehouse", help="Warehouse for tasks / dynamic tables.",
                                                     rich_help_panel=_SF)] = None,
    role: SfRoleOpt = None,
    soft_delete: Annotated[bool, typer.Option("--soft-delete", help="Flag deleted rows (_CDC_DELETED) instead of "
                                              "deleting them.")] = False,
    history: Annotated[bool, typer.Option("--history", help="Also keep an SCD type 2 <TABLE>_HISTORY table.")] = False,
    decimal_overflow: Annotated[str, typer.Option("--decimal-overflow", help="DECIMAL wider than 38 digits: varchar "
                                                  "(exact text) | refuse.")] = "varchar",
    s3: Annotated[Optional[str], typer.Option("--s3", help="s3://bucket/prefix of `cdc ship --to s3`: add stage, "
                                              "pipes and apply objects.", rich_help_panel=_S3)] = None,
    role_arn: Annotated[Optional[str], typer.Option("--role-arn", help="IAM role for the storage integration.",
                                                    rich_help_panel=_S3)] = None,
    integration: Annotated[str, typer.Option("--integration", help="Storage integration name.",
                                             rich_help_panel=_S3)] = "CDC_S3",
    apply_mode: Annotated[str, typer.Option("--apply-mode", help="task | dynamic-table.", rich_help_panel=_S3)] = "task",
    dry_run: DryRunOpt = False,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, Any],
) -> None:
    """Create or extend Snowflake tables, stages, pipes and MERGE objects from the MySQL schema."""
    settings = settings_from(config, state_dir, mysql_flags, **{
        "snowflake.connection": connection_name, "snowflake.database": database, "snowflake.schema": schema,
        "snowflake.warehouse": warehouse, "snowflake.role": role})
    if not dry_run:  # a dry run changes nothing: its success says nothing of the stage
        runs_stage(settings, "snowflake-bootstrap", "cdc snowflake-bootstrap")
    options = sf_bootstrap.Options(
        schema=settings.snowflake.schema if schema else None, soft_delete=soft_delete, history=history, s3_url=s3,
        role_arn=role_arn or sf_bootstrap.Options.role_arn, integration=integration, apply_mode=apply_mode,
        warehouse=settings.snowflake.warehouse, decimal_overflow=decimal_overflow)
    if from_mysql:
        with connection(settings.mysql) as mysql:
            schemas = sf_bootstrap.schemas_from_mysql(mysql, settings.mysql, table or [])
    else:
        schemas = sf_bootstrap.schemas_from_history(masked_history(StateDir(settings.state_dir)), table or [])
    targets = sf_bootstrap.targets_for(schemas, options)
    conn = connect(settings.snowflake)
    try:
        plan = sf_bootstrap.run(conn, targets, options, dry_run=dry_run)
    finally:
        conn.close()
    _render(plan, dry_run=dry_run, as_json=as_json)
    raise typer.Exit(int(ExitCode.OK))


def _render(plan: sf_bootstrap.Plan, *, dry_run: bool, as_json: bool) -> None:
    if as_json:
        ui.print_json(plan.to_dict() | {"dry_run": dry_run})
        return
    if dry_run or plan.notes:
        print_sql(sf_bootstrap.render_script(plan))
    for note in plan.notes:
        ui.note(f"note: {note}")
    for drift in plan.type_drift:
        ui.note(f"warning: type changed, not altered: {drift}")
    verb = "would create" if dry_run else "created"
    ui.note(f"{verb} {len(plan.created)} table(s) {', '.join(plan.created)}; "
            f"{'would add' if dry_run else 'added'} {len(plan.added)} column(s) {', '.join(plan.added)}")


def print_sql(text: str) -> None:
    """SQL on stdout: syntax-highlighted at a terminal, plain text when piped (so it can be run as is)."""
    if ui.out.is_terminal:
        from rich.syntax import Syntax

        # At a terminal only: a name's ESC would act on it. Piped, the script stays exact (it runs as is).
        ui.out.print(Syntax(visible(text, newlines=True), "sql", word_wrap=True))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
