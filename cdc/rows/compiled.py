"""Compile a table map's image reader into one Python function: no per-column call or dispatch per row.

images.EncodedImageReader calls one reader closure per column: at binlog rates the calls, the
(value, offset) tuples and the per-column NULL test are most of the decode time. Here the same readers'
work is written out as Python source for the table's column sequence and compiled once per table map:
hot types (integers, DOUBLE, DECIMAL, DATETIME, DATE, strings, blobs, ENUM: each type's `inline` in
cdc.rows.mysql_types) are inlined, consecutive fixed-width columns are read with one struct call when the
row has no NULLs, any other column calls its reader. The output is the interpreted reader's, value for
value (tests/rows/test_compiled.py, and test_decode_differential.py against the library on a real binlog).
"""

from __future__ import annotations

import binascii
import struct
from typing import Any

from cdc.rows.images import EncodedImageReader
from cdc.rows.readers import Inline, Reader


class CompiledImageReader(EncodedImageReader):
    """An EncodedImageReader whose image() is compiled for its column sequence (same values, same offsets)."""

    def __init__(self, plan: list[tuple[str | None, Reader]], inlines: list[Inline | None]) -> None:
        super().__init__(plan)
        namespace: dict[str, Any] = {"b2a": binascii.b2a_base64}
        source = _source(self.plan, inlines, self.bitmap_size, namespace)
        exec(compile(source, "<cdc image reader>", "exec"), namespace)  # noqa: S102 - source built from literals
        self.source = source
        self.image = namespace["image"]  # type: ignore[method-assign]


def _column_lines(i: int, inline: Inline | None, namespace: dict[str, Any], read: Reader) -> list[str]:
    if inline is None:
        namespace[f"read{i}"] = read
        return [f"v{i}, p = read{i}(buf, p)"]
    if inline.fmt:
        namespace[f"unpack{i}"] = struct.Struct("<" + inline.fmt).unpack_from
        return [f"v{i}, = unpack{i}(buf, p)", f"p += {struct.calcsize('<' + inline.fmt)}"]
    for name, value in inline.consts.items():
        namespace[name.replace("$k", str(i))] = value
    return [line.replace("$v", f"v{i}").replace("$k", str(i)) for line in inline.lines]


def _no_null_lines(inlines: list[Inline | None], namespace: dict[str, Any],
                   plan: list[tuple[str, Reader]]) -> list[str]:
    """Every column read in turn; runs of fixed-width columns share one struct call."""
    lines: list[str] = []
    i = 0
    while i < len(plan):
        run = i
        while run < len(plan) and inlines[run] is not None and inlines[run].fmt:  # type: ignore[union-attr]
            run += 1
        if run - i > 1:
            fmt = "<" + "".join(inline.fmt for inline in inlines[i:run])  # type: ignore[union-attr]
            namespace[f"unpack_run{i}"] = struct.Struct(fmt).unpack_from
            lines += [", ".join(f"v{j}" for j in range(i, run)) + f", = unpack_run{i}(buf, p)",
                      f"p += {struct.calcsize(fmt)}"]
            i = run
            continue
        lines += _column_lines(i, inlines[i], namespace, plan[i][1])
        i += 1
    return lines


def _source(plan: list[tuple[str, Reader]], inlines: list[Inline | None], bitmap_size: int,
            namespace: dict[str, Any]) -> str:
    nulls = "buf[p]" if bitmap_size == 1 else f"int.from_bytes(buf[p:p + {bitmap_size}], 'little')"
    body = ["def image(buf, p):", f"    nulls = {nulls}", f"    p += {bitmap_size}", "    if not nulls:"]
    body += ["        " + line for line in _no_null_lines(inlines, namespace, plan)]
    body.append("    else:")
    for i, (inline, (_, read)) in enumerate(zip(inlines, plan, strict=True)):
        body += [f"        if nulls & {1 << i}: v{i} = None", "        else:"]
        body += ["            " + line for line in _column_lines(i, inline, namespace, read)]
    kept = sorted((name, i) for i, (name, _) in enumerate(plan) if not name.startswith("\x00"))
    body.append("    return {" + ", ".join(f"{name!r}: v{i}" for name, i in kept) + "}, p")
    return "\n".join(body) + "\n"
