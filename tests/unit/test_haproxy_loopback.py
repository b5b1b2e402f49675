"""HAProxy's stats and Prometheus listeners on loopback (serve/haproxy_loopback.py, SPEC P7): the
rewrite of Serve's configuration, and the wrapper that Serve runs in place of HAProxy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engram.models.settings import ServeSettings
from engram.serve.haproxy_loopback import loopback_binds
from engram.serve.http_front import BINARY_ENV, prepare_local_front, real_haproxy

pytestmark = pytest.mark.unit

# The shape of Serve's HAProxy configuration (ray/serve/_private/haproxy_templates.py, Ray 2.60).
SERVE_CONFIG = """global
    stats socket /tmp/x/admin.sock mode 666 level admin
defaults
    mode http
frontend prometheus
    bind :9101
    mode http
frontend http_frontend
    bind *:8000
    mode http
backend app
    server r1 127.0.0.1:30000 check
frontend grpc_frontend
    bind *:9000 proto h2
listen stats
  bind *:8404
  stats enable
frontend other
    bind 0.0.0.0:7000
    bind :::7001
    bind [::]:7002
    bind 10.0.0.1:7003
"""


def test_wildcard_listeners_outside_serves_frontends_move_to_loopback() -> None:
    rewritten = loopback_binds(SERVE_CONFIG)
    binds = [line.strip() for line in rewritten.splitlines() if line.strip().startswith("bind")]
    assert binds == [
        "bind 127.0.0.1:9101",
        "bind *:8000",  # serve.host's frontend: Serve already binds it to that host
        "bind *:9000 proto h2",
        "bind 127.0.0.1:8404",
        "bind 127.0.0.1:7000",
        "bind 127.0.0.1:7001",
        "bind 127.0.0.1:7002",
        "bind 10.0.0.1:7003",  # an address someone chose stays
    ]
    # Nothing else changes: backends' servers, sockets, the rest of each line.
    assert (
        rewritten.replace("127.0.0.1:9101", ":9101").replace("127.0.0.1:8404", "*:8404").splitlines()[:16]
        == SERVE_CONFIG.splitlines()[:16]
    )


def fake_haproxy(tmp_path: Path) -> Path:
    """A stand-in HAProxy that records its pid, arguments and the configuration it was given."""
    fake = tmp_path / "haproxy"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "pid $$" > "$(dirname "$0")/seen"\n'
        'echo "args $*" >> "$(dirname "$0")/seen"\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = -f ] && cat "$2" >> "$(dirname "$0")/seen"; shift; done\n'
    )
    fake.chmod(0o755)
    return fake


def test_serve_runs_haproxy_through_the_wrapper_in_the_same_process(tmp_path: Path) -> None:
    fake = fake_haproxy(tmp_path)
    environ = {BINARY_ENV: str(fake)}  # the operator's HAProxy is the one wrapped
    front = prepare_local_front(ServeSettings(), environ)
    try:
        assert front.run_dir is not None
        wrapper = Path(environ[BINARY_ENV])
        assert wrapper.parent == front.run_dir and os.access(wrapper, os.X_OK)
        config = front.run_dir / "haproxy.cfg"
        config.write_text(SERVE_CONFIG)
        # As Serve starts it: asyncio.create_subprocess_exec(binary, "-db", "-f", config, "-sf", pid).
        process = subprocess.Popen([str(wrapper), "-db", "-f", str(config), "-sf", "123"])
        assert process.wait(timeout=60) == 0
        seen = (tmp_path / "seen").read_text().splitlines()
        # exec all the way: the pid Serve holds (and signals on reload) is HAProxy's own.
        assert seen[0] == f"pid {process.pid}"
        copy = front.run_dir / f"haproxy.cfg.loopback.{process.pid}"
        assert seen[1] == f"args -db -f {copy} -sf 123"
        assert "\n".join(seen[2:]) + "\n" == loopback_binds(SERVE_CONFIG)
        assert copy.stat().st_mode & 0o777 == 0o600
        assert config.read_text() == SERVE_CONFIG  # Serve's own file is never written
    finally:
        front.close()


def test_the_real_haproxy_is_never_another_runs_wrapper(tmp_path: Path) -> None:
    inherited = {BINARY_ENV: str(tmp_path / "engram-hp-x" / "haproxy-loopback")}
    found = real_haproxy(inherited)
    assert found is None or not found.endswith("haproxy-loopback")
    assert real_haproxy({BINARY_ENV: "/opt/haproxy/sbin/haproxy"}) == "/opt/haproxy/sbin/haproxy"
