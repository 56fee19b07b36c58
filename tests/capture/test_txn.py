"""A rows event's block of lines (cdc.capture.rowblock), completed at COMMIT, is encode_line of each change exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.capture.rowblock import ALL_ROWS, RowsMeta, first_row_after, rows_block
from cdc.capture.txn import TransactionBuffer
from cdc.changelog import encode_line, position_string
from cdc.rows.native import marker_filler

# Control characters (the block's markers are \x00 and \x01) are welcome in values, names and GTIDs.
text = st.text()
values = st.none() | st.integers(-2 ** 63, 2 ** 64 - 1) | text | st.floats(allow_nan=False)
images = st.none() | st.dictionaries(text, values, max_size=5).map(lambda d: {**d, "id": d.get("id", 1)})


def _expected(images: list[tuple[Any, Any]], meta: RowsMeta, xid: int | None, ts: str) -> bytes:
    lines = []
    for row, (before, after) in enumerate(images):
        if row < meta.first:
            continue
        image = after or before
        change = {
            "after": after, "before": before, "db": meta.db, "key": {"id": image["id"]}, "op": meta.op,
            "position": position_string(meta.file, meta.pos, row), "table": meta.table, "ts": ts, "v": 1,
            "src": {"file": meta.file, "gtid": meta.gtid, "pos": meta.pos, "row": row, "server_id": meta.server_id,
                    "xid": xid}}
        lines.append(encode_line(change if meta.fk_checks else {**change, "fk_checks": False}))
    return b"".join(lines)


@given(st.sampled_from(["mariadb-bin.000042", "binlog.000001", "mysql-bin.1234567"]), text, text,
       st.sampled_from(["c", "u", "d"]), st.lists(st.tuples(images, images).filter(lambda p: p[0] or p[1]), max_size=4),
       st.none() | text, st.integers(4, 2 ** 40), st.none() | st.integers(1, 2 ** 32 - 1), st.integers(0, 5),
       st.none() | st.integers(0, 2 ** 64 - 1), st.booleans())
def test_rows_block_completes_to_encode_line(file: str, db: str, table: str, op: str, rows: list[tuple[Any, Any]],
                                            gtid: str | None, pos: int, server_id: int | None, first: int,
                                            xid: int | None, fk_checks: bool) -> None:
    """A rows event written with foreign_key_checks=0 adds `"fk_checks": false` to each line, sorted in place."""
    meta = RowsMeta(db, table, file, pos, gtid, server_id, op, first, fk_checks=fk_checks)
    block, count = rows_block(rows, ["id"], meta)
    assert count == max(0, len(rows) - first)
    buffer = TransactionBuffer(Path("/nonexistent"), spill_bytes=2**30)  # never spills: no directory needed
    buffer.add(meta.position(first), block, count)
    assert b"".join(buffer.complete(xid, 1_700_000_000)) == _expected(rows, meta, xid, "2023-11-14T22:13:20Z")


def test_first_row_after_a_recovered_position() -> None:
    meta = RowsMeta("d", "t", "mariadb-bin.000003", 500, None, 1, "c")
    assert first_row_after(meta, None) == 0
    assert first_row_after(meta, position_string("mariadb-bin.000003", 499, 7)) == 0  # an earlier event
    assert first_row_after(meta, position_string("mariadb-bin.000003", 500, 7)) == 8  # this one, row 7
    assert first_row_after(meta, position_string("mariadb-bin.000003", 501, 0)) == ALL_ROWS  # a later event
    assert first_row_after(meta, position_string("mariadb-bin.000004", 4, 0)) == ALL_ROWS


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"\x00", b"\x01", b"a", b"line\n", b'{"x":1}', b"\xff\x02"]), max_size=30),
       st.sampled_from([b"null", b"42", b"18446744073709551615"]), st.binary(max_size=12))
def test_c_marker_fill_equals_two_replaces(parts: list[bytes], xid: bytes, end: bytes) -> None:
    """cdc.rows._native.finish (one pass) against bytes.replace twice, the Python fallback (issue 28)."""
    fill = marker_filler()
    assert fill is not None, "the C decoder is built by `pip install -e .`"
    block = b"".join(parts)
    assert fill(block, xid, end) == block.replace(b"\x00", xid).replace(b"\x01", end)
    assert fill(bytearray(block), xid, end) == block.replace(b"\x00", xid).replace(b"\x01", end)
    # A transaction's blocks, filled and joined in one call (one write per MiB of lines, not one per rows event).
    cut = len(parts) // 2
    blocks = [b"".join(parts[:cut]), bytearray(b"".join(parts[cut:])), b""]
    assert fill(blocks, xid, end) == block.replace(b"\x00", xid).replace(b"\x01", end)
    assert fill([], xid, end) == b""


def test_blocks_of_a_transaction_are_filled_in_groups_of_a_mebibyte(tmp_path: Path, monkeypatch: Any) -> None:
    """complete() fills and yields a transaction's blocks joined, a MiB at a time: the same lines as block by block
    (C and the Python fallback), whole lines in every piece, and no piece much over a MiB."""
    meta = RowsMeta("db", "t", "mariadb-bin.000001", 4, None, 1, "c")
    blocks = [rows_block([(None, {"id": n, "v": "x" * (n % 3000)})] * 40, ["id"], meta)[0] for n in range(300)]
    end = b'1970-01-01T00:00:00Z","v":1}\n'
    expected = b"".join(block.replace(b"\x00", b"7").replace(b"\x01", end) for block in blocks)
    for native in ("1", "0"):
        monkeypatch.setenv("CDC_NATIVE", native)
        buffer = TransactionBuffer(tmp_path, spill_bytes=2**30)
        for block in blocks:
            buffer.add("first", block, 40)
        pieces = [bytes(piece) for piece in buffer.complete(7, 0)]
        assert b"".join(pieces) == expected
        assert 1 < len(pieces) < len(blocks) and all(piece.endswith(b"}\n") for piece in pieces)
        assert max(map(len, pieces)) < (2**20 + max(map(len, blocks))) * 5 // 4  # the commit fields add to each line
