"""Durations as people write them in options (5s, 10m) and read them in status lines and messages."""

from __future__ import annotations

import random
import re

from cdc.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str, option: str = "duration") -> float:
    """`500ms`, `5s`, `10m`, `2h`, `7d` or plain seconds -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"{option} {text!r} is not a duration", hint="write e.g. 500ms, 5s, 10m, 2h or 7d")
    return float(match[1]) * _UNITS[match[2]]


def human_duration(seconds: float) -> str:
    """A duration as people read it in a status line: 45s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def backoff(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter")."""
    return random.uniform(0, min(cap, base * 2 ** min(attempt, 30)))
