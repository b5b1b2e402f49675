"""Grouped processing of async ``add_structured`` tasks (#11) on real stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.api import AddStructuredRequest
from engram.models.enums import TaskStatus
from engram.storage.stores import Stores

pytestmark = pytest.mark.integration


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service)
    yield path
    await path.close()


def structured(user_id: str, content: str, **fields: Any) -> AddStructuredRequest:
    return AddStructuredRequest(
        user_id=user_id, ownership="USER", mem_type="SEMANTIC", content=content, **fields
    )


async def test_many_users_tasks_share_groups_and_each_lands_once(
    write_path: WritePath, stores: Stores
) -> None:
    requests = [structured(f"g{i % 10}", f"Grouped fact {i}: shelf {i}") for i in range(60)]
    accepted = await asyncio.gather(*(write_path.accept_structured(r) for r in requests))
    await write_path.drain()
    views = [await write_path.task(a.task_id) for a in accepted]  # type: ignore[union-attr]
    assert all(v.status is TaskStatus.DONE for v in views)
    memory_ids = [v.decisions[0].memory_id for v in views]
    assert len(set(memory_ids)) == 60
    stats = write_path.structured.stats()
    assert stats["structured_tasks"] == 60 and stats["structured_groups"] < 60
    # Per-user order: a user's memories were created in the order their tasks were accepted.
    async with stores.metadata.transaction(readonly=True) as tx:
        for user in ("g0", "g3"):
            log = await tx.change_log(user, limit=100)
            added = [c.memory_id for c in reversed(log)]
            expected = [m for r, m in zip(requests, memory_ids, strict=True) if r.user_id == user]
            assert added == expected


async def test_a_refused_task_fails_alone_and_the_others_land(
    write_path: WritePath, settings: Any, stores: Stores
) -> None:
    settings.capacity.app_limit = 2
    settings.capacity.important_ratio = 1.0
    requests = [
        structured("cap", "Pinned one", app_id="a", is_important=True),
        structured("cap", "Pinned two", app_id="a", is_important=True),
        structured("cap", "No room left", app_id="a"),
        structured("other", "Unaffected fact"),
    ]
    accepted = await asyncio.gather(*(write_path.accept_structured(r) for r in requests))
    await write_path.drain()
    views = [await write_path.task(a.task_id) for a in accepted]  # type: ignore[union-attr]
    assert [v.status for v in views] == [TaskStatus.DONE, TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.DONE]
    assert views[2].error is not None and views[2].error.startswith("42901")
    async with stores.metadata.transaction(readonly=True) as tx:
        assert (await tx.counters("cap"))["app:a"] == 2


async def test_a_group_that_fails_is_retried_task_by_task(
    write_path: WritePath, monkeypatch: pytest.MonkeyPatch, stores: Stores
) -> None:
    service = write_path.service
    stage = service.stage_structured

    async def failing_for_poison(tx: Any, requests: list[AddStructuredRequest], *args: Any) -> Any:
        if any("poison" in r.content for r in requests):
            raise RuntimeError("the database went away for this row")  # not an EngramError: no verdict
        return await stage(tx, requests, *args)

    monkeypatch.setattr(service, "stage_structured", failing_for_poison)
    requests = [structured(f"r{i}", f"Fact {i}") for i in range(5)] + [structured("r9", "poison fact")]
    accepted = await asyncio.gather(*(write_path.accept_structured(r) for r in requests))
    await write_path.drain()
    views = [await write_path.task(a.task_id) for a in accepted]  # type: ignore[union-attr]
    assert [v.status for v in views[:5]] == [TaskStatus.DONE] * 5
    # The poisoned task is left unfinished for the next resume; nothing of it was written.
    assert views[5].status in (TaskStatus.PENDING, TaskStatus.RUNNING)
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await tx.change_log("r9", limit=10) == []
        for i in range(5):
            assert len(await tx.change_log(f"r{i}", limit=10)) == 1
