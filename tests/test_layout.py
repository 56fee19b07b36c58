"""The layout's rules, read from the source: stages meet only through their packages' public names.

Each stage is a package (snapshot, capture, sinks, spark, snowflake) and pipeline/ drives them. A library module
outside a stage may import the stage's package (`from cdc.snapshot import run_snapshot`), never a module inside it
(`cdc.snapshot.handover`): what a stage exports is its contract, the rest can move without breaking a caller.
commands/ is the UI over the library and may import any module of it.
The library never imports a UI toolkit: commands/ is the only place for typer, rich and questionary.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("snapshot", "capture", "sinks", "spark", "snowflake", "pipeline")
# What other packages may import only by their public names. pipeline/ is not one: it is the top of cdc/, and
# commands/ (the thin UI over it) is outside these rules.
CONTRACTS = ("snapshot", "capture", "sinks", "spark", "snowflake")
UI_LIBRARIES = ("typer", "rich", "questionary", "click")
# Stages a stage may not import at all, public names included: they meet through files (checkpoints,
# segments, batches, the lake), not calls. pipeline/ is the one place that runs several stages.
NO_CALLS_BETWEEN = {
    "sinks": ("snapshot", "capture", "spark", "snowflake", "pipeline"),
    "spark": ("snapshot", "capture", "sinks", "snowflake", "pipeline"),
    "snowflake": ("snapshot", "capture", "sinks", "spark", "pipeline"),
    "capture": ("snapshot", "sinks", "spark", "snowflake", "pipeline"),
    "snapshot": ("capture", "sinks", "spark", "snowflake", "pipeline"),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in a file, function-level imports included."""
    names: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from cdc.snapshot import handover` reaches a module as surely as `import cdc.snapshot.handover`.
            names += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
            names.append((node.lineno, node.module))
    return names


def owner(path: Path) -> str | None:
    """The stage a file belongs to (None for shared modules in cdc/ and for commands/)."""
    parts = path.relative_to(ROOT).parts
    return parts[1] if parts[0] == "cdc" and len(parts) > 2 and parts[1] in STAGES else None


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def sources(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def reaches_inside(path: Path, dotted: str) -> str | None:
    """The module inside another stage that `dotted` names (or lies in), when the importing file is not in that stage."""
    parts = dotted.split(".")
    if len(parts) < 3 or parts[0] != "cdc" or parts[1] not in CONTRACTS or owner(path) == parts[1]:
        return None
    module = ".".join(parts[:3])
    return module if is_module(module) else None


def violations(path: Path) -> list[str]:
    found = {(line, module) for line, dotted in imported_modules(path) if (module := reaches_inside(path, dotted))}
    return [f"{path.relative_to(ROOT).as_posix()}:{line} imports {module}" for line, module in sorted(found)]


def test_no_module_reaches_into_another_stage() -> None:
    found = [text for path in sources("cdc") for text in violations(path)]
    assert not found, "import the stage's package, not its modules:\n" + "\n".join(found)


def test_stages_do_not_call_each_other() -> None:
    found = []
    for path in sources("cdc"):
        banned = NO_CALLS_BETWEEN.get(owner(path) or "", ())
        found += [f"{path.relative_to(ROOT)}:{line} imports {dotted}" for line, dotted in imported_modules(path)
                  if dotted.split(".")[:2] in (["cdc", stage] for stage in banned)]
    assert not found, "stages meet through their files and cdc.checkpoints:\n" + "\n".join(found)


def test_the_library_never_imports_a_ui_toolkit() -> None:
    found = [f"{path.relative_to(ROOT)}:{line} imports {dotted}" for path in sources("cdc")
             for line, dotted in imported_modules(path) if dotted.split(".")[0] in UI_LIBRARIES]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("from cdc.snapshot.handover import take_handover\n", ["cdc/pipeline/x.py:1 imports cdc.snapshot.handover"]),
    ("from cdc.snapshot import handover\n", ["cdc/pipeline/x.py:1 imports cdc.snapshot.handover"]),
    ("def f():\n    import cdc.capture.tail\n", ["cdc/pipeline/x.py:2 imports cdc.capture.tail"]),
    ("from cdc.snapshot import run_snapshot\nfrom cdc.state import StateDir\n", []),
])
def test_the_rule_sees_what_it_should(source: str, expected: list[str]) -> None:
    """The checker itself: a function-level import or a module named in `from pkg import mod` still counts."""
    path = ROOT / "cdc" / "pipeline" / "x.py"
    try:
        path.write_text(source, encoding="utf-8")
        assert violations(path) == expected
    finally:
        path.unlink()


@pytest.mark.parametrize("stage", CONTRACTS)
def test_every_public_name_of_a_stage_resolves(stage: str) -> None:
    """A stage's __all__ is its contract: each name listed there is importable from the package itself."""
    import importlib

    package = importlib.import_module(f"cdc.{stage}")
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert not missing, f"cdc.{stage} lists {missing} but cannot give them"
