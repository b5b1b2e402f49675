"""What a test fixture started below this process, for ending one try of a start that failed."""

from __future__ import annotations

import os
from collections.abc import Callable

from engram.storage.processes import ProcessInfo, descendants


def started_since() -> Callable[[], list[ProcessInfo]]:
    """A function that lists this process's live descendants that were not alive when this was called
    (pinned by start time: a reused pid is a new process)."""
    before = {(p.pid, p.start) for p in descendants(os.getpid())}
    return lambda: [p for p in descendants(os.getpid()) if (p.pid, p.start) not in before]
