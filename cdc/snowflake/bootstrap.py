"""`snowflake-bootstrap`: create (or extend) every Snowflake object the pipeline needs.

Idempotent by construction: tables are created only when missing, a missing column becomes
`ALTER TABLE ... ADD COLUMN`, shared objects use `CREATE ... IF NOT EXISTS`. Nothing is ever
`CREATE OR REPLACE`d, because a replaced table loses its data. A column whose type changed in
MySQL is reported, never altered (Snowflake cannot change most types in place).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc import sql
from cdc.config import MySQLSettings
from cdc.errors import CdcError, PreconditionError, UsageError
from cdc.escapes import sql_comment, visible
from cdc.masking import ColumnRules
from cdc.s3keys import split_s3_url, table_component
from cdc.schema import SchemaHistory, TableSchema
from cdc.snowflake import ddl, names
from cdc.snowflake.typemap import type_base
from cdc.source.schema_reads import read_table_schema

APPLY_MODES = ("task", "dynamic-table")


@dataclass(frozen=True)
class Options:
    schema: str | None = None  # Snowflake schema (name policy applied); None = the connection's
    soft_delete: bool = False
    history: bool = False
    s3_url: str | None = None  # s3://bucket/prefix of `cdc ship --to s3`: adds the S3 path objects
    role_arn: str = "arn:aws:iam::<account-id>:role/<snowflake-s3-role>"
    integration: str = "CDC_S3"
    apply_mode: str = "task"
    warehouse: str | None = None
    schedule: str = "1 MINUTE"
    target_lag: str = "1 minute"
    decimal_overflow: str = "varchar"

    def __post_init__(self) -> None:
        if self.apply_mode not in APPLY_MODES:
            raise UsageError(f"--apply-mode {self.apply_mode!r} is not one of {', '.join(APPLY_MODES)}")
        if self.s3_url and not self.warehouse:
            raise UsageError("the S3 path's tasks / dynamic tables need a warehouse", hint="pass --warehouse")


@dataclass(frozen=True)
class Statement:
    sql: str
    what: str  # "create table ORDERS", "add column ORDERS.NOTE", ...
    changes: bool = False  # creates or alters something that did not exist
    run: bool = True  # False: printed for an administrator (storage integration)


@dataclass
class Plan:
    statements: list[Statement] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    type_drift: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, statement: Statement) -> None:
        self.statements.append(statement)

    def to_dict(self) -> dict[str, Any]:
        return {"created": self.created, "added_columns": self.added, "type_drift": self.type_drift,
                "statements": [s.sql for s in self.statements if s.run], "admin_statements":
                [s.sql for s in self.statements if not s.run], "notes": self.notes}


def schemas_from_history(history: SchemaHistory, tables: Iterable[str]) -> list[TableSchema]:
    """Latest schema of each selected table (all recorded tables when none is selected)."""
    wanted = [_split(t) for t in tables] or history.tables()
    found = []
    for db, table in wanted:
        schema = history.latest(db, table)
        if schema is None:
            raise PreconditionError(f"no schema history for {db}.{table} in {history.directory}",
                                    hint="run cdc snapshot/tail first, or pass --from-mysql")
        found.append(schema)
    return found


def schemas_from_mysql(conn: Any, settings: MySQLSettings, tables: Iterable[str]) -> list[TableSchema]:
    """Current schema of each selected table from information_schema."""
    wanted = [_split(t) for t in tables] or [_split(t) for t in settings.tables]
    if not wanted and settings.databases:
        from cdc.source.connect import query

        for db in settings.databases:
            rows = query(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                         "AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", (db,))
            wanted.extend((db, str(r["TABLE_NAME"])) for r in rows)
    if not wanted:
        raise UsageError("no tables selected", hint="pass --table DB.TABLE (repeatable) or --database DB")
    found = []
    for db, table in wanted:
        schema = read_table_schema(conn, db, table)
        if schema is None:
            raise PreconditionError(f"MySQL table {db}.{table} does not exist", hint="check --table")
        found.append(ColumnRules(settings.exclude_columns, settings.hash_columns).mask(schema))
    return found


def _split(qualified: str) -> tuple[str, str]:
    db, dot, table = qualified.partition(".")
    if not dot or not db or not table:
        raise UsageError(f"table {qualified!r} is not DB.TABLE")
    return db, table


def targets_for(schemas: list[TableSchema], options: Options) -> list[ddl.Target]:
    mapped = names.table_names((s.db, s.table) for s in schemas)
    return [ddl.build_target(s, mapped[(s.db, s.table)], decimal_overflow=options.decimal_overflow) for s in schemas]


def plan(targets: list[ddl.Target], options: Options, existing: dict[str, dict[str, str]]) -> Plan:
    """The statements that make Snowflake match the MySQL tables; `existing` = table -> column -> type."""
    result = Plan()
    if options.schema:
        schema = sql.quote_ident(names.snowflake_name(options.schema))
        result.add(Statement(ddl.render("schema.sql.j2", schema=schema), f"schema {schema}"))
        result.add(Statement(f"USE SCHEMA {schema}", "use schema"))
    result.add(Statement(ddl.render("internal_stage.sql.j2", stage=sql.quote_ident(names.INTERNAL_STAGE)),
                         "internal stage for Parquet batches"))
    result.add(Statement(ddl.render("bookkeeping_table.sql.j2", table=sql.quote_ident(names.BOOKKEEPING_TABLE)),
                         "applied-batch bookkeeping", changes=names.BOOKKEEPING_TABLE not in existing))
    for target in targets:
        dynamic = options.s3_url is not None and options.apply_mode == "dynamic-table"
        if not dynamic or target.keyless:  # a keyless table is never a dynamic table (see _s3_path)
            _table(result, target, existing, options)
    if options.s3_url:
        _s3_path(result, targets, options)
    return result


def _table(result: Plan, target: ddl.Target, existing: dict[str, dict[str, str]], options: Options) -> None:
    # A keyless table's rows have no identity to soft-delete or to version: it gets neither (a note says so).
    soft_delete = options.soft_delete and not target.keyless
    if target.keyless and (options.soft_delete or options.history):
        result.notes.append(f"{target.source} has no key: its rows are deleted, not soft-deleted, and it has no "
                            "history table (a multiset of rows, docs/guide.md)")
    wanted = target.column_types(soft_delete=soft_delete)
    _create_or_extend(result, target.name, wanted, existing, ddl.create_table(target, soft_delete=soft_delete))
    if options.history and not target.keyless:
        context = ddl.table_context(target)
        history = {c.name: c.type for c in target.columns} | {
            name: kind for name, kind, _ in ddl.HISTORY_COLUMNS}
        _create_or_extend(result, target.history, history, existing,
                          ddl.render("history_table.sql.j2", table=context))


def _create_or_extend(result: Plan, table: str, wanted: dict[str, str], existing: dict[str, dict[str, str]],
                      create: str) -> None:
    have = existing.get(table)
    if have is None:
        result.add(Statement(create, f"create table {table}", changes=True))
        result.created.append(table)
        return
    for column, kind in wanted.items():
        if column not in have:
            result.add(Statement(ddl.add_column(table, column, kind), f"add column {table}.{column}", changes=True))
            result.added.append(f"{table}.{column}")
        elif not _same_type(have[column], kind):
            result.type_drift.append(f"{table}.{column}: Snowflake has {have[column]}, MySQL now maps to {kind}")


def _same_type(have: str, want: str) -> bool:
    return type_base(have) == type_base(want)


def _s3_path(result: Plan, targets: list[ddl.Target], options: Options) -> None:
    bucket, prefix = split_s3_url(options.s3_url or "")
    location = f"s3://{bucket}/{prefix}/" if prefix else f"s3://{bucket}/"
    integration = sql.quote_ident(names.snowflake_name(options.integration))
    stage, file_format = sql.quote_ident(names.EXTERNAL_STAGE), sql.quote_ident(names.FILE_FORMAT)
    result.add(Statement(ddl.render("storage_integration.sql.j2", integration=integration,
                                    role_arn=sql.quote_literal(options.role_arn),
                                    location=sql.quote_literal(location)), "storage integration", run=False))
    result.notes.extend(iam_steps(integration, location, bucket))
    result.add(Statement(ddl.render("file_format.sql.j2", file_format=file_format), "JSON file format"))
    result.add(Statement(ddl.render("external_stage.sql.j2", stage=stage, location=sql.quote_literal(location),
                                    integration=integration, file_format=file_format), "external stage"))
    for target in targets:
        if target.keyless:  # a MERGE of the landed lines cannot count copies of identical rows
            result.notes.append(f"{target.source} has no key: the S3 path does not apply it; run cdc snowflake-apply "
                                "on spark-merge's batches for it")
            continue
        path = f"table={table_component(target.db, target.table)}/"
        context = ddl.table_context(target, stage_path=path)
        for template, what in (("landing_table.sql.j2", "landing table"), ("pipe.sql.j2", "pipe")):
            result.add(Statement(ddl.render(template, table=context, stage=stage, file_format=file_format),
                                 f"{what} for {target.source}"))
        _apply_objects(result, target, context, options)
    result.notes.append(
        "S3 event notification: run SHOW PIPES, copy the notification_channel (an SQS ARN) and add a bucket event "
        f"notification on s3://{bucket} for s3:ObjectCreated:* with prefix '{prefix + '/' if prefix else ''}' to it "
        "(aws s3api put-bucket-notification-configuration ... QueueConfigurations=[{QueueArn: <channel>}]).")


def _apply_objects(result: Plan, target: ddl.Target, context: dict[str, Any], options: Options) -> None:
    warehouse = sql.quote_ident(names.snowflake_name(options.warehouse or ""))
    if options.apply_mode == "dynamic-table":
        changes = ddl.render("changes.sql.j2", table=context, source=context["landing"], last_only=True)
        versions = ddl.render("changes.sql.j2", table=context, source=context["landing"], last_only=False)
        lag = sql.quote_literal(options.target_lag)
        result.add(Statement(ddl.render("dynamic_table.sql.j2", table=context, changes=changes, target_lag=lag,
                                        warehouse=warehouse, soft_delete=options.soft_delete),
                             f"dynamic table for {target.source}"))
        if options.history:
            result.add(Statement(ddl.render("dynamic_history.sql.j2", table=context, versions=versions,
                                            target_lag=lag, warehouse=warehouse), f"history for {target.source}"))
        return
    result.add(Statement(ddl.render("stream.sql.j2", table=context), f"stream for {target.source}"))
    source = ddl.render("changes.sql.j2", table=context, source=context["stream"], last_only=True)
    statements = ddl.history_statements(target, source) if options.history else []
    statements.append(ddl.merge(target, source, soft_delete=options.soft_delete))
    stream_literal = sql.quote_literal(context["stream"])
    result.add(Statement(ddl.render("task.sql.j2", table=context, warehouse=warehouse, statements=statements,
                                    schedule=sql.quote_literal(options.schedule), stream_literal=stream_literal),
                         f"task for {target.source}"))
    result.add(Statement(ddl.render("task_resume.sql.j2", table=context), f"resume task for {target.source}"))


def iam_steps(integration: str, location: str, bucket: str) -> list[str]:
    return [
        f"An ACCOUNTADMIN runs the CREATE STORAGE INTEGRATION {integration} statement (cdc does not).",
        f"IAM: create a role with s3:GetObject, s3:GetObjectVersion on {location}* and s3:ListBucket on "
        f"arn:aws:s3:::{bucket}; pass its ARN with --role-arn.",
        f"IAM trust: DESC INTEGRATION {integration}; put STORAGE_AWS_IAM_USER_ARN as the trust policy's Principal "
        "and STORAGE_AWS_EXTERNAL_ID as its sts:ExternalId condition.",
    ]


def existing_columns(cursor: Any, schema: str) -> dict[str, dict[str, str]]:
    """Table -> column -> data type of one Snowflake schema (in the connection's database)."""
    cursor.execute("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                   "WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION", (schema,))
    found: dict[str, dict[str, str]] = {}
    for table, column, kind in cursor.fetchall():
        found.setdefault(str(table), {})[str(column)] = str(kind)
    return found


def not_null_columns(execute: Callable[..., list[tuple[Any, ...]]], target: ddl.Target) -> list[str]:
    """Non-key columns Snowflake holds NOT NULL (a bootstrap of an older cdc copied MySQL's): the likely cause of a
    refused MERGE, since Snowflake's error does not name the column. [] if it cannot be asked."""
    try:
        found = execute("SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = CURRENT_SCHEMA() "
                        "AND TABLE_NAME = ? AND IS_NULLABLE = 'NO'", (target.name,))
    except CdcError:
        return []
    ours = {name for name, _, not_null in ddl.CDC_COLUMNS if not_null}
    return [str(r[0]) for r in found if str(r[0]) not in set(target.key) | ours]


def run(conn: Any, targets: list[ddl.Target], options: Options, *, dry_run: bool = False) -> Plan:
    """Plan against what the schema holds, then (unless dry_run) execute every runnable statement."""
    from cdc.snowflake.connect import cursor as guarded_cursor

    cursor = guarded_cursor(conn)
    if options.schema:
        schema = names.snowflake_name(options.schema)
    else:
        found = cursor.execute("SELECT CURRENT_SCHEMA()").fetchone()
        schema = str(found[0]) if found and found[0] else ""
        if not schema:
            raise UsageError("no Snowflake schema selected", hint="pass --schema or set it in the connection")
    result = plan(targets, options, existing_columns(cursor, schema))
    if not dry_run:
        for statement in result.statements:
            if statement.run:
                cursor.execute(statement.sql)
    return result


def render_script(result: Plan) -> str:
    """The plan as one SQL script; statements an administrator must run are marked.

    A comment line names the table, and MySQL allows a newline in a table name: a name is spelled out in
    comments (escapes.sql_comment), never pasted, or the rest of it would run as a statement (#26).
    """
    parts = []
    for statement in result.statements:
        _refuse_backslash_identifier(statement)
        head = f"-- {sql_comment(statement.what)}" + ("" if statement.run else " (run by an ACCOUNTADMIN; cdc does not)")
        parts.append(f"{head}\n{statement.sql};")
    return "\n\n".join(parts) + "\n"


def _refuse_backslash_identifier(statement: Statement) -> None:
    """Refuse a quoted identifier holding a backslash in a script meant to be run as is.

    Snowflake reads `\\` inside "..." literally, but the statement splitters that run scripts (the Python
    connector's execute_stream / split_statements, SnowSQL) read it as an escape: for them `"a\\"` never
    closes, and the next name's text becomes bare SQL (#26). Statement by statement execution is not affected.
    """
    text, index = statement.sql, 0
    while index < len(text):
        if text[index] == "'":  # a string literal: skip it, backslash escapes included
            index += 1
            while index < len(text) and text[index] != "'":
                index += 2 if text[index] == "\\" else 1
        elif text[index] == '"':
            end = index + 1
            while (end := text.index('"', end)) + 1 < len(text) and text[end + 1] == '"':
                end += 2  # a doubled quote inside the name
            name = text[index + 1:end].replace('""', '"')
            if "\\" in name:
                raise PreconditionError(
                    f"{visible(statement.what)}: the Snowflake name {visible(name)!r} holds a backslash, which "
                    "SnowSQL and the connector's statement splitter misread in a script",
                    hint="run snowflake-bootstrap without --dry-run (it runs one statement at a time), use --json, "
                    "or rename the MySQL table or column")
            index = end
        index += 1


def bootstrap_history(conn: Any, history: SchemaHistory, options: Options) -> Plan:
    """Every table of the schema history created (or given its new columns) in Snowflake: what `cdc run` does."""
    return run(conn, targets_for(schemas_from_history(history, []), options), options)
