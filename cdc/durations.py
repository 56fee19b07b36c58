"""Durations as people read them in status lines and messages."""

from __future__ import annotations


def human_duration(seconds: float) -> str:
    """A duration as people read it in a status line: 45s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
