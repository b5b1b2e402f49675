"""Every way of stopping Engram leaves nothing behind, and the next start comes up (issue #26).

Each test starts the README's first command (``make run``) on a fresh data directory in a process
group of its own, as a terminal does, acknowledges writes, stops it one way, checks that within
30 s nothing of the run is alive and neither of its ports is held, then starts it again on the
same data and checks every acknowledged write is DONE exactly once.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from engram.loadtest.stops import STOPS, ServeRun
from tests.e2e.make_run import GONE_WITHIN_S, make_run, run_config, start, stop_cleanly
from tests.e2e.recovery import accept_adds, assert_all_done_exactly_once, unfinished_users
from tests.support.crash_facts import FACTS
from tests.support.net import free_port

pytestmark = pytest.mark.e2e

USERS = [f"stop-{i}" for i in range(6)]


@pytest.mark.parametrize("how", list(STOPS))
def test_a_stop_leaves_nothing_and_the_next_start_finishes_every_write(how: str, tmp_path: Path) -> None:
    config, data_dir, ports = run_config(tmp_path)
    first = start(config, data_dir, ports)
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        accepted = accept_adds(url, USERS)
        in_flight = unfinished_users(url, accepted)
        first.snapshot()
        first.stop(how)
        stopped_at = time.monotonic()
        left = first.wait_gone(GONE_WITHIN_S)
        took = time.monotonic() - stopped_at
        output = first.output.text()
        assert not left, f"after {how}, left after {took:.0f} s: {left}\n{output[-3000:]}"
        # Ray's processes were never signalled under a running driver: no fatal trace, no abort.
        assert "Aborted" not in output and "logging.cc" not in output, output[-3000:]
        if how != "sigkill-serve":  # killed, the supervisor cannot say anything
            assert "stopping Engram" in output, output[-3000:]
        assert first.record is not None
        assert not any(Path(d).exists() for d in first.record.run_dirs), "the HTTP front's directory is left"
    finally:
        first.kill_everything()

    second = start(config, data_dir, ports)
    try:
        assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
        stop_cleanly(second)
    finally:
        second.kill_everything()
    print(f"{how}: gone in {took:.1f} s; {in_flight} of {len(USERS)} users had writes in flight at the stop")


def test_a_start_refuses_a_port_held_by_another_process_naming_it(tmp_path: Path) -> None:
    import socket

    config, data_dir, ports = run_config(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports[0]))
        holder.listen()
        run = make_run(config, data_dir, ports)
        try:
            code = run.process.wait(timeout=120)
            run.output.ended.wait(timeout=10)
        finally:
            run.kill_everything()
    output = run.output.text()
    assert code != 0
    assert f"port {ports[0]} (serve.port) is held by pid {os.getpid()}" in output, output[-2000:]


def test_a_second_start_on_the_same_data_is_refused(tmp_path: Path) -> None:
    config, data_dir, ports = run_config(tmp_path)
    first = start(config, data_dir, ports)
    try:
        other_port = free_port()
        env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
        second = ServeRun(
            [sys.executable, "-m", "engram.serve.cli", "serve", "--port", str(other_port)],
            data_dir,
            [other_port],
            env,
        )
        code = second.process.wait(timeout=120)
        second.output.ended.wait(timeout=10)
        assert code == 2
        assert f"is in use by engram serve pid {first.supervisor_pid()}" in second.output.text()
        stop_cleanly(first)
    finally:
        first.kill_everything()
