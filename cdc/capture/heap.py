"""Keep freed heap in the tail process rather than handing it back to the kernel at every free (issue #28).

glibc's malloc serves a large request (above its mmap threshold, adapted at run time up to 32 MiB) with a
fresh mmap and unmaps it when freed, and gives the top of the heap back (trims it) once more than its trim
threshold lies free there. Tail's hot loop allocates and frees multi-megabyte buffers without pause: packets
read from the server, a transaction's lines, the block written to a segment. Each new mapping or regrown heap
top is then touched page by page again, one minor page fault per 4 KiB, with the kernel zeroing each page:
measured in tests/capture/test_heap.py and printed by benchmarks/bench_tail.py.

Raising both thresholds keeps such buffers in the heap and reuses their pages. The cost is bounded: at most
TRIM_THRESHOLD of freed memory stays mapped at the heap's top, and nothing larger than MMAP_THRESHOLD is
served from the heap (a bigger request still gets a mapping of its own, returned when freed).
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (<malloc.h>).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2: 32 MiB on 64-bit.
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 64 * 2**20


def keep_freed_heap() -> bool:
    """Set the process's malloc thresholds (glibc only); True when they were set.

    Called by `cdc tail`, whose process runs tail alone (a `cdc run` process also holds Spark's driver, pyarrow
    and the apply, each with buffers of its own, and keeps malloc's defaults); with another C library (musl,
    macOS) nothing changes, which is only slower.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False  # musl has no mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 when the value is refused.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
