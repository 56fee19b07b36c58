"""examples/snowflake-grants.sql: two roles, least privilege each (#26). snowflake-apply's role changes rows and
its own staging tables, never the objects bootstrap owns; the file parses as Snowflake SQL, statement by statement."""

from __future__ import annotations

import re
from pathlib import Path

import sqlglot
from snowflake.connector.util_text import split_statements

from cdc.snowflake import names

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snowflake-grants.sql"
GRANT = re.compile(r"^GRANT (?P<what>.+) TO ROLE (?P<role>\w+)$")


def _statements() -> list[str]:
    with EXAMPLE.open() as text:
        return [" ".join(s.split()).rstrip(";") for s, _ in split_statements(text, remove_comments=True) if s.strip()]


def _grants(role: str) -> set[str]:
    return {m["what"] for s in _statements() if (m := GRANT.match(s)) and m["role"] == role}


def test_the_apply_role_reads_and_writes_rows_and_its_stage_only() -> None:
    assert _grants("CDC_APPLY") == {
        "USAGE ON WAREHOUSE CDC_WH", "USAGE ON DATABASE RAW", "USAGE ON SCHEMA RAW.HR",
        "CREATE TABLE ON SCHEMA RAW.HR",  # its transient staging tables
        "SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA RAW.HR",
        "SELECT, INSERT, UPDATE, DELETE ON FUTURE TABLES IN SCHEMA RAW.HR",
        f'READ, WRITE ON STAGE RAW.HR."{names.INTERNAL_STAGE}"',  # PUT and REMOVE of a batch's files
    }
    assert "GRANT ROLE CDC_APPLY TO USER CDC_APPLY_SVC" in _statements()


def test_the_bootstrap_role_creates_the_schema_and_nothing_grants_everything() -> None:
    assert _grants("CDC_BOOTSTRAP") == {"USAGE ON WAREHOUSE CDC_WH", "USAGE, CREATE SCHEMA ON DATABASE RAW",
                                        "EXECUTE TASK ON ACCOUNT"}
    text = " ".join(_statements()).upper()
    assert "ALL PRIVILEGES" not in text and "OWNERSHIP" not in text and "ACCOUNTADMIN" not in text
    for statement in _statements():
        assert sqlglot.parse_one(statement, read="snowflake") is not None
