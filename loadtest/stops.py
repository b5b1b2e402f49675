"""``engram serve`` started as an operator starts it, stopped in each way one can stop it, and what
is left afterwards (issue #26): the restart benchmark and the e2e stop tests share this.

A run is started in a process group (and session) of its own, as a terminal or a supervisor does,
so that "the group" is exactly what a signal to a terminal's foreground job reaches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engram.storage.processes import (
    ProcessInfo,
    all_processes,
    end_processes,
    is_alive,
    listening_pids,
)
from engram.storage.run_record import RunRecord, read_record

# Each way of stopping: what signal, and whether to the whole process group or to engram serve alone.
STOPS: dict[str, tuple[signal.Signals, bool]] = {
    "sigterm-group": (signal.SIGTERM, True),
    "sigterm-serve": (signal.SIGTERM, False),
    "sigint-group": (signal.SIGINT, True),
    "sigkill-group": (signal.SIGKILL, True),
    "sigkill-serve": (signal.SIGKILL, False),
}
LISTENING = "Engram listens on"


class Output:
    """Collects a child's output on a thread (a full pipe would stall it) and notes a marker line."""

    def __init__(self, process: subprocess.Popen[str], marker: str) -> None:
        self.lines: list[str] = []
        self.seen = threading.Event()
        self.ended = threading.Event()
        self._marker = marker
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip())
            if self._marker in line:
                self.seen.set()
        self.ended.set()

    def wait_for_marker(self, deadline: float) -> bool:
        """True once the marker line appeared; False if the output ended or time ran out first."""
        while time.monotonic() < deadline:
            if self.seen.wait(timeout=0.1):
                return True
            if self.ended.is_set():
                return self.seen.is_set()
        return False

    def text(self) -> str:
        """Everything printed so far."""
        return "\n".join(self.lines)


@dataclass
class Leftovers:
    """What of a run is still there after its stop: live processes and held ports."""

    processes: list[ProcessInfo] = field(default_factory=list)
    ports: dict[int, dict[int, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.processes or self.ports)

    def __str__(self) -> str:
        procs = ", ".join(f"{p.pid} ({p.name})" for p in self.processes)
        return f"processes: [{procs}]; ports held: {self.ports}"


def descendants(root: int) -> list[ProcessInfo]:
    """``root``'s live descendants, by parent links at this moment."""
    children: dict[int, list[ProcessInfo]] = {}
    for info in all_processes():
        children.setdefault(info.ppid, []).append(info)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child.pid)
    return found


class ServeRun:
    """One start of the service (``argv``: ``make run`` or ``engram serve``) on ``data_dir``."""

    def __init__(
        self,
        argv: Sequence[str],
        data_dir: Path,
        ports: Sequence[int],
        env: Mapping[str, str],
        cwd: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.ports = list(ports)
        self.began = time.monotonic()
        self.process = subprocess.Popen(  # noqa: S603 - our own command lines
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        self.output = Output(self.process, LISTENING)
        self.record: RunRecord | None = None
        self.seen: list[ProcessInfo] = []

    def wait_listening(self, limit_s: float) -> bool:
        """Until the service listens (True) or exited or ``limit_s`` passed (False); reads its record."""
        if not self.output.wait_for_marker(time.monotonic() + limit_s):
            return False
        self.record = read_record(self.data_dir)
        return self.record is not None

    def snapshot(self) -> list[ProcessInfo]:
        """Every process of the run right now: the started command, its descendants, the run's marked
        processes (whatever their parent became). Kept, to be checked after the stop."""
        found = {p.pid: p for p in descendants(self.process.pid)}
        if self.record is not None:
            found.update({p.pid: p for p in self.record.processes()})
        top = [p for p in all_processes() if p.pid == self.process.pid]
        self.seen = [*top, *found.values()]
        return self.seen

    def supervisor_pid(self) -> int:
        """``engram serve``'s own pid (under ``make``, its child)."""
        assert self.record is not None, "not listening yet"
        return self.record.supervisor_pid

    def stop(self, how: str) -> None:
        """Deliver one of :data:`STOPS`."""
        sig, group = STOPS[how]
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.process.pid, sig)
            else:
                os.kill(self.supervisor_pid(), sig)

    def leftovers(self) -> Leftovers:
        """What of the run is alive or held now."""
        alive = {p.pid: p for p in self.seen if is_alive(p)}
        if self.record is not None:
            alive.update({p.pid: p for p in self.record.processes()})
        ports = {port: held for port in self.ports if (held := listening_pids(port))}
        return Leftovers(list(alive.values()), ports)

    def wait_gone(self, limit_s: float) -> Leftovers:
        """Until the started command has exited and nothing of the run is left, or ``limit_s``;
        returns what is left (empty: gone)."""
        deadline = time.monotonic() + limit_s
        while True:
            exited = self.process.poll() is not None
            left = self.leftovers()
            if (exited and not left) or time.monotonic() >= deadline:
                return left  # the started command, still running, is among them
            time.sleep(0.1)  # polling processes and ports, bounded by limit_s

    def kill_everything(self) -> None:
        """After a failed check: end whatever of the run is left, and the run directories it
        recorded (nothing of it can remove them after a SIGKILL), so the next test starts clean."""
        if self.process.poll() is None:
            self.snapshot()
        end_processes(self.leftovers().processes, grace_s=2.0, first=signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for run_dir in self.record.run_dirs if self.record is not None else []:
            shutil.rmtree(run_dir, ignore_errors=True)
