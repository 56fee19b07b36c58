"""Change capture: the binlog tail loop and what it needs (filters, DDL recognition, transactions).

The names below are imported on first use (PEP 562): a decode worker (cdc.capture.decode_worker) imports
only what decoding needs, not the tail loop, its database driver and the DDL parser (~0.2 s of CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.capture.filters import Filters
    from cdc.capture.lag import Progress
    from cdc.capture.start import StartRequest
    from cdc.capture.tail import TailOptions, TailSummary, run_tail

_HOMES = {"Filters": "cdc.capture.filters", "Progress": "cdc.capture.lag", "StartRequest": "cdc.capture.start",
          "TailOptions": "cdc.capture.tail", "TailSummary": "cdc.capture.tail", "run_tail": "cdc.capture.tail"}

__all__ = ["Filters", "Progress", "StartRequest", "TailOptions", "TailSummary", "run_tail"]

__getattr__ = exports(__name__, _HOMES)
