"""`cdc prune`: delete the change-log segments every reader has passed, once older than the retention window."""

# No `from __future__ import annotations`: typer must see real types.

from typing import Annotated, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, choices, settings_from
from cdc.durations import parse_duration
from cdc.errors import ExitCode, UsageError
from cdc.pipeline.prune import READERS, PrunePlan, plan_prune, prune
from cdc.pipeline.run import RunOptions, plan_stages
from cdc.state import StateDir


def prune_command(
    keep: Annotated[Optional[str], typer.Option(
        "--keep", help="Keep segments sealed less than this long ago (24h, 7d, 0s); default: changelog.keep in cdc.toml.")]
    = None,
    readers: Annotated[Optional[list[str]], typer.Option(
        "--reader", help=f"A reader to wait for even before its first run (repeatable; {' | '.join(READERS)}); "
        "default: the configured ones. Those with a checkpoint always count.", autocompletion=choices(READERS))]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; delete nothing.")] = False,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete the change log every reader (ship, spark-merge, snowflake-apply) has passed, and applied batches' files."""
    settings = settings_from(config, state_dir)
    seconds = parse_duration(keep, "--keep") if keep is not None else settings.changelog.keep_seconds()
    if seconds is None:
        raise UsageError("changelog.keep is off, so there is no retention to prune by",
                         hint="pass --keep (e.g. --keep 24h), or set [changelog] keep in cdc.toml")
    state = StateDir(settings.state_dir)
    # The configured readers count even before their first run: one without a checkpoint holds everything back.
    expected = readers if readers is not None else [s for s in plan_stages(settings, RunOptions()) if s in READERS]
    unknown = sorted(set(expected) - set(READERS))
    if unknown:
        raise UsageError(f"--reader {', '.join(unknown)}: not a reader of the change log",
                         hint=f"name one of {', '.join(READERS)}")
    plan = plan_prune(state, keep=seconds, expected=expected)
    if dry_run:
        _show(plan.to_dict() | {"dry_run": True}, plan, as_json, verb="would delete")
    else:
        result = prune(state, plan)
        _show(result.to_dict() | {"dry_run": False}, plan, as_json, verb="deleted")
    raise typer.Exit(int(ExitCode.OK))


def _show(document: dict[str, object], plan: PrunePlan, as_json: bool, *, verb: str) -> None:
    if as_json:
        ui.print_json(document)
        return
    _show_segments(plan, verb)
    batches = plan.batches
    if batches.batches:
        ui.note(f"{verb} the data files of {len(batches.batches):,} applied batches ({batches.bytes / 2**20:,.1f} MiB), "
                f"{batches.batches[0]} to {batches.batches[-1]}")
    elif batches.reason is not None:
        ui.note(f"no batch to prune: {batches.reason}")
    if batches.folds:
        ui.note(f"{verb} the folders of {len(batches.folds):,} applied batches, {batches.folds[0]} to "
                f"{batches.folds[-1]}, their manifests folded into batches/folded.json")


def _show_segments(plan: PrunePlan, verb: str) -> None:
    if plan.reason is not None:
        ui.note(f"nothing to prune: {plan.reason}; {plan.kept:,} segments kept")
    elif not plan.segments:
        ui.note(f"nothing to prune: no segment up to {plan.horizon} (held by {plan.held_by}) is older than --keep; "
                f"{plan.kept:,} segments kept")
    else:
        ui.note(f"{verb} {len(plan.segments):,} segments ({plan.bytes / 2**20:,.1f} MiB), {plan.segments[0].name} "
                f"to {plan.segments[-1].name}; {plan.kept:,} kept, held at {plan.horizon} by {plan.held_by}")
