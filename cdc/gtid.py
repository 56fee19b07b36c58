"""GTID sets of both flavours, as pure values: parse, print, add one transaction, compare.

- MariaDB: `0-1-57,1-2-9` (domain-server-seq). A domain's entry is its last transaction; every sequence number up
  to it counts as contained, which is how MariaDB itself reads gtid_binlog_pos and gtid_slave_pos
  (https://mariadb.com/kb/en/gtid/). The server id is kept: a promoted replica holds the *same* GTIDs as its old
  primary, an unrelated server with the same domain and sequence numbers holds other server ids.
- MySQL: `uuid:1-57:60,uuid2:1-3`, explicit intervals per source uuid
  (https://dev.mysql.com/doc/refman/8.0/en/replication-gtids-concepts.html). Anonymous transactions (GTIDs off)
  have the all-zero uuid and are never part of a set. MySQL 8.3+ tagged GTIDs (`uuid:tag:n`; in a set
  `uuid:1-5:tag:1-3`, a tag naming the intervals after it) are their own sequences: `uuid:7` and `uuid:tag:7` are
  two transactions (https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-concepts.html#replication-gtids-tagged).
  Their key is `uuid:tag`, the tag lower-cased as MySQL normalises it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cdc.errors import UsageError

_MARIADB = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_UUID = re.compile(r"^[0-9a-fA-F][0-9a-fA-F-]*$")  # a server uuid (with or without dashes, any case)
_ANONYMOUS = "00000000-0000-0000-0000-000000000000"
_TAG = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,31}$")  # MySQL 8.3+: a letter or _, then up to 31 more

Interval = tuple[int, int]


@dataclass
class GtidSet:
    """A set of transactions named by GTID: MariaDB domains, MySQL uuid intervals (one flavour in practice)."""

    domains: dict[int, tuple[int, int]] = field(default_factory=dict)  # MariaDB: domain -> (server_id, seq)
    intervals: dict[str, list[Interval]] = field(default_factory=dict)  # MySQL: uuid[:tag] -> sorted, merged

    @classmethod
    def parse(cls, text: str | None) -> GtidSet:
        """Parse either flavour; '' or None is the empty set. UsageError names a malformed part."""
        found = cls()
        for part in (p.strip() for p in (text or "").replace("\n", "").split(",")):
            if part:
                found._parse_part(part, text or "")
        return found

    def _parse_part(self, part: str, text: str) -> None:
        maria = _MARIADB.match(part)
        if maria:
            domain, server, seq = int(maria[1]), int(maria[2]), int(maria[3])
            # gtid_binlog_state lists one entry per (domain, server): the domain's position is its highest seq.
            if domain not in self.domains or seq >= self.domains[domain][1]:
                self.domains[domain] = (server, seq)
            return
        uuid, _, ranges = part.partition(":")
        if not _UUID.match(uuid) or not ranges:
            raise UsageError(f"GTID set {text!r} is neither MariaDB (0-1-57) nor MySQL (uuid:1-57): {part!r}")
        key, counted = _normal_uuid(uuid), False
        for piece in ranges.split(":"):
            if _TAG.match(piece):  # a tag: the intervals after it belong to uuid:tag (MySQL 8.3+)
                key, counted = f"{_normal_uuid(uuid)}:{piece.lower()}", False
                continue
            first, _, last = piece.partition("-")
            if not first.isdigit() or not (last or first).isdigit() or int(first) > int(last or first):
                raise UsageError(f"GTID set {text!r} has a bad interval {piece!r} in {part!r}")
            self._add_interval(key, int(first), int(last or first))
            counted = True
        if not counted:
            raise UsageError(f"GTID set {text!r} has a tag without intervals in {part!r}")

    def __str__(self) -> str:
        maria = [f"{d}-{s}-{n}" for d, (s, n) in sorted(self.domains.items())]
        return ",".join(maria + _print_mysql(self.intervals))

    def copy(self) -> GtidSet:
        return GtidSet(dict(self.domains), {u: list(s) for u, s in self.intervals.items()})

    @property
    def is_empty(self) -> bool:
        return not self.domains and not self.intervals

    def add(self, gtid: str | None) -> None:
        """Record one committed transaction (its GTID as the binlog names it); None and anonymous ones are ignored."""
        if not gtid:
            return
        maria = _MARIADB.match(gtid)
        if maria:
            # Binlog order is the truth for a domain's position (MariaDB's BINLOG_GTID_POS reads it the same way).
            self.domains[int(maria[1])] = (int(maria[2]), int(maria[3]))
            return
        uuid, _, number = gtid.rpartition(":")
        key = _gtid_key(uuid)
        if key is not None and number.isdigit() and key != _ANONYMOUS and int(number) > 0:
            self._add_interval(key, int(number), int(number))

    def contains_gtid(self, gtid: str) -> bool:
        """Whether one transaction is inside the set."""
        maria = _MARIADB.match(gtid)
        if maria:
            held = self.domains.get(int(maria[1]))
            return held is not None and int(maria[3]) <= held[1]
        uuid, _, number = gtid.rpartition(":")
        key = _gtid_key(uuid)
        if not number.isdigit() or key is None:
            return False
        n = int(number)
        return any(a <= n <= b for a, b in self.intervals.get(key, []))

    def contains(self, other: GtidSet) -> bool:
        """Whether every transaction of `other` is inside this set."""
        return self.missing(other).is_empty

    def missing(self, other: GtidSet) -> GtidSet:
        """The part of `other` not inside this set (MariaDB: per domain, the sequence numbers beyond ours)."""
        gone = GtidSet()
        for domain, (server, seq) in other.domains.items():
            held = self.domains.get(domain)
            if held is None or held[1] < seq:
                gone.domains[domain] = (server, seq)
        for uuid, spans in other.intervals.items():
            rest = _subtract(spans, self.intervals.get(uuid, []))
            if rest:
                gone.intervals[uuid] = rest
        return gone

    def describe_missing(self, other: GtidSet) -> str:
        """`other` minus this set, spelled for a person: 0-1-91..0-1-95, uuid:7-9."""
        gone = self.missing(other)
        parts = []
        for domain, (server, seq) in sorted(gone.domains.items()):
            held = self.domains.get(domain)
            first = held[1] + 1 if held else 1
            parts.append(f"{domain}-{server}-{seq}" if first >= seq else f"domain {domain} seq {first}..{seq} "
                         f"(up to {domain}-{server}-{seq})")
        parts.extend(str(GtidSet(intervals={u: s})) for u, s in sorted(gone.intervals.items()))
        return ", ".join(parts)

    def remove(self, gtid: str) -> None:
        """Take one MySQL transaction out (MariaDB domains hold positions, not members: use `missing`)."""
        uuid, _, number = gtid.rpartition(":")
        key = _gtid_key(uuid)
        if key in self.intervals and number.isdigit():
            rest = _subtract(self.intervals[key], [(int(number), int(number))])
            if rest:
                self.intervals[key] = rest
            else:
                del self.intervals[key]

    def _add_interval(self, uuid: str, first: int, last: int) -> None:
        spans = self.intervals.setdefault(uuid, [])
        if spans and spans[-1][1] + 1 == first:  # the usual case: the next transaction of the same source
            spans[-1] = (spans[-1][0], last)
            return
        spans.append((first, last))
        spans.sort()
        merged: list[Interval] = []
        for a, b in spans:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        spans[:] = merged


def _gtid_key(source: str) -> str | None:
    """The intervals' key of one GTID's source part: `uuid` or, tagged, `uuid:tag` (None: not a MySQL source)."""
    uuid, _, tag = source.partition(":")
    if not _UUID.match(uuid) or (tag and not _TAG.match(tag)):
        return None
    return f"{_normal_uuid(uuid)}:{tag.lower()}" if tag else _normal_uuid(uuid)


def _print_mysql(intervals: dict[str, list[Interval]]) -> list[str]:
    """MySQL's own spelling: one entry per uuid, its untagged intervals first, then each tag and its intervals."""
    by_uuid: dict[str, list[str]] = {}
    for key, spans in sorted(intervals.items()):  # "uuid" sorts before "uuid:tag"
        uuid, _, tag = key.partition(":")
        pieces = by_uuid.setdefault(uuid, [])
        pieces.extend(([tag] if tag else []) + [str(a) if a == b else f"{a}-{b}" for a, b in spans])
    return [":".join([uuid, *pieces]) for uuid, pieces in sorted(by_uuid.items())]


def _normal_uuid(uuid: str) -> str:
    plain = uuid.replace("-", "").lower()
    return f"{plain[:8]}-{plain[8:12]}-{plain[12:16]}-{plain[16:20]}-{plain[20:]}" if len(plain) == 32 else uuid.lower()


def _subtract(spans: list[Interval], taken: list[Interval]) -> list[Interval]:
    rest: list[Interval] = []
    for a, b in spans:
        pieces = [(a, b)]
        for c, d in taken:
            pieces = [p for x, y in pieces for p in ((x, min(y, c - 1)), (max(x, d + 1), y)) if p[0] <= p[1]]
        rest.extend(pieces)
    return rest


def is_mariadb_gtid(text: str) -> bool:
    return bool(_MARIADB.match(text.strip()))
