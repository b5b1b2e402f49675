"""Who still uses a milvus-lite data directory in this process, so the last one to close stops it.

milvus-lite 3.2 serves a ``.db`` directory from inside the process that opens it: a gRPC server on
loopback, its threads, the collection's engine and the directory's lock, kept until the process
exits unless told to stop. pymilvus' ``close`` leaves all of it running, so a process that opened
and closed stores kept the lock (another process could not open the directory), and a test run
kept three threads and a server per test (about 2,400 threads by its end, and stalls of a minute).
"""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_users: dict[str, int] = {}


def opened(uri: str) -> None:
    """One more store of this process uses the milvus-lite directory ``uri``."""
    path = os.path.abspath(uri)
    with _lock:
        _users[path] = _users.get(path, 0) + 1


def closed(uri: str) -> None:
    """One store fewer; the last one stops milvus-lite's server for ``uri`` (flushed on stop)."""
    path = os.path.abspath(uri)
    with _lock:
        left = _users.get(path, 0) - 1
        if left > 0:
            _users[path] = left
            return
        _users.pop(path, None)
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # another milvus-lite line (2.5's C++ server) runs out of process
        return
    server_manager_instance.release_server(path)
