"""The embedded default listens on loopback only, every process and port (SPEC P7, issue #27).

The README's first command (``make run``) on a fresh data directory: once it listens, every
listening socket (TCP and UDP, IPv4 and IPv6) held by a process of the run, the supervisor, its
descendants and Ray's processes in sessions of their own (found by the run's id and its server's
session, as a stop finds them), is bound to a loopback address.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.make_run import run_config, start, stop_cleanly
from tests.support.sockets import listeners_of

pytestmark = pytest.mark.e2e


def test_every_socket_of_the_embedded_default_is_on_loopback(tmp_path: Path) -> None:
    config, data_dir, ports = run_config(tmp_path)
    run = start(config, data_dir, ports)
    try:
        processes = run.snapshot()
        listeners = listeners_of((p.pid, p.name) for p in processes)
        report = "\n".join(str(listener) for listener in listeners)
        print(f"{len(processes)} processes of the run listen on:\n{report}")
        # The scan sees the run: the HTTP front and the metrics exporter are among its sockets.
        held = {listener.port for listener in listeners}
        assert set(ports) <= held, f"ports {ports} not found among the run's sockets:\n{report}"
        assert len(listeners) > len(ports), report  # Ray's own (GCS, raylet, workers) are there too
        exposed = [str(listener) for listener in listeners if not listener.is_loopback()]
        assert not exposed, "listening beyond loopback:\n" + "\n".join(exposed)
        stop_cleanly(run)
    finally:
        run.kill_everything()
