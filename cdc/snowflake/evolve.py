"""A Snowflake table's columns made to follow the schema history, at each batch's position (issue #30).

snowflake-apply calls `evolution` before it loads a batch: every schema version between the one the table's
last applied batch had and the batch's own is walked (cdc.schema.carried), not only the final difference, so
a column renamed in MySQL is renamed (its values kept), a dropped one is dropped, an added one is added and
its existing rows get what MySQL gave them (its DEFAULT, the type's implicit value or NULL), and one dropped
and added again is reset to the later add's fill. Rows merged after an add keep their own values: the fill
only touches rows whose _CDC_POSITION is older than the add.

Snowflake commits DDL implicitly, so these steps run before the batch's transaction; each is idempotent
(a rerun finds the column already renamed, added or gone, and the fill's position guard rewrites only rows
older than the add), so a run killed between them and the MERGE replays them harmlessly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc import sql
from cdc.schema import Column, TableSchema, carried, varchar_length
from cdc.schema.retype import LOSSIEST, unreproduced, widens
from cdc.snowflake import ddl, names, rekey
from cdc.snowflake.typemap import snowflake_type, type_base

_Q = sql.quote_ident
# Types TRY_CAST converts text to (cdc.snowflake.evolve._tolerant).
_TRY_TARGETS = frozenset({"NUMBER", "FLOAT", "DATE", "TIME", "TIMESTAMP_NTZ", "TIMESTAMP_TZ", "TIMESTAMP_LTZ", "BOOLEAN"})
_NUMBER = re.compile(r"^NUMBER\((\d+),(\d+)\)$")
_PRECISION = re.compile(r"^(TIMESTAMP_NTZ|TIMESTAMP_TZ|TIMESTAMP_LTZ|TIME)\((\d+)\)$")
# cdc's own columns: never dropped as "a column MySQL no longer has".
_OURS = frozenset(name for name, _, _ in ddl.CDC_COLUMNS + ddl.SOFT_DELETE_COLUMNS)


@dataclass(frozen=True)
class Step:
    sql: str
    params: tuple[Any, ...]
    what: str  # "add column T.C", ...
    table: str  # the Snowflake table it changes
    column: str
    change: str  # add | drop | rename | fill | convert | shorten
    renamed_from: str = ""  # rename: the old name; fill: the column the values are copied from; convert: the column
    value: str = ""  # fill: the value expression (its parameters lead `params`); convert: the new type
    cut: int | None = None  # convert of a DATETIME/TIMESTAMP to fewer fractional digits: nanoseconds modulo this go
    tolerant: str = ""  # convert: "text" / "number" for a TRY_CAST of a conversion the cast may not reproduce
    widens: bool = False  # convert: the new type holds every old value unchanged (cdc.schema.retype.widens)
    old_type: str = ""  # convert: the column's Snowflake type before


def evolution(schema: TableSchema, versions: list[TableSchema], since: str | None, target: ddl.Target,
              have: dict[str, str]) -> list[Step]:
    """The steps that take the Snowflake table `target.name` (columns `have`) to `schema` (versions: the history).

    since: the schema position of the table's last applied batch (None if none is known, e.g. the first batch
    after bootstrap: the table's columns are then taken as they are, and only the difference is made).
    """
    where = f"{schema.db}.{schema.table}"
    table = _Q(target.name)
    latest = versions[-1] if versions else None
    steps: list[Step] = []
    kept: set[str] = set()
    for column in target.columns:
        mysql_name, name = column.mysql, column.name
        came = carried(versions, mysql_name, since, schema.position) if since is not None else None
        if came is not None and came.source is not None and came.source != mysql_name:
            old = names.column_names(where, [came.source])[came.source]
            if old in have and name not in have:
                steps.append(Step(ddl.render("rename_column.sql.j2", table=table, old=_Q(old), new=_Q(name)), (),
                                  f"rename column {target.name}.{old} to {name}", target.name, name, "rename", old))
                kept.add(old)
                continue
            if old in have:  # bootstrap already added the new name (empty): the values move over, the old goes
                steps.append(Step(ddl.render("fill_column.sql.j2", table=table, column=_Q(name), value=_Q(old),
                                             current_only=False),
                                  (schema.position,), f"copy column {target.name}.{old} to {name}", target.name,
                                  name, "fill", old, _Q(old)))
                kept.add(name)
                continue
        was = _retyped(versions, since, mysql_name, column.type, where) \
            if came is not None and since is not None and came.source == mysql_name else None
        if was is not None and since is not None:
            now = schema.column(mysql_name)
            steps.extend(_convert(target.name, name, column.type, have, _fraction_cut(versions, since, schema,
                                                                                       mysql_name),
                                  lossy=unreproduced(was, now, LOSSIEST) is not None, widens=widens(was, now),
                                  old_type=snowflake_type(was, table=where)))
            kept.add(name)
            continue
        if name in have and (came is None or came.source is not None):
            kept.add(name)
            length = _shortened(versions, since, schema, mysql_name) if since is not None and came is not None else None
            if length is not None:
                steps.append(Step(ddl.render("shorten_column.sql.j2", table=table, column=_Q(name), length=length,
                                             current_only=False), (), f"cut column {target.name}.{name} to {length}",
                                  target.name, name, "shorten", cut=length))
            continue
        reset = came if came is not None else carried(versions, mysql_name, "", schema.position)
        if name not in have:
            steps.append(Step(ddl.add_column(target.name, name, column.type), (), f"add column {target.name}.{name}",
                              target.name, name, "add"))
        else:
            kept.add(name)  # dropped and added again in MySQL: same Snowflake column, older rows reset
        if reset.fill is not None or name in have:
            image = json.dumps({mysql_name: reset.fill})
            value = ddl.from_json(column, "PARSE_JSON(?)") if reset.fill is not None else "NULL"
            steps.append(Step(ddl.render("fill_column.sql.j2", table=table, column=_Q(name), value=value,
                                         current_only=False),
                              ((image,) if reset.fill is not None else ()) + (reset.added_at,),
                              f"fill column {target.name}.{name} for rows older than {reset.added_at}",
                              target.name, name, "fill", "", value))
    # A column the batch's version lacks but the newest version has stays (a bootstrap from the newest schema
    # made it, or the batch predates its ADD): the batch that adds it resets the older rows to its fill.
    keep_for_later = set(names.column_names(where, latest.column_names).values()) if latest is not None else set()
    for name in have:
        if name not in kept | keep_for_later | _OURS and name not in {c.name for c in target.columns}:
            steps.append(Step(ddl.render("drop_column.sql.j2", table=table, column=_Q(name)), (),
                              f"drop column {target.name}.{name}", target.name, name, "drop"))
    return steps


def _retyped(versions: list[TableSchema], since: str, mysql_name: str, wanted: str, where: str) -> Column | None:
    """The column as it was at the table's last batch, if its Snowflake type changed since (a MODIFY / CHANGE)."""
    before = next((v for v in reversed(versions) if v.position <= since), None)
    if before is None or mysql_name not in before.column_names:
        return None
    was = before.column(mysql_name)
    return was if snowflake_type(was, table=where) != wanted else None


def _shortened(versions: list[TableSchema], since: str, schema: TableSchema, mysql_name: str) -> int | None:
    """A VARCHAR made shorter since the table's last batch: its new length (Snowflake's VARCHAR has none to cut)."""
    before = next((v for v in reversed(versions) if v.position <= since), None)
    if before is None or mysql_name not in before.column_names:
        return None
    had, kept = varchar_length(before.column(mysql_name)), varchar_length(schema.column(mysql_name))
    return kept if had is not None and kept is not None and kept < had else None


def _fraction_cut(versions: list[TableSchema], since: str, schema: TableSchema, mysql_name: str) -> int | None:
    """A MODIFY to fewer fractional digits of a DATETIME/TIMESTAMP: the nanoseconds modulus MariaDB dropped (#30)."""
    before = next((v for v in reversed(versions) if v.position <= since), None)
    old = before.column(mysql_name) if before is not None and mysql_name in before.column_names else None
    new = schema.column(mysql_name)
    temporal = ("datetime", "timestamp")
    if old is None or old.data_type not in temporal or new.data_type not in temporal or \
            (new.fsp or 0) >= (old.fsp or 0):
        return None
    return int(10 ** (9 - (new.fsp or 0)))


def _tolerant(had: str, kind: str, lossy: bool) -> str:
    """How a lossy conversion's cast avoids failing: TRY_CAST of the text (Snowflake's TRY_CAST takes text only)."""
    if not lossy or type_base(kind) not in _TRY_TARGETS:
        return ""
    return "text" if type_base(had) == "VARCHAR" else "number" if type_base(had) in ("NUMBER", "FLOAT") else ""


def _convert(table: str, name: str, kind: str, have: dict[str, str], cut: int | None = None, *,
             lossy: bool = False, widens: bool = False, old_type: str = "") -> list[Step]:
    """A column converted to a new type the way MySQL converted its stored values (Snowflake cannot change most
    types in place): a new column filled by a cast, the old one dropped, the new one renamed. Each step is skipped
    on a rerun that finds it done (the new column present, the old one gone).

    lossy: a conversion the cast may not reproduce (cdc.schema.retype), whose table tail flagged for a re-snapshot
    when the session made it so: a value the cast cannot take ('12abc' as a NUMBER, a number past the new
    precision) becomes NULL until the re-read, instead of failing every apply."""
    scratch = names.derived_name(name, "_CDC_CONVERTED")
    steps = []
    tolerant = _tolerant(have.get(name, ""), kind, lossy)
    if name in have:
        if scratch not in have:
            steps.append(Step(ddl.add_column(table, scratch, kind), (), f"add column {table}.{scratch}", table, scratch,
                              "add"))
        steps.append(Step(ddl.render("convert_column.sql.j2", table=_Q(table), new=_Q(scratch), old=_Q(name), type=kind,
                                     current_only=False, cut=cut, tolerant=tolerant),
                          (), f"convert column {table}.{name} to {kind}", table, scratch, "convert", name, kind, cut,
                          tolerant, widens, old_type))
        steps.append(Step(ddl.render("drop_column.sql.j2", table=_Q(table), column=_Q(name)), (),
                          f"drop column {table}.{name}", table, name, "drop"))
    if name in have or scratch in have:
        steps.append(Step(ddl.render("rename_column.sql.j2", table=_Q(table), old=_Q(scratch), new=_Q(name)), (),
                          f"rename column {table}.{scratch} to {name}", table, name, "rename", scratch))
    return steps


def convert_history(execute: Callable[..., Any], target: ddl.Target, step: Step, history: dict[str, str]) -> list[str]:
    """The SCD2 table's column of a main-table conversion `step` (history: its columns -> types, kept up to date).

    Its versions span both types, so the column takes a type that holds the values of both (NUMBER(10,0) and
    NUMBER(20,0): NUMBER(20,0); NUMBER(8,2) and NUMBER(6,4): NUMBER(10,4); a timestamp's larger precision) where
    there is one, every version's value unchanged; otherwise it keeps its type. Then the current versions' values
    are converted in place, as MySQL converted the rows they stand for (unless the conversion changed no value).
    """
    column, kind = step.renamed_from, step.value
    done: list[str] = []
    both = _holding_both(step.old_type, kind)
    if both is not None and both != step.old_type:
        # The declared key (the table's key and _CDC_POSITION) dropped around the conversion: it may hold the
        # column, and the local stand-in cannot drop a column before one its key holds.
        done += rekey.undeclare(execute, target.history)
        for each in _convert(target.history, column, both, history):
            execute(each.sql, each.params or None)
            history[each.column] = both
            if each.change == "drop":
                history.pop(each.column, None)
            elif each.change == "rename":
                history.pop(each.renamed_from, None)
            done.append(each.what)
        done += rekey.rekey(execute, target.history, (*target.key, "_CDC_POSITION"), drop_unkeyed=False, not_null=True)
    if not step.widens:
        execute(ddl.render("convert_column.sql.j2", table=_Q(target.history), new=_Q(column), old=_Q(column), type=kind,
                           current_only=True, cut=step.cut, tolerant=step.tolerant))
        done.append(f"convert current versions of {target.history}.{column} to {kind}")
    return done


def _holding_both(old: str, new: str) -> str | None:
    """A Snowflake type holding every value of NUMBER/TIMESTAMP types `old` and `new` unchanged; None if none is."""
    a, b = _NUMBER.match(old), _NUMBER.match(new)
    if a and b:
        scale = max(int(a[2]), int(b[2]))
        digits = max(int(a[1]) - int(a[2]), int(b[1]) - int(b[2]))
        return f"NUMBER({min(digits + scale, 38)},{scale})" if digits + scale <= 38 else None
    a, b = _PRECISION.match(old), _PRECISION.match(new)
    if a and b and a[1] == b[1]:
        return f"{a[1]}({max(int(a[2]), int(b[2]))})"
    return None
