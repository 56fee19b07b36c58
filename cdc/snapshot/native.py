"""Load the snapshot's row reader in C (cdc/snapshot/_native.c), built by `pip install -e .`.

The generated Python reader of cdc.snapshot.lines stays the reference and the fallback: it
reads every row when the extension was not built (no C compiler: the build is optional), when the
built one is stale (its ABI_VERSION is not this file's), or when CDC_NATIVE=0 is set (the
differential tests and benchmarks/bench_snapshot.py run both readers side by side that way).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from cdc.native_build import stale_source
from cdc.native_floats import orjson_writes_exponents_as_c

ABI_VERSION = 7  # must match _native.c's: what the reader() arguments mean
# Column actions (the C enum, checked at import): what the reader does with a column's bytes.
# INTEGER_TEXT (ZEROFILL, YEAR: int(v) printed) and BIT (big-endian unsigned, up to 8 bytes) do the
# plain cases in C and call the column's fragment for anything else, as PYTHON does for every value.
# CACHED is PYTHON keeping the fragment of each distinct value (up to 256 per column): for SET, whose
# encoder is costly and whose values repeat. FLOAT32 (a FLOAT, read as the server's DOUBLE text) is the
# shortest decimal that round-trips the 4-byte float, written as orjson writes it; text float() would read
# otherwise (spaces, '_', nan) goes to the column's fragment. DOUBLE stays PYTHON: float() and orjson's
# formatting beat Python's repr conversion called from C (measured: benchmarks/bench_snapshot.py, docs/performance.md).
RAW, QUOTED, TEMPORAL, TIMESTAMP, TEXT, BASE64, SKIP, PYTHON, INTEGER_TEXT, BIT, CACHED, FLOAT32 = range(12)
WITH_FRAGMENT = frozenset({PYTHON, INTEGER_TEXT, BIT, CACHED, FLOAT32})
SLOT_ROW_PADDED, SLOT_ROW = -1, -2  # template holes of the row number (%012d, %d)
_NAMES = ("RAW", "QUOTED", "TEMPORAL", "TIMESTAMP", "TEXT", "BASE64", "SKIP", "PYTHON", "INTEGER_TEXT", "BIT",
          "CACHED", "FLOAT32", "SLOT_ROW_PADDED", "SLOT_ROW")


def _load() -> tuple[ModuleType | None, str | None]:
    try:
        from cdc.snapshot import _native as module
    except ImportError as exc:
        return None, f"the C row reader is not built ({exc}): run `pip install -e .`"
    if getattr(module, "ABI_VERSION", None) != ABI_VERSION:
        return None, f"the built C row reader is stale (ABI {getattr(module, 'ABI_VERSION', None)}, "\
                     f"want {ABI_VERSION}): run `pip install -e .` again"
    if [getattr(module, name) for name in _NAMES] != [globals()[name] for name in _NAMES]:
        return None, "the built C row reader numbers its actions differently: run `pip install -e .` again"
    # In a checkout, a source edited (or pulled) after the build means the build is out of date;
    # scripts/setup.sh reinstalls only when pyproject.toml changes.
    shared = Path(__file__).parent.parent  # cdc/_native_floats.[ch], compiled into tail's decoder too
    here = Path(__file__).parent
    stale = stale_source(module, (here / "_native.c", here / "_native_binary.c", here / "_native_binary.h",
                                  shared / "_native_floats.c", shared / "_native_floats.h"))
    if stale:
        return None, stale
    module.set_orjson_exponents(orjson_writes_exponents_as_c())
    return module, None


_MODULE, PROBLEM = _load()


def is_disabled() -> bool:
    """CDC_NATIVE=0: read with the Python reader even where the C one is built."""
    return os.environ.get("CDC_NATIVE", "1").strip() == "0"


def native_module() -> ModuleType | None:
    """The C reader's module when it is built, current and not disabled; else None."""
    return None if is_disabled() else _MODULE
