"""`snowflake-apply`: load each new spark-merge batch into Snowflake and MERGE it, exactly once.

Per batch: PUT its Parquet files to the internal stage, COPY each table's files into a staging
table with a per-run unique name (FILE_FORMAT = PARQUET, MATCH_BY_COLUMN_NAME), then in one
transaction: one MERGE per table (+ SCD2 history) and the batch id into the bookkeeping table.
The bookkeeping table is the truth of "applied"; the checkpoint only says how far a run got.

Values never become SQL text: they travel in the Parquet files, and the few values we send
(batch id, run id) are bind parameters. Where the engine cannot run MERGE inside a transaction
(fakesnow, probed at start), every statement is idempotent instead: the MERGE and the history
steps are guarded by _CDC_POSITION and the bookkeeping insert by NOT EXISTS, so a run killed
between them and rerun replays the batch harmlessly.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cdc import sql
from cdc.checkpoints import ApplyCheckpoint
from cdc.errors import CdcError, PreconditionError, TransientError
from cdc.masking import masked_history
from cdc.schema import TableSchema
from cdc.snowflake import ddl, evolve, moves, names, outcome, rekey, staging
from cdc.snowflake.bootstrap import existing_columns, not_null_columns
from cdc.snowflake.connect import cursor as guarded_cursor
from cdc.snowflake.folded import Folded, look_back, read_folded
from cdc.snowflake.loaders import Loaders
from cdc.snowflake.outcome import Counts, Summary
from cdc.snowflake.sealed import forget_folded, list_batches, refuse_folded, refuse_pruned
from cdc.snowflake.staging import Batch
from cdc.state import StateDir

_Q = sql.quote_ident
METADATA = (names.ACTION, names.IS_UPDATE, names.CDC_POSITION, names.CDC_COMMIT_TS, names.CDC_OP)


class Applier:
    """Apply batches over one Snowflake connection (current database and schema = the targets')."""

    def __init__(self, conn: Any, state: StateDir, *, on_batch: Callable[[str, dict[str, Counts]], None] | None = None,
                 open_connection: Callable[[], Any] | None = None, load_sessions: int = 1):
        """open_connection, load_sessions: the batch's tables are staged on up to load_sessions sessions, this one and
        more that open_connection opens when first needed (cdc.snowflake.loaders); close() logs them out."""
        self.conn = conn
        self.cursor = guarded_cursor(conn)
        self.state = state
        self.history = masked_history(state)  # the columns the change log holds
        self.run_id = uuid.uuid4().hex[:12].upper()
        self.on_batch = on_batch
        self.summary = Summary()
        self.staging = staging.StagingTables(self.run_id)
        self.applied: set[str] | None = None  # batch ids in the bookkeeping table, as of start() and since
        self.checkpoint: ApplyCheckpoint | None = None  # the apply checkpoint as this Applier last saw or wrote it
        self._transactional: bool | None = None  # probed once per connection
        self._remove_refused = False  # the engine has no REMOVE (fakesnow): not asked again
        self.manifests: list[Batch] | None = None  # every sealed batch, listed again by each pass of run()
        self.known: dict[str, Batch] = {}  # the sealed batches' manifests read so far (they never change)
        self.folded = Folded()  # what cdc prune kept of the batches whose folders it removed
        self._vacated: set[str] = set()  # Snowflake names the batch being applied renamed a table away from
        self.loaders = Loaders(lambda statement, params=None: self.execute(statement, params), open_connection,
                               load_sessions)

    def execute(self, statement: str, params: Any = None, *, fetch: bool = True) -> list[tuple[Any, ...]]:
        self.cursor.execute(statement, params)
        return self.cursor.fetchall() if fetch and self.cursor.description else []

    def start(self) -> set[str]:
        """Check the bookkeeping table, probe transactions, drop staging left by killed runs."""
        schema = self.execute("SELECT CURRENT_SCHEMA()")[0][0]
        self.existing = existing_columns(self.cursor, schema)
        if names.BOOKKEEPING_TABLE not in self.existing:
            raise PreconditionError(f"Snowflake schema {schema} has no {names.BOOKKEEPING_TABLE} table",
                                    hint="run cdc snowflake-bootstrap first (same database and schema)")
        self.staging.tables.clear()  # dropped below with every other run's
        for table in self.existing:
            if table.startswith(names.STAGING_PREFIX):
                self.execute(f"DROP TABLE IF EXISTS {_Q(table)}")
        if self._transactional is None:
            self._transactional = self._probe_transactions()
        self.summary.transactional = self._transactional
        # The batches before the newest folded one are never listed again (their folders are gone): not fetched.
        through = read_folded(self.state).through
        applied = {str(r[0]) for r in self.execute(f'SELECT "BATCH_ID" FROM {_Q(names.BOOKKEEPING_TABLE)}' + (
            ' WHERE "BATCH_ID" >= ?' if through else ""), (through,) if through else None)}
        refuse_folded(through, applied)
        moves.finish_recorded(lambda statement: self.execute(statement, fetch=False), self.existing,
                              lambda batch_id: batch_id in applied or (through is not None and batch_id < through))
        self.applied = applied
        self.checkpoint = ApplyCheckpoint.read(self.state)
        return applied

    def resume(self) -> set[str]:
        """The applied batch ids for a new run of this Applier: start() on first use, and again when the apply
        checkpoint moved since this Applier last wrote it (another process applied batches meanwhile). A `cdc run
        --follow` keeps its Applier from cycle to cycle (the Snowflake schema changes between cycles only through its
        own bootstrap, after which it starts a new one): start()'s statements are paid once, not per cycle."""
        if self.applied is None or ApplyCheckpoint.read(self.state) != self.checkpoint:
            self.start()
        else:
            self.summary = Summary(transactional=bool(self._transactional))
        assert self.applied is not None
        return self.applied

    @property
    def statements(self) -> int:
        """Statements sent so far, on every session (each at least one round trip to Snowflake)."""
        return self.cursor.statements + self.loaders.statements

    def close(self) -> None:
        """Drop this Applier's staging tables (housekeeping: a later start() drops them otherwise), log out the
        loaders' extra sessions."""
        try:
            self.staging.drop(lambda statement: self.execute(statement, fetch=False))
        except CdcError:
            self.summary.cleanup_skipped = True
        finally:
            self.loaders.close()

    def _probe_transactions(self) -> bool:
        """Can MERGE run inside BEGIN ... COMMIT here? (Snowflake: yes; fakesnow: no.)"""
        table = _Q(names.BOOKKEEPING_TABLE)
        try:
            self.execute("BEGIN")
            self.execute(f'MERGE INTO {table} AS "T" USING (SELECT \'probe\' AS "BATCH_ID") AS "S" '
                         'ON "T"."BATCH_ID" = "S"."BATCH_ID" WHEN MATCHED AND FALSE THEN DELETE')
            return True
        except Exception:  # noqa: BLE001 - any refusal means "no"; the fallback is still exact
            return False
        finally:
            self.execute("ROLLBACK")

    def apply(self, batch: Batch) -> dict[str, Counts]:
        """Load and merge one batch, record it; returns the MERGE counts per table."""
        refuse_pruned(self.state, batch.batch_id)
        run = lambda statement: self.execute(statement, fetch=False)  # noqa: E731
        renamed = moves.renamed_tables(batch.manifest)
        self.summary.evolved += moves.move_tables(run, self.existing, batch.batch_id, renamed)
        self._vacated = moves.vacated(renamed)
        staged = self._stage(batch)
        staging.check_staged(self.execute, batch, staged)
        counts: dict[str, Counts] = {}
        if self.summary.transactional:
            self.execute("BEGIN")
        try:
            for key, target, table in staged:
                try:
                    counts[key] = self._merge(target, table)
                except CdcError as exc:
                    raise outcome.stuck(batch.batch_id, key, target.name, exc, self._not_null(target)) from None
            rows = sum(int(spec.get("rows", 0)) for spec in batch.manifest.get("tables", {}).values())
            bk = _Q(names.BOOKKEEPING_TABLE)
            self.execute(f'INSERT INTO {bk} ("BATCH_ID", "APPLIED_AT", "RUN_ID", "ROWS") '
                         f'SELECT ?, CURRENT_TIMESTAMP(), ?, ? WHERE NOT EXISTS '
                         f'(SELECT 1 FROM {bk} WHERE "BATCH_ID" = ?)', (batch.batch_id, self.run_id, rows,
                                                                       batch.batch_id))
            if self.summary.transactional:
                self.execute("COMMIT")
        except BaseException:
            if self.summary.transactional:
                self.execute("ROLLBACK")
            raise
        moves.finish(run, self.existing, batch.batch_id)
        self._cleanup(f"REMOVE @{_Q(names.INTERNAL_STAGE)}/{batch.batch_id}/")
        return counts

    def _cleanup(self, statement: str) -> None:
        """Housekeeping that may fail without harm (fakesnow has no REMOVE; a rerun PUTs under its own run id)."""
        if self._remove_refused:
            self.summary.cleanup_skipped = True
            return
        try:
            self.execute(statement)
        except TransientError:
            self.summary.cleanup_skipped = True
        except CdcError:
            self.summary.cleanup_skipped = self._remove_refused = True

    def _stage(self, batch: Batch) -> list[tuple[str, ddl.Target, str]]:
        """Every table's target made ready (evolved), then staged (staging.load): all the batch's files in one PUT,
        each table COPYed into a staging table, side by side on the loaders' sessions."""
        tables = []
        for key, spec in sorted(batch.manifest.get("tables", {}).items()):
            files = staging.batch_files(batch, key, spec)
            arrow = pq.read_schema(files[0])
            tables.append(staging.Table(key, spec, files, arrow, self._target(batch, key, spec, arrow)))
        # Under the run's id: a killed earlier attempt's files (another file count) are never loaded with these.
        return staging.load(self.loaders, self.staging, batch, tables,
                            f"@{_Q(names.INTERNAL_STAGE)}/{batch.batch_id}/{self.run_id}/")

    def _target(self, batch: Batch, key: str, spec: dict[str, Any], arrow: pa.Schema) -> ddl.Target:
        db, _, table = key.partition(".")
        schema = self.history.at(db, table, spec.get("schema_position") or "~") or self.history.latest(db, table)
        if schema is None:
            raise PreconditionError(f"batch {batch.batch_id}: no schema history for {key} in {self.history.directory}",
                                    hint="apply on the state directory spark-merge wrote the batch from")
        target = ddl.build_target(schema, names.snowflake_name(table))
        if target.name in self.existing:
            self._evolve(batch, key, schema, target, emptied=bool(spec.get("emptied_at")))
        elif target.name in self._vacated:  # a new table under a name this batch renamed a table away from
            self.execute(ddl.create_table(target, soft_delete=False))
            self.existing[target.name] = target.column_types(soft_delete=False)
        have = self.existing.get(target.name)
        in_file = {f.name for f in arrow} - set(METADATA)
        missing = [c.name for c in target.columns if c.mysql in in_file and (have is None or c.name not in have)]
        if have is None or missing:
            raise PreconditionError(
                f"batch {batch.batch_id}: Snowflake table {target.name} " + (
                    "does not exist" if have is None else f"lacks column(s) {', '.join(missing)}"),
                hint="run cdc snowflake-bootstrap (it creates tables and adds new columns), then rerun")
        columns = tuple(c for c in target.columns if c.mysql in in_file)
        return ddl.Target(target.db, target.table, target.name, columns, target.key)

    def _evolve(self, batch: Batch, key: str, schema: TableSchema, target: ddl.Target, *, emptied: bool) -> None:
        """Walk the table's schema versions up to the batch's (cdc.snowflake.evolve), before its transaction.

        emptied: the batch deletes every row the table held (a TRUNCATE or DROP TABLE in its run). A column whose
        type changed meanwhile (DROP TABLE, then CREATE TABLE of the same name with other types) then has no value
        worth converting, and a key column cannot be converted in place: the table is replaced by an empty one of
        the batch's shape instead, which a rerun repeats harmlessly (the batch was not applied).
        """
        db, _, table = key.partition(".")
        have = self.existing[target.name]
        versions, since = self.history.versions(db, table), self._applied_position(batch, key)
        steps = evolve.evolution(schema, versions, since, target, have)
        if emptied and any(step.change == "convert" for step in steps):
            self._replace_table(target)
            return
        keyed = [s for s in steps if s.change == "convert" and s.renamed_from in target.key]
        if keyed:  # declared again below, once the key columns have their new type
            self.summary.evolved.extend(rekey.undeclare(self.execute, target.name))
        history = self.existing.get(target.history)
        for step in steps:
            self.execute(step.sql, step.params or None)
            if step.change == "add":
                have[step.column] = next((c.type for c in target.columns if c.name == step.column), "")
                # SCD2: older versions hold NULL there (a conversion's scratch column has no type here: not in it)
                if history is not None and step.column not in history and have[step.column]:
                    self.execute(ddl.add_column(target.history, step.column, have[step.column]))
                    history[step.column] = have[step.column]
            elif step.change == "rename":
                have[step.column] = have.pop(step.renamed_from, "")
                if history is not None and step.renamed_from in history and step.column not in history:
                    self.execute(ddl.render("rename_column.sql.j2", table=_Q(target.history),
                                            old=_Q(step.renamed_from), new=_Q(step.column)))
                    history[step.column] = history.pop(step.renamed_from)
            elif step.change == "fill" and history is not None and step.column in history and (
                    not step.renamed_from or step.renamed_from in history):
                self.execute(ddl.render("fill_column.sql.j2", table=_Q(target.history), column=_Q(step.column),
                                        value=step.value, current_only=True), step.params)
            elif step.change == "convert" and history is not None and step.renamed_from in history:
                self.summary.evolved.extend(evolve.convert_history(self.execute, target, step, history))
            elif step.change == "shorten" and history is not None and step.column in history:
                self.execute(ddl.render("shorten_column.sql.j2", table=_Q(target.history), column=_Q(step.column),
                                        length=step.cut, current_only=True))
            elif step.change == "drop":
                have.pop(step.column, None)  # SCD2 keeps it: the versions before the DROP had values there
            self.summary.evolved.append(step.what)
        # After the columns: a new key may hold a column this batch adds; none is a key dropped (cdc.snowflake.rekey).
        if keyed or rekey.key_changed(schema, versions, since):
            self.summary.evolved.extend(rekey.rekey(self.execute, target.name, target.key, not_null=bool(keyed)))
            if history is not None and target.key:  # SCD2: one row per key and change (none kept without a key)
                self.summary.evolved.extend(rekey.rekey(self.execute, target.history, (*target.key, "_CDC_POSITION"),
                                                        drop_unkeyed=False))

    def _replace_table(self, target: ddl.Target) -> None:
        """The table made anew, empty, in the target's shape (soft delete kept if it had it); SCD2 gains new columns."""
        soft_delete = names.CDC_DELETED in self.existing[target.name]
        self.execute(ddl.create_table(target, soft_delete=soft_delete, replace=True))
        self.existing[target.name] = dict(target.column_types(soft_delete=soft_delete))
        self.summary.evolved.append(f"replace table {target.name} (emptied by the batch, its column types changed)")
        history = self.existing.get(target.history)
        if history is None:
            return
        for column in target.columns:
            if column.name not in history:  # the old versions stay in it, NULL there
                self.execute(ddl.add_column(target.history, column.name, column.type))
                history[column.name] = column.type

    def _not_null(self, target: ddl.Target) -> list[str]:
        """The likely cause of a refused MERGE (bootstrap.not_null_columns), after rolling its transaction back."""
        if self.summary.transactional:
            self.execute("ROLLBACK")  # the failed transaction first; nothing of it stays
        return not_null_columns(self.execute, target)

    def _applied_position(self, batch: Batch, key: str) -> str | None:
        """The schema position of the table in the last batch before `batch` that had it (all applied by now)."""
        if self.manifests is None:
            self.manifests, self.folded = list_batches(self.state, known=self.known), read_folded(self.state)
        # A renamed table's earlier batches are under the names it had then (each for the positions it had it).
        held = [(f"{d}.{t}", start, end) for d, t, start, end in self.history.lineage(*key.partition(".")[::2])]
        return look_back(self.manifests, self.folded, held, batch.batch_id)

    def _merge(self, target: ddl.Target, table: str) -> Counts:
        have = self.existing.get(target.name, {})
        source = ddl.render("batch_source.sql.j2", staging=table, columns=[
            {"name": _Q(c.name), "staged": _Q(staging.column_name(c.mysql)),
             "variant": have.get(c.name, c.type).upper() in ("VARIANT", "OBJECT")} for c in target.columns])
        if target.keyless:
            return self._replace_rows(target, source, soft_delete=names.CDC_DELETED in have)
        if target.history in self.existing:
            for statement in ddl.history_statements(target, source):
                self.execute(statement)
        self.execute(ddl.merge(target, source, soft_delete=names.CDC_DELETED in have), fetch=False)
        return outcome.merge_counts(self.cursor)

    def _replace_rows(self, target: ddl.Target, source: str, *, soft_delete: bool) -> Counts:
        """A keyless table: every copy of each row the batch names deleted, then the batch's copies inserted."""
        found = Counts()
        statements = ddl.replace_rows(target, source, soft_delete=soft_delete)
        for statement, kind in zip(statements, ("deleted", "inserted"), strict=True):
            self.execute(statement, fetch=False)
            setattr(found, kind, outcome.affected(self.cursor))
        return found


def run(conn: Any, state: StateDir, *, follow: bool = False, poll_interval: float = 2.0,
        stop: threading.Event | None = None, on_batch: Callable[[str, dict[str, Counts]], None] | None = None,
        applier: Applier | None = None, open_connection: Callable[[], Any] | None = None,
        load_sessions: int = 1) -> Summary:
    """Apply every sealed batch not yet in the bookkeeping table; with follow, keep polling until stop.

    applier: one kept by the caller from an earlier run on this connection (`cdc run --follow`), closed by it;
    without, a new one is made (with open_connection and load_sessions, see Applier) and its staging tables are
    dropped at the end."""
    stop = stop or threading.Event()
    with state.lock(ApplyCheckpoint.STAGE):
        own = applier is None
        applier = applier or Applier(conn, state, on_batch=on_batch, open_connection=open_connection,
                                     load_sessions=load_sessions)
        before = applier.statements
        try:
            applied = applier.resume()
            done = applier.checkpoint.last_batch if applier.checkpoint is not None else None
            while not _apply_new(applier, applied, stop, on_batch, done):
                summary = applier.summary
                summary.last_batch = max([*summary.applied, *summary.skipped, *filter(None, [done])], default=None)
                if not follow or stop.wait(poll_interval):
                    break
            if own:
                applier.close()
        finally:
            if own:
                applier.loaders.close()  # the extra sessions, after a failure too (close() above did it otherwise)
            applier.summary.statements = applier.statements - before
        return applier.summary


def _apply_new(applier: Applier, applied: set[str], stop: threading.Event,
               on_batch: Callable[[str, dict[str, Counts]], None] | None, done: str | None = None) -> bool:
    """One pass over the sealed batches, applying those not applied yet; True if a stop came first.

    done: the apply checkpoint when the run started. A batch after it found in the bookkeeping table is reported
    as skipped (another run applied it, or one was killed before its checkpoint); those up to it are not: listed
    in every run, they made a long --follow's lines grow with every batch ever applied."""
    summary = applier.summary
    # What evolution looks back on (new ones included); only the new ones' manifests are read.
    applier.manifests = batches = list_batches(applier.state, known=applier.known)
    applier.folded = read_folded(applier.state)
    folded = applier.folded.through
    forget_folded(applied, folded)
    listed = {*summary.skipped, *summary.applied}
    for batch in batches:
        if folded is not None and batch.batch_id <= folded:
            continue  # applied before it was folded; its folder is left by a prune stopped before it went
        if batch.batch_id in applied:
            if (done is None or batch.batch_id > done) and batch.batch_id not in listed:
                summary.skipped.append(batch.batch_id)
                listed.add(batch.batch_id)
            continue
        if stop.is_set():
            summary.stopped = True
            return True
        counts = applier.apply(batch)
        applied.add(batch.batch_id)
        summary.applied.append(batch.batch_id)
        for key, value in counts.items():
            summary.tables.setdefault(key, Counts()).add(value)
        advance_checkpoint(applier.state, batch.batch_id)
        applier.checkpoint = ApplyCheckpoint.read(applier.state)
        if on_batch:
            on_batch(batch.batch_id, counts)
    return False


def advance_checkpoint(state: StateDir, batch_id: str, *, now: float | None = None) -> None:
    """Record `batch_id` as applied (after its bookkeeping row); a batch sorting before the checkpoint (one
    that was missing from the bookkeeping table) never moves it back."""
    previous = ApplyCheckpoint.read(state)
    if previous is not None and previous.last_batch and previous.last_batch > batch_id:
        return
    ApplyCheckpoint.applied(batch_id, time.time() if now is None else now).write(state)
