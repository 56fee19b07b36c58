"""The library's imports form no cycle, between modules or between its packages, and cdc/ never loads the CLI's libraries.

A cycle works until someone imports the other end first: then a name is missing from a half-initialised
module. Between packages (schema -> source -> values -> schema, issue #22) it also means neither side
can be read, tested or moved without the other. `cdc/__main__.py` is the command line's entry point,
not the library, and is left out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "cdc"
CLI_LIBRARIES = ("typer", "rich", "questionary")


def module_names() -> dict[str, Path]:
    """Every module of cdc/ (a package by its own name) -> its file."""
    modules = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The cdc modules `name` imports anywhere in its file (function-level imports are dependencies too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            submodules = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names come from the module's own namespace
                found.add(base)
    # A module's own packages are its parents, imported first by Python itself: not a dependency edge.
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {dep for dep in found if dep in modules and dep != name and dep not in parents}


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported(name, path, modules) for name, path in modules.items()}


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between cdc's top-level units: cdc.schema, cdc.values, cdc.source, cdc.rows, ..."""
    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for name, deps in graph.items():
        packages.setdefault(unit(name), set()).update(unit(dep) for dep in deps if unit(dep) != unit(name))
    return packages


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None (depth-first search, nodes in sorted order)."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep in on_path:
                return path[path.index(dep):] + [dep]
            if dep not in done and (cycle := visit(dep)) is not None:
                return cycle
        on_path.discard(path.pop())
        done.add(node)
        return None

    for node in sorted(graph):
        if node not in done and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_module_imports_itself_through_others() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_package_imports_itself_through_others() -> None:
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


def test_schema_is_a_model_that_reads_no_server() -> None:
    assert not {"cdc.source", "cdc.capture", "cdc.rows"} & package_graph(import_graph())["cdc.schema"]


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_every_module_imports_in_a_fresh_interpreter_without_the_cli_libraries() -> None:
    """Every module in one fresh interpreter (nothing imported before): a broken cycle shows as an ImportError."""
    names = sorted(module_names())
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {CLI_LIBRARIES!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"cdc/ imported {done.stdout.strip()}: it must never load the CLI's libraries"
