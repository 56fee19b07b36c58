"""Change capture: the binlog tail loop and what it needs (filters, DDL recognition, transactions)."""

from cdc.capture.events import Progress
from cdc.capture.filters import Filters
from cdc.capture.start import StartRequest
from cdc.capture.tail import TailOptions, TailSummary, run_tail

__all__ = ["Filters", "Progress", "StartRequest", "TailOptions", "TailSummary", "run_tail"]
