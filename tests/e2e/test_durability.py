"""Accepted writes survive a crash of the shard actor and are processed exactly once (W1, DESIGN 2)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.recovery import assert_all_done_exactly_once

pytestmark = pytest.mark.e2e


def test_killed_shard_loses_and_duplicates_nothing(engram_app: RunningApp) -> None:
    import ray

    from serve.shard import shard_name

    users = [f"crash-{i}" for i in range(6)]

    async def accept_all() -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=engram_app.url, timeout=60) as http:
            bodies = [
                (
                    u,
                    {
                        "user_id": u,
                        "messages": [{"role": "user", "content": f"I collect stamps from country {n}."}],
                    },
                )
                for u in users
                for n in range(5)
            ]
            answers = await asyncio.gather(*(http.post("/memory/v1/add", json=b) for _, b in bodies))
        return [(u, a.json()["data"]["task_id"]) for (u, _), a in zip(bodies, answers, strict=True)]

    accepted = asyncio.run(accept_all())
    assert len(accepted) == 30
    shard = ray.get_actor(shard_name(engram_app.settings.serve.app_name, 0), namespace="serve")
    ray.kill(shard, no_restart=False)  # mid-flight: tasks are recorded, most not yet processed

    assert_all_done_exactly_once(engram_app.url, accepted, facts_per_user=5)
