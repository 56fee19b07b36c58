"""MariaDB's system-versioned tables, which cdc does not replicate: refused with the fix, never skipped in silence."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows


def test_system_versioned_tables_are_refused_not_skipped(tmp_path: Path, mariadb_factory: Any,
                                                         aws_env: dict[str, str], bucket: str,
                                                         snowflake_env: dict[str, str], sf: Any) -> None:
    """MariaDB's WITH SYSTEM VERSIONING: an UPDATE inserts the old version as a row and a DELETE closes the row, in
    the binlog, while SELECT * shows the current rows. The snapshot skipped such a table in silence (information_schema
    calls it SYSTEM VERSIONED, not BASE TABLE) and tail then captured its history rows: the targets held neither what
    SELECT * shows nor the whole history. Refused (exit 4) with the fix; excluded, the rest replicates; a table made
    versioned later stops tail at that DDL."""
    server = mariadb_factory()
    server.execute("CREATE DATABASE m")
    server.execute("CREATE TABLE m.plain (id INT PRIMARY KEY, a VARCHAR(10))")
    server.execute("CREATE TABLE m.audit (id INT PRIMARY KEY, a VARCHAR(10)) WITH SYSTEM VERSIONING")
    server.execute("INSERT INTO m.plain VALUES (1, 'one')")
    server.execute("INSERT INTO m.audit VALUES (1, 'one')")
    config = write_config(tmp_path / "cdc.toml", server, "m", aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 4 and "system-versioned tables are not supported: m.audit" in err, err
    assert '[mysql] exclude_tables = ["m.audit"]' in " ".join(err.split()), err  # a line to paste
    checked = subprocess.run(cdc_argv(config, "check-binlog", "--json"), cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    verdict = next(c for c in json.loads(checked.stdout)["checks"] if c["name"] == "system_versioned")
    assert verdict["status"] == "warn" and "m.audit" in verdict["value"] and "m.plain" not in verdict["value"], verdict

    config.write_text(config.read_text().replace('databases = ["m"]', 'databases = ["m"]\nexclude_tables = ["m.audit"]'))
    checked = subprocess.run(cdc_argv(config, "check-binlog", "--json"), cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    verdict = next(c for c in json.loads(checked.stdout)["checks"] if c["name"] == "system_versioned")
    assert verdict["status"] == "ok", verdict  # the fix it advised is taken: no warning left
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    server.execute("UPDATE m.audit SET a = 'uno' WHERE id = 1")
    server.execute("INSERT INTO m.plain VALUES (2, 'two')")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert sorted(rows(sf, 'SELECT "ID", "A" FROM "PLAIN"')) == [(1, "one"), (2, "two")]

    server.execute("ALTER TABLE m.plain ADD SYSTEM VERSIONING")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 1 and "m.plain is made system-versioned at" in err, err
