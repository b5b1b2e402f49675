"""An exclusive lock on a resource of this machine shared by test runs that may overlap.

``make test`` runs the e2e and distributed suites beside unit + integration; the standalone
Milvus server's embedded etcd always listens on the same ports, so the runs that start one take
turns (flock: released by the kernel if a run dies)."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Hold the machine-wide lock ``name`` for the duration of the block (waits for it)."""
    path = Path(tempfile.gettempdir()) / f"engram-test-{name}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
