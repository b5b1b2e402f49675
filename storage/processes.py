"""The processes a run of Engram started, found through the kernel and ended.

A run marks every process it starts with ``ENGRAM_RUN_ID`` in the environment, which children
inherit whoever starts them (Ray's raylet, its workers, HAProxy); the kernel keeps a process's
starting environment in ``/proc/<pid>/environ`` whatever its name, parent or process group
becomes, unless the process writes over that memory itself (``setproctitle`` does, in Ray's
agents). The run's server also leads a session of its own, which every descendant stays in unless
it starts one itself: a process of either kind is the run's. A pid alone is never trusted: the
process's start time (``/proc/<pid>/stat``) goes with it, so a pid the kernel gave to another
process since is never signalled.

Linux only (``/proc``); elsewhere the lookups find nothing and ``parent_death_signal`` does nothing,
which docs/operations.md states.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

RUN_ID_ENV = "ENGRAM_RUN_ID"
PROC = Path("/proc")
# prctl(2) options (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# A TCP socket listening is in state 0A in /proc/net/tcp and tcp6.
TCP_LISTENING = {"tcp": "0A", "tcp6": "0A"}


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process as the kernel reports it; ``start`` (clock ticks after boot) pins the pid."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    state: str
    name: str


def read_process(pid: int, proc: Path = PROC) -> ProcessInfo | None:
    """The process ``pid``, or None when there is none (or ``/proc`` is absent)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # The name is in parentheses and may itself hold spaces or parentheses: split after the last ")".
    name = stat[stat.find("(") + 1 : stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2 :].split()
    return ProcessInfo(
        pid=pid,
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        start=int(fields[19]),
        state=fields[0],
        name=name,
    )


def is_alive(process: ProcessInfo, proc: Path = PROC) -> bool:
    """Whether that very process (same pid, same start) still runs; a zombie has ended."""
    now = read_process(process.pid, proc)
    return now is not None and now.start == process.start and now.state not in ("Z", "X")


def all_processes(proc: Path = PROC) -> list[ProcessInfo]:
    """Every live process of this machine (zombies left out)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in proc.iterdir():
            if entry.name.isdigit():
                info = read_process(int(entry.name), proc)
                if info is not None and info.state not in ("Z", "X"):
                    found.append(info)
    return found


def environment_value(pid: int, name: str, proc: Path = PROC) -> str | None:
    """``name``'s value in the environment process ``pid`` started with, or None."""
    try:
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def processes_marked(
    name: str, value: str, exclude: Iterable[int] = (), proc: Path = PROC
) -> list[ProcessInfo]:
    """Live processes whose starting environment sets ``name`` to ``value`` (never by name or pid)."""
    if not value:
        return []  # an unmarked run has no processes to find
    skip = {os.getpid(), *exclude}
    return [
        p for p in all_processes(proc) if p.pid not in skip and environment_value(p.pid, name, proc) == value
    ]


def session_members(
    leader: int, leader_start: int, exclude: Iterable[int] = (), proc: Path = PROC
) -> list[ProcessInfo]:
    """Live processes of the session that process ``leader`` (started at ``leader_start``) began,
    whatever became of the leader; none if that pid now belongs to another process (reused)."""
    everyone = all_processes(proc)
    if any(p.pid == leader and p.start != leader_start for p in everyone):
        return []
    skip = {os.getpid(), *exclude}
    return [p for p in everyone if p.sid == leader and p.start >= leader_start and p.pid not in skip]


def processes_of_run(
    run_id: str, exclude: Iterable[int] = (), proc: Path = PROC, *, leader: tuple[int, int] | None = None
) -> list[ProcessInfo]:
    """Every live process that the run ``run_id`` started, its descendants included: those whose
    environment carries the run's id, and those of the session its server leads (``leader``: pid,
    start). Both are needed: a process that renames itself (setproctitle, as Ray's agents do) may
    overwrite its environment's memory, and one that starts a session of its own leaves the server's."""
    found = {p.pid: p for p in processes_marked(RUN_ID_ENV, run_id, exclude, proc)}
    if leader is not None and leader[0] > 0:
        found.update({p.pid: p for p in session_members(*leader, exclude, proc)})
    return list(found.values())


def descendants(pid: int, proc: Path = PROC) -> list[ProcessInfo]:
    """Every live process below ``pid`` (children, their children, ...), parents first."""
    children: dict[int, list[ProcessInfo]] = {}
    for process in all_processes(proc):
        children.setdefault(process.ppid, []).append(process)
    found: list[ProcessInfo] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(0), []):
            found.append(child)
            pending.append(child.pid)
    return found


def end_processes(
    processes: Iterable[ProcessInfo],
    grace_s: float = 5.0,
    *,
    first: signal.Signals = signal.SIGTERM,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> list[ProcessInfo]:
    """Signal each process with ``first``, SIGKILL those still alive after ``grace_s``; returns
    the ones that were alive to be ended."""
    targets = [p for p in processes if is_alive(p)]
    for target in targets:
        _signal(target, first)
    deadline = clock() + grace_s
    while any(is_alive(p) for p in targets) and clock() < deadline:
        pause(0.05)  # waiting for processes to exit, bounded by the grace
    for target in targets:
        if is_alive(target):
            _signal(target, signal.SIGKILL)
    kill_deadline = clock() + 5.0
    while any(is_alive(p) for p in targets) and clock() < kill_deadline:
        pause(0.05)  # a SIGKILLed process is gone within moments, bounded all the same
    return targets


def end_until_none(
    find: Callable[[], Iterable[ProcessInfo]],
    grace_s: float = 5.0,
    *,
    first: signal.Signals = signal.SIGTERM,
    rounds: int = 5,
) -> list[ProcessInfo]:
    """End what ``find`` returns, then look again, until it finds nothing alive or ``rounds`` pass;
    every process that was ended. One look is not enough: a process forked (a worker the raylet was
    starting) between the look and the signal is not in it."""
    ended: dict[int, ProcessInfo] = {}
    for _ in range(rounds):
        batch = [p for p in find() if p.pid not in ended or ended[p.pid].start != p.start]
        batch = [p for p in batch if is_alive(p)]
        if not batch:
            break
        ended.update((p.pid, p) for p in end_processes(batch, grace_s, first=first))
        grace_s, first = 0.0, signal.SIGKILL  # a process that outlived one round gets no more grace
    return list(ended.values())


def _signal(process: ProcessInfo, sig: signal.Signals) -> None:
    # Checked just before: the pid is still that process (a reused pid has another start time).
    if is_alive(process):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, sig)


def open_sockets(
    tables: Mapping[str, str] = TCP_LISTENING, proc: Path = PROC
) -> dict[str, tuple[str, str, int]]:
    """The sockets of this network namespace in the given state per ``/proc/net`` table:
    inode -> (table, address as the kernel writes it in hex, port)."""
    found: dict[str, tuple[str, str, int]] = {}
    for table, state in tables.items():
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == state:
                host, port = fields[1].rsplit(":", 1)
                found[fields[9]] = (table, host, int(port, 16))
    return found


def listening_pids(port: int, proc: Path = PROC) -> dict[int, str]:
    """The processes listening on TCP ``port`` (any address, IPv4 or IPv6): pid -> name."""
    inodes = {inode for inode, (_, _, p) in open_sockets(TCP_LISTENING, proc).items() if p == port}
    if not inodes:
        return {}
    holders: dict[int, str] = {}
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for info in all_processes(proc):
        with contextlib.suppress(OSError):
            for fd in (proc / str(info.pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        holders[info.pid] = info.name
                        break
    return holders


# The C library's symbols, loaded once here: a child's preexec_fn (after fork, before exec) must not
# look libraries up, which may start processes or take locks.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _prctl(option: int, value: int) -> bool:
    if _LIBC is None:
        return False
    return int(_LIBC.prctl(option, value, 0, 0, 0)) == 0


def parent_death_signal(sig: signal.Signals = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; False elsewhere).

    For a child's ``preexec_fn``: the setting survives ``exec``. If the parent is already gone by
    then, the signal would never come, so the child sends it to itself.
    """
    parent = os.getppid()
    done = _prctl(_PR_SET_PDEATHSIG, int(sig))
    if done and os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return done


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants instead of PID 1 (Linux; False elsewhere)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)
