"""Accepted writes survive a crash of the shard actor and are processed exactly once (W1, DESIGN 2)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.e2e.conftest import RunningApp

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

    deadline = time.monotonic() + 120
    with httpx.Client(base_url=engram_app.url, timeout=60) as http:
        pending = {task_id for _, task_id in accepted}
        while pending and time.monotonic() < deadline:
            for task_id in list(pending):
                answer = http.post("/memory/v1/task", json={"task_id": task_id}).json()
                if answer["code"] == 0 and answer["data"]["status"] in ("DONE", "FAILED"):
                    assert answer["data"]["status"] == "DONE"
                    pending.discard(task_id)
            time.sleep(0.1)
        assert not pending, f"{len(pending)} accepted tasks never finished after the crash"
        for user in users:
            log = http.post("/memory/v1/change_log", json={"user_id": user, "limit": 500}).json()["data"]
            added = [c["content_after"] for c in log["changes"] if c["op_type"] == "ADD"]
            assert len(added) == len(set(added)) == 5, "each accepted fact is stored exactly once"
