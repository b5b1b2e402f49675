"""Starting a local Ray on a busy machine: again when Ray's own wait for its raylet runs out.

``ray.init`` gives the raylet a fixed 30 s to register with the GCS (no setting changes it) and
then raises. Beside a CPU hog that happened to ``engram serve`` (#26); the start then failed as a
whole. A failed start's processes are ended and Ray is started again, a bounded number of times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from engram.storage.processes import ProcessInfo

# What Ray's exception says when the raylet did not register in time (ray/_private/node.py).
RAYLET_TIMEOUT = "timed out during startup"


def init_with_retries(
    init: Callable[[], object],
    *,
    shutdown: Callable[[], object],
    leftovers: Callable[[], Iterable[ProcessInfo]],
    end: Callable[[Iterable[ProcessInfo]], object],
    attempts: int = 3,
) -> None:
    """Run ``init``; when Ray timed out starting its node, ``shutdown``, ``end`` the ``leftovers``
    of that try and run it again, ``attempts`` times in all. Any other error is raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            init()
            return
        except Exception as exc:
            if RAYLET_TIMEOUT not in str(exc) or attempt == attempts:
                raise
            print(
                f"Ray's node did not start within Ray's 30 s (a busy machine?): starting it again "
                f"({attempt + 1} of {attempts})",
                file=sys.stderr,
                flush=True,
            )
            shutdown()
            end(leftovers())
