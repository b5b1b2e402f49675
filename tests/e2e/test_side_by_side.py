"""Two Engram runs on one machine take none of each other's traffic (issue #26).

The session's app (a Ray and an HAProxy front of its own) is up; the README's first command
(``make run``) starts beside it on a fresh data directory. No socket of the run may listen where a
process outside the run listens too. Serve's fallback proxy binds a fixed port (8500) with
SO_REUSEPORT: while both instances had it, the kernel handed a request that HAProxy sent there to
either instance, and a task one of them acknowledged was "no such task" at the other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.storage.processes import all_processes
from tests.e2e.conftest import RunningApp
from tests.e2e.make_run import run_config, start, stop_cleanly
from tests.support.sockets import listeners_of

pytestmark = pytest.mark.e2e


def test_a_second_run_listens_on_no_port_of_the_first(engram_app: RunningApp, tmp_path: Path) -> None:
    config, data_dir, ports = run_config(tmp_path)
    run = start(config, data_dir, ports)
    try:
        ours = run.snapshot()
        pids = {p.pid for p in ours}
        mine = listeners_of((p.pid, p.name) for p in ours)
        others = listeners_of((p.pid, p.name) for p in all_processes() if p.pid not in pids)
        # Both instances are seen: each one's HTTP front is among its listeners.
        assert ports[0] in {m.port for m in mine}, "\n".join(map(str, mine))
        assert engram_app.settings.serve.port in {o.port for o in others}, "\n".join(map(str, others))
        shared = [f"{m}  and  {o}" for m in mine for o in others if m.shares_port_with(o)]
        assert not shared, "the run listens where another process does:\n" + "\n".join(shared)
        stop_cleanly(run)
    finally:
        run.kill_everything()
