"""Synthetic change logs that follow docs/formats.md exactly (tail does not exist yet).

Hostile on purpose: quotes, backslashes, emoji, NUL, line separators, the string 'None',
awkward database/table names, and a few big rows.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from cdc.changelog import SegmentWriter, encode_line, position_string

BINLOG = "mariadb-bin.000003"
TABLES = [("shop", "customers"), ("shop", "orders"), ("we'ird db", 't"ab\\le 💥/x'), ("shop", "a.b"), ("sh op", "..")]
HOSTILE = ["O'Brien", 'say "hi"', "back\\slash\\", "emoji 🎉🐍", "nul\x00byte", "None", "", "line\nbreak",
           "\u2028sep", "tab\there", "{\"json\": 1}", "ünïcødé", "%2F/..%"]


def make_changes(count: int, *, seed: int = 7, big_every: int = 0, big_size: int = 100_000) -> list[dict[str, Any]]:
    """`count` row changes in transactions of 1..5 rows, positions strictly increasing."""
    rng = random.Random(seed)
    changes: list[dict[str, Any]] = []
    pos, xid, second = 4, 100, 0
    while len(changes) < count:
        pos += 200
        xid += 1
        second += rng.randint(0, 400)
        ts = f"2026-11-{22 + second // 86400 % 7:02d}T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"
        for row in range(min(rng.randint(1, 5), count - len(changes))):
            db, table = TABLES[rng.randrange(len(TABLES))]
            key = {"id": rng.randint(1, 50)}
            name = rng.choice(HOSTILE) + str(rng.randint(0, 9))
            if big_every and (len(changes) + 1) % big_every == 0:
                name = "x" * big_size
            after = {"id": key["id"], "name": name, "amount": f"{rng.randint(-10**6, 10**6)}.{rng.randint(0, 9999):04d}",
                     "big": 18446744073709551615, "doc": '{"a": null}'}
            op = rng.choice("cuud")
            changes.append({
                "after": None if op == "d" else after, "before": None if op == "c" else {**after, "name": "old"},
                "db": db, "key": key, "op": op, "position": position_string(BINLOG, pos, row),
                "src": {"file": BINLOG, "gtid": f"0-1-{xid}", "pos": pos, "row": row, "server_id": 1, "xid": xid},
                "table": table, "ts": ts, "v": 1,
            })
    return changes


def write_changelog(directory: Path, changes: list[dict[str, Any]], per_segment: int = 500) -> list[Path]:
    """Seal segments of about `per_segment` lines, always at a transaction boundary."""
    writer = SegmentWriter(directory, owner="test")
    sealed: list[Path] = []
    for index, change in enumerate(changes):
        writer.write(change["position"], encode_line(change))
        next_xid = changes[index + 1]["src"]["xid"] if index + 1 < len(changes) else None
        if writer.lines >= per_segment and next_xid != change["src"]["xid"]:
            sealed.append(writer.seal())  # type: ignore[arg-type]
    if not writer.is_empty:
        sealed.append(writer.seal())  # type: ignore[arg-type]
    return sealed


def lines_of(changes: list[dict[str, Any]]) -> Counter[bytes]:
    return Counter(encode_line(change).rstrip(b"\n") for change in changes)


def read_s3_lines(s3: Any, bucket: str, prefix: str) -> tuple[Counter[bytes], dict[str, bytes]]:
    """Every data line under prefix (manifests excluded) and the raw objects by key."""
    import gzip

    import zstandard

    objects: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            objects[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    lines: Counter[bytes] = Counter()
    for key, body in objects.items():
        if "/_manifests/" in key:
            continue
        if key.endswith(".gz"):
            body = gzip.decompress(body)
        elif key.endswith(".zst"):
            body = zstandard.ZstdDecompressor().decompress(body)
        assert body.endswith(b"\n"), key
        lines.update(body[:-1].split(b"\n"))
    return lines, objects


def as_v1_manifest(manifest: dict[str, Any]) -> bytes:
    """What cdc wrote before batches for the same one-segment batch: version 1, `segment`, no `bytes` per object."""
    assert manifest["segments"][0] == manifest["segments"][1], "v1 had one manifest per segment"
    v1 = {"version": 1, "segment": manifest["segments"][0], "compression": manifest["compression"],
          "records": manifest["records"], "objects": [{k: v for k, v in o.items() if k != "bytes"}
                                                      for o in manifest["objects"]],
          "first_position": manifest["first_position"], "last_position": manifest["last_position"]}
    return json.dumps(v1, indent=2, sort_keys=True).encode() + b"\n"
