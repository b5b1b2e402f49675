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
import time
from collections import Counter
from typing import Any


def freeze_long_lived() -> int:
    """Collect what is garbage now, then freeze every object still alive; how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


# Collections of the middle generation between two full ones (CPython's default: 10).
FULL_COLLECTION_EVERY = 50


def space_full_collections(every: int = FULL_COLLECTION_EVERY) -> None:
    """Let ``every`` middle-generation collections pass between two full collections. In a Recall
    replica under load (Zipf, 60 recall/s) the default 10 set the pace: 10 full collections in
    120 s, ~36 ms each walking the snapshots loaded since the warm-up; 50 gave 2 (#30)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, every)


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``; elsewhere its peak, from ``getrusage``)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class FullCollections:
    """The garbage collector's full collections in this process since ``install``, and the time
    they stalled it: what a frozen start-up heap leaves of the tail (snapshots loaded later are
    collected as before)."""

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self._started: float | None = None
        self._installed = False

    def install(self) -> None:
        """Start counting (once per process: a second call does nothing)."""
        if not self._installed:
            gc.callbacks.append(self._on_phase)
            self._installed = True

    def figures(self) -> dict[str, float]:
        """``full_collections`` and ``full_collection_ms`` (their total) so far."""
        return {"full_collections": float(self.count), "full_collection_ms": round(self.total_ms, 1)}

    def _on_phase(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.count += 1
            self.total_ms += (time.perf_counter() - self._started) * 1000
            self._started = None


FULL_COLLECTIONS = FullCollections()


def heap_census(top: int = 25) -> dict[str, int]:
    """What a full collection walks now: the objects it tracks outside the frozen generation, by
    type name, the ``top`` most common (an operator's question; type names only, no values)."""
    counts = Counter(type(o).__name__ for o in gc.get_objects())
    return {"tracked": sum(counts.values()), "frozen": gc.get_freeze_count(), **dict(counts.most_common(top))}
