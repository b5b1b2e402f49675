"""Long-lived objects out of the garbage collector's way, once a process has started (#11), and the
process's resident memory (what a bounded snapshot cache is measured against, #30).

A full collection walks every tracked object. A Serve process holds hundreds of thousands from
its imports and start-up (and a Recall replica a million more in warm snapshots): each full
collection stalled the process ~120-170 ms, which was the tail of the acknowledgements and of
recall under load (docs/benchmarks.md). Frozen objects are skipped by the collector; they are
still freed by reference counting, and what is allocated later is collected as before.
"""

from __future__ import annotations

import gc
import os
import resource
import sys


def freeze_long_lived() -> int:
    """Collect what is garbage now, then freeze every object still alive; how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``; elsewhere its peak, from ``getrusage``)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux
