"""`cdc kinesis-read`: print every record of a Kinesis stream, to see what arrived."""

from __future__ import annotations

import sys

import typer

from cdc import sinks
from cdc.commands.options import ConfigOpt, settings_from
from cdc.commands.ship import EndpointOpt, ProfileOpt, RegionOpt, StreamOpt, aws_flags
from cdc.errors import ConfigError


def kinesis_read(
    stream: StreamOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    endpoint_url: EndpointOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print every record of a stream (all shards, from TRIM_HORIZON), one line each, to stdout."""
    settings = settings_from(config, None, **aws_flags(stream=stream, region=region, profile=profile,
                                                        endpoint_url=endpoint_url))
    if not settings.aws.stream:
        raise ConfigError("kinesis-read needs a stream", hint="pass --stream NAME or set [aws] stream in cdc.toml")
    client = sinks.make_client("kinesis", settings.aws)
    out = sys.stdout.buffer
    for data in sinks.read_stream(client, settings.aws.stream):
        out.write(data + b"\n")
    out.flush()
    raise typer.Exit(0)
