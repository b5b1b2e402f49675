"""Starting a local Ray on a busy machine: again when Ray's own wait for its raylet or GCS runs out.

``ray.init`` gives the raylet a fixed 30 s to register with the GCS (no setting changes it) and
then raises. Beside a CPU hog that happened to ``engram serve`` (#26); the start then failed as a
whole. The GCS's wait (``RAY_gcs_server_port_wait_time_s``) ran out too: in one start beside two
busy loops the GCS wrote nothing, not even its log, in 180 s, where every other start took under
10 s. A failed start's processes are ended and Ray is started again, a bounded number of times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from engram.storage.processes import ProcessInfo

# What Ray's exceptions say when the raylet did not register in time, or the GCS did not publish
# its port in time (ray/_private/node.py, ray/_raylet.pyx).
RAYLET_TIMEOUT = "timed out during startup"
GCS_TIMEOUT = "Timed out waiting for file"
STARTUP_TIMEOUTS = (RAYLET_TIMEOUT, GCS_TIMEOUT)

# Ray nices every worker by 15 (ray_config_def.h, ``worker_niceness``) so that its own daemons and
# other processes win the CPU. In Engram the workers are the service: every replica and shard.
# Beside two busy loops at normal priority they got a sliver of the CPU, and the e2e suite ran at
# a fifth of its quiet pace (#26). A Ray of Engram's own runs its workers at the priority its
# starter was given (``nice`` adds to the inherited niceness: 0 keeps it).
LOCAL_SYSTEM_CONFIG: dict[str, object] = {"worker_niceness": 0}


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
            if not any(t in str(exc) for t in STARTUP_TIMEOUTS) or attempt == attempts:
                raise
            print(
                f"Ray's node did not start within Ray's wait (a busy machine?): starting it again "
                f"({attempt + 1} of {attempts})",
                file=sys.stderr,
                flush=True,
            )
            shutdown()
            end(leftovers())
