"""A local Milvus standalone server for the distributed profile on one machine (development, CI).

The PyPI package ``milvus`` (the ``distributed`` extra) ships a real Milvus 2.3 standalone binary
with embedded etcd and local object storage; this starts it as a child process in its own process
group, waits until it answers, and stops the whole group. A cluster runs a Milvus of its own and
only sets ``storage.milvus_uri``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engram.storage.processes import parent_death_signal

DEFAULT_PORT = 19530
# The embedded etcd of the standalone binary always listens on these (its client and peer ports):
# one such server per machine at a time.
ETCD_PORTS = (2379, 2380)
# The start loop's clock and pause (tests run it without waiting).
_clock = time.monotonic
_pause = time.sleep


class MilvusServerError(RuntimeError):
    """The Milvus server could not be started or did not become ready."""


@dataclass
class MilvusServerProcess:
    """A running local Milvus server: its gRPC URI, data dir and process."""

    uri: str
    data_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def running(self) -> bool:
        """Whether the server's launcher process is still alive."""
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the server and every process it started (SIGTERM, then SIGKILL after ``grace_s``)."""
        group = self.process.pid
        _signal_group(group, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        # The launcher exits first; the server binary, in the same group, may take longer.
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(group):
            _signal_group(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace_s)


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A launcher that exited but was not reaped yet still answers: reap it and ask again.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(group, os.WNOHANG)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        # A port a stopped server left in TIME_WAIT is free to listen on again; a listener is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _ready(port: int) -> bool:
    # The launcher's health check port is resolved at start; the proxy's own answer is what counts.
    try:
        from pymilvus import MilvusClient

        client = MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=2)
    except Exception:  # not listening yet: pymilvus raises its own connection errors
        return False
    try:
        client.list_collections()
        return True
    except Exception:
        return False
    finally:
        client.close()


def start_milvus_server(
    data_dir: Path,
    port: int = DEFAULT_PORT,
    timeout_s: float = 180.0,
    *,
    attempt_s: float = 45.0,
    should_stop: Callable[[], bool] = lambda: False,
) -> MilvusServerProcess:
    """Start a Milvus standalone server keeping its data in ``data_dir``; returns once it answers.

    A start that does not answer within ``attempt_s`` is stopped and made again: started within
    seconds of another server's stop, the 2.3.5 binary sometimes never opens its proxy port
    (seen 3 times in 6 starts here; every retry answered within ~50 s).
    ``should_stop`` (a signal arrived) ends the wait and stops what was started.
    """
    try:
        import milvus  # noqa: F401  (the binary's package: pip install 'engram[distributed]')
    except ImportError as exc:
        raise MilvusServerError(
            "the Milvus server package is not installed: pip install 'engram[distributed]'"
        ) from exc
    deadline = _clock() + timeout_s
    while True:
        server = _launch(data_dir, port)
        attempt_ends = min(deadline, _clock() + attempt_s)
        while _clock() < attempt_ends:
            if should_stop():
                server.stop()
                raise MilvusServerError("stopped while the Milvus server was starting")
            if not server.running:
                raise MilvusServerError(
                    f"the Milvus server exited with code {server.process.returncode}; "
                    f"see {data_dir / 'launcher.log'}"
                )
            if _ready(port):
                return server
            _pause(0.5)
        server.stop()
        if _clock() >= deadline:
            raise MilvusServerError(
                f"the Milvus server did not answer on port {port} within {timeout_s:.0f} s"
            )


def _launch(data_dir: Path, port: int) -> MilvusServerProcess:
    taken = [p for p in (*ETCD_PORTS, port) if _port_taken(p)]
    if taken:
        raise MilvusServerError(
            f"port(s) {taken} in use on 127.0.0.1: another Milvus server (its embedded etcd holds "
            f"{ETCD_PORTS[0]} and {ETCD_PORTS[1]}) or another service runs here; stop it or point "
            "storage.milvus_uri at it"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    log = (data_dir / "launcher.log").open("ab")
    # A process group of its own: the launcher runs the server binary as a child, and stop() must
    # reach both, also when the caller is killed. And should the caller die without a stop (a
    # SIGKILL), the kernel sends the launcher SIGINT, on which it stops the binary (Ctrl-C's path):
    # the server never outlives its owner. (The signal follows the thread that started it: call
    # this from a thread that lives as long as the server, as the main thread does.)
    process = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "-c",
            "from milvus import main; main()",
            "--data",
            str(data_dir),
            "--proxy-port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_dies_with_its_owner,  # only a prctl: safe between fork and exec
    )
    log.close()
    return MilvusServerProcess(f"http://127.0.0.1:{port}", data_dir, process)


def _dies_with_its_owner() -> None:
    parent_death_signal(signal.SIGINT)


@contextlib.contextmanager
def milvus_server(
    data_dir: Path, port: int = DEFAULT_PORT, timeout_s: float = 180.0
) -> Iterator[MilvusServerProcess]:
    """A Milvus server for the duration of the block."""
    server = start_milvus_server(data_dir, port, timeout_s)
    try:
        yield server
    finally:
        server.stop()
