"""``engram serve``: the supervisor that owns a run, from its start to its last process.

The supervisor imports no Ray. It

1. takes the data directory's lock (storage/run_record.py): a second live run on the same data is
   refused (exit 2); a run whose supervisor died while its server still stops is waited for;
2. reclaims what a run that did not stop cleanly left (its processes, found by the run id in their
   environment, and its directories) and says so in one line;
3. refuses (exit 2) a port that something else holds, naming the pid;
4. starts the server (serve/server_process.py) in a session of its own, marked with a new run id;
5. forwards the first SIGTERM, SIGINT or SIGHUP to it (a signal sent to the whole process group
   reaches the supervisor and, through ``make``, perhaps twice: later ones change nothing);
6. when the server has exited, however it ended, ends whatever of the run is still alive, removes
   its directories and its record, and exits with the server's code.

Should the supervisor itself be killed, the server sees its pipe close and stops by itself; should
both be killed at once, the next start reclaims what they left.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from engram.models.ids import new_id
from engram.models.settings import Settings
from engram.serve.http_front import LocalFront, prepare_local_front
from engram.serve.network import joins_a_cluster
from engram.serve.server_process import STOP_SIGNALS
from engram.storage.processes import (
    RUN_ID_ENV,
    ProcessInfo,
    become_subreaper,
    descendants,
    end_until_none,
    listening_pids,
    read_process,
)
from engram.storage.run_record import (
    RunLock,
    RunRecord,
    read_record,
    reclaim,
    remove_record,
    write_record,
)

# The supervisor gives the server its own bound and this much more before it kills the run itself.
FORCE_MARGIN_S = 5.0


class ServerArgv(Protocol):
    """How to start the server: its command line, given the fd of the supervisor's pipe."""

    def argv(self, parent_fd: int) -> list[str]:
        """The server's command line."""
        ...


@dataclass(frozen=True)
class ServerCommand:
    """What the server process is started with (the options of ``engram serve``)."""

    config: str | None
    host: str | None
    port: int | None

    def argv(self, parent_fd: int) -> list[str]:
        """The server's command line."""
        argv = [sys.executable, "-m", "engram.serve.server_process", "--parent-fd", str(parent_fd)]
        argv += ["--config", self.config] if self.config else []
        argv += ["--host", self.host] if self.host is not None else []
        argv += ["--port", str(self.port)] if self.port is not None else []
        return argv


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def take_data_dir(settings: Settings, lock: RunLock) -> str | None:
    """Take the data directory's lock; None when taken, else why it cannot be."""
    data_dir = settings.storage.data_dir
    if lock.try_acquire():
        return None
    record = read_record(data_dir)
    supervisor = record.supervisor() if record is not None else None
    if record is not None and supervisor is not None:
        return (
            f"the data directory {data_dir} is in use by engram serve pid {supervisor.pid} "
            f"(port {record.port}): stop it first, or give this one another storage.data_dir"
        )
    # A server whose supervisor died stops by itself within its bound: let it finish.
    wait_s = settings.serve.stop_timeout_s + FORCE_MARGIN_S
    server = record.server_pid if record is not None else "unknown"
    _say(f"the previous run's server (pid {server}) is still stopping: waiting up to {wait_s:g} s for it")
    if lock.acquire_within(wait_s):
        return None
    if record is not None:
        _say(reclaim(record, grace_s=0).summary())
        if lock.acquire_within(10.0):
            return None
    return f"the data directory {data_dir} is locked ({lock.path}) by a process that is not engram serve"


def port_refusal(settings: Settings) -> str | None:
    """Why a port the run needs cannot be had (something else listens on it), or None."""
    data_dir = settings.storage.data_dir
    wanted = [(settings.serve.port, "serve.port")]
    if settings.metrics.export_port:
        wanted.append((settings.metrics.export_port, "metrics.export_port"))
    for port, setting in wanted:
        holders = listening_pids(port)
        if holders:
            who = ", ".join(f"pid {pid} ({name})" for pid, name in sorted(holders.items()))
            return (
                f"port {port} ({setting}) is held by {who}, which is not a run of engram serve on "
                f"{data_dir}: stop it, or set {setting} to a free port"
            )
    # Where /proc is absent the listeners above are unknown: a bind says whether the port is free.
    return export_port_refusal(settings.metrics.export_port)


def export_port_refusal(port: int) -> str | None:
    """Why Ray could not export metrics on ``port`` (taken), or None. A taken port does not fail
    ``ray.init`` but stalls it until Ray's start-up times out, so ``engram serve`` checks first."""
    if port == 0:
        return None  # Ray picks a free one
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Ray's exporter binds the node's address (loopback on the embedded default): a holder on
        # any interface takes the port from it, so probe every interface, reuse on as Ray does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return (
                f"metrics.export_port {port} is in use: set ENGRAM_METRICS__EXPORT_PORT "
                "(or metrics.export_port) to a free port, or 0 to let Ray pick one"
            )
    return None


class _Signals:
    """The supervisor's view of the stop signals and of its children's exits, for a select loop."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.at: float | None = None
        self.server_pid: int | None = None
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # wakes the loop via the fd

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if self.first is None:
            self.first, self.at = signum, time.monotonic()
            self.forward()

    def forward(self) -> None:
        """Ask the server to stop (once it exists)."""
        if self.first is not None and self.server_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server_pid, signal.SIGTERM)

    def wait(self, timeout: float | None) -> None:
        """Until a signal arrives (a stop, a child's exit) or ``timeout`` passes."""
        select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass


def _reap(server_pid: int) -> int | None:
    """Reap every exited child (adopted orphans too); the server's exit code once it has exited."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == server_pid:
            code = os.waitstatus_to_exitcode(status)


def _wait_for_server(signals: _Signals, record: RunRecord, bound_s: float) -> int:
    server_pid = record.server_pid
    forced = False
    while True:
        code = _reap(server_pid)
        if code is not None:
            if code < 0:
                _say(f"the server (pid {server_pid}) was killed by {signal.Signals(-code).name}")
                return 1
            return 1 if forced else code
        timeout = None
        if signals.at is not None:
            left = signals.at + bound_s + FORCE_MARGIN_S - time.monotonic()
            if left <= 0 and not forced:
                _say(f"the server did not stop within {bound_s + FORCE_MARGIN_S:g} s: killing the run")
                end_until_none(lambda: _run_processes(record), grace_s=0, first=signal.SIGKILL)
                forced = True
                continue
            timeout = max(left, 0.5)
        signals.wait(timeout)


def supervise(settings: Settings, command: ServerArgv) -> int:
    """Run ``engram serve`` to its end (see the module's docstring); the exit code."""
    data_dir = settings.storage.data_dir
    lock = RunLock(data_dir)
    try:
        refusal = take_data_dir(settings, lock)
        if refusal is not None:
            _say(refusal)
            return 2
        previous = read_record(data_dir)
        if previous is not None:
            _say(reclaim(previous).summary())
            remove_record(data_dir)
        refusal = port_refusal(settings)
        if refusal is not None:
            _say(refusal)
            return 2
        return _run(settings, command, lock)
    finally:
        lock.close()


def _run(settings: Settings, command: ServerArgv, lock: RunLock) -> int:
    data_dir = settings.storage.data_dir
    signals = _Signals()
    run_id = new_id()
    env = dict(os.environ)
    env[RUN_ID_ENV] = run_id
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Ray waits 30 s for its GCS to start; a loaded 2-core machine has taken longer.
    env.setdefault("RAY_gcs_server_port_wait_time_s", "120")
    # The server's Ray reads its HTTP front from the environment (unless it joins a cluster).
    front = None if joins_a_cluster(env) else prepare_local_front(settings.serve, environ=env)
    me = read_process(os.getpid())
    record = RunRecord(
        run_id=run_id,
        supervisor_pid=os.getpid(),
        supervisor_start=me.start if me is not None else 0,
        port=settings.serve.port,
        metrics_port=settings.metrics.export_port,
        run_dirs=[str(front.run_dir)] if front is not None and front.run_dir is not None else [],
    )
    write_record(data_dir, record)
    become_subreaper()  # orphans of the server's tree come back here, not to PID 1
    parent_r, parent_w = os.pipe()  # the server reads end-of-file once this process is gone
    code = 0
    try:
        if signals.first is not None:  # stopped before anything started
            return 0
        server = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            command.argv(parent_r),
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=(parent_r, lock.fd),
            start_new_session=True,
        )
        os.close(parent_r)
        signals.server_pid = server.pid
        signals.forward()  # a signal that came while it was being started
        started = read_process(server.pid)
        record.server_pid = server.pid
        record.server_start = started.start if started is not None else 0
        write_record(data_dir, record)
        code = _wait_for_server(signals, record, settings.serve.stop_timeout_s)
    finally:
        _clean_up(data_dir, record, front)
        os.close(parent_w)
    return code


def _run_processes(record: RunRecord) -> list[ProcessInfo]:
    """Every live process of the run: those the record finds (marked, or in the server's session)
    and every descendant of this process, which adopts the orphans of the server's tree (a process
    that both rewrote its environment and left the session is found only so)."""
    found = {p.pid: p for p in record.processes()}
    found.update((p.pid, p) for p in descendants(os.getpid()))
    return list(found.values())


def _clean_up(data_dir: Path, record: RunRecord, front: LocalFront | None) -> None:
    left = end_until_none(lambda: _run_processes(record), grace_s=3.0)
    if left:
        names = ", ".join(f"{p.pid} ({p.name})" for p in left[:8])
        _say(f"ended {len(left)} process(es) the server left: {names}")
    if front is not None:
        front.close()
    remove_record(data_dir)
