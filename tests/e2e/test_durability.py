"""Accepted writes survive a crash of the shard actor (Ray restarts it) and are processed exactly
once (W1, DESIGN 2). A crash of the whole service (kill -9; the next start reclaims what it left,
#26) is the last link of tests/e2e/test_stops.py's chain."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.recovery import accept_adds, assert_all_done_exactly_once
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
