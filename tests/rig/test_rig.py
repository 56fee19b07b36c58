"""The rig itself: real servers start with the configuration they claim, and stop cleanly."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pymysql
import pytest

from tests.rig import DbUser, MariaDB, MissingToolError, MotoServer, _process, merge_options


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_session_server_logs_full_row_images(mariadb: MariaDB) -> None:
    assert mariadb.variable("log_bin") == 1
    assert mariadb.variable("binlog_format") == "ROW"
    assert mariadb.variable("binlog_row_image") == "FULL"
    assert mariadb.variable("binlog_row_metadata") == "FULL"
    assert mariadb.variable("server_id") == 1
    file, pos = mariadb.binlog_position()
    assert file.startswith("mariadb-bin.") and pos > 0
    assert (mariadb.datadir / file).is_file()


def test_fresh_db_is_usable_and_written_to_the_binlog(mariadb: MariaDB, fresh_db: str) -> None:
    _, before = mariadb.binlog_position()
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO t VALUES (%s, %s)", (1, "O'Brien 🐬"), database=fresh_db)
    assert mariadb.execute("SELECT name FROM t", database=fresh_db) == [("O'Brien 🐬",)]
    assert mariadb.binlog_position()[1] > before


def test_replication_user_has_only_replication_grants(mariadb: MariaDB, replication_user: DbUser) -> None:
    with mariadb.connect(replication_user.name, replication_user.password) as conn, conn.cursor() as cur:
        cur.execute("SHOW GRANTS")
        grants = " ".join(row[0] for row in cur.fetchall())
        cur.execute("SHOW BINARY LOGS")  # needs BINLOG MONITOR
        assert cur.fetchall()
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("CREATE DATABASE not_allowed")
    for privilege in ("REPLICATION SLAVE", "BINLOG MONITOR", "SELECT"):
        assert privilege in grants
    assert "ALL PRIVILEGES" not in grants


def test_misconfigured_server_has_binlog_off(mariadb_factory: Callable[..., MariaDB]) -> None:
    server = mariadb_factory(skip_log_bin=True)
    assert "log-bin" not in server.options
    assert server.variable("log_bin") == 0


def test_overrides_reach_the_server(mariadb_factory: Callable[..., MariaDB]) -> None:
    server = mariadb_factory(
        {"binlog-format": "STATEMENT", "binlog-row-image": "MINIMAL", "binlog-row-metadata": "NO_LOG"}
    )
    assert server.variable("log_bin") == 1
    assert server.variable("binlog_format") == "STATEMENT"
    assert server.variable("binlog_row_image") == "MINIMAL"
    assert server.variable("binlog_row_metadata") == "NO_LOG"


@pytest.mark.mariadb
def test_restart_freeze_and_stop_by_pid() -> None:
    with MariaDB() as server:
        server.execute("CREATE DATABASE kept")
        first_pid, port = server.pid, server.port
        server.restart({"binlog-format": "MIXED"})
        assert (server.port, server.variable("binlog_format")) == (port, "MIXED")
        assert server.pid != first_pid and not _pid_alive(first_pid)  # type: ignore[arg-type]
        assert server.execute("SHOW DATABASES LIKE 'kept'") == [("kept",)]
        server.freeze()
        # The kernel still accepts the TCP connection; the handshake never comes.
        with pytest.raises(pymysql.err.OperationalError):
            server.connect(connect_timeout=1, read_timeout=1)
        server.thaw()
        assert server.execute("SELECT 1") == [(1,)]
        pid = server.pid
    assert not _pid_alive(pid)  # type: ignore[arg-type]
    assert not server.base_dir.exists()


def test_merge_options_skip_removes_its_opposite() -> None:
    merged = merge_options({"log-bin": "/x/bin", "server_id": 1}, {"skip_log_bin": True, "server-id": False})
    assert merged == {"skip-log-bin": True}
    assert merge_options(merged, {"log-bin": "/y"}) == {"log-bin": "/y"}


def test_moto_endpoint_serves_s3(moto_server: MotoServer) -> None:
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket="rig-check")
    s3.put_object(Bucket="rig-check", Key="a/b.json", Body=b"{}")
    assert "rig-check" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="rig-check")["Contents"]] == ["a/b.json"]


def test_aws_env_points_boto3_at_moto(aws_env: dict[str, str], moto_server: MotoServer) -> None:
    import boto3

    kinesis = boto3.client("kinesis")  # no endpoint_url: AWS_ENDPOINT_URL from the env
    assert kinesis.meta.endpoint_url == moto_server.endpoint_url
    kinesis.create_stream(StreamName="rig-check", ShardCount=1)
    assert "rig-check" in kinesis.list_streams()["StreamNames"]


def test_moto_kinesis_keeps_every_record_of_concurrent_put_records(moto_server: MotoServer) -> None:
    """The network-fault tests deliver a stalled PutRecords beside its retry; the stand-in must not drop either."""
    from concurrent.futures import ThreadPoolExecutor

    from cdc.sinks import read_stream

    kinesis = moto_server.client("kinesis")
    kinesis.create_stream(StreamName="rig-concurrent", ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName="rig-concurrent", WaiterConfig={"Delay": 0.1})

    def put(writer: int) -> None:
        client = moto_server.client("kinesis")  # one HTTP connection per writer, served by its own thread
        for batch in range(10):
            records = [{"Data": f"{writer}-{batch}-{i}".encode(), "PartitionKey": "k"} for i in range(200)]
            client.put_records(StreamName="rig-concurrent", Records=records)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(8)))
    received = list(read_stream(kinesis, "rig-concurrent"))
    assert len(received) == len(set(received)) == 8 * 10 * 200


def test_missing_mariadb_fails_with_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(_process, "_SBIN_DIRS", ())
    with pytest.raises(MissingToolError, match="apt-get install mariadb-server"):
        MariaDB()
