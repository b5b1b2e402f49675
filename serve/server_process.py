"""The server of ``engram serve``: the process that starts Ray, Serve and the app, and stops them.

``engram serve`` itself is a supervisor (serve/supervisor.py) that starts this module as its child
in a session of its own, so that a signal sent to the terminal's or a supervisor's process group
reaches only the supervisor, never Ray's processes: Ray's raylet killed under a running driver
aborts the driver (``logging.cc`` fatal) instead of letting it stop. One stop for every cause:

- SIGTERM, SIGINT or SIGHUP (from the supervisor, which forwards the operator's);
- the supervisor's death, however it died (the pipe it holds reads end-of-file here).

The stop runs once, whatever arrives during it, and is bounded by ``serve.stop_timeout_s``: the
shards finish queued writes for up to ``serve.stop_grace_s``, then Serve (its HTTP front with it)
and Ray stop, then any process of the run that is still alive is ended. Past the bound whatever
still runs is killed and the server exits 1.

    python -m engram.serve.server_process --parent-fd N [--config FILE] [--host H] [--port P]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from engram.models.settings import Settings, load_settings
from engram.serve.network import is_loopback_host, joins_a_cluster, local_ray_environment, start_decision
from engram.serve.ray_start import LOCAL_SYSTEM_CONFIG, init_with_retries
from engram.storage.private_files import private_umask
from engram.storage.processes import (
    ProcessInfo,
    descendants,
    end_processes,
    end_until_none,
    processes_of_run,
    read_process,
)
from engram.storage.run_record import read_record, remove_record

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long a stop signal that another thread received may wait for the main thread to act on it.
STOP_POLL_S = 0.5
# Time kept back from the stop's bound for Serve's and Ray's own shutdown after the shards close.
_SHUTDOWN_RESERVE_S = 6.0


class StopRequested(BaseException):
    """Raised in the main thread by the first stop signal, wherever the start or the wait is."""


class Stopper:
    """The server's one stop: the first signal interrupts the main thread, later ones do nothing,
    and a timer kills what is left once ``bound_s`` has passed since the stop began."""

    def __init__(self, run_id: str, bound_s: float) -> None:
        self.run_id = run_id
        self.bound_s = bound_s
        me = read_process(os.getpid())
        # The server leads a session of its own (the supervisor starts it so): its members are the run's.
        self.leader = (me.pid, me.start) if me is not None and me.sid == me.pid else None
        self.began: float | None = None
        self.requested = False
        self._timer: threading.Timer | None = None

    def install(self) -> None:
        """Take over the stop signals (call in the main thread, before anything starts)."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Once only: a second signal in the moment between the first one's ``except`` and
        # ``begin()`` would otherwise escape the stop itself (the server died with a traceback).
        if self.began is None and not self.requested:
            self.requested = True
            raise StopRequested(signum)

    def begin(self) -> float:
        """Mark the stop as begun (signals are ignored from now on) and arm the bound; its deadline."""
        if self.began is None:
            self.began = time.monotonic()
            self._timer = threading.Timer(self.bound_s, self._past_bound)
            self._timer.daemon = True
            self._timer.start()
        return self.began + self.bound_s

    def _past_bound(self) -> None:
        print(
            f"the stop took longer than serve.stop_timeout_s ({self.bound_s:g} s): "
            "killing what is left of the run",
            file=sys.stderr,
            flush=True,
        )
        end_until_none(self.processes, grace_s=0, first=signal.SIGKILL)
        os._exit(1)

    def processes(self) -> list[ProcessInfo]:
        """The run's processes but this one: marked, in its session, or below it."""
        found = {p.pid: p for p in processes_of_run(self.run_id, leader=self.leader)}
        found.update((p.pid, p) for p in descendants(os.getpid()))
        return list(found.values())

    def finished(self) -> None:
        """The stop ended within its bound."""
        if self._timer is not None:
            self._timer.cancel()


def wait_for_stop(poll_s: float = STOP_POLL_S) -> NoReturn:
    """Until a stop signal's handler raises ``StopRequested`` in this (the main) thread.

    Not ``signal.pause()``: the kernel may hand a signal sent to the process to any of its threads
    (the supervisor watch's own ``kill``, one of Ray's), and then pause() never returns, while
    Python runs the handler only once the main thread runs again: a supervisor killed with SIGKILL
    left the whole run up (CI). A sleep ends within ``poll_s`` and the handler runs then."""
    while True:
        time.sleep(poll_s)


def watch_parent(fd: int) -> None:
    """Stop as on SIGTERM once the supervisor is gone: its end of the pipe closes when it dies."""

    def wait() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):
                pass  # the supervisor never writes; a byte would only be noise
        print("engram serve's supervisor is gone: stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="supervisor-watch", daemon=True).start()


def serve_until_stopped(settings: Settings, stopper: Stopper) -> int:
    """Start Ray (local unless ``RAY_ADDRESS``), Serve and the app; block until a stop; stop them.

    A cluster profile without Ray's token authentication is refused (exit 2) before anything
    starts (serve/network.py); a local Ray binds every socket to loopback, or the start stops."""
    decision = start_decision(settings.serve, os.environ)
    if decision.refusal is not None:
        print(decision.refusal, file=sys.stderr, flush=True)
        return 2
    if decision.warning is not None:
        print(decision.warning, file=sys.stderr, flush=True)
    local = not joins_a_cluster(os.environ)
    if local:  # Ray's processes read these from the environment they inherit
        os.environ.update(local_ray_environment(os.environ))
    code = 0
    try:
        import ray
        from ray import serve

        from engram.serve.app import deploy

        def init() -> None:
            # Engram's metrics and Ray's and Serve's own go out on this port (docs/operations.md).
            ray.init(
                # A Ray of its own unless RAY_ADDRESS names a cluster: never one that merely runs here.
                address="local" if local else os.environ["RAY_ADDRESS"],
                include_dashboard=False,
                namespace="serve",
                log_to_driver=False,
                _metrics_export_port=settings.metrics.export_port or None,
                # A cluster keeps the settings it was started with (Ray refuses them on a connect).
                _system_config=LOCAL_SYSTEM_CONFIG if local else None,
            )

        if local:  # what a failed try started is this process's own: its descendants
            init_with_retries(
                init,
                shutdown=ray.shutdown,
                leftovers=lambda: descendants(os.getpid()),
                end=end_processes,
            )
        else:
            init()
        stopper.install()  # ray.init put its own SIGTERM handler (sys.exit) in place of ours
        node_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        if local and not is_loopback_host(node_ip):
            # Fail closed: a Ray of our own reachable from the network is what P7 forbids.
            print(
                f"Engram failed to start: the local Ray's node address is {node_ip}, not loopback",
                file=sys.stderr,
                flush=True,
            )
            return 1  # the finally below stops Ray
        serve.start(http_options={"host": settings.serve.host, "port": settings.serve.port})
        try:
            deploy(settings)
        except Exception as exc:
            _print_deploy_failure(exc)
            code = 1
        else:
            print(
                f"Engram listens on http://{settings.serve.host}:{settings.serve.port} (Ctrl-C stops it)",
                flush=True,
            )
            wait_for_stop()
    except (StopRequested, KeyboardInterrupt):
        pass
    except SystemExit:  # Ray's SIGTERM handler, had the signal come during ray.init
        code = 0
    finally:
        deadline = stopper.begin()
        print("stopping Engram ...", file=sys.stderr, flush=True)
        code = stop_app(settings, deadline) or code
        _end_leftovers(settings, stopper)
        stopper.finished()
    return code


def _print_deploy_failure(exc: BaseException) -> None:
    """The reason Serve gave for a failed deployment (otherwise only in Ray's log files)."""
    from ray import serve

    from engram.serve.startup_report import deployment_failures

    print(f"Engram failed to start: {exc}", file=sys.stderr, flush=True)
    try:
        report = deployment_failures(serve.status())
    except Exception as status_exc:  # Serve itself may be what failed
        report = [f"(Serve's status could not be read: {type(status_exc).__name__}: {status_exc})"]
    for line in report:
        print(line, file=sys.stderr, flush=True)


def stop_app(settings: Settings, deadline: float) -> int:
    """Stop whatever the start reached: shards finish queued writes (extraction still up), then
    Serve and Ray go. Every step runs even when an earlier one failed; returns 1 if any did.
    Prints how long each step took: a stop near its bound says which step to look at."""
    import ray

    if not ray.is_initialized():
        return 0
    from ray import serve

    from engram.models.rules.sharding import shard_name

    code = 0
    took: list[str] = []
    began = step = time.monotonic()

    def lap(name: str) -> None:
        nonlocal step
        now = time.monotonic()
        took.append(f"{name} {now - step:.1f} s")
        step = now

    shards = []
    for i in range(settings.serve.shard_count):
        with contextlib.suppress(ValueError):  # never created
            shards.append(ray.get_actor(shard_name(settings.serve.app_name, i), namespace="serve"))
    # Shards close before Serve goes: their queued tasks may still need the Extraction deployment.
    for shard in shards:
        try:
            left = max(1.0, deadline - _SHUTDOWN_RESERVE_S - time.monotonic())
            ray.get(shard.close.remote(), timeout=left)
        except Exception as exc:
            print(f"closing a shard failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            code = 1
    lap("shards")
    try:
        serve.shutdown()  # type: ignore[no-untyped-call]
    except Exception as exc:
        print(f"stopping Serve failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    for shard in shards:
        with contextlib.suppress(Exception):  # already gone
            ray.kill(shard)
    lap("Serve")
    ray.shutdown()
    lap("Ray")
    print(
        f"Engram stopped in {time.monotonic() - began:.1f} s ({', '.join(took)})",
        file=sys.stderr,
        flush=True,
    )
    return code


def _end_leftovers(settings: Settings, stopper: Stopper) -> None:
    """End what Ray's shutdown left of the run; with the supervisor gone, also its record and files."""
    run_id = stopper.run_id
    left = end_until_none(stopper.processes, grace_s=3.0)
    if left:
        names = ", ".join(f"{p.pid} ({p.name})" for p in left[:8])
        print(
            f"ended {len(left)} process(es) that outlived Ray's shutdown: {names}",
            file=sys.stderr,
            flush=True,
        )
    data_dir = settings.storage.data_dir
    record = read_record(data_dir)
    if record is not None and record.run_id == run_id and record.supervisor() is None:
        for run_dir in record.run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
        remove_record(data_dir)


def exit_now(code: int) -> NoReturn:
    """End the process once its stop is done, without the interpreter's own shutdown: that waits on
    every thread still running, and Ray's have held a stopped server there past the supervisor's
    bound (CI, after "Engram stopped in 6.6 s"). Everything worth keeping is stored by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the server process (started by serve/supervisor.py, never by hand)."""
    parser = argparse.ArgumentParser(description="engram serve's server process")
    parser.add_argument("--parent-fd", type=int, help="read end of the supervisor's pipe")
    parser.add_argument("--config")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    private_umask()  # every file of the service (and of the Ray it starts) is 0600 / 0700 (P8)
    settings = load_settings(args.config)
    if args.host is not None:
        settings.serve.host = args.host
    if args.port is not None:
        settings.serve.port = args.port
    stopper = Stopper(os.environ.get("ENGRAM_RUN_ID", ""), settings.serve.stop_timeout_s)
    stopper.install()
    if args.parent_fd is not None:
        watch_parent(args.parent_fd)
    exit_now(serve_until_stopped(settings, stopper))


if __name__ == "__main__":
    main()
