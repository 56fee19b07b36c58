"""Compile a table map's image reader into one Python function: no per-column call or dispatch per row.

encoded_reads.EncodedImageReader calls one reader closure per column: at binlog rates the calls, the
(value, offset) tuples and the per-column NULL test are most of the decode time. Here the same readers'
work is written out as Python source for the table's column sequence and compiled once per table map:
hot types (integers, DOUBLE, DECIMAL, DATETIME, DATE, strings, blobs, ENUM) are inlined, consecutive
fixed-width columns are read with one struct call when the row has no NULLs, any other column calls
its reader. The output is the interpreted reader's, value for value (tests/rows/test_decode_compiled.py,
and test_decode_differential.py against the library on a real binlog).
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass, field
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc.schema import Column
from cdc.rows.encoded_reads import EncodedImageReader, by_string_shape
from cdc.rows.images import _DIG2BYTES, _INTS, Reader, _fraction_reader
from cdc.values import INTEGER_TYPES


@dataclass(frozen=True)
class Inline:
    """Source of one column's read: `$v` is its variable, `$k` its suffix for temporaries and constants.

    Either `lines` (statements reading from `buf` at `p` and advancing `p`) or `fmt`, a fixed-width
    struct format that neighbouring fixed columns share one unpack call with.
    """

    lines: tuple[str, ...] = ()
    fmt: str = ""
    consts: dict[str, Any] = field(default_factory=dict)


def _length(size: int) -> str:
    if size == 1:
        return "buf[p]"
    if size == 2:
        return "buf[p] | buf[p + 1] << 8"
    return f"int.from_bytes(buf[p:p + {size}], 'little')"


def _text(size: int, codec: str) -> Inline:
    return Inline((f"q = p + {size} + ({_length(size)})", f"$v = buf[p + {size}:q].decode({codec!r})", "p = q"))


def _base64(size: int, pad_to: int) -> Inline:
    data = f"buf[p + {size}:q]" + (f".ljust({pad_to}, b'\\x00')" if pad_to else "")
    return Inline((f"q = p + {size} + ({_length(size)})", f"$v = b2a({data}, newline=False).decode('ascii')", "p = q"))


_CODES = {1: "B", 2: "H", 4: "I"}


def _decimal(precision: int, scale: int) -> Inline:
    """encoded_reads._decimal_text written out, one struct call per value.

    Each group of digits is one big-endian field (3-byte groups: a byte and a short), so no integer wider
    than 32 bits is ever built: a 72-bit int.from_bytes and its masks cost twice as much per value.
    The sign is the top bit of the first byte; a negative value has every bit inverted.
    """
    intg = precision - scale
    int_groups = ([(_DIG2BYTES[intg % 9], intg % 9)] if intg % 9 else []) + [(4, 9)] * (intg // 9)
    frac_groups = [(4, 9)] * (scale // 9) + ([(_DIG2BYTES[scale % 9], scale % 9)] if scale % 9 else [])
    fields: list[int] = []  # width in bytes of each struct field, in order
    for width, _ in int_groups + frac_groups:
        fields += [1, 2] if width == 3 else [width]
    fmt = ">" + "".join(_CODES[width] for width in fields)
    top = 1 << (8 * fields[0] - 1)

    def group_values(negative: bool) -> list[str]:
        """One expression per group, from the fields d$k_0, d$k_1... (inverted for a negative value)."""
        def field(i: int) -> str:
            mask = ((1 << (8 * fields[i])) - 1) if negative else 0
            if i == 0:
                mask = (mask ^ top) if negative else top  # the sign bit reads as 0 either way
            return f"(d$k_{i} ^ {mask})" if mask else f"d$k_{i}"
        values, i = [], 0
        for width, _ in int_groups + frac_groups:
            values.append(f"({field(i)} << 16 | {field(i + 1)})" if width == 3 else field(i))
            i += 2 if width == 3 else 1
        return values

    def text(negative: bool) -> str:
        values = group_values(negative)
        whole = "0"
        for value, (_, digits) in zip(values, int_groups):
            whole = value if whole == "0" else f"({whole}) * {10 ** digits} + {value}"
        # %-formatting: an f-string's format specs cost a format() call each, several times slower here.
        spec = ("-" if negative else "") + "%d" + ("." if frac_groups else "")
        spec += "".join(f"%0{digits}d" for _, digits in frac_groups)
        return f"{spec!r} % ({', '.join([whole, *values[len(int_groups):]])},)"

    names = ", ".join(f"d$k_{i}" for i in range(len(fields)))
    return Inline((f"{names}, = unpack_dec$k(buf, p)", f"if d$k_0 & {top}: $v = {text(False)}",
                   f"else: $v = {text(True)}", f"p += {struct.calcsize(fmt)}"),
                  consts={"unpack_dec$k": struct.Struct(fmt).unpack_from})


def _datetime2(fsp: int) -> Inline:
    """DATETIME2: 5 big-endian bytes (read as a byte and an int, under 32 bits each) and 0-3 fraction bytes."""
    fsize, scale = _fraction_reader(fsp)
    fraction_fields = {0: "", 1: "B", 2: "H", 3: "BH"}[fsize]
    spec = "%04d-%02d-%02d %02d:%02d:%02d" + (".%06d" if fsize else "")
    names = ["h", "d"] + [f"f{i}" for i in range(len(fraction_fields))]
    fraction = {0: "", 1: ", f0", 2: ", f0", 3: ", (f0 << 16 | f1)"}[fsize] + (f" * {scale}" if fsize and scale != 1 else "")
    return Inline((f"{', '.join(names)}, = unpack_dt$k(buf, p)",
                   "y, m = divmod((h << 10 | d >> 22) & 131071, 13)",
                   f"$v = {spec!r} % (y, m, d >> 17 & 31, d >> 12 & 31, d >> 6 & 63, d & 63{fraction})",
                   f"p += {5 + fsize}"),
                  consts={"unpack_dt$k": struct.Struct(">BI" + fraction_fields).unpack_from})


_DATE = Inline(("d = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16",
                "$v = '%04d-%02d-%02d' % (d >> 9, d >> 5 & 15, d & 31)", "p += 3"))


def _enum(size: int, labels: list[str]) -> Inline:
    return Inline((f"q = {_length(size)}", f"$v = labels$k[q] if q < {len(labels)} else ''", f"p += {size}"),
                  consts={"labels$k": tuple(labels)})


def inline_for(column: Any, ours: Column) -> Inline | None:
    """The inlined read of encoded_reads.encoded_reader_for(column, ours), or None (the column calls its reader)."""
    t, kind = column.type, ours.data_type
    if t in _INTS and kind in INTEGER_TYPES:
        return Inline(fmt=_INTS[t][bool(column.unsigned)][1])
    if t == FIELD_TYPE.INT24 and kind in INTEGER_TYPES:
        signed = "" if column.unsigned else ", signed=True"
        return Inline((f"$v = int.from_bytes(buf[p:p + 3], 'little'{signed})", "p += 3"))
    if t == FIELD_TYPE.DOUBLE and kind == "double":
        return Inline(fmt="d")
    if t == FIELD_TYPE.NEWDECIMAL and kind == "decimal":
        return _decimal(column.precision, column.decimals)
    if t == FIELD_TYPE.DATETIME2 and kind == "datetime":
        return _datetime2(column.fsp or 0)
    if t == FIELD_TYPE.DATE and kind == "date":
        return _DATE
    if t == FIELD_TYPE.ENUM and kind == "enum":
        return _enum(column.size, list(column.enum_values or [""]))
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        return by_string_shape(column, ours, _text, _base64)
    return None


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
    for i, (inline, (_, read)) in enumerate(zip(inlines, plan)):
        body += [f"        if nulls & {1 << i}: v{i} = None", "        else:"]
        body += ["            " + line for line in _column_lines(i, inline, namespace, read)]
    kept = sorted((name, i) for i, (name, _) in enumerate(plan) if not name.startswith("\x00"))
    body.append("    return {" + ", ".join(f"{name!r}: v{i}" for name, i in kept) + "}, p")
    return "\n".join(body) + "\n"
