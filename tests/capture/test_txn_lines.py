"""RowLines (the per-event parts of a change line encoded once) writes split_line's bytes exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.txn import RowLines, split_line
from cdc.changelog import position_string

values = st.none() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.text() | st.floats(allow_nan=False)
images = st.none() | st.dictionaries(st.text(min_size=1), values, max_size=5)


@given(st.sampled_from(["mariadb-bin.000042", "binlog.000001", "mysql-bin.1234567"]), st.text(), st.text(),
       st.sampled_from(["c", "u", "d"]), images, images, st.none() | st.text(), st.integers(4, 2 ** 40),
       st.none() | st.integers(1, 2 ** 32 - 1), st.integers(0, 10 ** 6))
def test_row_lines_equal_split_line(file: str, db: str, table: str, op: str, before: dict | None, after: dict | None,
                                    gtid: str | None, pos: int, server_id: int | None, row: int) -> None:
    body = {"after": after, "before": before, "db": db, "key": after or before or {}, "op": op,
            "position": position_string(file, pos, row)}
    src = {"file": file, "gtid": gtid, "pos": pos, "row": row, "server_id": server_id}
    lines = RowLines(table, file, pos, gtid, server_id)
    assert (lines.head(body, row), lines.tail) == split_line(body, src, table)
    assert f"{position_string(file, pos, 0)[:-12]}{row:012d}" == position_string(file, pos, row)
