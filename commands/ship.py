"""`cdc ship`: change log -> Kinesis (PutRecords) or S3 (partitioned objects), then checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from cdc import completion, sinks
from cdc.commands import logs, ui
from cdc.commands.logs import log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, choices, runs_stage, settings_from
from cdc.errors import ExitCode
from cdc.signals import stop_on_signals
from cdc.state import StateDir

_AWS = "AWS"
ToOpt = Annotated[str, typer.Option("--to", help="kinesis | s3 | s3://bucket/prefix.",
                                    autocompletion=choices(completion.SHIP_TARGETS))]
StreamOpt = Annotated[Optional[str], typer.Option("--stream", help="Kinesis stream name.", rich_help_panel=_AWS)]
BucketOpt = Annotated[Optional[str], typer.Option("--bucket", help="S3 bucket (or s3://bucket/prefix).", rich_help_panel=_AWS)]
PrefixOpt = Annotated[Optional[str], typer.Option("--prefix", help="S3 key prefix (default: cdc).", rich_help_panel=_AWS)]
RegionOpt = Annotated[Optional[str], typer.Option("--region", help="AWS region.", rich_help_panel=_AWS)]
ProfileOpt = Annotated[Optional[str], typer.Option("--profile", help="AWS profile (~/.aws/config).", rich_help_panel=_AWS)]
EndpointOpt = Annotated[
    Optional[str], typer.Option("--endpoint-url", help="Endpoint for LocalStack/MinIO/moto.", rich_help_panel=_AWS)
]


RollSizeOpt = Annotated[Optional[int], typer.Option(
    "--roll-size", help="S3: close a batch of segments, and cut a table's object, at this many MiB "
    "uncompressed (default 128; cdc.toml \\[aws] roll_size).")]
RollIntervalOpt = Annotated[Optional[float], typer.Option(
    "--roll-interval", help="S3 with --follow: ship a batch that is not full once its oldest segment "
    "has waited this many seconds (default 60; cdc.toml \\[aws] roll_interval).")]

SseOpt = Annotated[Optional[str], typer.Option(
    "--sse", help="S3 server-side encryption of every object: AES256 (SSE-S3) or aws:kms (SSE-KMS; "
    "cdc.toml \\[aws] sse).", rich_help_panel=_AWS)]
SseKmsKeyOpt = Annotated[Optional[str], typer.Option(
    "--sse-kms-key-id", help="With --sse aws:kms: the KMS key (id, ARN or alias/NAME); default the account's "
    "aws/s3 key.", rich_help_panel=_AWS)]


def aws_flags(**values: object) -> dict[str, object]:
    """AWS options as dotted settings keys (flag > CDC_AWS_* > cdc.toml [aws])."""
    return {f"aws.{name}": value for name, value in values.items()}


@log_options
def ship(
    to: ToOpt,
    stream: StreamOpt = None,
    bucket: BucketOpt = None,
    prefix: PrefixOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    endpoint_url: EndpointOpt = None,
    follow: Annotated[bool, typer.Option("--follow/--until-now", help="Keep shipping new segments (poll) "
                                         "until SIGTERM/Ctrl-C, or ship what is sealed and exit.")] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between polls with --follow.")] = 1.0,
    partition_by: Annotated[str, typer.Option("--partition-by", help="Kinesis partition key: pk | table | transaction.")] = "pk",
    explicit_hash_key: Annotated[Optional[list[str]], typer.Option(
        "--explicit-hash-key", help="DB.TABLE=HASHKEY: route a hot table to a chosen shard (repeatable).")] = None,
    oversize: Annotated[Optional[str], typer.Option(
        "--oversize", help="s3://bucket/prefix for Kinesis records over the stream's limit (pointer record sent).")] = None,
    compression: Annotated[str, typer.Option("--compression", help="S3 objects: gzip | zstd | none.")] = "gzip",
    multipart_mib: Annotated[int, typer.Option("--multipart-threshold", help="S3 multipart above this many MiB.")] = 64,
    roll_size: RollSizeOpt = None,
    roll_interval: RollIntervalOpt = None,
    sse: SseOpt = None,
    sse_kms_key_id: SseKmsKeyOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ship sealed change-log segments to Kinesis or S3, then advance the checkpoint."""
    settings = settings_from(config, state_dir, **aws_flags(
        stream=stream, bucket=bucket, prefix=prefix, region=region, profile=profile, endpoint_url=endpoint_url,
        roll_size=roll_size, roll_interval=roll_interval, sse=sse, sse_kms_key_id=sse_kms_key_id))
    if to in ("kinesis", "s3") or to.startswith("s3://"):  # anything else is a usage error, of no stage
        runs_stage(settings, "ship-kinesis" if to == "kinesis" else "ship-s3", f"cdc ship --to {to}")
    target = sinks.ShipTarget(to=to, partition_by=partition_by, explicit_hash_keys=tuple(explicit_hash_key or ()),
                              oversize_url=oversize, compression=compression,
                              multipart_threshold=multipart_mib * 1024 * 1024)
    sink = sinks.open_sink(settings.aws, target)
    with stop_on_signals() as stop, _progress(not as_json, sink.stage, settings.log.status_seconds()) as on_progress:
        summary = sinks.ship(StateDir(settings.state_dir), sink, follow=follow, poll_interval=poll_interval,
                             stop=stop, on_progress=on_progress)
    _render(summary, as_json)
    raise typer.Exit(int(stop.exit_code if summary.remaining and not follow else ExitCode.OK))


@contextmanager
def _progress(enabled: bool, stage: str, status_interval: float) -> Iterator[Callable[[sinks.Progress], None] | None]:
    """A rich progress bar on stderr at a TTY (segments, records, bytes, rate); else a status log record now and then
    (each S3 batch is logged by the library as well)."""
    if not enabled or not logs.live():
        every = logs.Every(status_interval)

        def status(p: sinks.Progress) -> None:
            if p.segments_done and every.due():
                rate = p.records / p.seconds if p.seconds > 0 else 0.0
                ui.note(f"{stage} at {p.segment}: {p.segments_done} of {p.segments_total} segment(s), {p.records:,} "
                        f"records, {rate:,.0f} records/s", stage=stage, position=p.segment, segments=p.segments_done,
                        records=p.records, records_per_second=round(rate, 1))

        yield status
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("segments"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                   TimeElapsedColumn(), console=ui.err, transient=True)
    task = bar.add_task("ship", total=None, stats="")

    def update(p: sinks.Progress) -> None:
        stats = f"{p.records:,} records  {p.bytes / 2**20:,.1f} MiB  {p.records / p.seconds:,.0f} rec/s"
        bar.update(task, completed=p.segments_done, total=p.segments_total or None, stats=stats)

    with bar:
        yield update


def _render(summary: sinks.ShipSummary, as_json: bool) -> None:
    if as_json:
        ui.print_json(summary.to_dict())
        return
    objects = f", {summary.objects:,} object(s) in {summary.batches:,} batch(es)" if summary.objects else ""
    ui.note(f"shipped {summary.segments} segment(s){objects}, {summary.records:,} records, {summary.bytes:,} bytes "
            f"in {summary.requests:,} requests to {summary.destination} ({summary.records_per_second:,.0f} records/s); "
            f"checkpoint at {summary.last_segment or '(nothing shipped yet)'}")
    if summary.remaining:
        ui.note(f"stopped early: {summary.remaining} sealed segment(s) left; rerun to continue")
