"""The extraction deployment: requests are batched, and a replica killed mid-flight loses nothing."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.recovery import assert_all_done_exactly_once
from tests.support.crash_facts import FACTS

pytestmark = pytest.mark.e2e


def _extraction_handle(app: RunningApp):  # type: ignore[no-untyped-def]
    from ray import serve

    from engram.serve.extraction import DEPLOYMENT_NAME

    return serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=app.settings.serve.app_name)


def _drain_shards(app: RunningApp) -> None:
    """Wait until no shard has queued writes: earlier tests' tasks would call extraction too."""
    import ray

    from engram.models.rules.sharding import shard_name

    for index in range(app.settings.serve.shard_count):
        shard = ray.get_actor(shard_name(app.settings.serve.app_name, index), namespace="serve")
        ray.get(shard.drain.remote())


def test_concurrent_requests_are_answered_in_batches(engram_app: RunningApp) -> None:
    from engram.actors.engine_outputs import EXTRACT_TASK, ExtractionOutput
    from engram.actors.engines.base import ChatMessage, StructuredRequest

    _drain_shards(engram_app)
    handle = _extraction_handle(engram_app)
    before = handle.batch_sizes.remote().result()
    texts = [f"I play chess on Tuesdays with friend {n}." for n in range(64)]
    requests = [
        StructuredRequest(
            task=EXTRACT_TASK,
            messages=(ChatMessage("user", text),),
            output=ExtractionOutput,
            payload={
                "messages": [{"role": "user", "content": text, "msg_id": None}],
                "ownership": "USER",
                "today": "2026-11-29",
            },
        )
        for text in texts
    ]
    responses = [handle.generate.remote(r) for r in requests]
    results = [r.result() for r in responses]
    assert all(isinstance(r, ExtractionOutput) and r.facts for r in results)
    after = handle.batch_sizes.remote().result()
    new_batches = {size: after.get(size, 0) - before.get(size, 0) for size in after}
    assert sum(size * count for size, count in new_batches.items()) == 64
    assert max(size for size, count in new_batches.items() if count) > 1, "requests were never batched"
    assert max(after) <= engram_app.settings.engine.batch_max_size


def _kill_extraction_replica() -> str:
    import ray

    names = [
        a
        for a in ray.util.list_named_actors(all_namespaces=True)
        if "Extraction" in a["name"] and "REPLICA" in a["name"]
    ]
    assert names, "no extraction replica found"
    actor = ray.get_actor(names[0]["name"], namespace=names[0]["namespace"])
    ray.kill(actor, no_restart=True)
    return str(names[0]["name"])


def test_killed_extraction_replica_loses_and_duplicates_nothing(engram_app: RunningApp) -> None:
    users = [f"extract-crash-{i}" for i in range(6)]

    async def accept(numbers: range) -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=engram_app.url, timeout=60) as http:
            bodies = [
                (u, {"user_id": u, "messages": [{"role": "user", "content": FACTS[n]}]})
                for u in users
                for n in numbers
            ]
            answers = await asyncio.gather(*(http.post("/memory/v1/add", json=b) for _, b in bodies))
        return [(u, a.json()["data"]["task_id"]) for (u, _), a in zip(bodies, answers, strict=True)]

    import ray

    from engram.models.rules.sharding import shard_name

    shard = ray.get_actor(shard_name(engram_app.settings.serve.app_name, 0), namespace="serve")
    accepted = asyncio.run(accept(range(12)))
    # Mid-flight: a user's tasks run one at a time, so the tail of each queue still needs extraction.
    assert ray.get(shard.write_stats.remote())["pending"] > 0, "nothing in flight to crash into"
    killed = _kill_extraction_replica()
    # Accepted while no replica is serving: their extraction must wait for the restarted one.
    accepted += asyncio.run(accept(range(12, 15)))
    assert len(accepted) == 90

    assert_all_done_exactly_once(engram_app.url, accepted, facts_per_user=15)
    # The restarted replica (another actor) answered the requests that were waiting.
    after = _extraction_handle(engram_app).batch_sizes.remote().result()
    assert sum(size * count for size, count in after.items()) > 0
    assert killed not in {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
