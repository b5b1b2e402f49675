"""``batch_add_structured`` (#11) through the real HTTP app over real stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.settings import Settings
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.storage.stores import Stores
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration
V1 = "/memory/v1"


@pytest.fixture
async def app(
    service: MemoryService, settings: Settings
) -> AsyncIterator[tuple[httpx.AsyncClient, WritePath]]:
    write_path = WritePath(service)
    backend = LocalBackend(wire_core(service, write_path))
    http_app = build_http_app(lambda: backend, auth=lambda: AUTH_OFF)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=http_app), base_url="http://127.0.0.1"
    ) as http:
        yield http, write_path
    await write_path.close()


def item(content: str, **fields: Any) -> dict[str, Any]:
    return {"ownership": "USER", "mem_type": "SEMANTIC", "content": content, **fields}


async def post(http: httpx.AsyncClient, route: str, body: Any) -> dict[str, Any]:
    response = await http.post(f"{V1}/{route}", json=body)
    payload: dict[str, Any] = response.json()
    return payload


async def test_a_sync_batch_answers_every_items_memory_in_order(
    app: tuple[httpx.AsyncClient, WritePath],
) -> None:
    http, _ = app
    items = [item(f"Batch fact {i}: the meeting room is {i}B.") for i in range(5)]
    items.append(item("Batch fact 2: the meeting room is 2B."))  # the same content again
    answer = await post(http, "batch_add_structured", {"user_id": "b1", "items": items, "sync": True})
    assert answer["code"] == 0
    results = answer["data"]["items"]
    assert [r["index"] for r in results] == list(range(6))
    assert all(r["code"] == 0 and r["memory_id"] for r in results)
    assert results[5]["memory_id"] == results[2]["memory_id"]  # dedup holds inside a batch too
    assert len({r["memory_id"] for r in results}) == 5
    found = await post(http, "recall", {"user_id": "b1", "query": "which meeting room?", "top_k": 10})
    assert {m["memory_id"] for m in found["data"]["memories"]} >= {r["memory_id"] for r in results[:3]}


async def test_items_beyond_capacity_are_refused_alone(
    app: tuple[httpx.AsyncClient, WritePath], settings: Settings, stores: Stores
) -> None:
    http, _ = app
    settings.capacity.app_limit = 3
    settings.capacity.important_ratio = 1.0
    items = [item(f"Critical fact {i}", is_important=True) for i in range(4)] + [item("A plain fact")]
    answer = await post(
        http, "batch_add_structured", {"user_id": "b2", "app_id": "a", "items": items, "sync": True}
    )
    codes = [r["code"] for r in answer["data"]["items"]]
    # As if one by one: three fit, the fourth mark passes the important limit, then the dimension
    # is full of memories that may not be evicted.
    assert codes == [0, 0, 0, 42902, 42901]
    async with stores.metadata.transaction(readonly=True) as tx:
        counts = await tx.counters.read("b2")
    assert counts["app:a"] == 3  # nothing half-written by the refused items


async def test_an_async_batch_is_one_task_with_a_decision_per_item(
    app: tuple[httpx.AsyncClient, WritePath], settings: Settings
) -> None:
    http, write_path = app
    settings.capacity.app_limit = 2
    settings.capacity.important_ratio = 1.0
    items = [item(f"Pinned fact {i}", is_important=True) for i in range(2)] + [item("Plain fact")]
    accepted = await post(http, "batch_add_structured", {"user_id": "b3", "app_id": "a", "items": items})
    await write_path.drain()
    task = await post(http, "task", {"task_id": accepted["data"]["task_id"]})
    assert task["data"]["status"] == "DONE"
    decisions = task["data"]["decisions"]
    assert [d["op"] for d in decisions] == ["ADD", "ADD", "REFUSED"]
    assert decisions[2]["reason"].startswith("42901")


async def test_a_task_tells_when_it_was_accepted_and_when_it_ended(
    app: tuple[httpx.AsyncClient, WritePath],
) -> None:
    http, write_path = app
    gate = asyncio.Event()
    write_path.host.submit_nowait("b9", gate.wait)  # the task waits behind this on b9's mailbox
    accepted = await post(http, "batch_add_structured", {"user_id": "b9", "items": [item("A fact")]})
    pending = (await post(http, "task", {"task_id": accepted["data"]["task_id"]}))["data"]
    assert pending["status"] == "PENDING" and pending["accepted_at"] and pending["finished_at"] is None
    # While pending, the payload (the whole batch) is kept to replay it; a status poll leaves it out.
    async with write_path.service.metadata.transaction(readonly=True) as tx:
        polled = await tx.tasks.get(accepted["data"]["task_id"], with_payload=False)
        full = await tx.tasks.get(accepted["data"]["task_id"])
    assert polled is not None and full is not None
    assert polled.payload == {} and full.payload["items"][0]["content"] == "A fact"
    gate.set()
    await write_path.drain()
    done = (await post(http, "task", {"task_id": accepted["data"]["task_id"]}))["data"]
    assert done["status"] == "DONE"
    assert done["accepted_at"] == pending["accepted_at"]
    assert datetime.fromisoformat(done["finished_at"]) >= datetime.fromisoformat(done["accepted_at"])
    # A finished task keeps its decisions and no payload (P8): the content was only kept to replay it.
    async with write_path.service.metadata.transaction(readonly=True) as tx:
        polled = await tx.tasks.get(accepted["data"]["task_id"], with_payload=False)
        full = await tx.tasks.get(accepted["data"]["task_id"])
    assert polled is not None and full is not None
    assert polled.payload == {} and full.payload == {}
    assert polled.decisions == full.decisions and len(full.decisions) == 1


async def test_a_bad_item_is_a_bad_request_naming_it(app: tuple[httpx.AsyncClient, WritePath]) -> None:
    http, _ = app
    answer = await post(http, "batch_add_structured", {"user_id": "b4", "items": [item("fine"), item("   ")]})
    assert answer["code"] == 40001
    empty = await post(http, "batch_add_structured", {"user_id": "b4", "items": []})
    assert empty["code"] == 40001


@given(sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=2, max_size=5))
@hypothesis_settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
async def test_concurrent_batches_of_one_user_never_interleave(
    app: tuple[httpx.AsyncClient, WritePath], stores: Stores, sizes: list[int]
) -> None:
    http, write_path = app
    user = f"order-{abs(hash(tuple(sizes)))}-{len(sizes)}"
    bodies = [
        {"user_id": user, "items": [item(f"{user} batch {b} item {i}") for i in range(size)]}
        for b, size in enumerate(sizes)
    ]
    answers = await asyncio.gather(*(post(http, "batch_add_structured", body) for body in bodies))
    await write_path.drain()
    async with stores.metadata.transaction(readonly=True) as tx:
        page = await tx.changes.page(user, limit=500)
    change_of = {c.memory_id: c.change_id for c in page}
    for answer in answers:
        task = await post(http, "task", {"task_id": answer["data"]["task_id"]})
        ids = [d["memory_id"] for d in task["data"]["decisions"]]
        changes = [change_of[i] for i in ids]
        # A batch's items are stored in their order, one right after the other.
        assert changes == list(range(changes[0], changes[0] + len(changes)))
