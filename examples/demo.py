"""The local demo: the whole pipeline on throwaway local services, driven through the real `cdc` CLI.

Run it with `bash scripts/demo.sh` (installs what is missing first). It starts a MariaDB with the
binary log on, loads the REGIONS/COUNTRIES example, runs each stage as a user would, prints every
command with its exit code, and stops everything it started. Pass --keep to keep the work directory.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.rig import MariaDB  # noqa: E402  (the same throwaway servers the tests use)

REGIONS = [(1, "Europe"), (2, "Americas"), (3, "Asia"), (4, "Middle East and Africa")]
COUNTRIES = [("AR", "Argentina", 2), ("AU", "Australia", 3), ("BE", "Belgium", 1), ("BR", "Brazil", 2),
             ("CA", "Canada", 2), ("CH", "Switzerland", 1), ("CN", "China", 3), ("DE", "Germany", 1)]


def load_example(server: MariaDB) -> None:
    """The source article's schema, with primary keys and a foreign key as a real OLTP schema has."""
    server.execute("CREATE DATABASE IF NOT EXISTS hr")
    server.execute("CREATE TABLE hr.REGIONS (REGION_ID INT PRIMARY KEY, REGION_NAME VARCHAR(25))")
    server.execute(
        "CREATE TABLE hr.COUNTRIES (COUNTRY_ID CHAR(2) PRIMARY KEY, COUNTRY_NAME VARCHAR(40), "
        "REGION_ID INT, FOREIGN KEY (REGION_ID) REFERENCES hr.REGIONS (REGION_ID))"
    )
    for region in REGIONS:
        server.execute("INSERT INTO hr.REGIONS VALUES (%s, %s)", region)
    for country in COUNTRIES:
        server.execute("INSERT INTO hr.COUNTRIES VALUES (%s, %s, %s)", country)


def cdc(workdir: Path, env: dict[str, str], *args: str, expect: tuple[int, ...] = (0,)) -> int:
    """Run one `cdc` command the way a user types it; stop the demo on an unexpected exit code."""
    print(f"\n$ cdc {shlex.join(args)}", flush=True)
    code = subprocess.run([sys.executable, "-m", "cdc", *args], cwd=workdir, env=env).returncode
    print(f"(exit {code})", flush=True)
    if code not in expect:
        raise SystemExit(f"demo: `cdc {args[0]}` exited {code}, expected {expect}")
    return code


def write_config(workdir: Path, server: MariaDB) -> None:
    (workdir / "cdc.toml").write_text(
        f'state_dir = "{workdir / ".cdc"}"\n\n[mysql]\nhost = "{server.host}"\nport = {server.port}\n'
        'user = "root"\nssl_mode = "DISABLED"\ndatabases = ["hr"]\n'
    )


def run(workdir: Path) -> None:
    with MariaDB() as server:
        print(f"demo: throwaway MariaDB {server.host}:{server.port}, datadir {server.datadir}")
        load_example(server)
        write_config(workdir, server)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cdc(workdir, env, "check-binlog")
    print(f"\ndemo: done. Work directory: {workdir} (cdc.toml, .cdc/ state)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="cdc-demo-"))
    try:
        run(workdir)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(workdir)], check=False)


if __name__ == "__main__":
    main()
