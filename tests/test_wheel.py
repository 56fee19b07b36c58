"""The wheel as a user installs it: `pip install .` into a clean venv, then `cdc` must start and work.

The clean install is the real install path: a fresh venv with its own pip, the wheel and its declared
dependencies (no test extras), and nothing of this checkout's .venv. A dependency that cdc imports but
pyproject.toml does not declare (click, once typer stopped pulling it in) makes `cdc --help` fail there.
pip takes the dependencies from its cache when this machine has installed them before (setup.sh did), so the
test costs about a minute; without the cache it downloads them from the package index.
Building needs the build backend pyproject.toml names (pip fetches it into an isolated env, cached too).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from cdc.commands.main import COMMANDS
from tests.rig import DbUser, MariaDB

ROOT = Path(__file__).resolve().parents[1]
# Repository folder -> where the wheel installs it: commands/ and templates/ live inside cdc's namespace.
SHIPPED = {"cdc": "cdc", "commands": "cdc/commands", "templates": "cdc/templates"}


def _run(argv: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, f"{' '.join(argv)}\n{result.stdout}\n{result.stderr}"
    return result


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH, no venv of ours, no CDC_* settings, their own HOME."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env["HOME"] = str(home)
    # pip's cache lives under the real HOME: keep using it (a new HOME would download every dependency again).
    env["PIP_CACHE_DIR"] = str(Path.home() / ".cache" / "pip")
    return env


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the wheel is built from (a build in the checkout would leave build/ behind)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in SHIPPED:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return src


@pytest.fixture(scope="module")
def wheel(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(sources)],
         sources)
    (built,) = out.glob("cdc-*.whl")
    return built


@pytest.mark.long  # with the test below: one worker builds the module's wheel
def test_wheel_ships_every_module_inside_the_cdc_namespace(sources: Path, wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, installed in SHIPPED.items():
        for path in (sources / folder).rglob("*"):
            if path.suffix in (".py", ".j2", ".sql"):
                name = f"{installed}/{path.relative_to(sources / folder).as_posix()}"
                assert name in names, f"{name} is not in {wheel.name}"
    # A top-level `commands` or `templates` in site-packages would collide with any other project's.
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"cdc"}, tops


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with the wheel and its declared dependencies only: (its bin/ folder, a user's environment)."""
    where = tmp_path_factory.mktemp("clean")
    (where / "home").mkdir()
    env = _clean_env(where / "home")
    venv.EnvBuilder(with_pip=True).create(where / "venv")
    python = where / "venv" / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], where,
         timeout=1200, env=env)
    return where / "venv" / "bin", env


@pytest.mark.long  # a wheel build and a clean venv: first, not at the suite's end
@pytest.mark.mariadb
def test_clean_install_starts_every_command_and_checks_a_real_server(
        installed: tuple[Path, dict[str, str]], mariadb: MariaDB, replication_user: DbUser, tmp_path: Path) -> None:
    """One test, so that one xdist worker builds the clean venv (a module fixture is built once per worker)."""
    bin_dir, env = installed
    helped = _run([str(bin_dir / "cdc"), "--help"], tmp_path, env=env)
    assert "check-binlog" in helped.stdout and "snowflake-apply" in helped.stdout
    for name, _, _ in COMMANDS:
        shown = _run([str(bin_dir / "cdc"), name, "--help"], tmp_path, env=env)
        assert f"cdc {name}" in " ".join(shown.stdout.split()), name
    assert _run([str(bin_dir / "python"), "-m", "cdc", "--version"], tmp_path, env=env).stdout.startswith("cdc ")
    probe = ("import cdc, cdc.commands, cdc.templates; from cdc.sql import template_names; "
             "print(cdc.__file__); print(cdc.commands.__file__); print(len(template_names('snowflake')))")
    files = _run([str(bin_dir / "python"), "-c", probe], tmp_path, env=env).stdout.split()
    assert all(".venv" not in path and str(ROOT) not in path for path in files[:2]), files
    assert int(files[2]) == len(list((ROOT / "templates" / "snowflake").glob("*.j2")))
    # The C parts (tail's row decoder, the snapshot's row reader, the merge's scanner) built and loaded: a wheel that
    # shipped their sources unpacked them after the built modules, and the newer sources made each module "stale".
    native = ("from cdc.rows import native as r; from cdc.snapshot import native as s; from cdc.spark import scan; "
              "print(repr((r.PROBLEM, s.PROBLEM, scan.NATIVE_PROBLEM)))")
    assert _run([str(bin_dir / "python"), "-c", native], tmp_path, env=env).stdout.strip() == "(None, None, None)"

    checked = _run([str(bin_dir / "cdc"), "check-binlog", "--host", mariadb.host, "--port", str(mariadb.port),
                    "--user", replication_user.name, "--json"], tmp_path,
                   env={**env, "CDC_MYSQL_PASSWORD": replication_user.password})
    report = json.loads(checked.stdout)
    assert report["ok"] is True and report["server"]["user"].startswith(replication_user.name), report
