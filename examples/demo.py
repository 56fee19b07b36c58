"""The local demo: the whole pipeline on throwaway local services, driven through the real `cdc` CLI.

Run it with `bash scripts/demo.sh` (installs what is missing first). It starts

- a MariaDB with the binary log on (ROW, FULL images, FULL metadata), loaded with the source article's
  REGIONS/COUNTRIES example plus an ORDERS table with exact types, and a steady workload writing to them;
- moto's server as the local S3 and Kinesis endpoint (a bucket and a stream are created on it);
- fakesnow's server as the local Snowflake stand-in (a connections.toml entry points at it);

then runs each stage as a user would (check-binlog, snapshot, tail, ship to S3 and Kinesis, spark-merge
reading what was shipped to S3, snowflake-bootstrap, snowflake-apply) while the workload writes, catches
up with `cdc run --until-now` once it stops, proves the result with `cdc verify` and shows `cdc status`.
Every command is printed with its exit code; everything the demo starts, it stops. `--keep` keeps the work
directory (cdc.toml, .cdc state, lake).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.demo_workload import Workload, load_example  # noqa: E402
from tests.rig import MariaDB, MotoServer  # noqa: E402  (the same throwaway servers the tests use)

BUCKET, PREFIX, STREAM = "cdc-demo-lake", "cdc", "cdc-demo"
SNOWFLAKE_DATABASE, SNOWFLAKE_SCHEMA = "DEMO", "HR"


class Demo:
    """The work directory, the environment every `cdc` command gets, and the commands run so far."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env = workdir, env
        self.ran: list[tuple[str, int]] = []

    def cdc(self, *args: str, expect: tuple[int, ...] = (0,)) -> int:
        """Run one `cdc` command the way a user types it; stop the demo on an unexpected exit code."""
        line = f"cdc {shlex.join(args)}"
        print(f"\n$ {line}", flush=True)
        code = subprocess.run([sys.executable, "-m", "cdc", *args], cwd=self.workdir, env=self.env).returncode
        print(f"(exit {code})", flush=True)
        self.ran.append((line, code))
        if code not in expect:
            raise SystemExit(f"demo: `{line}` exited {code}, expected {' or '.join(map(str, expect))}")
        return code

    def catch_up(self) -> None:
        """One pass of every stage after the snapshot, one command each (`cdc run --until-now` chains them)."""
        self.cdc("tail", "--until-now")
        self.cdc("ship", "--to", "s3")
        self.cdc("ship", "--to", "kinesis")
        self.cdc("spark-merge", "--source", f"s3://{BUCKET}/{PREFIX}")
        self.cdc("snowflake-apply", "--until-now")


@contextmanager
def snowflake_stand_in(workdir: Path) -> Iterator[dict[str, str]]:
    """fakesnow's server in this process; yields SNOWFLAKE_* variables naming a connections.toml entry for it."""
    import fakesnow
    import snowflake.connector

    with fakesnow.server() as params:
        # uvicorn configures its loggers when the server starts: quiet them (and fakesnow's and sqlglot's notes
        # on the statements DuckDB cannot run) only now, or every query prints a line.
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "fakesnow", "fakesnow.server", "sqlglot"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        home = workdir / "snowflake"
        home.mkdir()
        # The same file the Snowflake CLI keeps; the password lives here, never on a command line.
        (home / "connections.toml").write_text(
            f'[local]\naccount = "{params["account"]}"\nuser = "{params["user"]}"\npassword = "{params["password"]}"\n'
            f'host = "{params["host"]}"\nport = {params["port"]}\nprotocol = "http"\nnetwork_timeout = 1\n')
        os.chmod(home / "connections.toml", 0o600)
        conn = snowflake.connector.connect(**params)
        conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {SNOWFLAKE_DATABASE}")
        conn.close()
        try:
            yield {"SNOWFLAKE_HOME": str(home)}
        finally:
            from fakesnow.transforms import stage

            # fakesnow stages PUT files in a /tmp folder it makes at import and never removes: staged rows.
            shutil.rmtree(stage.LOCAL_BUCKET_PATH, ignore_errors=True)


def aws_stand_in(stack: ExitStack) -> MotoServer:
    moto = stack.enter_context(MotoServer())
    moto.client("s3").create_bucket(Bucket=BUCKET)
    kinesis = moto.client("kinesis")
    kinesis.create_stream(StreamName=STREAM, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=STREAM)
    return moto


def write_config(workdir: Path, server: MariaDB, moto: MotoServer) -> None:
    """cdc.toml as `cdc init` would write it: every setting, no secret."""
    (workdir / "cdc.toml").write_text(
        f'state_dir = "{workdir / ".cdc"}"\n\n'
        f'[mysql]\nhost = "{server.host}"\nport = {server.port}\nuser = "root"\nssl_mode = "DISABLED"\n'
        'databases = ["hr"]\n\n'
        f'[aws]\nregion = "us-east-1"\nendpoint_url = "{moto.endpoint_url}"\nbucket = "{BUCKET}"\n'
        f'prefix = "{PREFIX}"\nstream = "{STREAM}"\n\n'
        f'[snowflake]\nconnection = "local"\ndatabase = "{SNOWFLAKE_DATABASE}"\nschema = "{SNOWFLAKE_SCHEMA}"\n')


def run(workdir: Path, workload_seconds: float) -> Demo:
    with ExitStack() as stack:
        server = stack.enter_context(MariaDB())
        print(f"demo: throwaway MariaDB {server.host}:{server.port}, datadir {server.datadir}")
        load_example(server)
        moto = aws_stand_in(stack)
        print(f"demo: local S3 and Kinesis at {moto.endpoint_url} (bucket {BUCKET}, stream {STREAM})")
        snowflake_env = stack.enter_context(snowflake_stand_in(workdir))
        print(f"demo: local Snowflake stand-in, connection [local] in {snowflake_env['SNOWFLAKE_HOME']}")
        write_config(workdir, server, moto)
        demo = Demo(workdir, {**os.environ, **moto.env, **snowflake_env, "PYTHONPATH": str(ROOT)})

        demo.cdc("check-binlog")
        demo.cdc("snapshot")
        with Workload(server, seconds=workload_seconds) as workload:
            demo.cdc("snowflake-bootstrap")
            demo.catch_up()  # while the workload writes: a moving target
        print(f"\ndemo: workload stopped after {workload.transactions} transactions; catching up")
        demo.cdc("run", "--until-now")  # the same chain in one command, as a runbook step
        demo.cdc("verify")  # the cut-over gate: every table, lake and Snowflake, equals MySQL
        demo.cdc("status", "--min-runway-hours", "0")
        return demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--workload-seconds", type=float, default=20.0, help="how long the steady workload writes")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="cdc-demo-"))
    try:
        demo = run(workdir, args.workload_seconds)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\ndemo: every step succeeded:")
    for line, code in demo.ran:
        print(f"  exit {code}  {line}")
    print(f"demo: work directory {workdir}" + (" (kept)" if args.keep else " (removed; --keep keeps it)"))


if __name__ == "__main__":
    main()
