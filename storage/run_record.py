"""Which run of ``engram serve`` owns a data directory, and what a crashed run left behind.

Two files in the data directory:

- ``serve.lock``: held with ``flock`` by the running service (the supervisor and its server share
  the one open file). The kernel lets go of it when the last of them dies, however it dies, so a
  held lock means a live run and a free one means none: no pid is ever guessed at.
- ``serve-run.json``: the record of the run that holds (or last held) the lock: its id (the value
  of ``ENGRAM_RUN_ID`` that every process it starts inherits), the supervisor's and the server's
  pids with their start times, its ports and the directories it made outside the data directory.
  A clean stop removes it; one found by a start that got the lock belongs to a run that did not
  stop cleanly, and :func:`reclaim` ends that run's processes and removes its directories.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engram.storage.processes import ProcessInfo, end_processes, is_alive, processes_of_run, read_process

LOCK_FILE = "serve.lock"
RECORD_FILE = "serve-run.json"


class DataDirInUseError(RuntimeError):
    """Another live run of ``engram serve`` holds the data directory."""


@dataclass
class RunRecord:
    """What a run started, as written when it started."""

    run_id: str
    supervisor_pid: int
    supervisor_start: int
    port: int
    metrics_port: int
    started_at: float = field(default_factory=time.time)
    server_pid: int = 0
    server_start: int = 0
    run_dirs: list[str] = field(default_factory=list)

    def supervisor(self) -> ProcessInfo | None:
        """The supervisor, if that very process still runs."""
        return _pinned(self.supervisor_pid, self.supervisor_start)

    def server(self) -> ProcessInfo | None:
        """The server (the Ray driver), if that very process still runs."""
        return _pinned(self.server_pid, self.server_start)

    def processes(self) -> list[ProcessInfo]:
        """Every live process of the run: marked with its id, or in the session its server leads."""
        return processes_of_run(self.run_id, leader=(self.server_pid, self.server_start))


def _pinned(pid: int, start: int) -> ProcessInfo | None:
    info = read_process(pid) if pid else None
    return info if info is not None and info.start == start and is_alive(info) else None


def record_path(data_dir: Path) -> Path:
    """Where the data directory's run record lives."""
    return data_dir / RECORD_FILE


def read_record(data_dir: Path) -> RunRecord | None:
    """The data directory's run record, or None (absent or unreadable: nothing to go by)."""
    try:
        raw = json.loads(record_path(data_dir).read_text())
        return RunRecord(**raw)
    except (OSError, ValueError, TypeError):
        return None


def write_record(data_dir: Path, record: RunRecord) -> None:
    """Write the record whole or not at all (a crash mid-write leaves the old one)."""
    path = record_path(data_dir)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(record), indent=1))
    os.replace(partial, path)


def remove_record(data_dir: Path) -> None:
    """Forget the run: it stopped and left nothing."""
    with contextlib.suppress(FileNotFoundError):
        record_path(data_dir).unlink()


class RunLock:
    """The data directory's ``flock``: one live run of ``engram serve`` per data directory."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / LOCK_FILE
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

    def try_acquire(self) -> bool:
        """Take the lock if no live run holds it."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def acquire_within(
        self,
        wait_s: float,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], None] = time.sleep,
    ) -> bool:
        """Take the lock, waiting up to ``wait_s`` for a run that is stopping to let go of it."""
        deadline = clock() + wait_s
        while not self.try_acquire():
            if clock() >= deadline:
                return False
            pause(0.1)  # the holder is stopping; bounded by wait_s
        return True

    def close(self) -> None:
        """Let go of the lock (also what the kernel does when every holder has died)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass
class Reclaimed:
    """What a start found of a run that did not stop cleanly, and ended."""

    run_id: str
    ended: list[ProcessInfo]
    removed_dirs: list[str]

    def summary(self) -> str:
        """The one line a start prints about it."""
        names = ", ".join(f"{p.pid} ({p.name})" for p in self.ended[:8])
        more = f" and {len(self.ended) - 8} more" if len(self.ended) > 8 else ""
        return (
            f"reclaimed what run {self.run_id} left (it did not stop cleanly): "
            f"ended {len(self.ended)} process(es){': ' + names + more if self.ended else ''}; "
            f"removed {len(self.removed_dirs)} run directory(ies)"
        )


def reclaim(record: RunRecord, grace_s: float = 5.0) -> Reclaimed:
    """End every process the recorded run started and remove the directories it made."""
    ended = end_processes(record.processes(), grace_s)
    removed = []
    for run_dir in record.run_dirs:
        if Path(run_dir).exists():
            shutil.rmtree(run_dir, ignore_errors=True)
            removed.append(run_dir)
    return Reclaimed(record.run_id, ended, removed)
