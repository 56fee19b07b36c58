"""The pass's flat lines (cdc/spark/_flat.c, cdc.spark.flat) read as the JSON lines they stand for.

A kept line is written flat only where Spark's JSON reader would give its values as the line's own bytes; read back
through flat_rows, each such line must be the very row the JSON reader makes of it, and every other line must stay
JSON. The hazards below are the ones that would make the two readings differ if taken flat.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.schema import Column, TableSchema
from cdc.spark import flat, latest
from cdc.spark.sources import spark_lines
from cdc.spark.types import keyed_line_schema

SCHEMA = TableSchema("shop", "items", (Column("id", "int(11)", "int"), Column("code", "varchar(8)", "varchar"),
                                      Column("note", "text", "text"), Column("n", "bigint(20)", "bigint")),
                     ("id", "code"), "0000000001:000000000004:b000000000000")


def _line(position: int, after: Any, *, op: str = "c", key: Any = None, before: Any = None, raw: bytes | None = None,
          **top: Any) -> bytes:
    """One change line of shop.items; `raw` replaces the after image's JSON text (hazards orjson would not write)."""
    key = key if key is not None else {"code": "k", "id": position}
    change = {"after": "RAW" if raw is not None else after, "before": before, "db": "shop", "key": key, "op": op,
              "position": f"0000000001:{position:012d}:b000000000000", "src": {"pos": position, "x": 1.5},
              "table": "items", "ts": "2026-12-03T07:00:01Z", "v": 1, **top}
    text = orjson.dumps(change, option=orjson.OPT_SORT_KEYS)
    return (text.replace(b'"after":"RAW"', b'"after":' + raw) if raw is not None else text) + b"\n"


def _image(position: int, **values: Any) -> dict[str, Any]:
    return {"code": "k", "id": position, "note": "x", "n": 1, **values}


# Lines whose values Spark's reader gives as their own bytes: written flat.
PLAIN = [
    _line(1, _image(1)),
    _line(2, _image(2, note="", n=0)),  # an empty string is not null
    _line(3, _image(3, note="é 中 😀 \u2028 \u0085 \ufeff \x7f ✓", n=-42)),  # no line break to Spark's text reader
    _line(4, _image(4, note=None, n=None)),  # JSON null
    _line(5, {"code": "k", "id": 5}),  # members absent: null
    _line(6, _image(6, n=True)),  # true, read as text: "true"
    _line(7, _image(7, extra={"nested": [1, 2.5, "\t"]})),  # a member no column reads is passed over
    _line(8, None, op="d", before=_image(8, note="a\tb", n=1.5)),  # before: only its key columns are read
    _line(9, _image(9), op="u", before=_image(9, note="\\N")),
    _line(10, _image(10, note="  spaces  ", n=123456789012345678)),  # 18 digits
    _line(11, _image(11), ts=None),
    _line(12, _image(12, note="#,\"'")),  # orjson escapes the quote: not plain, see below
]
PLAIN_AT = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}

# Lines that must stay JSON: the two readings could differ, or this code is not sure of them.
HAZARDS = [
    _line(20, _image(20, note="a\tb")),  # an escape: its bytes are not its text
    _line(21, None, raw=b'{"code":"k","id":21,"note":"\\u00e9","n":1}'),
    _line(22, _image(22, n=1.5)),  # a float: Spark writes it back its own way
    _line(23, None, raw=b'{"code":"k","id":23,"note":"x","n":100000000000000000000}'),  # longer than readers agree on
    _line(24, None, raw=b'{"code":"k","id":24,"note":"x","n":-0}'),  # Spark reads -0 as 0
    _line(25, _image(25, note={"a": 1})),  # a nested value in a read column
    _line(26, _image(26, note=[1, 2])),
    _line(27, {"code": "k", "id": 27, "NOTE": "x"}),  # a name differing from a column's only in case
    _line(28, None, raw=b'{"code":"k","id":28,"note":"x","note":"y","n":1}'),  # a member twice
    _line(29, _image(29), fk_checks=False),  # a member the flat form does not carry
    _line(30, _image(30), ts=5),  # ts not a string
    _line(31, _image(31), key={"code": "a\tb", "id": 31}),
    _line(32, _image(32), op="u", before={"code": "k", "id": 1e3}),
    _line(33, None, raw=b'{"code":"k","id":33,"note":"x","n":007}'),  # not JSON: stays for Spark to refuse
]


def _pass(tmp_path: Path, lines: list[bytes], monkeypatch: pytest.MonkeyPatch) -> latest.Fewer:
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)  # every key once: nothing to leave out, written all the same
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(lines))
    out = tmp_path / "out"
    out.mkdir()
    fewer = latest.superseded_left_out([str(source)], None, [latest.listed("shop", "items", SCHEMA)], out)
    assert fewer is not None
    return fewer


def _rows(frame: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row) for row in frame.collect())


def test_plain_lines_are_written_flat_and_read_back_as_the_json_reader_reads_them(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = keyed_line_schema(["id", "code"], ["note", "n"])
    lines = PLAIN + HAZARDS[:-1]
    fewer = _pass(tmp_path, lines, monkeypatch)
    json_lines = spark_lines(spark, schema, [str(p) for p in fewer.files], None)
    flat_lines = flat.flat_rows(spark, schema, "shop", "items", fewer.flat["shop", "items"])
    assert {int(r.position.split(":")[1]) for r in flat_lines.collect()} == PLAIN_AT
    assert {int(r.position.split(":")[1]) for r in json_lines.collect()} == {12} | set(range(20, 33))
    # Each form's rows are the JSON reader's rows of the same lines.
    everything = spark_lines(spark, schema, [str(tmp_path / "in.jsonl")], None)
    assert _rows(flat.with_flat(spark, json_lines, schema, fewer)) == _rows(everything)
    for path in fewer.flat["shop", "items"].files:
        assert path.stat().st_mode & 0o777 == 0o600


def test_a_line_that_is_not_json_is_left_for_spark_to_refuse(tmp_path: Path, spark: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    schema = keyed_line_schema(["id", "code"], ["note", "n"])
    fewer = _pass(tmp_path, PLAIN[:2] + HAZARDS[-1:], monkeypatch)
    assert (tmp_path / "out" / "latest-000000.jsonl").read_bytes() == HAZARDS[-1]
    with pytest.raises(Exception, match="(?i)malformed"):
        spark_lines(spark, schema, [str(p) for p in fewer.files], None).collect()


def test_tables_without_flat_columns_and_other_tables_lines_stay_json(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    other = PLAIN[0].replace(b'"table":"items"', b'"table":"other"')
    source = tmp_path / "in.jsonl"
    source.write_bytes(PLAIN[0] + other)
    for tables, expected in [([("shop", "items", ["code", "id"], None)], PLAIN[0] + other),  # no flat columns
                             ([latest.listed("shop", "items", SCHEMA)], other)]:
        out = tmp_path / f"out{len(expected)}"
        out.mkdir()
        fewer = latest.superseded_left_out([str(source)], None, tables, out)
        assert fewer is not None and fewer.files[0].read_bytes() == expected
        assert {p.name for p in out.iterdir()} == {"latest-000000.jsonl"} | (
            {"flat-0-000000.tsv"} if fewer.flat else set())
    latest.discard(fewer)
    assert not list(out.iterdir())


def test_a_table_of_key_columns_only_has_flat_lines_with_an_empty_after(tmp_path: Path, spark: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    tags = TableSchema("shop", "tags", (Column("id", "int(11)", "int"),), ("id",), SCHEMA.position)
    lines = [orjson.dumps({"after": {"id": n}, "before": None, "db": "shop", "key": {"id": n}, "op": "c",
                           "position": f"0000000001:{n:012d}:b000000000000", "table": "tags", "ts": "x", "v": 1})
             + b"\n" for n in range(1, 5)]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(lines))
    (tmp_path / "out").mkdir()
    fewer = latest.superseded_left_out([str(source)], None, [latest.listed("shop", "tags", tags)], tmp_path / "out")
    assert fewer is not None and fewer.files[0].read_bytes() == b""
    schema = keyed_line_schema(["id"], [])
    rows = flat.with_flat(spark, spark_lines(spark, schema, [str(p) for p in fewer.files], None), schema, fewer)
    assert _rows(rows) == _rows(spark_lines(spark, schema, [str(source)], None))


def test_only_the_run_s_biggest_tables_are_written_flat_in_two_files_each(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A run touching many tables opens and creates two flat files for each of at most FLAT_TABLES of them (those
    with the most row changes), however many input files; the other tables' lines stay JSON."""
    from cdc.schema import SchemaHistory
    from cdc.spark import scan
    from cdc.state import StateDir

    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    monkeypatch.setattr(latest, "FLAT_TABLES", 2)
    history = SchemaHistory(StateDir(tmp_path / "state").ensure().schema)
    sizes = {"a": 3, "b": 9, "c": 6}
    for name in sizes:
        history.record(TableSchema("shop", name, SCHEMA.columns, SCHEMA.primary_key, SCHEMA.position))
    files, n = [], 0
    for part in range(5):
        lines = []
        for name, count in sizes.items():
            for _ in range(count):
                n += 1  # after the schema's position
                lines.append(_line(100 + n, _image(n)).replace(b'"table":"items"', f'"table":"{name}"'.encode()))
        files.append(tmp_path / f"{part}.jsonl")
        files[-1].write_bytes(b"".join(lines))
    infos = scan.local_stats([str(f) for f in files], None)
    fewer = latest.for_run([str(f) for f in files], None, history, infos, tmp_path / "staging")
    assert fewer is not None and sorted(fewer.flat) == [("shop", "b"), ("shop", "c")]
    assert sorted(p.name for t in fewer.flat.values() for p in t.files) == [
        "flat-0-000001.tsv", "flat-0-000002.tsv", "flat-1-000001.tsv", "flat-1-000002.tsv"]
    assert sum(p.read_bytes().count(b"\n") for t in fewer.flat.values() for p in t.files) == 5 * (9 + 6)
    assert sum(f.read_bytes().count(b"\n") for f in fewer.files) == 5 * 3  # table a's lines, as JSON
    assert sorted(p.name for p in (tmp_path / "staging").iterdir()) == sorted(
        [f"latest-{i:06d}.jsonl" for i in range(5)] + ["flat-0-000001.tsv", "flat-0-000002.tsv",
                                                         "flat-1-000001.tsv", "flat-1-000002.tsv"])


def test_a_line_at_or_before_the_run_s_start_is_not_merged_again_even_flat(tmp_path: Path, spark: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass leaves out the lines it reads at or before the run's start, but keeps one it cannot read so far (a
    position longer than it keeps), which may still be plain: read flat, it goes through the merge's own filter on
    positions as a JSON line does, or the old change would undo a later one."""
    from cdc.changelog import SegmentWriter, position_string
    from cdc.schema import SchemaHistory
    from cdc.spark import merge, read_lake_table
    from cdc.state import StateDir

    monkeypatch.setattr(latest, "FEWER_LINES_BYTES", 0)
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    monkeypatch.setattr("cdc.spark.small_tables.SMALL_LAKE_ROWS", -1)  # table by table, as a big one
    state = StateDir(tmp_path / "state")
    state.ensure()
    binlog = "mariadb-bin.000001"
    columns = (Column("k", "varchar(16)", "varchar"), Column("v", "int(11)", "int"))
    SchemaHistory(state.schema).record(TableSchema("shop", "t", columns, ("k",), position_string(binlog, 4, 0)))

    def change(position: str, op: str, k: str, v: int) -> tuple[str, bytes]:
        line = {"after": {"k": k, "v": v}, "before": None if op == "c" else {"k": k, "v": 0}, "db": "shop",
                "key": {"k": k}, "op": op, "position": position, "table": "t", "ts": "2026-12-03T07:00:01Z", "v": 1}
        return position, orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n"

    def run(*segments: list[tuple[str, bytes]]) -> None:
        writer = SegmentWriter(state.changelog, owner="test")
        for lines in segments:
            for position, data in lines:
                writer.write(position, data)
            writer.seal()
        merge(state, spark=spark)

    at = [position_string(binlog, pos, 0) for pos in range(1000)]
    run([change(at[100], "c", "a", 1), *(change(at[110 + n], "c", f"small {n}", n) for n in range(4))],
        [change(at[200], "u", "a", 2), change(at[207], "u", "a", 4)])
    older = at[205] + "~" * 40  # sorts before the run's start (at[207]); longer than the pass keeps (POS_MAX)
    run([change(at[400], "u", "small 0", 10), change(older, "u", "a", 3),
         *(change(at[401 + n], "u", f"small {n}", n + 10) for n in range(1, 4))])
    rows = read_lake_table(state.root / "lake", "shop", "t").by_key()
    assert {k: r["v"] for k, r in rows.items()} == {("a",): 4, **{(f"small {n}",): n + 10 for n in range(4)}}
