"""The command line as a whole: --help lists every command, --version, python -m cdc, help everywhere."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from cdc import __version__
from cdc.commands.main import COMMANDS, app, command_function

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "cli.md"
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


LOADED = ("import sys\nfrom cdc.commands.main import run\nsys.argv = ['cdc', *sys.argv[1:]]\n"
          "try:\n    run()\nexcept SystemExit:\n    pass\n"
          "print(' '.join(m for m in sys.modules if m.startswith('cdc.commands.') or m in ('pyspark', 'questionary')))")


@pytest.mark.parametrize("args", [["--version"], ["status", "--help"], ["check-binlog", "--help"]])
def test_a_command_loads_its_own_module_alone(args: list[str]) -> None:
    # Every `cdc` a user types (and each stage `cdc run` or a runbook starts) imported every command's module and
    # its libraries (PySpark, pyarrow, questionary...) first: 1.3 s before anything ran on a slow machine.
    done = subprocess.run([sys.executable, "-c", LOADED, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.splitlines()[-1].split())  # after --help's text
    named = {f"cdc.commands.{module}" for name, module, _ in COMMANDS if name == args[0]}
    others = {f"cdc.commands.{module}" for _, module, _ in COMMANDS} - named
    assert named <= loaded and not loaded & (others | {"pyspark", "questionary"}), sorted(loaded)


def test_a_mistyped_command_is_told_the_close_one() -> None:
    # typer suggests from the commands loaded so far: with each loaded only when named, none would be.
    result = CliRunner().invoke(app, ["statu"])
    assert result.exit_code == 2
    assert "No such command 'statu'. Did you mean 'status'?" in result.output


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_help(name: str) -> None:
    doc = (command_function(name).__doc__ or "").strip()
    assert doc, f"cdc {name} has no docstring (its --help text)"
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0
    assert " ".join(doc.splitlines()[0].split()[:4]) in " ".join(result.stdout.split())


def _cli_docs() -> ModuleType:
    """scripts/cli_docs.py, the generator of docs/cli.md (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "scripts" / "cli_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date() -> None:
    # CI's check that docs/cli.md was regenerated after a change to a command, an option or a help text.
    assert CLI_MD.read_text(encoding="utf-8") == _cli_docs().render(), (
        "docs/cli.md is stale: run `python scripts/cli_docs.py` and commit the result")


def test_cli_reference_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli_docs, target = _cli_docs(), tmp_path / "cli.md"
    assert cli_docs.main([], target=target) == 0
    assert cli_docs.main(["--check"], target=target) == 0
    target.write_text(target.read_text(encoding="utf-8").replace("Show the version and exit.", "edited"),
                      encoding="utf-8")
    assert cli_docs.main(["--check"], target=target) == 1
    message = capsys.readouterr().err
    assert "is stale: run `python scripts/cli_docs.py`" in message
    assert "-│ --version" in message and "+│ --version" in message


@pytest.mark.parametrize("name", NAMES)
def test_every_command_is_documented(name: str) -> None:
    # docs/cli.md is generated from --help (scripts/cli_docs.py); docs/guide.md is the prose a person writes.
    assert f"## `cdc {name}`" in CLI_MD.read_text(encoding="utf-8"), f"docs/cli.md has no section for cdc {name}"
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    assert f"## `cdc {name}`" in guide, f"docs/guide.md has no section on cdc {name}"


def _options(name: str) -> list[Any]:
    """The command's options as click sees them (typer vendors its own click: no isinstance here)."""
    command = typer.main.get_command(app).get_command(None, name)  # type: ignore[attr-defined]
    return [p for p in command.params if any(flag.startswith("-") for flag in p.opts)]


def _flags(name: str) -> list[str]:
    """The command's long flags, both sides of --x/--no-x, without --help."""
    return [flag for option in _options(name) for flag in [*option.opts, *option.secondary_opts]
            if flag.startswith("--") and flag != "--help"]


@pytest.mark.parametrize("name", NAMES)
def test_every_option_appears_in_cli_reference(name: str) -> None:
    # In the command's own section of docs/cli.md. What it catches is an option --help does not show
    # (hidden=True, a panel lost), or a docs/cli.md that was not regenerated after an option was added.
    reference = CLI_MD.read_text(encoding="utf-8")
    section = reference.split(f"## `cdc {name}`\n", 1)[-1].split("\n## ", 1)[0]
    missing = [flag for flag in _flags(name) if not re.search(re.escape(flag) + r"(?![\w-])", section)]
    assert not missing, f"docs/cli.md does not document cdc {name} {' '.join(missing)}"


@pytest.mark.parametrize("name", NAMES)
def test_every_option_is_explained(name: str) -> None:
    # Anywhere in the hand-written docs, not only in the command's section of guide.md: the shared options
    # (--host, --config, --json...) are described once. What it catches is an option only --help explains.
    prose = "".join((ROOT / "docs" / page).read_text(encoding="utf-8") for page in ("guide.md", "config.md"))
    missing = [flag for flag in _flags(name) if not re.search(re.escape(flag) + r"(?![\w-])", prose)]
    assert not missing, f"docs/guide.md and docs/config.md do not explain cdc {name} {' '.join(missing)}"


@pytest.mark.parametrize("name", NAMES)
def test_help_keeps_bracketed_words(name: str) -> None:
    # --help is rich markup: an unescaped "[client]" is taken for a style tag and vanishes from the text.
    helps = [(option.help or "").replace("\\[", "[") for option in _options(name)]
    words = {word for text in helps for word in re.findall(r"\[[^\]\s]+\]", text)}
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0
    lost = [word for word in sorted(words) if word not in result.stdout]
    assert not lost, f"cdc {name} --help lost {lost} (escape it as \\[...] in the help text)"
