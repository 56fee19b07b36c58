"""Canonical row encoding and range checksums for `cdc verify`, computed in Python on both sides.

The contract is the change-log value encoding (cdc/values.py, docs/formats.md "Values"): a value
read from MySQL and the same value read back from the lake or Snowflake must encode to the same
canonical form, so equal rows hash equally whatever the engines' own types are:

- the source row is encoded exactly as snapshot encodes `r` lines (cdc.source.tables);
- a target value (pyarrow or Snowflake connector Python object) goes through cdc.values.encode_value;
- then both pass through `normalise`: the few places where the targets are lossy *by design* are
  mapped the documented way (a zero date is NULL, or 0001-01-01 in a NOT NULL column: cdc/spark/types.py),
  and JSON text is re-serialised canonically (key order and whitespace are not data).

A range is compared by a digest over its (key, row digest) pairs sorted by key; a range whose digest
differs is bisected in memory (halves of its key order) until the differing keys are single rows.
Rows that a collation puts into different ranges on the two sides (MySQL orders `_ci` text its own
way, the targets by code point) show up as "missing" in one range and "extra" in another with the
same digest: `TableDiff.finish` cancels those pairs, so the result is exact whatever the order.

A table without a key (`snapshot --allow-no-pk`) is a multiset of rows: no key orders or pairs its
rows, and two identical rows are two rows. It is compared whole (`compare_multisets`): each side's
row digests are counted, and the two sides are equal when their counts are, which is when their
checksums over the sorted digests are; the differing rows are then the counts' differences.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from cdc.errors import DataError
from cdc.schema import Column
from cdc.values import BINARY_TYPES, encode_value

# Zero and partial-zero dates, as cdc/spark/types.py recognises them.
_ZERO_DATE = re.compile(r"^(0000-|\d{4}-00-|\d{4}-\d{2}-00)")
LEAF = 8  # rows per side below which a bisected range is compared key by key
DEFAULT_SAMPLE = 20


@dataclass(frozen=True)
class RowDigest:
    """One row reduced to what the comparison needs: its key (canonical JSON), sort order and digest."""

    key: bytes
    order: tuple[Any, ...]
    digest: bytes


def normalise(column: Column, value: Any) -> Any:
    """A change-log value in the form both sides are compared in (see the module docstring)."""
    if value is None:
        return None
    kind = column.data_type
    if kind == "json":
        return _canonical_json(value)
    if kind in ("date", "datetime", "timestamp") and isinstance(value, str) and _ZERO_DATE.match(value):
        if column.nullable:
            return None
        fraction = ".000000" if column.fsp else ""
        return {"date": "0001-01-01", "datetime": f"0001-01-01 00:00:00{fraction}"}.get(
            kind, f"0001-01-01T00:00:00{fraction}Z")
    return value


def encode_target(column: Column, value: Any) -> Any:
    """A target's Python value -> change-log form -> normalised; an unencodable value stays visibly different."""
    if value is None:
        return None
    if column.data_type == "set" and isinstance(value, str):
        value = json.loads(value)  # Snowflake returns an ARRAY as JSON text
    if column.data_type == "json" and isinstance(value, str):
        return _canonical_json(value)
    try:
        return normalise(column, encode_value(column, value))
    except DataError as exc:
        return f"<unencodable {type(value).__name__}: {exc.message}>"


def _canonical_json(text: Any) -> str:
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError):
        return str(text)
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def order_value(column: Column, value: Any) -> tuple[Any, ...]:
    """A sort key agreeing with the targets' ORDER BY for a canonical value (NULLs first)."""
    if value is None:
        return (0,)
    kind = column.data_type
    try:
        if kind == "decimal":
            return (1, Decimal(value))
        if kind in BINARY_TYPES:
            return (1, base64.b64decode(value))
    except (InvalidOperation, ValueError):
        pass
    return (1, value) if isinstance(value, (int, float, str)) else (1, str(value))


class RowHasher:
    """Turns rows (column name -> canonical value) of one table into RowDigests."""

    def __init__(self, columns: Sequence[Column], key: Sequence[str]) -> None:
        self.names = [c.name for c in columns]
        by_name = {c.name: c for c in columns}
        self.key = list(key)
        self.key_columns = [by_name[k] for k in key]

    def digest(self, row: dict[str, Any]) -> RowDigest:
        values = [row.get(name) for name in self.names]
        key = [row.get(k) for k in self.key]
        order = tuple(order_value(c, v) for c, v in zip(self.key_columns, key, strict=False))
        return RowDigest(orjson.dumps(key), order, hashlib.blake2b(orjson.dumps(values), digest_size=16).digest())

    def key_dict(self, key: bytes) -> dict[str, Any]:
        return dict(zip(self.key, orjson.loads(key), strict=False))


def range_digest(rows: Iterable[RowDigest]) -> bytes:
    """Order-independent within the range: pairs are sorted by key before hashing."""
    h = hashlib.blake2b(digest_size=16)
    for row in sorted(rows, key=lambda r: r.key):
        h.update(len(row.key).to_bytes(4, "big") + row.key + row.digest)
    return h.digest()


@dataclass
class TableDiff:
    """Differences found so far in one table; keys are canonical key JSON."""

    source_rows: int = 0
    target_rows: int = 0
    ranges: int = 0
    differing_ranges: int = 0
    missing: dict[bytes, bytes] = field(default_factory=dict)  # in the source, not in the target
    extra: dict[bytes, bytes] = field(default_factory=dict)  # in the target, not in the source
    changed: set[bytes] = field(default_factory=set)

    def compare_range(self, source: list[RowDigest], target: list[RowDigest]) -> None:
        self.ranges += 1
        self.source_rows += len(source)
        self.target_rows += len(target)
        if len(source) == len(target) and range_digest(source) == range_digest(target):
            return
        self.differing_ranges += 1
        self._bisect(sorted(source, key=lambda r: r.key), sorted(target, key=lambda r: r.key))

    def _bisect(self, source: list[RowDigest], target: list[RowDigest]) -> None:
        if len(source) == len(target) and range_digest(source) == range_digest(target):
            return
        if max(len(source), len(target)) <= LEAF:
            self._leaf(source, target)
            return
        keys = sorted({r.key for r in source} | {r.key for r in target})
        pivot = keys[len(keys) // 2]
        self._bisect([r for r in source if r.key < pivot], [r for r in target if r.key < pivot])
        self._bisect([r for r in source if r.key >= pivot], [r for r in target if r.key >= pivot])

    def _leaf(self, source: list[RowDigest], target: list[RowDigest]) -> None:
        left = {r.key: r.digest for r in source}
        right = {r.key: r.digest for r in target}
        for key, digest in left.items():
            if key not in right:
                self.missing[key] = digest
            elif right[key] != digest:
                self.changed.add(key)
        for key, digest in right.items():
            if key not in left:
                self.extra[key] = digest

    def finish(self) -> None:
        """Cancel rows the two sides merely ordered into different ranges (same key, same digest)."""
        for key in set(self.missing) & set(self.extra):
            if self.missing.pop(key) != self.extra.pop(key):
                self.changed.add(key)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def differences(self) -> Iterator[tuple[bytes, str]]:
        """(key, kind) in key order; kind is missing (not in the target), extra (only there) or changed."""
        found = [(k, "missing") for k in self.missing] + [(k, "extra") for k in self.extra]
        found += [(k, "changed") for k in self.changed]
        return iter(sorted(found))

    @property
    def count(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.changed)


def compare_streams(diff: TableDiff, source_pages: Iterable[list[RowDigest]], target: Iterator[RowDigest]) -> TableDiff:
    """Compare the source's key ranges (its pages) with the target rows that sort into them."""
    pending: list[RowDigest] = []
    exhausted = False
    for page in source_pages:
        if not page:
            continue
        high = max(r.order for r in page)
        taken = [r for r in pending if r.order <= high]
        pending = [r for r in pending if r.order > high]
        while not pending and not exhausted:
            row = next(target, None)
            if row is None:
                exhausted = True
            elif row.order <= high:
                taken.append(row)
            else:
                pending.append(row)
        diff.compare_range(page, taken)
    rest = pending + list(target)
    if rest or diff.ranges == 0:
        diff.compare_range([], rest)
    diff.finish()
    return diff


@dataclass
class MultisetDiff:
    """Two sides of a keyless table as multisets of row digests: copies missing from the target, extra in it."""

    source: Counter[bytes] = field(default_factory=Counter)
    target: Counter[bytes] = field(default_factory=Counter)

    @property
    def source_rows(self) -> int:
        return sum(self.source.values())

    @property
    def target_rows(self) -> int:
        return sum(self.target.values())

    @property
    def missing(self) -> Counter[bytes]:
        return self.source - self.target

    @property
    def extra(self) -> Counter[bytes]:
        return self.target - self.source

    @property
    def equal(self) -> bool:
        return multiset_checksum(self.source) == multiset_checksum(self.target)

    def differences(self) -> Iterator[tuple[bytes, str, int]]:
        """(row digest, missing|extra, copies), in digest order."""
        found = [(d, "missing", n) for d, n in self.missing.items()] + [(d, "extra", n) for d, n in self.extra.items()]
        return iter(sorted(found))


def multiset_checksum(counts: Counter[bytes]) -> bytes:
    """A digest of the sorted row digests, each as many times as the rows it stands for."""
    h = hashlib.blake2b(digest_size=16)
    for digest in sorted(counts):
        h.update(digest + counts[digest].to_bytes(8, "big"))
    return h.digest()


def compare_multisets(source: Iterable[RowDigest], target: Iterable[RowDigest]) -> MultisetDiff:
    """Count each side's rows by digest (memory: one entry per distinct row)."""
    return MultisetDiff(Counter(r.digest for r in source), Counter(r.digest for r in target))
