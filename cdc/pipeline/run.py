"""`cdc run`: the stages chained, once up to "now" (`--until-now`) or continuously (`--follow`).

The chain, always in pipeline order: snapshot (only before tail's first run, and resumed if it was
interrupted), tail, ship-s3 (if `[aws] bucket` is set), ship-kinesis (if `[aws] stream` is set),
spark-merge (of the local change log: the same lines that were shipped, without a round trip),
snowflake-bootstrap and snowflake-apply (if a Snowflake connection is configured). Bootstrap is in the
chain so that a table or column added in MySQL reaches Snowflake before the batch that needs it; it
only creates what is missing (never replaces) and runs only when a batch waits to be applied.

Each stage is the library call its standalone command makes (cdc.pipeline.run_stages), so it takes its
own lock and keeps its own checkpoint: a crashed `cdc run` is simply run again, and a standalone stage
running on the same state directory makes the run fail with exit 6 (and vice versa).

`--follow` runs tail continuously and the later stages in cycles beside it (issue #25). The first cycle is the
chain as `--until-now` runs it (tail catches up with the backlog, with a decode worker if a core is spare);
from then on tail is `cdc tail --follow` in a thread of this process (cdc.pipeline.tail_beside), sealing a
segment within its flush interval (0.5 s) whatever merge and apply are doing. Each later cycle ships, merges,
bootstraps and applies what is sealed when it starts, and goes again at once when a segment sealed meanwhile,
else waits up to `poll_interval` for one. From the second cycle on, ship runs in a thread beside the merge
(cdc.pipeline.ship_beside): merge reads the local change log, not what ship wrote, so neither waits for the other. Why not
the old cycle loop (tail --until-now at the start of each cycle): a commit made while a cycle's merge and
apply ran was not even sealed until the next cycle's tail (commit -> sealed p99 20 s on a quiet machine, 65 s
at load 15); now it is within a second, durable in the change log and shippable by the next cycle. End to end,
a row still waits for the running cycle to end before a merge takes it: that gain is only the tail stage's
time per cycle (docs/performance.md, "Freshness").

What stays: every stage, tail included, holds its own lock and checkpoint (tail's for the whole run, so a
standalone `cdc tail` fails with exit 6, and vice versa); stages never wait for each other (they meet only
through the state directory: merge reads sealed segments, which tail never rewrites), so nothing can
deadlock; a failure stops the run at a clear point: the thread's error is raised by the cycle that finds
it, so the run ends with tail's own error and exit code, or retries a transient one (a new thread after the
backoff), never going on without tail. SIGTERM sets the one stop event every stage and the thread check
between units of work; the run joins the thread, which seals and checkpoints what was committed. The
SparkSession and the Snowflake login are kept for the whole run, so a cycle costs seconds, not a start-up.

`--json` stage lines: each cycle has a tail line with the rows the thread captured since the previous one
(and where it is, its lag); the last one comes when the run ends. Their sum is the summary's tail total.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.capture import StartRequest
from cdc.config import Settings
from cdc.durations import backoff
from cdc.errors import CdcError, ExitCode, UsageError
from cdc.pipeline import failures, prune, run_stages
from cdc.pipeline.auto_resnapshot import STAGE as AUTO_RESNAPSHOT
from cdc.pipeline.auto_resnapshot import AutoResnapshot
from cdc.pipeline.prune import Pruner
from cdc.pipeline.run_stages import Context, Outcome, StageProgress
from cdc.pipeline.ship_beside import ShipBeside
from cdc.pipeline.tail_beside import TailBeside
from cdc.state import StateDir

log = logging.getLogger(__name__)

STAGES = ("snapshot", "tail", "ship-s3", "ship-kinesis", "spark-merge", "snowflake-bootstrap", "snowflake-apply")
ALIASES = {"ship": ("ship-s3", "ship-kinesis"), "snowflake": ("snowflake-bootstrap", "snowflake-apply")}
_RUNNERS: dict[str, Callable[[Context], Outcome]] = {
    "snapshot": run_stages.snapshot, "tail": run_stages.tail, "ship-s3": run_stages.ship("s3"),
    "ship-kinesis": run_stages.ship("kinesis"), "spark-merge": run_stages.spark_merge,
    "snowflake-bootstrap": run_stages.snowflake_bootstrap, "snowflake-apply": run_stages.snowflake_apply,
}
FAILED = "failed"
CAUGHT_UP, SIGNALLED = "caught up", "stopped by signal"


@dataclass(frozen=True)
class RunOptions:
    follow: bool = False
    stages: tuple[str, ...] = ()  # empty: every configured stage
    skip: tuple[str, ...] = ()
    snapshot: bool = True  # False: never snapshot (tail then needs a checkpoint or `start`)
    start: StartRequest = StartRequest()  # tail's first start, as `cdc tail --start-position/...`
    poll_interval: float = 1.0  # --follow: longest pause after a cycle when nothing new was sealed
    allow_no_pk: bool = False  # the snapshot copies keyless tables (multisets of rows) instead of refusing them
    # --follow: a stage failing with exit 10 (lost connection, throttling) is retried, with backoff, until no cycle
    # has completed for this long; then the run ends with that stage's error.
    transient_timeout: float = 300.0


@dataclass(frozen=True)
class StageResult:
    stage: str
    cycle: int
    status: str  # done | nothing new | skipped | stopped | failed
    reached: str | None
    count: int
    unit: str
    seconds: float
    lag_seconds: float | None = None
    error: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"event": "stage", "stage": self.stage, "cycle": self.cycle, "status": self.status,
                "reached": self.reached, "count": self.count, "unit": self.unit, "seconds": round(self.seconds, 3),
                "rate": round(self.rate, 1), "lag_seconds": self.lag_seconds, "error": self.error,
                "detail": dict(self.detail)}


@dataclass
class RunSummary:
    stages: list[str]
    follow: bool
    cycles: int = 0
    stopped: str = CAUGHT_UP
    seconds: float = 0.0
    totals: dict[str, int] = field(default_factory=dict)  # rows / records / changes per stage, all cycles
    last: dict[str, StageResult] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """--until-now: every stage consumed what was current at start (False if a signal cut it short)."""
        return self.stopped == CAUGHT_UP

    def to_dict(self) -> dict[str, Any]:
        return {"event": "summary", "mode": "follow" if self.follow else "until-now", "stages": self.stages,
                "cycles": self.cycles, "stopped": self.stopped, "complete": self.complete,
                "seconds": round(self.seconds, 3), "totals": dict(self.totals),
                "last": {name: result.to_dict() for name, result in self.last.items()}}


class StageError(CdcError):
    """A stage of `cdc run` failed: its own error, exit code and fix, with the stage named."""

    def __init__(self, stage: str, cause: CdcError) -> None:
        super().__init__(f"cdc run: stage {stage} failed: {cause.message}", hint=cause.hint)
        self.stage = stage
        self.exit_code = cause.exit_code


def plan_stages(settings: Settings, options: RunOptions, env: Mapping[str, str] | None = None) -> list[str]:
    """The stages to run, in pipeline order: the asked ones, else every configured one, minus skipped ones."""
    configured = _configured(settings, os.environ if env is None else env)
    asked = _expand(options.stages, "--stages", configured)
    skipped = _expand(options.skip, "--skip-stage", set(STAGES))
    if not options.snapshot and "snapshot" in asked:
        raise UsageError("--no-snapshot contradicts --stages snapshot", hint="give one of them")
    chosen = asked or configured
    if not options.snapshot:
        skipped.add("snapshot")
    chain = [stage for stage in STAGES if stage in chosen and stage not in skipped]
    if not chain:
        raise UsageError("no stage left to run", hint=f"stages: {', '.join(STAGES)} (or ship, snowflake)")
    return chain


def _expand(names: tuple[str, ...], flag: str, configured: set[str]) -> set[str]:
    """Stage names; an alias means its configured members (all of them if none is, so the error shows)."""
    found: set[str] = set()
    for name in (part.strip() for item in names for part in item.split(",") if part.strip()):
        if name not in STAGES and name not in ALIASES:
            raise UsageError(f"{flag} {name!r} is not a stage",
                             hint=f"stages: {', '.join(STAGES)}; aliases: ship, snowflake")
        members = set(ALIASES.get(name, (name,)))
        found.update(members & configured or members)
    return found


def _configured(settings: Settings, env: Mapping[str, str]) -> set[str]:
    stages = {"snapshot", "tail", "spark-merge"}
    if settings.aws.bucket:
        stages.add("ship-s3")
    if settings.aws.stream:
        stages.add("ship-kinesis")
    # A connection name (cdc.toml, CDC_SNOWFLAKE_CONNECTION, the Snowflake CLI's default) or an account.
    if settings.snowflake.connection or env.get("SNOWFLAKE_DEFAULT_CONNECTION_NAME") or env.get("SNOWFLAKE_ACCOUNT"):
        stages.update(("snowflake-bootstrap", "snowflake-apply"))
    return stages


def run_pipeline(
    settings: Settings,
    options: RunOptions,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[StageProgress], None] | None = None,
    on_stage: Callable[[StageResult], None] | None = None,
    on_cycle: Callable[[RunSummary], None] | None = None,
) -> RunSummary:
    """Run the chain once (until-now) or in cycles until `stop` (follow); raise StageError at the first failure."""
    stop = stop or threading.Event()
    chain = plan_stages(settings, options)
    ctx = Context(settings, StateDir(settings.state_dir).ensure(), stop, on_progress or (lambda _p: None),
                  start=options.start, allow_no_pk=options.allow_no_pk, follow=options.follow)
    summary = RunSummary(chain, options.follow)
    began, finished = time.monotonic(), False
    repairs = _repairs(ctx, chain, options)
    pruner = _pruner(ctx, chain)
    beside = TailBeside(ctx) if options.follow and "tail" in chain else None
    retry = _Retry(options.transient_timeout if options.follow else 0.0)
    report = on_stage or (lambda _r: None)
    try:
        while True:
            summary.cycles += 1
            try:
                busy, finished = _cycle(ctx, chain, summary, report, beside)
            except StageError as exc:
                pause = retry.after(exc)  # raises it again unless it is worth a retry
                if stop.wait(pause):
                    break
                continue
            if beside is None or beside.healthy:  # a restarted tail must show it reads before the count restarts
                retry.succeeded()
            summary.seconds = time.monotonic() - began
            if on_cycle:
                on_cycle(summary)
            if pruner is not None:
                pruner.maybe()
            # --until-now goes on while a re-snapshot it started runs (cdc.pipeline.auto_resnapshot).
            repairing = repairs is not None and repairs.poll(finished)
            if not (options.follow or repairing) or stop.is_set() or (not busy and _pause(ctx, beside, options)):
                break
    finally:
        if beside is not None:
            _last_tail(beside, summary, report)
        if repairs is not None:
            repairs.close()
        if pruner is not None:
            pruner.close()
        ctx.close()
    # --until-now: a signal that came after the last stage finished does not make the run incomplete.
    summary.stopped = SIGNALLED if (stop.is_set() if options.follow else not finished) else CAUGHT_UP
    summary.seconds = time.monotonic() - began
    if repairs is not None and not options.follow and (failed := repairs.unrepaired()) is not None:
        raise StageError(AUTO_RESNAPSHOT, failed)
    return summary


def _pause(ctx: Context, beside: TailBeside | None, options: RunOptions) -> bool:
    """The idle pause after a cycle that found nothing: True if the run is to stop."""
    if beside is not None and beside.running:
        return beside.wait(options.poll_interval)  # ends early when tail seals a segment
    return ctx.stop.wait(options.poll_interval)


def _last_tail(beside: TailBeside, summary: RunSummary, on_stage: Callable[[StageResult], None]) -> None:
    """Stop the tail thread; what it captured since the last cycle's tail line is the run's last one."""
    outcome = beside.close()
    if outcome is not None:
        _count(summary, _result("tail", summary.cycles, outcome, 0.0))
        on_stage(summary.last["tail"])


def _repairs(ctx: Context, chain: list[str], options: RunOptions) -> AutoResnapshot | None:
    """The automatic re-snapshot of flagged tables: only where this run's tail reads its watermarks."""
    if "tail" not in chain:
        return None
    return AutoResnapshot(ctx.settings, ctx.state, ctx.stop, follow=options.follow,
                          on_failure=lambda exc: _record(ctx, AUTO_RESNAPSHOT, exc))


def _pruner(ctx: Context, chain: list[str]) -> Pruner | None:
    """The change log's retention ([changelog] keep), for the readers this run feeds and those with a checkpoint."""
    keep = ctx.settings.changelog.keep_seconds()
    if keep is None:
        return None
    # The run's stop ends a long first prune early (Ctrl-C waits for no unlinks): the rest goes at the next one.
    return Pruner(ctx.state, keep, prune_readers(ctx.settings, chain), ctx.stop)


def prune_readers(settings: Settings, chain: list[str]) -> list[str]:
    """The readers a run's pruning waits for even before their first run: its chain's, and the destinations
    cdc.toml configures (a bucket, a stream, a Snowflake connection) when this run skips them. spark-merge, which
    counts as configured everywhere, only when the run merges: a run that only ships would never prune."""
    configured = set(plan_stages(settings, RunOptions())) - {"spark-merge"}
    return [stage for stage in prune.READERS if stage in chain or stage in configured]


class _Retry:
    """--follow outlives a network outage: a transient stage failure is retried with backoff, up to a limit.

    Every stage is idempotent from its checkpoint (docs/architecture.md), so running the chain again after a
    failure repeats nothing; what is left is not to hammer a server that is coming back (issue #27).
    """

    def __init__(self, limit: float) -> None:
        self.limit, self.failures = limit, 0
        self.failing_since: float | None = None

    def after(self, exc: StageError) -> float:
        """Seconds to wait before the next cycle; `exc` again if it is not transient or has lasted too long."""
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        if exc.exit_code != ExitCode.TRANSIENT or self.limit <= 0 or now - self.failing_since > self.limit:
            raise exc
        self.failures += 1
        log.warning(f"{exc.message}; retrying the cycle ({self.failures} in a row, giving up after "
                    f"{self.limit:.0f}s)", extra={"stage": exc.stage})
        return backoff(self.failures, 1.0, 30.0)

    def succeeded(self) -> None:
        self.failing_since, self.failures = None, 0


def _cycle(ctx: Context, chain: list[str], summary: RunSummary, on_stage: Callable[[StageResult], None],
           beside: TailBeside | None) -> tuple[bool, bool]:
    """One pass over the chain: (more to do, so follow goes again at once; every stage caught up)."""
    busy = False
    if beside is not None:
        beside.sealed.clear()  # set again by a segment sealed from here on: the next cycle has work
    shipping = _ship_beside(ctx, chain, summary.cycles) if beside is not None and summary.cycles > 1 else None

    def report(result: StageResult) -> None:
        _count(summary, result)
        on_stage(result)

    for stage in chain:
        if ctx.stop.is_set():  # between stages: the one before finished its unit of work
            if shipping is not None:
                shipping.join(report)
            return busy, False
        if shipping is not None and stage in shipping.stages:
            shipping.start()  # beside the merge; joined once the merge is done
            continue
        if stage == "tail" and beside is not None and ctx.tailed:
            result = _run_stage(ctx, stage, summary.cycles, on_stage, lambda _ctx: _tail_beside(ctx, beside))
        else:
            try:
                result = _run_stage(ctx, stage, summary.cycles, on_stage)
            except BaseException:
                if shipping is not None:
                    shipping.join(report, raise_error=False)  # its lines; the stage's error wins over its own
                raise
            if stage == "tail" and beside is not None and result.status != run_stages.STOPPED:
                beside.start()  # the backlog is captured: tail goes on beside the later stages
        report(result)
        if shipping is not None and stage == "spark-merge":
            shipping.join(report)  # its lines after the merge's, then its error
        busy = busy or (stage == "tail" and beside is None and result.count > 0)
        if result.status == run_stages.STOPPED:
            return busy, False
    return busy or (beside is not None and beside.sealed.is_set()), True


def _ship_beside(ctx: Context, chain: list[str], cycle: int) -> ShipBeside:
    return ShipBeside(chain, cycle, lambda stage, number, on_stage: _run_stage(ctx, stage, number, on_stage), ctx.stop)


def _tail_beside(ctx: Context, beside: TailBeside) -> Outcome:
    """The cycle's look at the tail thread: its error raised here, a new thread after a failure's backoff."""
    beside.check()
    if not beside.running:
        beside.start()
    if beside.healthy:
        failures.clear_failure(ctx.state, "tail")
    return beside.take()


def _count(summary: RunSummary, result: StageResult) -> None:
    summary.last[result.stage] = result
    summary.totals[result.stage] = summary.totals.get(result.stage, 0) + result.count


def _run_stage(ctx: Context, stage: str, cycle: int, on_stage: Callable[[StageResult], None],
               runner: Callable[[Context], Outcome] | None = None) -> StageResult:
    began = time.monotonic()
    try:
        outcome = (runner or _RUNNERS[stage])(ctx)
    except CdcError as exc:
        _record(ctx, stage, exc)
        on_stage(StageResult(stage, cycle, FAILED, None, 0, "", time.monotonic() - began, error=str(exc)))
        raise StageError(stage, exc) from exc
    except Exception as exc:  # a bug or an unmapped driver error: keep the traceback, name the stage
        _record(ctx, stage, exc)
        on_stage(StageResult(stage, cycle, FAILED, None, 0, "", time.monotonic() - began, error=repr(exc)))
        exc.add_note(f"cdc run: in stage {stage}")
        raise
    # A stage stopped by a signal has not shown it works again; the tail thread clears its own (_tail_beside).
    if outcome.status != run_stages.STOPPED and runner is None:
        failures.clear_failure(ctx.state, stage)
    return _result(stage, cycle, outcome, time.monotonic() - began)


def _result(stage: str, cycle: int, outcome: Outcome, seconds: float) -> StageResult:
    return StageResult(stage, cycle, outcome.status, outcome.reached, outcome.count, outcome.unit, seconds,
                       outcome.lag_seconds, detail=outcome.detail)


def _record(ctx: Context, stage: str, error: Exception) -> None:
    """The stage's last error, for `cdc status` (best effort: the stage's own error decides the exit)."""
    try:
        failures.record_failure(ctx.state, stage, error, command="cdc run",
                                secrets=failures.known_secrets(ctx.settings))
    except (OSError, CdcError) as exc:
        error.add_note(f"(its record for `cdc status` could not be written: {exc})")
