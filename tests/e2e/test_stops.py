"""Every way of stopping Engram leaves nothing behind, and the next start comes up (issue #26).

Each test starts the README's first command (``make run``) on a fresh data directory in a process
group of its own, as a terminal does, acknowledges writes, stops it one way, checks that within
30 s nothing of the run is alive and neither of its ports is held, then starts it again on the
same data and checks every acknowledged write is DONE exactly once.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from engram.loadtest.stops import STOPS, ServeRun
from engram.storage.processes import is_alive
from tests.e2e.recovery import assert_all_done_exactly_once
from tests.support.crash_facts import FACTS
from tests.support.net import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
START_LIMIT_S = 400  # a start on a loaded 2-core machine; a hang fails the test, not the run
GONE_WITHIN_S = 30  # the bar
USERS = [f"stop-{i}" for i in range(6)]


def _config(tmp_path: Path) -> tuple[Path, Path, list[int]]:
    data_dir = tmp_path / "data"
    ports = [free_port(), free_port()]
    config = tmp_path / "engram.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(data_dir)},
                "serve": {"port": ports[0]},
                "metrics": {"export_port": ports[1]},
                "limits": {"user_rate_per_s": 0},  # bursts of writes for one user
                "lifecycle": {"scheduler_enabled": False},
            }
        )
    )
    return config, data_dir, ports


def make_run(config: Path, data_dir: Path, ports: list[int]) -> ServeRun:
    """``make run`` with the test's venv, in a process group of its own."""
    env = dict(os.environ, ENGRAM_CONFIG=str(config), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    argv = ["make", "--no-print-directory", "-C", str(REPO), "run", f"VENV={sys.prefix}"]
    return ServeRun(argv, data_dir, ports, env)


def _accept_writes(url: str) -> list[tuple[str, str]]:
    async def accept_all() -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            bodies = [
                (u, {"user_id": u, "messages": [{"role": "user", "content": f}]})
                for u in USERS
                for f in FACTS
            ]
            answers = await asyncio.gather(*(http.post("/memory/v1/add", json=b) for _, b in bodies))
        refused = [a.json() for a in answers if a.status_code != 200 or a.json()["code"] != 0]
        assert not refused, f"{len(refused)} adds refused, first: {refused[0]}"
        return [(u, a.json()["data"]["task_id"]) for (u, _), a in zip(bodies, answers, strict=True)]

    return asyncio.run(accept_all())


def _unfinished(url: str, accepted: list[tuple[str, str]]) -> int:
    """How many of the users' last tasks are not DONE yet (a user's tasks run in order)."""
    last = dict(accepted)
    with httpx.Client(base_url=url, timeout=30) as http:
        states = [
            http.post("/memory/v1/task", json={"task_id": t}).json()["data"]["status"] for t in last.values()
        ]
    return sum(1 for s in states if s != "DONE")


def _start(config: Path, data_dir: Path, ports: list[int]) -> ServeRun:
    run = make_run(config, data_dir, ports)
    if not run.wait_listening(START_LIMIT_S):
        run.kill_everything()
        raise AssertionError("make run never listened:\n" + run.output.text()[-4000:])
    return run


def _stop_cleanly(run: ServeRun) -> None:
    run.snapshot()
    run.stop("sigterm-group")
    left = run.wait_gone(GONE_WITHIN_S)
    assert not left, f"{left}\n{run.output.text()[-3000:]}"


@pytest.mark.parametrize("how", list(STOPS))
def test_a_stop_leaves_nothing_and_the_next_start_finishes_every_write(how: str, tmp_path: Path) -> None:
    config, data_dir, ports = _config(tmp_path)
    first = _start(config, data_dir, ports)
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        accepted = _accept_writes(url)
        in_flight = _unfinished(url, accepted)
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

    second = _start(config, data_dir, ports)
    try:
        assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
        _stop_cleanly(second)
    finally:
        second.kill_everything()
    print(f"{how}: gone in {took:.1f} s; {in_flight} of {len(USERS)} users had writes in flight at the stop")


def test_a_start_after_both_processes_were_killed_ends_what_they_left(tmp_path: Path) -> None:
    """kill -9 of engram serve and of its server at once (the OOM killer, ``pkill -9``): nothing
    of the run can clean up; Ray's agents and HAProxy outlive them. The next start finds them by
    the run's record, ends them, says so, and finishes every acknowledged write."""
    config, data_dir, ports = _config(tmp_path)
    first = _start(config, data_dir, ports)
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        accepted = _accept_writes(url)
        assert first.record is not None
        record = first.record
        top = [p for p in first.snapshot() if p.pid in (record.supervisor_pid, record.server_pid)]
        assert len(top) == 2, top
        for pid in (record.supervisor_pid, record.server_pid):
            os.kill(pid, 9)
        deadline = time.monotonic() + 30
        while any(is_alive(p) for p in top) and time.monotonic() < deadline:
            time.sleep(0.1)  # the kernel ends a SIGKILLed process at once; bounded
        assert first.process.wait(timeout=30) != 0
        crashed_left = record.processes()
        assert crashed_left, "the crash left nothing behind: nothing for the start to reclaim"
    except BaseException:
        first.kill_everything()
        raise

    second = _start(config, data_dir, ports)
    try:
        output = second.output.text()
        assert f"reclaimed what run {record.run_id} left" in output, output[-3000:]
        assert not [p for p in crashed_left if is_alive(p)], "the start left the crashed run's processes"
        assert not record.processes()
        assert not any(Path(d).exists() for d in record.run_dirs)
        assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
        _stop_cleanly(second)
    finally:
        second.kill_everything()
        first.kill_everything()


def test_a_start_refuses_a_port_held_by_another_process_naming_it(tmp_path: Path) -> None:
    import socket

    config, data_dir, ports = _config(tmp_path)
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
    config, data_dir, ports = _config(tmp_path)
    first = _start(config, data_dir, ports)
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
        _stop_cleanly(first)
    finally:
        first.kill_everything()
