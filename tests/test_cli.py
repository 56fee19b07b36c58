"""The command line as a whole: --help lists every command, --version, python -m cdc, help everywhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from cdc import __version__
from commands.main import COMMANDS, app

ROOT = Path(__file__).resolve().parents[1]
NAMES = [name for name, _, _ in COMMANDS]


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in NAMES:
        assert f" {name} " in result.stdout, name


def test_no_arguments_shows_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "Usage:" in result.output and "check-binlog" in result.output


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"cdc {__version__}\n")


def test_python_dash_m_cdc() -> None:
    result = subprocess.run([sys.executable, "-m", "cdc", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert all(name in result.stdout for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_help(name: str) -> None:
    command = app.registered_commands[NAMES.index(name)]
    doc = (command.callback.__doc__ or "").strip()
    assert doc, f"cdc {name} has no docstring (its --help text)"
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0
    assert " ".join(doc.splitlines()[0].split()[:4]) in " ".join(result.stdout.split())


@pytest.mark.parametrize("name", NAMES)
def test_every_command_appears_in_readme(name: str) -> None:
    assert f"cdc {name}" in (ROOT / "README.md").read_text(encoding="utf-8"), f"README.md does not document cdc {name}"


def _options(name: str) -> list[Any]:
    """The command's options as click sees them (typer vendors its own click: no isinstance here)."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return [p for p in command.params if any(flag.startswith("-") for flag in p.opts)]


@pytest.mark.parametrize("name", NAMES)
def test_every_option_appears_in_readme(name: str) -> None:
    # Anywhere in README, not only in the command's section: the shared options (--host, --config, --json...)
    # are described once, under Configuration. What it catches is an option README never mentions.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    flags = [flag for option in _options(name) for flag in [*option.opts, *option.secondary_opts]
             if flag.startswith("--") and flag != "--help"]
    missing = [flag for flag in flags if not re.search(re.escape(flag) + r"(?![\w-])", readme)]
    assert not missing, f"README.md does not document cdc {name} {' '.join(missing)}"


@pytest.mark.parametrize("name", NAMES)
def test_help_keeps_bracketed_words(name: str) -> None:
    # --help is rich markup: an unescaped "[client]" is taken for a style tag and vanishes from the text.
    helps = [(option.help or "").replace("\\[", "[") for option in _options(name)]
    words = {word for text in helps for word in re.findall(r"\[[^\]\s]+\]", text)}
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0
    lost = [word for word in sorted(words) if word not in result.stdout]
    assert not lost, f"cdc {name} --help lost {lost} (escape it as \\[...] in the help text)"
