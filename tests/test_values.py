"""cdc.values' encoding of a JSON column: three sources of its text, kept apart (issue 28)."""

from __future__ import annotations

import pytest

from cdc.errors import DataError
from cdc.schema import Column
from cdc.values import MySQLJsonText, encoder_for

_JSON = Column("doc", "json", "json")


def test_json_text_passes_through_whichever_server_it_came_from() -> None:
    encode = encoder_for(_JSON)
    assert encode(MySQLJsonText('"abc"')) == '"abc"'  # MySQL 8's binary document: MySQL's text, quotes kept
    assert encode(MySQLJsonText("null")) == "null"  # JSON null is text, never the column's NULL
    assert encode(b'{"b": 1, "a": "x"}') == '{"b": 1, "a": "x"}'  # MariaDB's LONGTEXT from the binlog, as stored
    assert encode('{"b": 1}') == '{"b": 1}'  # a SELECT's text (snapshot)
    assert encode(None) is None


def test_json_from_the_librarys_parser_is_refused() -> None:
    """parse_json's Python values lose temporal and DECIMAL values: cdc.rows.json_binary reads documents instead."""
    with pytest.raises(DataError, match="cdc.rows.json_binary"):
        encoder_for(_JSON)({"a": 1})
