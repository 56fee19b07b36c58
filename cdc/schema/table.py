"""One version of a table's schema: its columns, primary key and foreign keys as of a position.

Also what the column types' text says (enum/set labels, a VARCHAR's length), whether a server logs the rows its
foreign-key cascades change, and what a column of one version holds in a row written under an earlier one.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

# ON DELETE / ON UPDATE rules under which InnoDB changes child rows itself (issue #24). RESTRICT and NO ACTION
# refuse the parent's change instead; SET DEFAULT is accepted by the parser but refused by InnoDB.
CASCADING_RULES = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # COLUMN_TYPE as information_schema spells it, e.g. "decimal(18,4)", "int(10) unsigned"
    data_type: str  # base name in lower case, e.g. "decimal"
    unsigned: bool = False
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    charset: str | None = None
    fsp: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        values = dict(d)
        for key in ("enum_values", "set_values"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in values.items() if k in known})

# From MySQL 8.4 on (and in 9.x), foreign keys are enforced in the SQL layer and the rows a cascade changes are
# written to the binlog like any other row change (the brief of issue #24); InnoDB's own cascades (MariaDB, MySQL
# before 8.4) write none. Aurora MySQL 3 is 8.0-based. Anything that is not MySQL-family 8.4+ counts as silent.
CASCADES_LOGGED_FROM = (8, 4)


def cascades_in_binlog(flavour: str, version: str) -> bool:
    """Whether this server writes the child rows its foreign-key cascades change as row events."""
    if "mariadb" in flavour.lower() or "mariadb" in version.lower():
        return False
    match = re.match(r"(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= CASCADES_LOGGED_FROM


@dataclass(frozen=True)
class ForeignKey:
    """One foreign key: child `db.table(columns)` references `ref_db.ref_table(ref_columns)`.

    Rules as information_schema.REFERENTIAL_CONSTRAINTS spells them: CASCADE, SET NULL, SET DEFAULT,
    RESTRICT, NO ACTION.
    """

    name: str
    db: str
    table: str
    columns: tuple[str, ...]
    ref_db: str
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = "RESTRICT"
    on_update: str = "RESTRICT"

    @property
    def cascades(self) -> bool:
        """InnoDB changes child rows itself for this key (rows the binlog may not show)."""
        return self.on_delete in CASCADING_RULES or self.on_update in CASCADING_RULES

    @property
    def child(self) -> str:
        return f"{self.db}.{self.table}"

    @property
    def parent(self) -> str:
        return f"{self.ref_db}.{self.ref_table}"

    def describe(self) -> str:
        return (f"{self.child}({', '.join(self.columns)}) -> {self.parent}({', '.join(self.ref_columns)}) "
                f"ON DELETE {self.on_delete} ON UPDATE {self.on_update}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"columns": list(self.columns), "ref_columns": list(self.ref_columns)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForeignKey:
        return cls(name=d["name"], db=d["db"], table=d["table"], columns=tuple(d["columns"]), ref_db=d["ref_db"],
                   ref_table=d["ref_table"], ref_columns=tuple(d["ref_columns"]),
                   on_delete=d.get("on_delete", "RESTRICT"), on_update=d.get("on_update", "RESTRICT"))


@dataclass(frozen=True)
class TableSchema:
    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    position: str = ""
    foreign_keys: tuple[ForeignKey, ...] = ()  # this table's own (it is the child), in constraint-name order
    referenced_by: tuple[ForeignKey, ...] = ()  # other tables' keys that reference this one (captured or not)
    # Column added by this version -> the value every row last written before it holds (change-log encoding,
    # docs/formats.md); an added column missing here holds NULL in those rows. Not part of the shape.
    fills: dict[str, Any] = field(default_factory=dict, compare=False)
    # Why the older rows' values of an added column cannot be known here (an ALTER-time default such as
    # CURRENT_TIMESTAMP or (uuid())): the table needs `cdc resnapshot`. None when they are known.
    resnapshot: str | None = field(default=None, compare=False)
    # New name -> old name of the columns this version renamed (RENAME COLUMN, CHANGE old new).
    renamed: dict[str, str] = field(default_factory=dict, compare=False)
    # Where the table this version starts came from: {"db", "table"} it was renamed from (RENAME TABLE), {} for a
    # new table under a name another table was renamed away from; None: the same table as the version before.
    origin: dict[str, str] | None = field(default=None, compare=False)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def same_shape(self, other: TableSchema) -> bool:
        """Same columns and key (what decoding a row depends on)."""
        return self.columns == other.columns and self.same_key(other)

    def same_key(self, other: TableSchema) -> bool:
        """The same key columns, in any order: information_schema lists `PRIMARY KEY (b, a)` in the key's
        order, the binlog's table map in column order, and both are one key."""
        return sorted(self.primary_key) == sorted(other.primary_key)

    def same_version(self, other: TableSchema) -> bool:
        """Same shape and the same foreign keys both ways (what the history records a version for)."""
        return (self.same_shape(other) and self.foreign_keys == other.foreign_keys
                and self.referenced_by == other.referenced_by)

    def version_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "columns": [asdict(c) for c in self.columns],
            "primary_key": list(self.primary_key),
            "fills": dict(self.fills),
            "renamed": dict(self.renamed),
            "resnapshot": self.resnapshot,
            **({"origin": dict(self.origin)} if self.origin is not None else {}),
            "foreign_keys": [k.to_dict() for k in self.foreign_keys],
            "referenced_by": [k.to_dict() for k in self.referenced_by],
        }


_PAREN_LIST = re.compile(r"^(?:enum|set)\((.*)\)$", re.IGNORECASE | re.DOTALL)


def parse_labels(column_type: str) -> tuple[str, ...]:
    """Labels of enum('a','b''c') / set(...) as information_schema spells them."""
    match = _PAREN_LIST.match(column_type)
    if not match:
        return ()
    body = match[1]
    labels: list[str] = []
    current: list[str] = []
    i, inside = 0, False
    while i < len(body):
        ch = body[i]
        if not inside:
            if ch == "'":
                inside = True
                current = []
        elif ch == "'" and i + 1 < len(body) and body[i + 1] == "'":
            current.append("'")
            i += 1
        elif ch == "\\" and i + 1 < len(body):
            current.append(body[i + 1])
            i += 1
        elif ch == "'":
            inside = False
            labels.append("".join(current))
        else:
            current.append(ch)
        i += 1
    return tuple(labels)



@dataclass(frozen=True)
class Carried:
    """Where a column's value at one version comes from, for a row written under an earlier version."""

    source: str | None  # the column's name in the row's own version (renames followed); None: not carried over
    fill: Any = None  # else: the value the column's last (re-)add gave older rows (change-log encoding)
    added_at: str = ""  # the position of that add: rows written before it hold the fill


def carried(versions: list[TableSchema], name: str, since: str, upto: str) -> Carried:
    """What column `name` of the version at `upto` holds in a row written under the version in force at `since`.

    Walks back over every version in between, so a column dropped and added again takes the later add's fill,
    never the row's stale value, and a renamed column keeps the row's value under its old name.
    """
    chain = [v for v in versions if v.position <= upto]
    current = name
    for index in range(len(chain) - 1, -1, -1):
        version = chain[index]
        if version.position <= since:
            return Carried(current if current in version.column_names else None)
        previous = chain[index - 1] if index else None
        older = version.renamed.get(current, current)
        if previous is None or older not in previous.column_names:
            return Carried(None, version.fills.get(current), version.position)
        current = older
    return Carried(None)


_VARCHAR = re.compile(r"varchar\((\d+)\)", re.IGNORECASE)


def varchar_length(column: Column) -> int | None:
    """A VARCHAR's length in characters (None for any other type)."""
    match = _VARCHAR.match(column.type) if column.data_type == "varchar" else None
    return int(match[1]) if match else None
