"""How orjson writes the doubles repr writes with an exponent, as both C row readers write them (cdc/_native_floats.c).

The snapshot's reader (FLOAT) and tail's decoder (FLOAT, DOUBLE) write numbers as orjson.dumps does; repr's
digits are orjson's, but where repr has an exponent orjson 3.x keeps e+NN as repr, writes e-05 in full and
drops e-NN's zero padding; nan and the infinities it writes as null. With another orjson, tail's FLOAT and
DOUBLE columns, and the snapshot's values with an exponent, go through orjson itself instead.
"""

from __future__ import annotations

import orjson

EXPONENT_PROBES = {1e16: b"1e+16", -3.4e38: b"-3.4e+38", 1e-05: b"0.00001", -9.12829e-05: b"-0.0000912829",
                   1.5e-07: b"1.5e-7", 5e-324: b"5e-324", 1.7976931348623157e308: b"1.7976931348623157e+308",
                   float("inf"): b"null", float("-inf"): b"null", float("nan"): b"null"}


def orjson_writes_exponents_as_c() -> bool:
    """Whether the installed orjson writes the probes as the C readers would (then C writes them too)."""
    return all(orjson.dumps(number) == text for number, text in EXPONENT_PROBES.items())
