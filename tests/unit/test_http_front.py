"""The HTTP front of a local Ray (serve/http_front.py): HAProxy's environment, one per start."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from engram.models.settings import ServeSettings
from engram.serve.http_front import DRAIN_S, READY_CHECK_ENV, READY_CHECK_S, prepare_local_front

pytestmark = pytest.mark.unit

PORT_NAMES = ("HAPROXY_STATS", "HAPROXY_METRICS", "FALLBACK_PROXY_HTTP", "FALLBACK_PROXY_GRPC")


def test_the_ray_front_turns_haproxy_off_even_when_inherited() -> None:
    environ = {"RAY_SERVE_ENABLE_HA_PROXY": "1"}
    front = prepare_local_front(ServeSettings(http_front="ray"), environ)
    assert front.kind == "ray" and front.run_dir is None
    assert environ == {"RAY_SERVE_ENABLE_HA_PROXY": "0", READY_CHECK_ENV: str(READY_CHECK_S)}
    front.close()


@pytest.mark.parametrize("front", ["haproxy", "ray"])
def test_a_starting_proxy_gets_time_on_a_busy_machine_unless_the_operator_says(front: str) -> None:
    # Serve's own 5 s made serve.start() fail beside a CPU hog (#26): the proxy was killed unready.
    environ: dict[str, str] = {}
    started = prepare_local_front(ServeSettings(http_front=front), environ)
    started.close()
    assert environ[READY_CHECK_ENV] == str(READY_CHECK_S) and READY_CHECK_S >= 30
    environ = {READY_CHECK_ENV: "7.5"}
    started = prepare_local_front(ServeSettings(http_front=front), environ)
    started.close()
    assert environ[READY_CHECK_ENV] == "7.5"


def test_haproxy_is_the_default_and_gets_files_and_ports_of_its_own() -> None:
    environ: dict[str, str] = {"KEEP": "me"}
    # The port source answers the same port twice: the two ports must still differ.
    ports = itertools.chain([41001, 41001], itertools.count(41002))
    front = prepare_local_front(ServeSettings(), environ, port=lambda: next(ports))
    try:
        assert front.kind == "haproxy" and front.run_dir is not None and front.run_dir.is_dir()
        assert environ["KEEP"] == "me" and environ["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
        # Every port Serve would take from a fixed default is this start's own, and all differ: the
        # fallback proxy's (8500) is bound with SO_REUSEPORT, so a shared one mixed two apps' traffic.
        chosen = [environ[f"RAY_SERVE_{name}_PORT"] for name in PORT_NAMES]
        assert chosen == ["41001", "41002", "41003", "41004"]
        files = [v for k, v in environ.items() if k.endswith(("_LOC", "_PATH", "_FILE", "_BASE"))]
        assert len(files) == 6  # the five of Serve's HAProxy mode and its loopback wrapper
        # Nothing in Ray's shared default directory, where two instances would overwrite each other.
        assert all(f.startswith(str(front.run_dir)) and "/tmp/haproxy-serve" not in f for f in files)
        # HAProxy refuses a socket path over 97 bytes; Ray adds a directory per node (56 hex digits).
        node = "0" * 56
        for key in ("RAY_SERVE_HAPROXY_SOCKET_PATH", "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH"):
            path = Path(environ[key])
            assert len(str(path.parent / node / path.name).encode()) <= 97
        assert environ["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == str(DRAIN_S)
        # The access log goes to a Unix socket of this start: Serve's UDP default made HAProxy open a
        # socket on every interface (tests/e2e/test_embedded_run.py's loopback test failed beside a
        # CPU hog).
        assert environ["RAY_SERVE_HAPROXY_LOG_TARGET"] == str(front.run_dir / "access-log.sock")
        assert dict(front.environment).items() <= environ.items()
    finally:
        front.close()
    assert front.run_dir is None


def test_two_starts_never_share_a_directory() -> None:
    first, second = (prepare_local_front(ServeSettings(), {}) for _ in range(2))
    try:
        assert first.run_dir != second.run_dir
        ports = [first.environment[f"RAY_SERVE_{name}_PORT"] for name in PORT_NAMES]
        assert len(set(ports)) == len(PORT_NAMES)
    finally:
        first.close()
        second.close()
