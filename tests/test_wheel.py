"""The wheel as a user installs it: built from pyproject.toml, installed into a fresh venv, `cdc --help` runs.

Kept fast: the wheel is installed with --no-deps into a venv without pip of its own, and the
dependencies come from this checkout's .venv through a path file (a plain path line, so the
.venv's editable-install finder is not loaded and `import cdc` can only find the wheel's copy).
Building needs the build backend pyproject.toml names (pip fetches it into an isolated env,
cached after the first run).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What pyproject.toml must ship: every package under these roots, and the SQL templates.
SHIPPED = ("cdc", "commands", "templates")


def _run(argv: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(argv)}\n{result.stdout}\n{result.stderr}"
    return result

@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the wheel is built from (a build in the checkout would leave build/ behind)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in SHIPPED:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    return src


@pytest.fixture(scope="module")
def wheel(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(sources)],
         sources)
    (built,) = out.glob("cdc-*.whl")
    return built


def test_wheel_ships_every_package_and_template(sources: Path, wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in SHIPPED:
        for path in (sources / package).rglob("*"):
            if path.suffix in (".py", ".j2", ".sql"):
                name = path.relative_to(sources).as_posix()
                assert name in names, f"{name} is not in {wheel.name}"


def test_installed_wheel_runs_help_and_finds_its_templates(sources: Path, wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet",
          str(wheel)], tmp_path)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path)
                .stdout.strip())
    (site / "checkout_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")

    helped = _run([str(env_dir / "bin" / "cdc"), "--help"], tmp_path)
    assert "check-binlog" in helped.stdout and "snowflake-apply" in helped.stdout
    probe = ("import cdc, templates; from cdc.sql import render, template_names; "
             "print(cdc.__file__); print(templates.__file__); print(len(template_names('snowflake')))")
    where = _run([str(python), "-c", probe], tmp_path).stdout.split()
    assert all(Path(path).is_relative_to(site) for path in where[:2]), where
    assert int(where[2]) == len(list((sources / "templates" / "snowflake").glob("*.j2")))
    assert _run([str(python), "-m", "cdc", "--version"], tmp_path).stdout.startswith("cdc ")
