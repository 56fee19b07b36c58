"""Type map, names, and every template: rendered, pinned by a golden file, parsed by sqlglot."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from cdc import sql
from cdc.errors import PreconditionError
from cdc.schema import Column, TableSchema
from cdc.snowflake import bootstrap, ddl, names
from cdc.snowflake.typemap import snowflake_type

GOLDEN = Path(__file__).parent / "golden"

# Every MySQL type family, with awkward column names (space, quote, mixed case).
ALL_TYPES = TableSchema("shop", "every_type", (
    Column("id", "bigint(20) unsigned", "bigint", unsigned=True, nullable=False),
    Column("t_i8", "tinyint(4)", "tinyint"), Column("t_u8", "tinyint(3) unsigned", "tinyint", unsigned=True),
    Column("t_i16", "smallint(6)", "smallint"), Column("t_u24", "mediumint(8) unsigned", "mediumint", unsigned=True),
    Column("t_i32", "int(11)", "int"), Column("t_u32", "int(10) unsigned", "int", unsigned=True),
    Column("t_i64", "bigint(20)", "bigint"),
    Column("price", "decimal(18,4)", "decimal", precision=18, scale=4),
    Column("huge", "decimal(65,30)", "decimal", precision=65, scale=30),
    Column("f", "float", "float"), Column("d", "double", "double"),
    Column("flags", "bit(64)", "bit"), Column("b1", "bit(1)", "bit"),
    Column("born", "date", "date", nullable=False), Column("at", "datetime(6)", "datetime", fsp=6),
    Column("at0", "datetime", "datetime", fsp=0), Column("seen", "timestamp(3)", "timestamp", fsp=3),
    Column("dur", "time(6)", "time", fsp=6), Column("yr", "year(4)", "year"),
    Column("code", "char(3)", "char", charset="latin1"), Column("Name Of", "varchar(64)", "varchar"),
    Column('quo"te', "text", "text"), Column("bin", "binary(16)", "binary"), Column("blob", "longblob", "longblob"),
    Column("doc", "json", "json"), Column("state", "enum('a','b')", "enum", enum_values=("a", "b")),
    Column("tags", "set('x','y')", "set", set_values=("x", "y")), Column("geo", "point", "point"),
), ("id",))

EXPECTED_TYPES = {
    "id": "NUMBER(20,0)", "t_i8": "NUMBER(3,0)", "t_u8": "NUMBER(3,0)", "t_i16": "NUMBER(5,0)",
    "t_u24": "NUMBER(8,0)", "t_i32": "NUMBER(10,0)", "t_u32": "NUMBER(10,0)", "t_i64": "NUMBER(19,0)",
    "price": "NUMBER(18,4)", "huge": "VARCHAR", "f": "FLOAT", "d": "FLOAT", "flags": "NUMBER(20,0)",
    "b1": "NUMBER(1,0)", "born": "DATE", "at": "TIMESTAMP_NTZ(6)", "at0": "TIMESTAMP_NTZ(0)",
    "seen": "TIMESTAMP_TZ(3)", "dur": "VARCHAR", "yr": "NUMBER(4,0)", "code": "VARCHAR", "Name Of": "VARCHAR",
    'quo"te': "VARCHAR", "bin": "BINARY", "blob": "BINARY", "doc": "VARIANT", "state": "VARCHAR",
    "tags": "ARRAY", "geo": "BINARY",
}


def test_type_map_covers_every_type_exactly() -> None:
    assert {c.name: snowflake_type(c) for c in ALL_TYPES.columns} == EXPECTED_TYPES


def test_wide_decimal_can_be_refused() -> None:
    with pytest.raises(PreconditionError, match=r"decimal\(65,30\), wider than Snowflake's NUMBER\(38,s\)"):
        snowflake_type(ALL_TYPES.column("huge"), table="shop.every_type", decimal_overflow="refuse")


def test_name_policy_and_quoting() -> None:
    assert names.snowflake_name("customer_id") == "CUSTOMER_ID"
    assert names.snowflake_name("Name Of") == "Name Of"
    assert names.snowflake_name("1st") == "1st"
    assert sql.quote_ident('quo"te') == '"quo""te"'


def test_column_collision_is_an_error() -> None:
    with pytest.raises(PreconditionError, match="'_cdc_op' maps to '_CDC_OP'"):
        names.column_names("shop.t", ["id", "_cdc_op"])
    with pytest.raises(PreconditionError, match="both map to Snowflake table 'ORDERS'"):
        names.table_names([("a", "orders"), ("b", "ORDERS")])


def test_table_without_primary_key_is_replaced_row_by_row_not_merged() -> None:
    """A keyless table (issue #24): delete every copy of the batch's rows (NULL-safe), insert its copies."""
    schema = TableSchema("shop", "log", (Column("line", "text", "text"), Column("n", "int(11)", "int")), ())
    target = ddl.build_target(schema, "LOG")
    assert target.keyless and target.key == ()
    delete, insert = ddl.replace_rows(target, 'SELECT * FROM "STAGED"')
    assert isinstance(sqlglot.parse_one(delete, read="snowflake"), exp.Delete)
    assert isinstance(sqlglot.parse_one(insert, read="snowflake"), exp.Insert)
    assert 'AND ("T"."LINE" = "S"."LINE" OR ("T"."LINE" IS NULL AND "S"."LINE" IS NULL))' in delete
    assert "\"S\".\"_CDC_ACTION\" = 'INSERT'" in insert
    plan = bootstrap.plan([target], bootstrap.Options(soft_delete=True, history=True, s3_url="s3://b/p",
                                                      warehouse="etl"), {})
    assert plan.created == ["LOG"] and not [s for s in plan.statements if "PIPE" in s.sql or "TASK" in s.sql]
    assert any("shop.log has no key" in n for n in plan.notes)


def _target() -> ddl.Target:
    return ddl.build_target(ALL_TYPES, "EVERY_TYPE")


def _statements() -> dict[str, str]:
    """One rendering of every template (keyed by template name) for the all-types table."""
    target = _target()
    opts = bootstrap.Options(schema="replica", soft_delete=True, history=True, s3_url="s3://bucket/cdc",
                             warehouse="etl", role_arn="arn:aws:iam::123456789012:role/snowflake")
    task_plan = bootstrap.plan([target], opts, {})
    dynamic = bootstrap.plan([target], bootstrap.Options(**{**vars(opts), "apply_mode": "dynamic-table"}), {})
    by_what = {s.what: s.sql for s in task_plan.statements + dynamic.statements}
    staging = '"_CDC_STG_RUN_1"'
    source = ddl.render("batch_source.sql.j2", staging=staging, columns=[
        {"name": sql.quote_ident(c.name), "staged": sql.quote_ident(c.name), "variant": c.type == "VARIANT"}
        for c in target.columns])
    close, insert = ddl.history_statements(target, source)
    return {
        "schema.sql.j2": by_what['schema "REPLICA"'],
        "internal_stage.sql.j2": by_what["internal stage for Parquet batches"],
        "bookkeeping_table.sql.j2": by_what["applied-batch bookkeeping"],
        "target_table.sql.j2": by_what['create table EVERY_TYPE'],
        "history_table.sql.j2": by_what["create table EVERY_TYPE_HISTORY"],
        "add_column.sql.j2": ddl.add_column("EVERY_TYPE", "NEW COL", "NUMBER(10,0)"),
        "convert_column.sql.j2": ddl.render("convert_column.sql.j2", table='"EVERY_TYPE"', new='"A_CDC_CONVERTED"',
                                            old='"A"', type="NUMBER(8,1)", current_only=False),
        "drop_column.sql.j2": ddl.render("drop_column.sql.j2", table='"EVERY_TYPE"', column='"OLD COL"'),
        "shorten_column.sql.j2": ddl.render("shorten_column.sql.j2", table='"EVERY_TYPE_HISTORY"', column='"NAME"',
                                            length=4, current_only=True),
        "rename_column.sql.j2": ddl.render("rename_column.sql.j2", table='"EVERY_TYPE"', old='"OLD"', new='"NEW"'),
        "fill_column.sql.j2": ddl.render("fill_column.sql.j2", table='"EVERY_TYPE_HISTORY"', column='"C_DATE"',
                                         current_only=True,
                                         value=ddl.from_json(next(c for c in target.columns if c.type == "DATE"),
                                                             "PARSE_JSON(?)")),
        "storage_integration.sql.j2": by_what["storage integration"],
        "file_format.sql.j2": by_what["JSON file format"],
        "external_stage.sql.j2": by_what["external stage"],
        "landing_table.sql.j2": by_what["landing table for shop.every_type"],
        "pipe.sql.j2": by_what["pipe for shop.every_type"],
        "stream.sql.j2": by_what["stream for shop.every_type"],
        "task.sql.j2": by_what["task for shop.every_type"],
        "task_resume.sql.j2": by_what["resume task for shop.every_type"],
        "dynamic_table.sql.j2": by_what["dynamic table for shop.every_type"],
        "dynamic_history.sql.j2": by_what["history for shop.every_type"],
        "changes.sql.j2": ddl.render("changes.sql.j2", table=ddl.table_context(target), source='"L"', last_only=True),
        "batch_source.sql.j2": source,
        "merge.sql.j2": ddl.merge(target, source, soft_delete=False) + ";\n\n"
        + ddl.merge(target, source, soft_delete=True),
        "history_close.sql.j2": close,
        "history_insert.sql.j2": insert,
        "replace_rows.sql.j2": ";\n\n".join(ddl.replace_rows(ddl.build_target(
            dataclasses.replace(ALL_TYPES, primary_key=()), "EVERY_TYPE"), source)),
    }


def test_every_template_is_rendered_here() -> None:
    assert set(_statements()) == {name.removeprefix("snowflake/") for name in sql.template_names("snowflake")}


def test_golden_sql_for_every_type() -> None:
    """Pin the generated SQL; regenerate with CDC_UPDATE_GOLDEN=1 and review the diff."""
    text = "\n\n".join(f"-- {name}\n{statement};" for name, statement in sorted(_statements().items())) + "\n"
    path = GOLDEN / "every_type.sql"
    if os.environ.get("CDC_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


# sqlglot 30 has no grammar for these Snowflake statements and falls back to exp.Command;
# for them we parse the statement they embed (the pipe's COPY, the task's MERGE) instead.
COMMAND_FALLBACKS = {"pipe.sql.j2": "CREATE PIPE", "stream.sql.j2": "CREATE STREAM", "task.sql.j2": "CREATE TASK",
                     "task_resume.sql.j2": "ALTER TASK"}


@pytest.mark.parametrize("name", sorted(_statements()))
def test_every_statement_parses_with_sqlglot(name: str) -> None:
    for statement in _statements()[name].split(";\n\n"):
        parsed = sqlglot.parse_one(statement, read="snowflake")
        if name in COMMAND_FALLBACKS:
            # A task with a scripting body parses as a Block whose head is the CREATE TASK command.
            head = parsed.expressions[0] if type(parsed).__name__ == "Block" else parsed
            assert isinstance(head, exp.Command) and statement.startswith(COMMAND_FALLBACKS[name])
        else:
            assert not isinstance(parsed, exp.Command), statement[:80]


def test_embedded_pipe_copy_and_task_statements_parse() -> None:
    statements = _statements()
    copy = statements["pipe.sql.j2"].split("AS COPY", 1)[1]
    assert isinstance(sqlglot.parse_one("COPY" + copy, read="snowflake"), exp.Copy)
    body = statements["task.sql.j2"].split("BEGIN TRANSACTION;", 1)[1].rsplit("COMMIT;", 1)[0]
    kinds = [type(sqlglot.parse_one(s, read="snowflake")).__name__ for s in body.split(";\n") if s.strip()]
    assert kinds == ["Update", "Insert", "Merge"]


def test_load_statements_parse() -> None:
    """The batch load path (PUT to the internal stage, COPY Parquet by column name) as apply issues it."""
    put = "PUT 'file:///state/batches/b000000000001/shop.t/part-0.parquet' @\"_CDC_BATCHES\"/b000000000001/1/ " \
          "AUTO_COMPRESS = FALSE OVERWRITE = TRUE"
    copy = 'COPY INTO "_CDC_STG_X_1" FROM @"_CDC_BATCHES"/b000000000001/1/ FILE_FORMAT = (TYPE = PARQUET) ' \
           "MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE FORCE = TRUE"
    assert isinstance(sqlglot.parse_one(put, read="snowflake"), exp.Put)
    assert isinstance(sqlglot.parse_one(copy, read="snowflake"), exp.Copy)


def test_no_create_or_replace_anywhere() -> None:
    assert all("OR REPLACE" not in s.upper() for s in _statements().values())
