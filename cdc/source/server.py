"""Identify the server: flavour (MySQL, MariaDB, RDS, Aurora), version, and a stable identity."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import pymysql

from cdc.source.connect import query, variables
from cdc.state import ServerIdentity

MYSQL = "mysql"
MARIADB = "mariadb"
RDS_MYSQL = "rds-mysql"
RDS_MARIADB = "rds-mariadb"
AURORA_MYSQL = "aurora-mysql"


@dataclass(frozen=True)
class ServerInfo:
    flavour: str
    version: str
    version_tuple: tuple[int, int, int]
    server_id: int
    server_uuid: str
    hostname: str
    aurora_version: str | None = None
    is_reader: bool = False

    @property
    def is_mariadb(self) -> bool:
        return self.flavour in (MARIADB, RDS_MARIADB)

    @property
    def is_managed(self) -> bool:
        """RDS and Aurora: no SUPER, retention through mysql.rds_* procedures."""
        return self.flavour in (RDS_MYSQL, RDS_MARIADB, AURORA_MYSQL)

    def identity(self) -> ServerIdentity:
        return ServerIdentity(self.server_uuid, self.server_id, self.flavour, self.version)


def parse_version(text: str) -> tuple[int, int, int]:
    # Aurora spells its version "8.0.mysql_aurora.3.05.2": major.minor only, patch unknown (0).
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return (0, 0, 0)
    return (int(match[1]), int(match[2]), int(match[3] or 0))


def classify(version: str, version_comment: str, basedir: str, has_rds_procs: bool, aurora_version: str | None) -> str:
    """Pick the flavour from what the server says about itself."""
    is_mariadb = "mariadb" in version.lower() or "mariadb" in version_comment.lower()
    if aurora_version:
        return AURORA_MYSQL
    # RDS installs under /rdsdbbin and ships the mysql.rds_* procedures.
    if has_rds_procs or basedir.startswith("/rdsdbbin"):
        return RDS_MARIADB if is_mariadb else RDS_MYSQL
    return MARIADB if is_mariadb else MYSQL


def describe_server(conn: pymysql.Connection) -> ServerInfo:
    found = variables(
        conn, ["version", "version_comment", "basedir", "server_id", "server_uuid", "hostname",
               "innodb_read_only", "port", "log_bin_basename"],
    )
    aurora = _aurora_version(conn)
    has_rds = bool(query(conn, "SELECT 1 AS x FROM information_schema.ROUTINES "
                               "WHERE ROUTINE_SCHEMA = 'mysql' AND ROUTINE_NAME = 'rds_set_configuration'"))
    flavour = classify(found.get("version", ""), found.get("version_comment", ""), found.get("basedir", ""), has_rds, aurora)
    uuid = found.get("server_uuid") or _derived_uuid(found)
    return ServerInfo(
        flavour=flavour,
        version=found.get("version", ""),
        version_tuple=parse_version(found.get("version", "")),
        server_id=int(found.get("server_id") or 0),
        server_uuid=uuid,
        hostname=found.get("hostname", ""),
        aurora_version=aurora,
        # Aurora readers run with innodb_read_only=ON and have no binlog of their own.
        is_reader=bool(aurora) and found.get("innodb_read_only", "").upper() == "ON",
    )


def _derived_uuid(found: dict[str, str]) -> str:
    """MariaDB has no @@server_uuid: derive a stable one from what identifies its binlog."""
    seed = "|".join(found.get(k, "") for k in ("hostname", "port", "server_id", "log_bin_basename"))
    return "mariadb-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def _aurora_version(conn: pymysql.Connection) -> str | None:
    try:
        rows = query(conn, "SELECT AURORA_VERSION() AS v")
    except pymysql.err.MySQLError:
        return None
    return str(rows[0]["v"]) if rows else None
