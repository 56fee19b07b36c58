"""DECIMAL: MySQL's packed decimal, read exactly (never through a float).

Big-endian groups of 9 digits in 4 bytes, a leading and a trailing group of fewer digits in fewer bytes;
the sign is the top bit (set for a positive value) and a negative value has every bit inverted
(https://dev.mysql.com/doc/refman/8.0/en/precision-math-decimal-characteristics.html).
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

from cdc.rows.readers import ColumnType, Inline, Reader
from cdc.schema import Column

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a group of n digits
_CODES = {1: "B", 2: "H", 4: "I"}

Groups = list[tuple[int, int]]  # (width in bytes, digits), most significant first


def _groups(precision: int, scale: int) -> tuple[Groups, Groups]:
    """The groups of the integer part and of the fraction."""
    intg = precision - scale
    int_groups = ([(DIG2BYTES[intg % 9], intg % 9)] if intg % 9 else []) + [(4, 9)] * (intg // 9)
    frac_groups = [(4, 9)] * (scale // 9) + ([(DIG2BYTES[scale % 9], scale % 9)] if scale % 9 else [])
    return int_groups, frac_groups


def decimal_reader(column: Any) -> Reader:
    """A reader of the Decimal (the library's value)."""
    int_groups, frac_groups = _groups(column.precision, column.decimals)
    widths = int_groups + frac_groups
    n_int = len(int_groups)
    size = sum(width for width, _ in widths)
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    groups, shift = [], 8 * size
    for width, digits in widths:
        shift -= 8 * width
        groups.append((shift, (1 << (8 * width)) - 1, f"0{digits}d"))

    def read(buf: Any, pos: int) -> tuple[Decimal, int]:
        raw = int.from_bytes(buf[pos:pos + size], "big")
        negative = not raw & top
        raw ^= full if negative else top
        if negative:
            raw &= ~top & full
        parts = [format((raw >> shift) & mask, spec) for shift, mask, spec in groups]
        text = "".join(parts[:n_int]) + "." + ("".join(parts[n_int:]) or "0")
        return Decimal("-" + text if negative else text), pos + size

    return read


def decimal_text_reader(precision: int, scale: int) -> Reader:
    """DECIMAL as the exact text cdc.values writes (format(Decimal, f".{scale}f")), without a Decimal."""
    int_groups, frac_groups = _groups(precision, scale)
    size = sum(width for width, _ in int_groups + frac_groups)
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    frac_bits = 8 * sum(width for width, _ in frac_groups)
    fractions, shift = [], frac_bits
    for width, digits in frac_groups:
        shift -= 8 * width
        fractions.append((shift, (1 << (8 * width)) - 1, f"0{digits}d"))
    units, shift = [], frac_bits + 8 * sum(width for width, _ in int_groups)
    for width, digits in int_groups:
        shift -= 8 * width
        units.append((shift, (1 << (8 * width)) - 1, 10 ** digits))

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        raw = int.from_bytes(buf[pos:pos + size], "big")
        sign = "" if raw & top else "-"
        raw = raw ^ top if sign == "" else (raw ^ full) & ~top
        whole = 0
        for shift, mask, unit in units:
            whole = whole * unit + ((raw >> shift) & mask)
        if not scale:
            return f"{sign}{whole}", pos + size
        frac = "".join([format((raw >> shift) & mask, spec) for shift, mask, spec in fractions])
        return f"{sign}{whole}.{frac}", pos + size

    return read


def checked_decimal_text(data: bytes, precision: int, scale: int) -> str:
    """MySQL's binary DECIMAL(precision, scale) at the start of data as its exact text, as decimal_text_reader
    writes it; ValueError when the precision, scale or size is not MySQL's or a digit group is out of range
    (as the C decoder's put_decimal raises): a JSON document's opaque DECIMAL carries its own precision and scale."""
    if not (1 <= precision <= 65 and scale <= 30 and scale <= precision):
        raise ValueError("MySQL binary JSON: a DECIMAL of a bad precision, scale or size")
    int_groups, frac_groups = _groups(precision, scale)
    size = sum(width for width, _ in int_groups + frac_groups)
    if size > len(data):
        raise ValueError("MySQL binary JSON: a DECIMAL of a bad precision, scale or size")
    raw = int.from_bytes(data[:size], "big")
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    raw = raw ^ top if raw & top else (raw ^ full) & ~top
    shift = 8 * size
    for width, digits in int_groups + frac_groups:
        shift -= 8 * width
        if (raw >> shift) & ((1 << (8 * width)) - 1) >= 10 ** digits:
            raise ValueError("DECIMAL group out of range")
    text: str = decimal_text_reader(precision, scale)(data, 0)[0]
    return text


def decimal_encoded_reader(column: Any, ours: Column) -> Reader:
    return decimal_text_reader(column.precision, column.decimals)


def decimal_inline(column: Any, ours: Column) -> Inline:
    """decimal_text_reader written out, one struct call per value.

    Each group of digits is one big-endian field (3-byte groups: a byte and a short), so no integer wider
    than 32 bits is ever built: a 72-bit int.from_bytes and its masks cost twice as much per value.
    The sign is the top bit of the first byte; a negative value has every bit inverted.
    """
    int_groups, frac_groups = _groups(column.precision, column.decimals)
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
        for value, (_, digits) in zip(values, int_groups, strict=False):  # the integer part's groups come first
            whole = value if whole == "0" else f"({whole}) * {10 ** digits} + {value}"
        # %-formatting: an f-string's format specs cost a format() call each, several times slower here.
        spec = ("-" if negative else "") + "%d" + ("." if frac_groups else "")
        spec += "".join(f"%0{digits}d" for _, digits in frac_groups)
        return f"{spec!r} % ({', '.join([whole, *values[len(int_groups):]])},)"

    names = ", ".join(f"d$k_{i}" for i in range(len(fields)))
    return Inline((f"{names}, = unpack_dec$k(buf, p)", f"if d$k_0 & {top}: $v = {text(False)}",
                   f"else: $v = {text(True)}", f"p += {struct.calcsize(fmt)}"),
                  consts={"unpack_dec$k": struct.Struct(fmt).unpack_from})


def describe_decimal(column: Any, charset: str | None) -> ColumnType:
    type_ = f"decimal({column.precision},{column.decimals})" + (" unsigned" if column.unsigned else "")
    return ColumnType("decimal", type_, extra={"precision": column.precision, "scale": column.decimals})
