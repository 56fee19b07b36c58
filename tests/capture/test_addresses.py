"""MariaDB's INET4, INET6 and UUID columns: tail writes the text the server's SELECT shows (cdc.rows.addresses).

The binlog carries their bytes; the snapshot reads their text. Random values of every shape (and the edge cases
of INET6's `::` and dotted-quad forms, UUIDs of every version and variant) are written, tailed, and each change
line must equal the server's own text of the same row.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from cdc.rows.addresses import SIZES, inet6_text
from cdc.values import ADDRESS_TYPES
from tests.capture.conftest import binlog_start, changelog_lines, tail_once

EDGES = ["::", "::1", "::2", "::ffff:1.2.3.4", "::1.2.3.4", "::ffff:0:1.2.3.4", "1::", "1:0:0:1::1", "::a:b",
         "2001:db8::ff00:42:8329", "fe80::1:0:0:0", "0:0:1::", "::0.0.1.0", "::255.255.255.255", "::ffff:0.0.0.0",
         "::fffe:1.2.3.4", "1:2:3:4:5:6:7:8", "0:1:2:3:4:5:6:7", "1:0:2:0:0:3:0:0", "1:2:3:4:5:6:7:0", "64:ff9b::1.2.3.4"]


def _random_inet6(rng: random.Random) -> str:
    return ":".join(f"{rng.choice([0, 0, 0, 0xffff, rng.randrange(65536)]):x}" for _ in range(8))


def test_inet4_inet6_and_uuid_lines_equal_the_servers_text(mariadb_factory: Any, tmp_path: Path) -> None:
    assert set(SIZES) == ADDRESS_TYPES
    server = mariadb_factory()
    db = server.create_database("addr")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, a INET6, b INET4, u UUID, k UUID NOT NULL)", database=db)
    start = binlog_start(server)
    rng = random.Random(7)
    with server.connect() as conn, conn.cursor() as cursor:
        for index in range(400):
            a = EDGES[index] if index < len(EDGES) else _random_inet6(rng)
            b = ".".join(str(rng.choice([0, 255, rng.randrange(256)])) for _ in range(4))
            # Every version and variant the server takes (it refuses some, e.g. version 11 of variant 0).
            u = "-".join(rng.randbytes(n).hex() for n in (4, 2, 2, 2, 6))
            cursor.execute("SELECT CAST(%s AS UUID)", (u,))
            u = cursor.fetchone()[0] or "6ccd780c-baba-1026-9564-5b8c656024db"
            k = "UUID()" if index % 3 == 0 else "%s"
            cursor.execute(f"INSERT INTO `{db}`.t VALUES (%s, %s, %s, %s, {k})",
                           (index, a, b, u if index % 7 else None, *([] if index % 3 == 0 else [u])))
        cursor.execute(f"UPDATE `{db}`.t SET a = '::ffff:10.0.0.1', u = NULL WHERE id < 5")
        conn.commit()
    tail_once(server, tmp_path / "state", db, start)
    lines = {line["after"]["id"]: line["after"] for line in changelog_lines(tmp_path / "state") if line.get("after")}
    expected = {row[0]: dict(zip(("id", "a", "b", "u", "k"), row))
                for row in server.execute(f"SELECT id, a, b, u, k FROM `{db}`.t")}
    assert len(expected) == 400
    differing = [(lines[key], want) for key, want in expected.items() if lines[key] != want]
    assert not differing, differing[:5]


def test_inet6_forms() -> None:
    assert inet6_text(bytes(16)) == "::"
    assert inet6_text(bytes(15) + b"\x01") == "::1"
    assert inet6_text(bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])) == "::ffff:10.0.0.1"
    assert inet6_text(bytes(12) + bytes([1, 2, 3, 4])) == "::1.2.3.4"
    assert inet6_text(b"\x00\x00" + bytes(range(1, 15))) == "::102:304:506:708:90a:b0c:d0e"
