"""A package's public names, imported on first use (PEP 562).

Stage packages export their contract from __init__ without importing what stands behind it: `cdc --help`
must not load pyspark or the Snowflake connector, and a decode worker must not load the tail loop.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def exports(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module __getattr__ serving `homes`: public name -> "module" or "module:attribute" (when renamed)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = home.partition(":")
        return getattr(import_module(module), attribute or name)

    return __getattr__
