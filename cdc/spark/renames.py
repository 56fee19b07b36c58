"""RENAME TABLE followed by spark-merge (issue #30): which table each change line belongs to at the end of a run.

A run's `rename` lines (RENAME TABLE a TO b, also chains, swaps and moves to another database; ALTER TABLE a
RENAME TO b) are replayed in position order over the names they touch. Each table is followed as one identity
through the names it holds: a line of name `n` at position `q` belongs to the table that held `n` at `q`, and is
merged under that table's name at the end of the run. The lake table moves with it (merged onto the lake
directory of the name it had when the run started; no copy stays under the old name) and Snowflake follows
(the batch's `renames`, done by snowflake-apply before the batch's rows). The schema history's versions of the
final name already reach back through the renames (cdc.schema.SchemaHistory.versions).

A name a RENAME moves a table into is free in MySQL at that moment: a table that held it before the run (and was
dropped since) ends there; its lines are dropped with it. Pure Python, but for `relabel` (one Spark expression).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Name = tuple[str, str]


@dataclass(frozen=True)
class Rename:
    """One `rename` change line."""

    position: str
    db: str
    table: str
    new_db: str
    new_table: str


@dataclass
class Identity:
    """One table followed through a run: the names it held, each from a position (inclusive) to one (exclusive)."""

    origin: Name | None  # its name when the run started; None: created after its name was renamed away
    spans: list[tuple[Name, str, str | None]] = field(default_factory=list)

    @property
    def final(self) -> Name | None:
        """Its name at the run's end; None when the table ended in the run (dropped, its name then renamed into)."""
        name, _, to = self.spans[-1]
        return name if to is None else None

    def close(self, position: str) -> None:
        name, start, _ = self.spans[-1]
        self.spans[-1] = (name, start, position)


@dataclass
class RenamePlan:
    identities: list[Identity]

    @classmethod
    def build(cls, renames: list[Rename]) -> RenamePlan:
        owner: dict[Name, Identity] = {}
        identities: list[Identity] = []

        def held(name: Name) -> Identity:
            if name not in owner:
                owner[name] = Identity(name, [(name, "", None)])
                identities.append(owner[name])
            return owner[name]

        for rename in sorted(renames, key=lambda r: r.position):
            old, new = (rename.db, rename.table), (rename.new_db, rename.new_table)
            if old == new:
                continue
            moving = held(old)
            moving.close(rename.position)
            held(new).close(rename.position)  # MySQL: the name is free here; whatever held it before has ended
            fresh = Identity(None, [(old, rename.position, None)])  # a table created under the old name later
            identities.append(fresh)
            owner[old] = fresh
            moving.spans.append((new, rename.position, None))
            owner[new] = moving
        return cls(identities)

    @property
    def names(self) -> set[Name]:
        return {name for i in self.identities for name, _, _ in i.spans}

    def base(self, final: Name) -> Name | None:
        """The lake table the table named `final` at the run's end merges onto: its name at the run's start
        (None: a table created in the run under a name another was renamed away from). Not renamed: itself."""
        for identity in self.identities:
            if identity.final == final:
                return identity.origin
        return final

    def moves(self) -> list[dict[str, list[str]]]:
        """Each table the run renamed, from its name at the start to its name at the end (the batch's `renames`)."""
        return [{"from": list(i.origin), "to": list(i.final)} for i in self.identities
                if i.origin is not None and i.final is not None and i.origin != i.final]


    def relabel(self, raw: Any) -> Any:
        """The lines with db/table set to their table's name at the run's end (a dropped table's lines: gone).

        A rename line belongs to the table it moves: it is looked up under its new name, which the table holds
        from that position on.
        """
        from pyspark.sql import functions as F

        is_rename = (F.col("op") == "ddl") & (F.col("kind") == "rename")
        db = F.when(is_rename, F.col("new_db")).otherwise(F.col("db"))
        table = F.when(is_rename, F.col("new_table")).otherwise(F.col("table"))
        position = F.col("position")
        new_db, new_table, keep = F.col("db"), F.col("table"), F.lit(True)
        cases = [(i.final, (db == name[0]) & (table == name[1]) & (position >= start)
                  & (position < to if to is not None else F.lit(True)))
                 for i in self.identities for name, start, to in i.spans]
        for final, matches in reversed(cases):  # spans of one name never overlap: any order gives one answer
            new_db = F.when(matches, F.lit(final[0] if final else None)).otherwise(new_db)
            new_table = F.when(matches, F.lit(final[1] if final else None)).otherwise(new_table)
            keep = F.when(matches, F.lit(final is not None)).otherwise(keep)
        return raw.filter(keep).withColumn("db", new_db).withColumn("table", new_table)


def rename_lines(raw: Any) -> list[Rename]:
    """The run's rename lines (a second, filtered read: only runs whose scan counted renames pay it)."""
    from pyspark.sql import functions as F

    found = raw.filter((F.col("op") == "ddl") & (F.col("kind") == "rename")).select(
        "position", "db", "table", "new_db", "new_table").distinct().collect()
    return [Rename(r["position"], r["db"], r["table"], r["new_db"] or r["db"], r["new_table"]) for r in found]


def follow(raw: Any, infos: list[Any]) -> tuple[Any, list[Any], RenamePlan | None]:
    """The run's lines and table stats with renames followed (unchanged, and no plan, for a run without any)."""
    from cdc.spark.scan import spark_stats

    if not any(i.renames for i in infos):
        return raw, infos, None
    plan = RenamePlan.build(rename_lines(raw))
    relabelled = plan.relabel(raw)
    return relabelled, spark_stats(relabelled), plan


def lake_base(target: Path, plan: RenamePlan | None, db: str, table: str) -> Path | None:
    """The lake directory the table named db.table at the run's end merges onto (None: a new table)."""
    from cdc.spark.lake import table_dir

    name = plan.base((db, table)) if plan is not None else (db, table)
    return None if name is None else table_dir(target, *name)


def journal(plan: RenamePlan, target: Path, written: set[str]) -> dict[str, Any]:
    """What the run journal says of renames: the batch's `renames`, and the lake directories to remove after the
    switch (names the run renamed a table away from and merged nothing under; `written`: the directories it did)."""
    from cdc.spark.lake import table_dir

    gone = sorted({table_dir(target, *name).name for name in plan.names} - written)
    return {"renames": plan.moves(), "removed": gone}
