"""The C scanner (cdc/spark/_scan.c) against the Python scan it stands in for: the same facts or the same error.

Every case runs local_stats twice on the same files, CDC_NATIVE=1 and CDC_NATIVE=0 (orjson, the reference).
No Spark: tests/spark/test_scan.py holds local_stats equal to Spark's aggregate.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.changelog import encode_line
from cdc.errors import DataError
from cdc.spark import scan


def _position(n: int) -> str:
    return f"0000000001:{n:012d}:b000000000000"


def _row(n: int, op: str = "u", db: str = "shop", table: str = "orders", **extra: Any) -> dict[str, Any]:
    image = {"id": n, "note": f"note {n}", "price": "12.50"}
    return {"after": None if op == "d" else image, "before": image if op in ("u", "d") else None, "db": db,
            "key": {"id": n}, "op": op, "position": _position(n * 10),
            "src": {"file": "mariadb-bin.000001", "gtid": None, "pos": n * 10, "row": 0, "server_id": 1, "xid": n},
            "table": table, "ts": "2026-11-29T07:00:01Z", "v": 1, **extra}


def _both(monkeypatch: pytest.MonkeyPatch, files: list[Path], merged_upto: str | None = None) -> tuple[Any, Any]:
    """(C scan's outcome, Python scan's outcome): the stats, or ("error", message, hint)."""
    outcomes = []
    for flag in ("1", "0"):
        monkeypatch.setenv("CDC_NATIVE", flag)
        try:
            outcomes.append(scan.local_stats([str(f) for f in files], merged_upto))
        except DataError as exc:
            outcomes.append(("error", exc.message, exc.hint))
    return outcomes[0], outcomes[1]


def test_the_c_scanner_is_built() -> None:
    """CI builds it (scripts/setup.sh); a build that silently failed would leave only the Python scan measured."""
    assert scan.native_module() is not None, scan.NATIVE_PROBLEM


def _raw(rest: bytes, op: bytes = b"c") -> bytes:
    """A line of orders at position 70 as written by hand: `rest` follows its position."""
    return b'{"db":"shop","table":"orders","op":"' + op + b'","position":"' + _position(70).encode() + b'"' + rest \
        + b"}\n"


HOSTILE: list[bytes] = [
    encode_line(_row(7, db='sh"op', table="a\\b")),  # escaped names: Python decodes them
    encode_line(_row(7, db="naïve", table="🦀 crab")),  # UTF-8 names, counted in C
    encode_line(_row(7, op="d", table="Orders")),
    encode_line(_row(7, op="r")),
    encode_line(_row(7, op="c", note="🦀 \x00 \\ \"")),
    _raw(b',"after":"\xff\xfe"', op=b"u"),
    _raw(b',"x":"\\ud800"', op=b"u"),
    _raw(b',"x":"\\ud83e\\udd80"', op=b"u"),
    _raw(b"", op=b'u","op":"d'),  # a repeated key
    _raw(b"", op=b"d").replace(b'"op"', b'"\\u006fp"'),  # an escaped key
    _raw(b',"n":123456789012345678901'),
    _raw(b',"n":1e999'),
    _raw(b',"n":-0.5E-7'),
    _raw(b',"n":01'),
    _raw(b',"n":NaN'),
    _raw(b',"n":' + b"[" * 100 + b"]" * 100),
    _raw(b',"n":[1,]'),
    _raw(b"").replace(b"}", b"} x"),
    b' \t{ "db" : "shop" , "table":"orders","op":"c","position":"' + _position(70).encode() + b'" } \r\n',
    _raw(b',"t":"a\tb"'),
    _raw(b"").replace(b'"shop"', b"null"),
    _raw(b"").replace(b'"orders"', b"7"),
    b'{"db":"shop","table":"orders","op":"c","position":7}\n',
    b'{"db":"shop","table":"orders","op":"c"}\n',
    _raw(b'', op=b"x"),
    _raw(b"").replace(b'"c"', b"null"),
    b'{"db":"shop","table":"orders","op":"c","position":"' + b"9" * 80 + b'"}\n',
    b'{"db":"shop","table":"orders","op":"c","position":"' + _position(1).encode() + b'"}\n',  # before merged_upto
    b"{}\n", b"[1, 2]\n", b'"text"\n', b"\n", b"  \t \n", b"\x0b\n", b'{"broken\n', b"\xef\xbb\xbf{}\n",
    encode_line({"db": "shop", "ddl": "TRUNCATE orders", "kind": "truncate", "op": "ddl", "position": _position(75),
                 "table": "orders", "ts": "2026-11-29T07:00:02Z", "v": 1}),
    encode_line({"db": "shop", "ddl": "-- rename", "kind": "rename", "op": "ddl", "position": _position(76),
                 "table": "orders", "new_db": "shop", "new_table": "o2", "ts": None, "v": 1}),
    encode_line({"cut": _position(33), "db": "shop", "kind": "resnapshot", "op": "ddl", "position": _position(77),
                 "table": "orders", "ts": "2026-11-29T07:00:03Z", "v": 1}),
]


@pytest.mark.parametrize("line", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("merged_upto", [None, _position(25)])
def test_a_hostile_line_among_plain_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: bytes,
                                         merged_upto: str | None) -> None:
    path = tmp_path / "seg.jsonl"
    path.write_bytes(b"".join(encode_line(_row(n, op="uc"[n % 2])) for n in range(1, 6)) + line
                     + encode_line(_row(9, table="other")))
    native, python = _both(monkeypatch, [path], merged_upto)
    assert native == python


def test_blocks_cut_anywhere_lines_without_a_last_newline_and_gzip(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    lines = [encode_line(_row(n, op=rng.choice("cudr"), table=rng.choice(["a", "b", "c"]))) for n in range(1, 400)]
    lines.insert(200, encode_line(_row(201, db='sh"op', table="a\\b")))  # its names escaped: Python counts it
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(b"".join(lines[:300]).rstrip(b"\n"))
    packed.write_bytes(gzip.compress(b"".join(lines[300:])))
    expected = _both(monkeypatch, [plain, packed], _position(500))
    assert expected[0] == expected[1] and len(expected[0]) == 4
    for block in (1, 7, 100, 4096):
        monkeypatch.setattr(scan, "_BLOCK", block)
        assert _both(monkeypatch, [plain, packed], _position(500)) == expected


@pytest.mark.parametrize("block", [1, 2, 7, 64, 4096])
def test_whole_lines_give_the_file_back_cut_after_newlines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          block: int) -> None:
    """whole_lines reads into one reused buffer: the blocks' bytes up to each cut are the file, in order, each cut
    after a newline but the file's last (a line longer than the buffer grows it)."""
    rng = random.Random(block)
    data = b"".join(b"x" * rng.choice([0, 1, 5, 63, 64, 65, 300]) + b"\n" for _ in range(60)) + b"tail without newline"
    plain, packed = tmp_path / "a.jsonl", tmp_path / "a.jsonl.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    monkeypatch.setattr(scan, "_BLOCK", block)
    for path in (plain, packed):
        pieces = [bytes(buffer[:cut]) for buffer, cut in scan.whole_lines(str(path))]
        assert b"".join(pieces) == data
        assert all(piece.endswith(b"\n") for piece in pieces[:-1]) and pieces[-1].endswith(b"tail without newline")


def test_thousands_of_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner's table index grows past its first sizes; each table keeps its own facts."""
    rng = random.Random(9)
    path = tmp_path / "seg.jsonl"
    path.write_bytes(b"".join(encode_line(_row(n, op=rng.choice("cudr"), table=f"t{rng.randrange(3000)}"))
                              for n in range(1, 20_000)))
    native, python = _both(monkeypatch, [path])
    assert native == python and len(native) > 2900


def test_damaged_lines_found_by_mutation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random byte flips, cuts and insertions into plain lines: the C scan counts or refuses each as Python does."""
    rng = random.Random(28)
    base = [encode_line(_row(n, op=rng.choice("cudr"), db="db" if n % 3 else "naïve")).rstrip(b"\n") for n in range(40)]
    alphabet = b'{}[]":,\\ u0123456789abcdefnrtx\xc3\xa9\xff\t-.eE+'
    for case in range(300):
        line = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(line))
            kind = rng.randrange(3)
            if kind == 0:
                line[at] = rng.choice(alphabet)
            elif kind == 1:
                line.insert(at, rng.choice(alphabet))
            else:
                del line[at:at + rng.randint(1, 8)]
        path = tmp_path / f"seg{case}.jsonl"
        path.write_bytes(b"\n".join([base[1], bytes(line).replace(b"\n", b" "), base[2]]) + b"\n")
        native, python = _both(monkeypatch, [path])
        assert native == python, bytes(line)


def test_what_orjson_refuses_is_never_counted_in_c() -> None:
    """The C scanner's own verdict on single lines: the ones it counts parse in orjson to the same fields."""
    module = scan.native_module()
    assert module is not None
    counted = 0
    for line in HOSTILE:
        scanner = module.Scanner(None)
        _, special = scanner.feed(line)
        if special:
            continue
        change = orjson.loads(line)
        [(db, table, rows, *_)] = scanner.tables()
        assert (db, table, rows) == (change["db"], change["table"], 1)
        counted += 1
    assert counted >= 7  # UTF-8 names, every row op, odd spacing, a number: counted in C, not handed back
    plain = b"".join(encode_line(_row(n, op="cudr"[n % 4])) for n in range(1, 101))
    scanner = module.Scanner(None)
    assert scanner.feed(plain) == (100, [])  # the common line never leaves C


# Bytes a string cannot pass over as plain text, each with what makes it so: its end, an escape, a control byte,
# UTF-8 (valid, cut, overlong, a surrogate) and an escaped surrogate; and DEL (0x7f), the last byte it can.
SPECIAL = [b'\\"', b"\\\\", b"\\n", b"\\u00e9", b"\\ud800", b"\\q", b"\x01", b"\x7f", b"\xc3\xa9", b"\xf0\x9f\xa6\x80",
           b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff", b'"']


def test_every_special_byte_at_every_offset_of_a_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """skip_string passes over plain bytes four at a time: a special one at any offset of a string, in a name or a
    value, still gets the Python scan's verdict (counted the same, or handed back)."""
    lines = []
    for special in SPECIAL:
        for offset in range(10):
            text = b"x" * offset + special + b"y" * (9 - offset % 4)
            lines.append(_raw(b',"after":{"note":"' + text + b'"}', op=b"u"))
            lines.append(_raw(b"").replace(b'"orders"', b'"' + text + b'"'))
    for n, line in enumerate(lines):
        path = tmp_path / f"seg{n}.jsonl"
        path.write_bytes(encode_line(_row(1)) + line + encode_line(_row(2)))
        native, python = _both(monkeypatch, [path])
        assert native == python, line
