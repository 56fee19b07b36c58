"""The C reader of superseded change lines (cdc/spark/_latest.c, cdc.spark.latest) against what it must keep.

What it may leave out is checked against a reference written here from the compaction's rule (each key's change
with the highest position wins; an update that moves its row also deletes the old key), in plain Python (the
json module, which reads numbers beyond 64 bits as Spark does): every key's winners are the same with the lines
it keeps as with all of them, and every line it is not sure of, or that another table or reader needs, is kept
byte for byte. The merge's result with the lines left out is held equal to the model's in
tests/spark/test_merge.py.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.changelog import encode_line
from cdc.spark import latest, scan

LISTED = [("shop", "orders", ["id"]), ("shop", "pairs", ["k1", "k2"]), ("naïve", "🦀 crab", ["id"]),
          ("we'ird\\db", 't"ab.le\n\x00', ["id"])]  # escaped in the lines
KEYS: dict[tuple[str, str], list[str]] = {(db, table): keys for db, table, keys in LISTED}
ODD_STRINGS = ["", "O'Brien", 'say "hi"', "back\\slash", "emoji 🎉", "line\nbreak", "\u2028", "ünï", "null", "1"]


def _position(n: int) -> str:
    return f"0000000001:{n:012d}:b000000000000"


def _line(rng: random.Random, n: int, table: tuple[str, str], op: str, key: dict[str, Any],
          before_key: dict[str, Any] | None = None) -> bytes:
    image = {**key, "note": rng.choice(ODD_STRINGS), "price": f"{rng.randrange(10**6)}.50",
             "big": rng.choice([18446744073709551615, -1, 0.1, 1.5e300])}
    before = None if op in ("c", "r") else {**image, **(before_key or key)}
    change = {"after": None if op == "d" else image, "before": before, "db": table[0], "key": key, "op": op,
              "position": _position(n), "table": table[1], "ts": "2026-12-01T07:00:01Z", "v": 1}
    return encode_line(change)


def _key(rng: random.Random, table: tuple[str, str]) -> dict[str, Any]:
    if table[1] == "pairs":
        return {"k1": rng.choice(ODD_STRINGS[:5]), "k2": rng.choice([0, 18446744073709551615, 1, 2])}
    return {"id": rng.randrange(40)}


def _workload(rng: random.Random, lines: int) -> list[bytes]:
    """Row changes to few keys (most superseded), moving updates, duplicates, other tables, DDL and odd lines."""
    tables = [*KEYS, ("shop", "unlisted")]
    out: list[bytes] = []
    for n in range(1, lines + 1):
        table, roll = rng.choice(tables), rng.random()
        key = _key(rng, table) if table in KEYS else {"id": rng.randrange(40)}
        position = rng.randrange(1, lines + 1) if rng.random() < 0.1 else n  # out of order, sometimes tied
        if roll < 0.1:  # an update moving its row from another key
            out.append(_line(rng, position, table, "u", key, _key(rng, table) if table in KEYS else {"id": -1}))
        elif roll < 0.15 and out:
            out.append(rng.choice(out))  # a replayed line
        elif roll < 0.17:
            out.append(orjson.dumps({"db": table[0], "ddl": "ALTER", "kind": "alter", "op": "ddl",
                                     "position": _position(position), "table": table[1]}) + b"\n")
        elif roll < 0.2:
            out.append(_odd_line(rng, position, table, key))
        else:
            out.append(_line(rng, position, table, rng.choice("cudr"), key))
    return out


def _odd_line(rng: random.Random, n: int, table: tuple[str, str], key: dict[str, Any]) -> bytes:
    """A line the C reader is not sure of, or whose update it must not take for one that keeps its row."""
    good = _line(rng, n, table, "u", key)
    return rng.choice([
        good.replace(b'"key":{', b'"key":  {'),  # other bytes, the same key: kept, never wrongly merged
        good.replace(b'"before":{', b'"before":{"i\\u0064":5,'),  # an escaped name in `before`: may be the key
        good.replace(b'"before":{', b'"before":{"id":7,'),  # the key column twice in `before`
        good.replace(b'"db"', b'"d\\u0062"'),  # an escaped field name
        good.replace(b'"key":{', b'"key":[{').replace(b'},"op"', b'}],"op"'),  # `key` not an object
        good.replace(b'"op":"u"', b'"op":"x"'),
        good[:-10] + b"\n",  # cut
        b"\n",
        b"  \t \n",
        good.replace(b'"before":{', b'"before":{"k1":"\xff",'),  # invalid UTF-8
        good.replace(b'"big":', b'"big":1234567890123456789012345,"huge":'),  # beyond 64 bits: only skipped
        good.replace(b'"big":', b'"big":1e999,"huge":'),
    ])


def _events(line: bytes, merged_upto: str | None) -> list[tuple[Any, ...]]:
    """The compaction's events of one line as (table, key, position): none for a line it does not count."""
    try:  # numbers beyond 64 bits too (orjson refuses them; Spark reads them)
        change = json.loads(line, parse_constant=_refuse)
    except ValueError:  # UnicodeDecodeError included
        return []
    if not isinstance(change, dict) or change.get("op") not in ("c", "u", "d", "r"):
        return []
    table, position = (change.get("db"), change.get("table")), change.get("position")
    if table not in KEYS or not isinstance(position, str) or (merged_upto and position <= merged_upto):
        return []
    names, key, before = KEYS[table], change.get("key"), change.get("before")  # type: ignore[index]
    if not isinstance(key, dict):
        return []
    new = tuple(orjson.dumps(key.get(k)) for k in names)
    events = [(table, new, position)]
    if change["op"] == "u":
        old = tuple(orjson.dumps(before.get(k)) for k in names) if isinstance(before, dict) else None
        if old != new:
            events.append((table, old, position))
    return events


def _refuse(name: str) -> None:
    raise ValueError(f"not JSON: {name}")


def _winners(lines: list[bytes], merged_upto: str | None) -> dict[tuple[Any, ...], tuple[str, Counter[bytes]]]:
    """Per (table, key): the highest position and the lines holding it (as many times as they occur)."""
    best: dict[tuple[Any, ...], tuple[str, Counter[bytes]]] = {}
    for line in lines:
        for table, key, position in _events(line, merged_upto):
            have = best.get((table, key))
            if have is None or position > have[0]:
                best[(table, key)] = (position, Counter([line.rstrip(b"\n")]))
            elif position == have[0]:
                have[1][line.rstrip(b"\n")] += 1
    return best


def _left(tmp_path: Path, files: list[Path], merged_upto: str | None = None,
          tables: list[latest.Listed] = LISTED) -> list[bytes]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    found = latest.superseded_left_out([str(f) for f in files], merged_upto, tables, out)
    assert found is not None, "nothing to leave out"
    paths, skipped = found.files, found.skipped
    assert len(paths) == len(files)
    left = []
    for path in paths:
        assert path.stat().st_mode & 0o777 == 0o600
        data = path.read_bytes()
        assert not data or data.endswith(b"\n")
        left += [line + b"\n" for line in data.split(b"\n")[:-1]]
        path.unlink()
    assert skipped == _lines(files) - len(left)
    return left


def _lines(files: list[Path]) -> int:
    """Lines as the reader counts them: each newline ends one, and a file's last bytes without one make one more."""
    data = [gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes() for f in files]
    return sum(d.count(b"\n") + (not d.endswith(b"\n") and bool(d)) for d in data)


@pytest.fixture(autouse=True)
def _always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)  # every case writes its file, whatever it leaves out


def test_the_reader_is_built() -> None:
    assert scan.native_module() is not None and hasattr(scan.native_module(), "Latest"), scan.NATIVE_PROBLEM


def test_a_key_keeps_its_last_change_and_a_moving_update(tmp_path: Path) -> None:
    rng = random.Random(1)
    table = ("shop", "orders")
    lines = [_line(rng, 1, table, "c", {"id": 1}), _line(rng, 2, table, "u", {"id": 1}),
             _line(rng, 3, table, "u", {"id": 2}, {"id": 1}),  # moves 1 -> 2: deletes 1 too
             _line(rng, 4, table, "u", {"id": 2}), _line(rng, 5, table, "d", {"id": 3}),
             _line(rng, 6, table, "c", {"id": 3}), _line(rng, 7, table, "r", {"id": 4})]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines)[:-1])  # the last line without its newline
    assert _left(tmp_path, [path]) == [lines[i] for i in (1, 2, 3, 5, 6)]


@pytest.mark.parametrize("seed", range(6))
def test_every_key_keeps_its_winners_and_every_other_line_is_kept(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = _workload(rng, 3000)
    cut = sorted(rng.sample(range(len(lines)), 3))
    files = []
    for i, (start, end) in enumerate(zip([0, *cut], [*cut, len(lines)], strict=True)):
        path = tmp_path / f"{i}.jsonl" if i != 1 else tmp_path / f"{i}.jsonl.gz"
        data = b"".join(lines[start:end])
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        files.append(path)
    merged_upto = _position(300) if seed % 2 else None
    left = _left(tmp_path, files, merged_upto)
    assert _winners(left, merged_upto) == _winners(lines, merged_upto)
    dropped = Counter(lines) - Counter(left)
    assert not Counter(left) - Counter(lines), "only lines of the input, each at most as often"
    assert len(dropped) > 300, "most changes to 40 keys are superseded"
    superseded = set()
    for line in dropped:  # only lines merged before (the merge drops them), or row changes that lose
        change = json.loads(line)
        if merged_upto is None or change["position"] > merged_upto:
            assert len(_events(line, None)) == 1 and change["op"] in "cudr", line
            superseded.add((change["db"], change["table"]))
    assert superseded == set(KEYS), "every listed table takes part, the escaped names' too"


def test_a_table_not_listed_keeps_every_line(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = [_line(rng, n, ("shop", "orders"), "u", {"id": 1}) for n in range(1, 50)]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    assert _left(tmp_path, [path], tables=[("shop", "other", ["id"])]) == lines
    assert _left(tmp_path, [path], tables=[("shop", "orders", ["id"])]) == lines[-1:]
    assert _left(tmp_path, [path], _position(49)) == []  # merged before: the merge drops them anyway


def test_not_worth_it_and_not_possible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(_line(rng, n, ("shop", "orders"), "c", {"id": n}) for n in range(1, 20)))
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.25)
    out = tmp_path / "out"
    out.mkdir()
    assert latest.superseded_left_out([str(path)], None, LISTED, out) is None  # no key twice
    assert latest.superseded_left_out([str(path)], None, [], out) is None
    assert latest.superseded_left_out([str(path) + ".zst"], None, LISTED, out) is None
    monkeypatch.setattr(latest, "SKIP_AT_LEAST", 0.0)
    (tmp_path / "not a directory").write_bytes(b"")  # a write that fails (as on a full disk): every line is read
    assert latest.superseded_left_out([str(path)], None, LISTED, tmp_path / "not a directory") is None
    monkeypatch.setenv("CDC_NATIVE", "0")
    assert latest.superseded_left_out([str(path)], None, LISTED, out) is None
    assert not list(out.iterdir())


def test_bounded_keys_keep_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_RECORDS, the lines are all kept; the lines recorded still lose to later recorded ones."""
    monkeypatch.setattr(latest, "MAX_RECORDS", 12)
    rng = random.Random(4)
    lines = [_line(rng, n, ("shop", "orders"), "u", {"id": n % 4}) for n in range(1, 41)]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    left = _left(tmp_path, [path])
    assert _winners(left, None) == _winners(lines, None)
    assert left == lines[8:12] + lines[12:]  # 12 recorded: the last of each key's three among them stays


def test_misuse_is_refused() -> None:
    native = scan.native_module()
    with pytest.raises(ValueError, match="without a primary key"):
        native.Latest(None, [("d", "t", [])])
    with pytest.raises(ValueError, match="twice"):
        native.Latest(None, [("d", "t", ["id"]), ("d", "t", ["id"])])
    with pytest.raises(TypeError):
        native.Latest(None, [("d", "t", [1])])
    with pytest.raises(ValueError, match="longer"):
        native.Latest("x" * 100, [])
    with pytest.raises(ValueError, match="parts"):
        native.Latest(None, [], 0)
    reader = native.Latest(None, [("d", "t", ["id"])], 2)
    with pytest.raises(RuntimeError, match="no such part"):
        reader.feed(2, b"{}\n")
    reader.feed(0, b'{"db":"d"}\n')
    with open(os.devnull, "wb") as sink:
        with pytest.raises(RuntimeError, match="before resolve"):
            reader.write(0, b"{}\n", sink.fileno())
        assert reader.resolve() == (1, 0)
        with pytest.raises(RuntimeError, match="twice"):
            reader.resolve()
        with pytest.raises(RuntimeError, match="after resolve"):
            reader.feed(1, b"{}\n")
        with pytest.raises(ValueError, match="more lines"):
            reader.write(0, b"{}\n{}\n", sink.fileno())
    with pytest.raises(RuntimeError, match="__init__"):
        native.Latest.__new__(native.Latest).feed(0, b"{}\n")


@pytest.mark.parametrize("seed", range(4))
def test_the_scan_feeds_the_pass_the_same_lines(tmp_path: Path, seed: int) -> None:
    """The table facts' scan feeding the pass from its own read of each line (scan.local_stats(latest=...)): the
    same facts, and the same lines left, byte for byte, as the pass reading the files itself."""
    rng = random.Random(seed)
    lines = [line for line in _workload(rng, 3000) if _scannable(line)]  # the scan stops at a damaged line
    files = []
    for i, part in enumerate((lines[:1000], lines[1000:1700], lines[1700:])):
        path = tmp_path / (f"{i}.jsonl.gz" if i == 1 else f"{i}.jsonl")
        data = b"".join(part)
        path.write_bytes(gzip.compress(data) if i == 1 else data)
        files.append(str(path))
    merged_upto = _position(300) if seed % 2 else None
    alone = _left(tmp_path, [Path(f) for f in files], merged_upto)
    fed = scan.native_module().Latest(merged_upto, LISTED, len(files), latest.MAX_RECORDS)
    assert scan.local_stats(files, merged_upto, fed) == scan.local_stats(files, merged_upto)
    found = latest._resolved(fed, files, tmp_path / "out", LISTED)
    assert found is not None
    left = b"".join(p.read_bytes() for p in found[0])
    assert left == b"".join(alone) and found[1] == _lines([Path(f) for f in files]) - len(alone)


def _scannable(line: bytes) -> bool:
    try:
        return not line.strip() or isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def test_a_pass_fed_by_the_scan_is_used_only_where_its_tables_agree() -> None:
    """for_run uses the scan's Latest only when each of its tables with lines in the run is one for_run chose, with
    the same key (a table the scan's Latest took that for_run would not: the lines are read again)."""
    stats = [scan.TableStats("shop", "orders", 5, "a", "b", "b", None, None),
             scan.TableStats("shop", "idle", 0, None, None, "a", None, None)]
    chosen: list[latest.Listed] = [("shop", "orders", ["id"], "i")]
    assert latest._agrees([("shop", "orders", ["id"], "i"), ("shop", "idle", ["id"], "i")], chosen, stats)
    assert not latest._agrees([("shop", "orders", ["code"], "s")], chosen, stats)
    assert not latest._agrees([("shop", "orders", ["id"], None)], chosen, stats)
    flat: list[latest.Listed] = [("shop", "orders", ["id"], "i", ["note"])]
    assert latest._agrees(flat, flat, stats)
    assert not latest._agrees([("shop", "orders", ["id"], "i", ["note", "total"])], flat, stats)
    assert not latest._agrees([("shop", "orders", ["id"], "i")], [], stats)


def test_a_latest_is_fed_only_by_the_c_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(_line(random.Random(5), 1, ("shop", "orders"), "u", {"id": 1}))
    fed = scan.native_module().Latest(None, LISTED, 1)
    monkeypatch.setenv("CDC_NATIVE", "0")  # the Python scan: it could not feed the Latest, which would leave out all
    with pytest.raises(ValueError, match="only by the C scanner"):
        scan.local_stats([str(path)], None, fed)


def test_the_scan_feeds_a_pass_of_the_keyed_tables_whose_schema_is_settled(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """scan_and_feed's Latest takes the tables whose last schema version is at or before the run's start, with a
    primary key (not a keyless one, not one altered since); none for a snapshot's rows alone or a first merge. The
    lines it leaves are the separate pass's."""
    from cdc.schema import Column, SchemaHistory, TableSchema
    from cdc.state import StateDir

    monkeypatch.setattr(latest, "FEWER_LINES_BYTES", 0)  # the gate on size: this input is small
    history = SchemaHistory(StateDir(tmp_path / "state").ensure().schema)
    ids = (Column("id", "int(11)", "int"), Column("note", "text", "text"))
    history.record(TableSchema("shop", "orders", ids, ("id",), _position(1)))
    history.record(TableSchema("shop", "bag", ids, (), _position(1)))  # keyless: a multiset, never in the pass
    history.record(TableSchema("shop", "later", ids, ("id",), _position(1)))
    history.record(TableSchema("shop", "later", ids[:1], ("id",), _position(500)))  # altered inside the run
    rng = random.Random(9)
    path = tmp_path / "a.jsonl"
    lines = [_line(rng, n, ("shop", name), "u", {"id": n % 3}) for n in range(300, 700) for name in ("orders", "later")]
    path.write_bytes(b"".join(lines))
    files, upto = [str(path)], _position(299)
    binlog, snapshot = ["seg-0000000001-000000000300-b000000000000.jsonl"], ["seg-0000000001-000000000300-s000000000000.jsonl"]
    infos, fed = latest.scan_and_feed(files, upto, history, binlog)
    assert fed is not None and fed.tables == [("shop", "orders", ["id"], "i", ["note"])]
    assert infos == scan.local_stats(files, upto)
    assert latest.scan_and_feed(files, upto, history, snapshot)[1] is None
    assert latest.scan_and_feed(files, None, history, binlog)[1] is None
    (tmp_path / "fed").mkdir()
    (tmp_path / "alone").mkdir()
    found = latest._resolved(fed.latest, files, tmp_path / "fed", fed.tables)
    alone = latest.superseded_left_out(files, upto, fed.tables, tmp_path / "alone")
    assert found is not None and alone is not None and found.skipped == alone.skipped > 0
    assert found.files[0].read_bytes() == alone.files[0].read_bytes()
    assert [p.read_bytes() for p in found.flat["shop", "orders"].files] == \
        [p.read_bytes() for p in alone.flat["shop", "orders"].files]


# Tables whose keys unique() may vouch for: integer, text, and both (docs/formats.md's forms of each).
PLAIN: list[latest.Listed] = [("shop", "orders", ["id"], "i"), ("shop", "codes", ["code"], "s"),
                              ("shop", "pairs", ["k1", "k2"], "si")]
HAZARDS = ["none", "moving update", "replayed line", "number not an integer", "whitespace in the key",
           "escaped text", "names out of order", "escaped op", "unreadable line", "past max_records", "no kinds"]


def _plain_key(rng: random.Random, table: str) -> dict[str, Any]:
    if table == "codes":
        return {"code": rng.choice(["a", "B", "a b", "O'Brien", "1", "-0"])}
    if table == "pairs":
        return {"k1": rng.choice(["x", "y"]), "k2": rng.choice([0, -1, 18446744073709551615])}
    return {"id": rng.randrange(-5, 30)}


def _hazard(rng: random.Random, hazard: str, n: int) -> tuple[bytes, str | None]:
    """A line bringing `hazard` into a plain workload, and the table it makes not unique (None: every table)."""
    table = rng.choice(["orders", "codes", "pairs"])
    key = _plain_key(rng, table)
    line = _line(rng, n, ("shop", table), "u", key)
    if hazard == "moving update":
        moved_from = next(k for k in iter(lambda: _plain_key(rng, table), None) if k != key)
        return _line(rng, n, ("shop", table), "u", key, moved_from), table
    if hazard == "number not an integer":
        return _line(rng, n, ("shop", "orders"), "u", {"id": 3.0}), "orders"
    if hazard == "whitespace in the key":
        return line.replace(b'"key":{', b'"key":{ '), table
    if hazard == "escaped text":
        return _line(rng, n, ("shop", "codes"), "u", {"code": 'say "hi"'}), "codes"
    if hazard == "names out of order":
        return line.replace(b'"key":{"k1":"x",', b'"key":{').replace(b'},"op"', b',"k1":"x"},"op"') \
            if b'"key":{"k1":"x",' in line else _hazard(rng, hazard, n)[0], "pairs"
    if hazard == "escaped op":
        return line.replace(b'"op":"u"', b'"op":"\\u0075"'), None
    if hazard == "unreadable line":
        return line[:-10] + b"\n", None
    raise AssertionError(hazard)


def _plain_workload(rng: random.Random, lines: int, hazard: str) -> tuple[list[bytes], set[str | None]]:
    """Row changes of the PLAIN tables at distinct positions, keys in the change log's form, none moving a row;
    with `hazard` brought in a few times: the lines, and the tables the hazard touches (None: all)."""
    out, touched = [], set()
    for n in range(1, lines + 1):
        if hazard not in ("none", "past max_records", "no kinds", "replayed line") and rng.random() < 0.01:
            line, table = _hazard(rng, hazard, n)
            out.append(line)
            touched.add(table)
            continue
        table = rng.choice(["orders", "codes", "pairs"])
        out.append(_line(rng, n, ("shop", table), rng.choice("cudr"), _plain_key(rng, table)))
        if hazard == "replayed line" and rng.random() < 0.01:
            out.append(out[-1])
            touched.add(table)
    return out, touched


def _typed_key(line: bytes) -> tuple[Any, ...] | None:
    """A row change's table and key as the compaction's typed key columns see it (an integer's value, a text's
    text); None for a line the compaction takes no event from."""
    try:
        change = json.loads(line)
    except ValueError:
        return None
    if not isinstance(change, dict) or change.get("op") not in ("c", "u", "d", "r"):
        return None
    keys = {t: k for _, t, k, _ in PLAIN}[change["table"]]
    return (change["table"], *(int(v) if isinstance(v, (int, float)) else v for v in (change["key"][k] for k in keys)))


@pytest.mark.parametrize("hazard", HAZARDS)
def test_unique_vouches_only_for_tables_whose_lines_left_hold_one_event_per_key(tmp_path: Path, hazard: str) -> None:
    """unique() is True for a table only where the lines left hold each of its keys once, typed as the compaction
    types them: on plain lines, every table; with a hazard that could give a key two events, not its table (or not
    any, where the line is beyond reading)."""
    rng = random.Random(HAZARDS.index(hazard))
    lines, touched = _plain_workload(rng, 4000, hazard)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    tables = [t[:3] + (None,) for t in PLAIN] if hazard == "no kinds" else PLAIN  # type: ignore[operator]
    reader = scan.native_module().Latest(None, tables, 1, 2000 if hazard == "past max_records" else 10**9)
    assert reader.feed(0, path.read_bytes()) == len(lines)
    reader.resolve()
    unique = {t[1]: one for t, one in zip(PLAIN, reader.unique(), strict=True)}
    out = tmp_path / "left.jsonl"
    with out.open("wb") as sink:
        reader.write(0, path.read_bytes(), sink.fileno())
    events = Counter(_typed_key(line) for line in out.read_bytes().splitlines())
    events.pop(None, None)
    for table, one in unique.items():  # the property: what it vouches for holds
        assert not one or all(n == 1 for key, n in events.items() if key[0] == table), table
    if hazard == "none":
        assert all(unique.values())
    elif hazard in ("past max_records", "no kinds") or None in touched:
        assert not any(unique.values())
    else:
        assert touched and not any(unique[t] for t in touched if t)
        assert all(unique[t] for t in unique if t not in touched)


def test_unique_is_asked_after_resolve() -> None:
    reader = scan.native_module().Latest(None, PLAIN, 1)
    with pytest.raises(RuntimeError, match="before resolve"):
        reader.unique()
    with pytest.raises(ValueError, match="kinds"):
        scan.native_module().Latest(None, [("d", "t", ["a", "b"], "i")])
    with pytest.raises(ValueError, match="kinds"):
        scan.native_module().Latest(None, [("d", "t", ["a"], "x")])


# ---- the flat form (_flat.c) against a reference written from its rules, on the hostile workload ----

FLAT_VALUES = ["note", "price", "big"]
TOP = {"after", "before", "db", "key", "op", "position", "src", "table", "ts", "v"}
NULL = b"\\N"


class _NotPlain(Exception):
    pass


def _node(text: str, i: int) -> tuple[Any, int]:
    """One JSON value of `text` at i, as ("str", text, escaped) / ("int", raw) / ("lit", raw) / ("obj", members) /
    ("other",), and the index after it; members: [(name, name escaped, node)]."""
    decoder = json.JSONDecoder()
    i = len(text) - len(text[i:].lstrip(" \t\r\n"))
    if text[i] == '"':
        value, end = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise _NotPlain
        return ("str", value, "\\" in text[i:end]), end
    if text[i] == "{":
        members, i = [], i + 1
        while True:
            i = len(text) - len(text[i:].lstrip(" \t\r\n"))
            if text[i] == "}":
                return ("obj", members), i + 1
            if text[i] == ",":
                i += 1
                continue
            name, i = _node(text, i)
            i = text.index(":", i) + 1
            value, i = _node(text, i)
            members.append((name[1], name[2], value))
    end = decoder.raw_decode(text, i)[1]
    raw = text[i:end]
    if raw in ("true", "false", "null"):
        return ("lit", raw), end
    if re.fullmatch(r"-?(0|[1-9][0-9]*)", raw) and raw != "-0" and len(raw) <= 18:
        return ("int", raw), end
    return ("other",), end


def _flat_reference(line: bytes, keys: list[str], values: list[str]) -> bytes | None:
    """The flat form _flat.c's rules give this line (None: it stays JSON)."""
    try:
        text = line.rstrip(b"\n").decode("utf-8")
        json.loads(text, parse_constant=_refuse)
        top, _ = _node(text, 0)
        return _flat_of(top, keys, values)
    except (ValueError, _NotPlain, IndexError):
        return None


def _flat_of(top: Any, keys: list[str], values: list[str]) -> bytes:
    if top[0] != "obj":
        raise _NotPlain
    names = [n for n, _, _ in top[1]]
    if any(escaped for _, escaped, _ in top[1]) or len(set(names)) != len(names) or not set(names) <= TOP:
        raise _NotPlain
    fields = {n: v for n, _, v in top[1]}

    def plain_string(name: str, absent_null: bool = False) -> bytes:
        node = fields.get(name, ("lit", "null") if absent_null else None)
        if absent_null and node == ("lit", "null"):
            return NULL
        if node is None or node[0] != "str" or node[2]:
            raise _NotPlain
        return node[1].encode()

    def image(name: str, columns: list[str]) -> tuple[bytes, list[bytes]]:
        node = fields.get(name, ("lit", "null"))
        if node == ("lit", "null") and name != "key":
            return NULL, [NULL] * len(columns)
        if node[0] != "obj":
            raise _NotPlain
        layout = {c.lower() for c in keys + values}
        found: dict[str, Any] = {}
        for member, escaped, value in node[1]:
            if escaped or (member.lower() in layout and member not in keys + values) or member in found:
                raise _NotPlain
            if member in columns:
                found[member] = value
        out = []
        for column in columns:
            value = found.get(column, ("lit", "null"))
            if value[0] == "str" and not value[2]:
                out.append(value[1].encode())
            elif value[0] in ("int", "lit"):
                out.append(NULL if value[1] == "null" else value[1].encode())
            else:
                raise _NotPlain
        return b"1", out

    op = plain_string("op")
    if op not in (b"c", b"u", b"d", b"r"):
        raise _NotPlain
    head = [op, plain_string("position"), plain_string("ts", absent_null=True)]
    plain_string("db")
    plain_string("table")
    _, key = image("key", keys)
    before, before_key = image("before", keys)
    after, after_values = image("after", values)
    return b"\t".join([*head, *key, before, *before_key, after, *after_values]) + b"\n"


@pytest.mark.parametrize("seed", range(4))
def test_flat_lines_are_the_plain_kept_lines_and_every_other_kept_line_stays_json(tmp_path: Path, seed: int) -> None:
    """With flat columns, each kept line goes to exactly one place: its table's flat file where the rules say it is
    plain (in the reference's flat form), else the JSON file, in input order."""
    rng = random.Random(seed)
    lines = _workload(rng, 3000)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    kept = _left(tmp_path, [path])  # the same pass without flat columns
    flat_tables: list[latest.Listed] = [(db, table, keys, None, FLAT_VALUES) for db, table, keys in LISTED]
    (tmp_path / "flat").mkdir()
    fewer = latest.superseded_left_out([str(path)], None, flat_tables, tmp_path / "flat")
    assert fewer is not None
    expected_json, expected_flat = [], {t: [] for t in KEYS}
    for line in kept:
        change = _parsed(line)
        table = (change.get("db"), change.get("table")) if isinstance(change, dict) else None
        form = _flat_reference(line, KEYS[table], FLAT_VALUES) if table in KEYS else None
        if form is None:
            expected_json.append(line)
        else:
            expected_flat[table].append(form)
    assert fewer.files[0].read_bytes() == b"".join(expected_json)
    for table, forms in expected_flat.items():
        got = fewer.flat.get(table)
        assert (b"".join(p.read_bytes() for p in got.files) if got else b"") == b"".join(forms), table
        assert not got or (got.keys, got.values) == (KEYS[table], FLAT_VALUES)
    # Most of this workload's lines hold a hazard (a float, a 20-digit integer, an escape, escaped table names).
    assert sum(len(f) for f in expected_flat.values()) > 30, "plain lines are written flat"
    assert len(expected_json) > 300, "and the others stay JSON"


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line, parse_constant=_refuse)
    except ValueError:
        return None
