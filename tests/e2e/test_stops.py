"""Every way of stopping Engram leaves nothing behind, and the next start comes up (issue #26).

One data directory, fresh at the first start, goes through every stop in turn: the README's first
command (``make run``) in a process group of its own, as a terminal starts it, acknowledges writes,
is stopped one way, and within 30 s nothing of the run may be alive and neither of its ports held;
the next start on the same data must come up and finish every write acknowledged before the stop,
each exactly once, and is then the run the next way stops. A chain rather than a fresh directory
per stop: each start after the first also recovers what the stop before it left (five stops, six
starts, instead of ten starts; the suite's time is bounded, .ci/run). The last link is a crash that
nothing can clean up after (kill -9 of engram serve and its server at once), which the next start
must reclaim: seven starts in all.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from engram.loadtest.stops import STOPS, ServeRun
from engram.storage.processes import is_alive
from tests.e2e.make_run import GONE_WITHIN_S, make_run, run_config, start, stop_cleanly
from tests.e2e.recovery import accept_adds, assert_all_done_exactly_once, unfinished_users
from tests.support.crash_facts import FACTS
from tests.support.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.own_service]

USERS_PER_STOP = 6


def test_every_stop_leaves_nothing_and_the_next_start_finishes_every_write(tmp_path: Path) -> None:
    config, data_dir, ports = run_config(tmp_path)
    url = f"http://127.0.0.1:{ports[0]}"
    run = start(config, data_dir, ports)
    crashed: ServeRun | None = None
    report = []
    try:
        _assert_a_second_start_is_refused(run, config, data_dir)
        for how in STOPS:
            accepted = accept_adds(url, [f"{how}-{i}" for i in range(USERS_PER_STOP)])
            in_flight = unfinished_users(url, accepted)
            assert in_flight > 0, f"{how}: every write finished before the stop; it would prove nothing"
            run.snapshot()
            run.stop(how)
            stopped_at = time.monotonic()
            left = run.wait_gone(GONE_WITHIN_S)
            took = time.monotonic() - stopped_at
            output = run.output.text()
            assert not left, f"after {how}, left after {took:.0f} s: {left}\n{output[-3000:]}"
            # Ray's processes were never signalled under a running driver: no fatal trace, no abort.
            assert "Aborted" not in output and "logging.cc" not in output, f"{how}: {output[-3000:]}"
            if how != "sigkill-serve":  # killed, the supervisor cannot say anything
                assert "stopping Engram" in output, f"{how}: {output[-3000:]}"
            assert run.record is not None
            assert not any(Path(d).exists() for d in run.record.run_dirs), (
                f"{how}: the HTTP front's directory is left"
            )
            run.kill_everything()

            run = start(config, data_dir, ports)
            assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
            report.append(
                f"{how}: gone in {took:.1f} s, {in_flight} of {USERS_PER_STOP} users had writes in flight"
            )
        crashed = run
        run = _crash_and_reclaim(crashed, config, data_dir, ports)
        stop_cleanly(run)
    finally:
        run.kill_everything()
        if crashed is not None:
            crashed.kill_everything()
    print("; ".join(report))


def _crash_and_reclaim(run: ServeRun, config: Path, data_dir: Path, ports: list[int]) -> ServeRun:
    """kill -9 of engram serve and of its server at once (the OOM killer, ``pkill -9``): nothing of
    the run can clean up; Ray's agents and HAProxy outlive them. The next start (returned) finds them
    by the run's record, ends them, says so, and finishes every acknowledged write."""
    url = f"http://127.0.0.1:{ports[0]}"
    accepted = accept_adds(url, [f"kill9-{i}" for i in range(USERS_PER_STOP)])
    assert unfinished_users(url, accepted) > 0, "nothing in flight to crash into"
    assert run.record is not None
    record = run.record
    top = [p for p in run.snapshot() if p.pid in (record.supervisor_pid, record.server_pid)]
    assert len(top) == 2, top
    for pid in (record.supervisor_pid, record.server_pid):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(is_alive(p) for p in top) and time.monotonic() < deadline:
        time.sleep(0.1)  # the kernel ends a SIGKILLed process at once; bounded
    assert run.process.wait(timeout=30) != 0
    crashed_left = record.processes()
    assert crashed_left, "the crash left nothing behind: nothing for the start to reclaim"

    second = start(config, data_dir, ports)
    try:
        output = second.output.text()
        assert f"reclaimed what run {record.run_id} left" in output, output[-3000:]
        assert not [p for p in crashed_left if is_alive(p)], "the start left the crashed run's processes"
        assert not record.processes()
        assert not any(Path(d).exists() for d in record.run_dirs)
        assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
    except BaseException:
        second.kill_everything()  # the caller holds only the crashed run
        raise
    return second


def _assert_a_second_start_is_refused(first: ServeRun, config: Path, data_dir: Path) -> None:
    """A second ``engram serve`` on a data directory in use exits 2 and names the one using it."""
    other_port = free_port()
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    second = ServeRun(
        [sys.executable, "-m", "engram.serve.cli", "serve", "--port", str(other_port)],
        data_dir,
        [other_port],
        env,
    )
    try:
        code = second.process.wait(timeout=120)
        second.output.ended.wait(timeout=10)
    finally:
        second.kill_everything()
    assert code == 2, second.output.text()
    assert f"is in use by engram serve pid {first.supervisor_pid()}" in second.output.text()


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
