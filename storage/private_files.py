"""Files and directories Engram creates are its own: 0600 / 0700, never readable by other users (P8).

The process umask is set once where the service and the stores start (``private_umask``), so every
creation path (SQLite and its WAL/SHM, milvus-lite's segments, the archive, exports, the master
key) inherits it; the directories Engram names are also made and tightened explicitly, since a
data directory left by an older version may be 0755.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_umask() -> None:
    """Make every file and directory this process creates from now on private to its owner."""
    os.umask(PRIVATE_UMASK)


def private_dir(path: Path) -> Path:
    """``path`` as an existing directory of mode 0700 (created, or tightened when it was wider)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != DIR_MODE:
        path.chmod(DIR_MODE)
    return path


def private_file(path: Path) -> None:
    """Tighten an existing file to 0600 (nothing when it does not exist)."""
    try:
        if path.stat().st_mode & 0o777 != FILE_MODE:
            path.chmod(FILE_MODE)
    except FileNotFoundError:
        pass
