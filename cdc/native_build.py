"""Whether a built C extension is older than its sources (a checkout edited or pulled after `pip install -e .`).

The three loaders (cdc.snapshot.native, cdc.rows.native, cdc.spark.scan) fall back to their Python paths then:
a stale build could disagree with the Python code it is tested against.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import ModuleType


def stale_source(module: ModuleType, sources: Iterable[Path]) -> str | None:
    """Why `module` is out of date (the first source changed after it was built), or None. An installed wheel ships
    no sources: nothing to compare, never stale."""
    built = Path(module.__file__) if module.__file__ else None
    if built is None:
        return None
    for source in sources:
        if source.exists() and source.stat().st_mtime > built.stat().st_mtime:
            return f"{source.name} changed after {built.name} was built: run `pip install -e .` again"
    return None
