"""Fresh MariaDB datadirs: mariadb-install-db once per process, then a copy per server."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ._process import RigError, tail


def is_root() -> bool:
    """True when running as root, where mariadbd and mariadb-install-db need --user=root."""
    return os.geteuid() == 0


_TEMPLATES: dict[tuple[str, ...], Path] = {}


def template_datadir(install_db: str, innodb_options: tuple[str, ...]) -> Path:
    """Return a freshly initialised datadir for these InnoDB options, made once per process."""
    if innodb_options not in _TEMPLATES:
        base = Path(tempfile.mkdtemp(prefix="cdc-mariadb-template-"))
        atexit.register(shutil.rmtree, base, True)
        _run_install_db(install_db, base / "data", innodb_options)
        _TEMPLATES[innodb_options] = base / "data"
    return _TEMPLATES[innodb_options]


def _run_install_db(install_db: str, datadir: Path, extra: tuple[str, ...]) -> None:
    argv = [
        install_db,
        "--no-defaults",
        f"--datadir={datadir}",
        # 'normal': root@localhost/127.0.0.1/::1 with an empty password, usable over TCP.
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        *(["--user=root"] if is_root() else []),
        *extra,  # passed through to the bootstrap mariadbd
    ]
    log = datadir.parent / "install.log"
    with open(log, "wb") as out:
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        raise RigError(
            f"mariadb-install-db failed with exit code {result.returncode} "
            f"({' '.join(argv)}); last lines of {log}:\n{tail(log)}"
        )
