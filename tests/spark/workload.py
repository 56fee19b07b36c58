"""Randomized change logs (docs/formats.md) and an independent reference model of the merge.

The model works on the JSON lines only (plain Python), then converts values to what the lake
must hold (pyarrow's Python values), so it shares no code with cdc.spark.
"""

from __future__ import annotations

import base64
import datetime as dt
import random
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.changelog import SegmentWriter, encode_line, position_string
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.values import BINARY_TYPES, SPATIAL_TYPES

BINLOG = "mariadb-bin.000003"
HOSTILE = ["O'Brien", 'say "hi"', "back\\slash\\", "emoji 🎉🐍", "nul\x00byte", "None", "", "line\nbreak",
           "\u2028sep", "tab\there", '{"json": 1}', "ünïcødé", "%2F/..%", "null"]


def c(name: str, type_: str, data_type: str, **kw: Any) -> Column:
    return Column(name=name, type=type_, data_type=data_type, **kw)


EVERY = (
    c("id", "int(11)", "int", nullable=False), c("ti", "tinyint(4)", "tinyint"),
    c("ui", "int(10) unsigned", "int", unsigned=True), c("bi", "bigint(20)", "bigint"),
    c("bu", "bigint(20) unsigned", "bigint", unsigned=True), c("d", "decimal(18,4)", "decimal", precision=18, scale=4),
    c("dw", "decimal(65,30)", "decimal", precision=65, scale=30), c("f", "float", "float"), c("db", "double", "double"),
    c("dt", "date", "date"), c("dtn", "date", "date", nullable=False), c("dtm", "datetime(6)", "datetime", fsp=6),
    c("dt0", "datetime", "datetime", fsp=0), c("ts", "timestamp(6)", "timestamp", fsp=6),
    c("tm", "time(6)", "time", fsp=6), c("yr", "year(4)", "year"), c("s", "varchar(255)", "varchar"),
    c("tx", "text", "text"), c("b", "varbinary(64)", "varbinary"), c("bt", "bit(64)", "bit"),
    c("e", "enum('a','b''c')", "enum", enum_values=("a", "b'c")), c("st", "set('x','y','z')", "set", set_values=("x", "y", "z")),
    c("j", "json", "json"), c("g", "geometry", "geometry"),
)
EXTRA = c("extra col.x", "varchar(10)", "varchar")
COMPOSITE = (c("k1", "varchar(20)", "varchar", nullable=False),
             c("k2", "bigint(20) unsigned", "bigint", unsigned=True, nullable=False),
             c("v", "decimal(5,2)", "decimal", precision=5, scale=2))
T1 = ("shop", "every")
T2 = ("we'ird db", 't"ab.le 💥')


def json_value(col: Column, rng: random.Random) -> Any:
    """A random change-log value of the column, NULL and zero dates included."""
    if col.nullable and rng.random() < 0.1:
        return None
    k = col.data_type
    pick = rng.choice
    if k == "tinyint":
        return pick([-128, 0, 127])
    if k == "int":
        return pick([0, 4294967295]) if col.unsigned else rng.randint(-2**31, 2**31 - 1)
    if k == "bigint":
        return pick([0, 18446744073709551615, 12345]) if col.unsigned else pick([-2**63, 2**63 - 1, 7])
    if k == "decimal":
        digits = col.precision - col.scale
        whole = rng.randint(-(10**digits - 1), 10**digits - 1)
        return f"{whole}.{rng.randint(0, 10**col.scale - 1):0{col.scale}d}"
    if k == "float":
        return pick([1.5, -3.4028234663852886e38, 0.1, 1e-45])
    if k == "double":
        return pick([0.1, -1.7976931348623157e308, 5e-324, 2.5])
    if k == "date":
        return pick(["2026-11-22", "0000-00-00", "2026-00-00", "1000-01-01", "9999-12-31"])
    if k == "datetime":
        frac = ".123456" if col.fsp else ""
        return pick([f"2026-11-22 07:00:01{frac}", f"0000-00-00 00:00:00{frac}", f"1970-01-01 00:00:00{frac}"])
    if k == "timestamp":
        return pick(["2026-11-22T07:00:01.123456Z", "0000-00-00T00:00:00.000000Z", "2038-01-19T03:14:07.999999Z"])
    if k == "time":
        return pick(["-01:30:00.250000", "838:59:59.000000", "00:00:00.000000"])
    if k == "year":
        return pick([0, 1901, 2155])
    if k in ("varchar", "text", "enum") and col.enum_values is None:
        return pick(HOSTILE) + str(rng.randint(0, 9))
    if k == "enum":
        return pick(["a", "b'c", ""])
    if k in ("varbinary", "geometry"):
        return base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))).decode()
    if k == "bit":
        return pick([0, 18446744073709551615, 5])
    if k == "set":
        return pick([[], ["x"], ["x", "z"], ["x", "y", "z"]])
    if k == "json":
        return pick(['{"a": null}', "null", "[1, 2.5, \"x\"]", '"O\'Brien"'])
    raise AssertionError(k)


def lake_value(col: Column, value: Any) -> Any:
    """What the lake must hold for a change-log value (pyarrow's Python form)."""
    if value is None:
        return None
    k = col.data_type
    if k == "bigint" and col.unsigned or k == "bit" and int(col.type[4:-1] or 1) > 63:
        return Decimal(value)
    if k == "decimal":
        return Decimal(value) if col.precision <= 38 else value
    if k == "float":
        return struct.unpack("f", struct.pack("f", value))[0]
    if k in ("date", "datetime", "timestamp"):
        if value.startswith("0000-") or value[5:7] == "00" or value[8:10] == "00":
            if col.nullable:
                return None
            value = "0001-01-01" + value[10:]
        if k == "date":
            return dt.date.fromisoformat(value)
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed
    if k in BINARY_TYPES or k in SPATIAL_TYPES:
        return base64.b64decode(value)
    return value


class Workload:
    """Transactions over two tables with snapshot reads, PK changes, DDL and truncate; plus the model."""

    def __init__(self, root: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.root = root
        self.history = SchemaHistory(root / "schema")
        self.schemas: dict[tuple[str, str], TableSchema] = {}
        self.lines: list[dict[str, Any]] = []
        self.pos = 1000
        self.xid = 0
        self.live: dict[tuple[str, str], dict[tuple[Any, ...], dict[str, Any]]] = {T1: {}, T2: {}}

    def set_schema(self, table: tuple[str, str], columns: tuple[Column, ...], pk: tuple[str, ...], position: str) -> None:
        schema = TableSchema(table[0], table[1], columns, pk, position)
        self.schemas[table] = schema
        self.history.record(schema)

    def snapshot(self, rows: int) -> None:
        handover = position_string(BINLOG, self.pos, 0)
        self.set_schema(T1, EVERY, ("id",), "0000000001:000000000004:b000000000000")
        self.set_schema(T2, COMPOSITE, ("k1", "k2"), "0000000001:000000000004:b000000000000")
        assert handover
        for i in range(rows):
            table = T1 if i % 2 else T2
            row = self._new_row(table)
            self._emit(table, "r", None, row, position_string(BINLOG, self.pos, i, snapshot=True))

    def _key(self, table: tuple[str, str], row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.schemas[table].primary_key)

    def _new_row(self, table: tuple[str, str]) -> dict[str, Any]:
        schema = self.schemas[table]
        while True:
            row = {col.name: json_value(col, self.rng) for col in schema.columns}
            if table == T1:
                row["id"] = self.rng.randint(1, 200)
            else:
                row["k1"], row["k2"] = self.rng.choice(HOSTILE[:6]), self.rng.choice([0, 18446744073709551615, *range(1, 30)])
            if self._key(table, row) not in self.live[table]:
                return row

    def _emit(self, table: tuple[str, str], op: str, before: Any, after: Any, position: str) -> None:
        image = after if after is not None else before
        key = {k: image[k] for k in self.schemas[table].primary_key}
        self.lines.append({"after": after, "before": before, "db": table[0], "key": key, "op": op, "position": position,
                           "src": {"file": BINLOG, "gtid": f"0-1-{self.xid}", "pos": int(position[11:23]),
                                   "row": int(position[-12:]), "server_id": 1, "xid": self.xid},
                           "table": table[1], "ts": self._ts(), "v": 1})
        live = self.live[table]
        if before is not None:
            live.pop(self._key(table, before), None)
        if after is not None:
            live[self._key(table, after)] = after

    def _ts(self) -> str:
        return (dt.datetime(2026, 11, 22) + dt.timedelta(seconds=self.xid * 7)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def transaction(self) -> None:
        self.xid += 1
        for _event in range(self.rng.randint(1, 2)):
            self.pos += 300
            table = self.rng.choice([T1, T2])
            for row in range(self.rng.randint(1, 3)):
                self._random_change(table, position_string(BINLOG, self.pos, row))

    def _random_change(self, table: tuple[str, str], position: str) -> None:
        live = self.live[table]
        roll = self.rng.random()
        if not live or roll < 0.3:
            self._emit(table, "c", None, self._new_row(table), position)
            return
        before = live[self.rng.choice(sorted(live, key=repr))]
        if roll < 0.75:
            after = {**self._new_row(table), **{k: before[k] for k in self.schemas[table].primary_key}}
            if self.rng.random() < 0.25:  # primary-key-changing update
                after = {**after, **{k: v for k, v in self._new_row(table).items() if k in self.schemas[table].primary_key}}
            self._emit(table, "u", before, after, position)
        else:
            self._emit(table, "d", before, None, position)

    def ddl(self, table: tuple[str, str], kind: str, columns: tuple[Column, ...] | None = None) -> None:
        self.xid += 1
        self.pos += 300
        position = position_string(BINLOG, self.pos, 0)
        self.lines.append({"db": table[0], "ddl": f"-- {kind}", "kind": kind, "op": "ddl", "position": position,
                           "src": {"file": BINLOG, "gtid": None, "pos": self.pos, "row": 0, "server_id": 1, "xid": None},
                           "table": table[1], "ts": self._ts(), "v": 1})
        if kind == "truncate":
            self.live[table].clear()
        if columns is not None:
            self.set_schema(table, columns, self.schemas[table].primary_key, position)
            names = {col.name for col in columns}
            for key, row in list(self.live[table].items()):
                self.live[table][key] = {n: row.get(n) for n in names}

    def write_segments(self, lines: list[dict[str, Any]], per_segment: int) -> None:
        writer = SegmentWriter(self.root / "changelog", owner="test")
        for index, line in enumerate(lines):
            writer.write(line["position"], encode_line(line))
            nxt = lines[index + 1]["src"]["xid"] if index + 1 < len(lines) else None
            if writer.lines >= per_segment and (nxt != line["src"]["xid"] or nxt is None):
                writer.seal()
        writer.seal()


def model(lines: list[dict[str, Any]], history: SchemaHistory) -> dict[tuple[str, str], dict[tuple[Any, ...], dict[str, Any]]]:
    """Expected lake content after `lines`: per table, key -> row (lake columns + _cdc_*)."""
    state: dict[tuple[str, str], dict[tuple[Any, ...], dict[str, Any]]] = {}
    last: dict[tuple[str, str], str] = {}
    seen: set[str] = set()
    for line in sorted(lines, key=lambda x: x["position"]):
        if line["position"] in seen:
            continue
        seen.add(line["position"])
        table = (line["db"], line["table"])
        rows = state.setdefault(table, {})
        last[table] = line["position"]
        pk = history.at(*table, line["position"]).primary_key  # type: ignore[union-attr]
        if line["op"] == "ddl":
            if line["kind"] in ("truncate", "drop"):
                rows.clear()
            continue
        meta = {"_cdc_op": line["op"], "_cdc_position": line["position"],
                "_cdc_commit_ts": dt.datetime.fromisoformat(line["ts"].replace("Z", "+00:00"))}
        if line["before"] is not None:
            rows.pop(tuple(line["before"][k] for k in pk), None)
        if line["op"] == "d":
            rows.pop(tuple(line["key"][k] for k in pk), None)
        if line["after"] is not None:
            rows[tuple(line["after"][k] for k in pk)] = {"json": line["after"], **meta}
    expected = {}
    for table, rows in state.items():
        final = history.at(*table, last[table])
        assert final is not None
        out = {}
        for row in rows.values():
            values = {col.name: lake_value(col, row["json"].get(col.name)) for col in final.columns}
            lake_key = tuple(values[k] for k in final.primary_key)
            out[lake_key] = {**values, **{m: row[m] for m in ("_cdc_op", "_cdc_position", "_cdc_commit_ts")}}
        expected[table] = out
    return expected
