"""Accepted writes survive a crash and are processed exactly once (W1, DESIGN 2): of the shard actor
(Ray restarts it), and of the whole service (kill -9; the next start reclaims what it left, #26)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from engram.storage.processes import is_alive
from tests.e2e.conftest import RunningApp
from tests.e2e.make_run import run_config, start, stop_cleanly
from tests.e2e.recovery import accept_adds, assert_all_done_exactly_once, unfinished_users
from tests.support.crash_facts import FACTS

pytestmark = pytest.mark.e2e


def test_killed_shard_loses_and_duplicates_nothing(engram_app: RunningApp) -> None:
    import ray

    from engram.models.rules.sharding import shard_name

    users = [f"crash-{i}" for i in range(6)]
    per_user = len(FACTS)  # a user's tasks run one at a time: the tail of the queue waits at the kill

    accepted = accept_adds(engram_app.url, users)
    assert len(accepted) == len(users) * per_user
    shard = ray.get_actor(shard_name(engram_app.settings.serve.app_name, 0), namespace="serve")
    assert ray.get(shard.write_stats.remote())["pending"] > 0, "nothing in flight to crash into"
    ray.kill(shard, no_restart=False)

    assert_all_done_exactly_once(engram_app.url, accepted, facts_per_user=per_user)
    # The crash landed mid-work: the restarted shard found some of these tasks unfinished.
    restarted = ray.get(shard.write_stats.remote())
    resumed = set(restarted["resumed_task_ids"])
    assert resumed & {task_id for _, task_id in accepted}, "the kill landed after every task had finished"
    # The restarted incarnation froze its start-up heap too (no ready() call follows a restart).
    assert restarted["frozen_objects"] > 0


def test_killed_shard_mid_group_loses_no_structured_write(engram_app: RunningApp) -> None:
    """add_structured tasks are processed in groups (#11): a kill inside a group loses nothing."""
    import ray

    from engram.models.rules.sharding import shard_name

    # Enough that processing (embedding, grouped writes) trails the acknowledgements at the kill.
    users = [f"crash-structured-{i}" for i in range(24)]

    async def accept_all() -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=engram_app.url, timeout=60) as http:
            bodies = [
                (u, {"user_id": u, "ownership": "USER", "mem_type": "SEMANTIC", "content": fact})
                for u in users
                for fact in FACTS
            ]
            answers = await asyncio.gather(
                *(http.post("/memory/v1/add_structured", json=b) for _, b in bodies)
            )
        refused = [a.json() for a in answers if a.status_code != 200 or a.json()["code"] != 0]
        assert not refused, f"{len(refused)} writes refused, first: {refused[0]}"
        return [(u, a.json()["data"]["task_id"]) for (u, _), a in zip(bodies, answers, strict=True)]

    accepted = asyncio.run(accept_all())
    shard = ray.get_actor(shard_name(engram_app.settings.serve.app_name, 0), namespace="serve")
    assert ray.get(shard.write_stats.remote())["pending"] > 0, "nothing in flight to crash into"
    ray.kill(shard, no_restart=False)

    assert_all_done_exactly_once(engram_app.url, accepted, facts_per_user=len(FACTS))
    resumed = set(ray.get(shard.write_stats.remote())["resumed_task_ids"])
    assert resumed & {task_id for _, task_id in accepted}, "the kill landed after every task had finished"


def test_killed_service_loses_nothing_and_its_restart_ends_what_the_crash_left(tmp_path: Path) -> None:
    """kill -9 of engram serve and of its server at once (the OOM killer, ``pkill -9``): nothing
    of the run can clean up; Ray's agents and HAProxy outlive them. The next start finds them by
    the run's record, ends them, says so, and finishes every acknowledged write."""
    config, data_dir, ports = run_config(tmp_path)
    first = start(config, data_dir, ports)
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        accepted = accept_adds(url, [f"kill9-{i}" for i in range(6)])
        assert unfinished_users(url, accepted) > 0, "nothing in flight to crash into"
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

    second = start(config, data_dir, ports)
    try:
        output = second.output.text()
        assert f"reclaimed what run {record.run_id} left" in output, output[-3000:]
        assert not [p for p in crashed_left if is_alive(p)], "the start left the crashed run's processes"
        assert not record.processes()
        assert not any(Path(d).exists() for d in record.run_dirs)
        assert_all_done_exactly_once(url, accepted, facts_per_user=len(FACTS))
        stop_cleanly(second)
    finally:
        second.kill_everything()
        first.kill_everything()
