"""The pass's kept lines whose key the lake already holds, found in C (cdc.spark.lake_keys, Latest.in_lake).

The compaction reads such a line as `_in_lake` without joining with the lake's keys, so the marks must be exactly
Spark's join's: a kept line is marked when a lake row's typed key columns are its key, and no other is.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc.changelog import encode_line
from cdc.spark import latest, scan
from cdc.spark.lake_keys import IN_LAKE

ORDERS, PAIRS, CODES, MOVED, NO_LAKE, DECIMAL = (("shop", t) for t in ("orders", "pairs", "codes", "moved", "new", "dec"))
# Key columns out of their names' byte order (the change log writes a key's members sorted), an integer beside text.
LISTED: list[latest.Listed] = [(*ORDERS, ["id"], "i", ["note"]), (*PAIRS, ["zk", "ak"], "is", None),
                               (*CODES, ["code"], "s", ["note"]), (*MOVED, ["id"], "i", None),
                               (*NO_LAKE, ["id"], "i", None), (*DECIMAL, ["id"], "i", None)]
INTS = [-(2 ** 63), -5, -1, 0, 1, 7, 2 ** 63 - 1]
TEXTS = ["a", "B", "a b", "O'Brien", "1", "-0", "zz"]
HOSTILE = ['say "hi"', "back\\slash", "ünï", "line\nbreak", "tab\there", "emoji 🎉"]  # no change line holds these


def _key(rng: random.Random, table: tuple[str, str]) -> dict[str, Any]:
    if table == PAIRS:
        return {"zk": rng.choice(INTS[1:6]), "ak": rng.choice(TEXTS)}
    if table == CODES:
        return {"code": rng.choice(TEXTS)}
    return {"id": rng.choice(INTS)}


def _lines(rng: random.Random, n: int) -> list[tuple[tuple[str, str], dict[str, Any], bytes]]:
    out = []
    for i in range(1, n + 1):
        table = MOVED if i == 7 else rng.choice([ORDERS, PAIRS, CODES, MOVED, NO_LAKE, DECIMAL])
        key, op = _key(rng, table), rng.choice("cuud")
        before = {**key, "note": "n"} if op in "ud" else None
        if i == 7:  # a row moved by an update: the table's lines are not one event per key
            op, before = "u", {"id": 123456, "note": "n"}
        change = {"after": None if op == "d" else {**key, "note": f"v{i}"}, "before": before, "db": table[0],
                  "key": key, "op": op, "position": f"0000000001:{i:012d}:b000000000000", "table": table[1],
                  "ts": "2026-12-03T21:00:00Z", "v": 1}
        out.append((table, key, encode_line(change)))
    return out


def _lake(directory: Path, columns: dict[str, pa.Array], files: int = 2) -> Path:
    directory.mkdir(parents=True)
    table = pa.table(columns)
    step = (len(table) + files - 1) // files
    for n in range(files):
        pq.write_table(table.slice(n * step, step), directory / f"part-{n:05d}.parquet")
    (directory / "_SUCCESS").write_bytes(b"")
    return directory


def _lakes(tmp_path: Path) -> dict[tuple[str, str], Path]:
    pairs = [(z, a) for z in INTS[1:6] for a in TEXTS[:4] + HOSTILE]
    return {
        ORDERS: _lake(tmp_path / "orders", {"id": pa.array(INTS[::2] + [99], pa.int64()), "x": pa.array(["r"] * 5)}),
        # an INT key column is 32 bits in Arrow
        PAIRS: _lake(tmp_path / "pairs", {"ak": pa.array([a for _, a in pairs]),
                                          "zk": pa.array([z for z, _ in pairs], pa.int32())}, files=3),
        CODES: _lake(tmp_path / "codes", {"code": pa.array(TEXTS[2:] + HOSTILE, pa.large_string())}),
        MOVED: _lake(tmp_path / "moved", {"id": pa.array(INTS, pa.int64())}),
        DECIMAL: _lake(tmp_path / "dec", {"id": pa.array([0, 1], pa.decimal128(20, 0))}),
    }


def _typed(table: tuple[str, str], key: dict[str, Any]) -> tuple[Any, ...]:
    return (key["zk"], key["ak"]) if table == PAIRS else tuple(key.values())


def _lake_keys(path: Path, table: tuple[str, str]) -> set[tuple[Any, ...]]:
    rows = pq.read_table(path).to_pylist()
    return {(r["zk"], r["ak"]) if table == PAIRS else (r["code"] if table == CODES else r["id"],) for r in rows}


def _pass(tmp_path: Path, seed: int) -> tuple[latest.Fewer, dict[str, bool], Path]:
    """The pass over a workload, its lines looked up in the lakes; per position of a key's last change, whether a
    lake holds that key (the reference); the pass's output directory."""
    assert scan.native_module() is not None, scan.NATIVE_PROBLEM
    rng = random.Random(seed)
    lines = _lines(rng, 600)
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    files[0].write_bytes(b"".join(line for _, _, line in lines[:300]))
    files[1].write_bytes(b"".join(line for _, _, line in lines[300:]))
    lakes = _lakes(tmp_path / "lake")
    out = tmp_path / "out"
    out.mkdir()
    fewer = latest.superseded_left_out([str(f) for f in files], None, LISTED, out,
                                        lakes=lambda db, table: lakes.get((db, table)))
    assert fewer is not None
    assert fewer.unique == {ORDERS, PAIRS, CODES, NO_LAKE, DECIMAL}
    assert fewer.in_lake == {ORDERS, PAIRS, CODES}

    last: dict[tuple[Any, ...], tuple[str, bool]] = {}
    for table, key, line in lines:
        position = orjson.loads(line)["position"]
        known = table in fewer.in_lake and _typed(table, key) in _lake_keys(lakes[table], table)
        last[table, _typed(table, key)] = (position, known)
    return fewer, dict(last.values()), out


@pytest.mark.parametrize("seed", range(4))
def test_kept_lines_whose_key_the_lake_holds_go_to_files_of_their_own(tmp_path: Path, seed: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a reference: the last change of each key of a unique table with a lake version is in an IN_LAKE file
    (or a flat line with one field more) exactly when a lake row holds its key (integers of any size, text beside an
    integer with its columns out of their names' order, Arrow's 32-bit and large text); a lake text no change line can
    hold marks nothing; a table whose rows moved, one without a lake, and one whose key is not an integer in Arrow
    are not looked up."""
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    fewer, expected, out = _pass(tmp_path, seed)
    kept = list(out.iterdir())
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in kept)
    found: dict[str, bool] = {}
    for path in kept:
        for line in path.read_bytes().splitlines():
            fields = line.split(b"\t")  # op, position, ts, id, before, id, after, note; one more: in the lake
            position = fields[1].decode() if path.suffix == ".tsv" else orjson.loads(line)["position"]
            found[position] = path.name.startswith(IN_LAKE) if path.suffix != ".tsv" else len(fields) == 9
    assert {p: k for p, k in found.items() if p in expected} == expected
    assert not any(found[p] for p in found.keys() - expected.keys())  # the moved table's other kept lines
    assert any(expected.values()) and not all(expected.values())
    assert sorted(str(p) for p in fewer.files + [f for t in fewer.flat.values() for f in t.files]) == \
        sorted(str(p) for p in kept)


def test_in_lake_is_refused_where_its_marks_could_be_wrong(tmp_path: Path) -> None:
    native = scan.native_module()
    assert native is not None
    line = encode_line({"after": {"id": 1}, "before": None, "db": "d", "key": {"id": 1}, "op": "c",
                        "position": "0000000001:000000000001:b000000000000", "table": "t", "ts": None, "v": 1})
    ints = (pa.array([1], pa.int64()).buffers()[1],)
    reader = native.Latest(None, [("d", "t", ["id"], "i"), ("d", "u", ["id"])], 1)
    reader.feed(0, line)
    with pytest.raises(RuntimeError, match="before resolve"):
        reader.in_lake(0, 1, [ints])
    reader.resolve()
    with pytest.raises(ValueError, match="not known to hold one event per key"):
        reader.in_lake(1, 1, [ints])  # no kinds: unique() never vouches for it
    with pytest.raises(ValueError, match="fewer rows"):
        reader.in_lake(0, 2, [ints])
    assert reader.in_lake(0, 1, [ints]) == 1
    fd = (tmp_path / "out").open("wb")
    with pytest.raises(RuntimeError, match="give lake_fd"):
        reader.write(0, line, fd.fileno())
    assert reader.write(0, line, fd.fileno(), -1, None, fd.fileno()) == (1, len(line), 0)
    with pytest.raises(RuntimeError, match="after write"):
        reader.in_lake(0, 1, [ints])
    fd.close()


def test_the_compaction_reads_the_marks_as_the_pass_made_them(tmp_path: Path, spark: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass's JSON and flat lines read by Spark as the merge reads them (cdc.spark.sources, cdc.spark.flat): each
    line's `_lake` is the reference's, and every kept line is read once."""
    from cdc.spark import flat
    from cdc.spark.sources import spark_lines
    from cdc.spark.types import keyed_line_schema

    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    fewer, expected, _ = _pass(tmp_path, 5)
    schema = keyed_line_schema(["id", "zk", "ak", "code"], ["note"])
    raw = spark_lines(spark, schema, [str(f) for f in fewer.files], None, None, True)
    raw = flat.with_flat(spark, raw, schema, fewer, lake_marks=True)
    rows = raw.select("position", "_lake").collect()
    read = {r["position"]: r["_lake"] for r in rows}
    assert len(read) == len(rows)
    assert {p: k for p, k in read.items() if p in expected} == expected
    assert any(expected.values()) and fewer.flat


def test_a_lookup_that_fails_half_way_leaves_the_table_to_spark_s_join(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A lake version one of whose files cannot be given to C after another was looked up (here a DECIMAL key in
    the second file): the lines already marked are still written (to IN_LAKE files), the table is not known, and the
    pass does not fail (it did: write() refused lines marked without a file for them)."""
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    lines = [encode_line({"after": {"id": n % 10, "note": f"v{n}"}, "before": {"id": n % 10, "note": "o"} if n >= 10
                          else None, "db": "shop", "key": {"id": n % 10},
                          "op": "c" if n < 10 else "u", "position": f"0000000001:{n + 1:012d}:b000000000000",
                          "table": "orders", "ts": None, "v": 1}) for n in range(30)]
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"".join(lines))
    version = tmp_path / "lake"
    version.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(5), pa.int64())}), version / "part-00000.parquet")
    pq.write_table(pa.table({"id": pa.array(range(5, 10), pa.decimal128(20, 0))}), version / "part-00001.parquet")
    out = tmp_path / "out"
    out.mkdir()
    fewer = latest.superseded_left_out([str(source)], None, [("shop", "orders", ["id"], "i")], out,
                                       lakes=lambda db, table: version)
    assert fewer is not None and fewer.unique == {("shop", "orders")} and not fewer.in_lake
    kept = [orjson.loads(line)["position"] for path in fewer.files for line in path.read_bytes().splitlines()]
    assert sorted(kept) == sorted(orjson.loads(line)["position"] for line in lines[20:])
