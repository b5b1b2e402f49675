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
            log = await tx.changes.page(user, limit=100)
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
        assert (await tx.counters.read("cap"))["app:a"] == 2


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
        assert await tx.changes.page("r9", limit=10) == []
        for i in range(5):
            assert len(await tx.changes.page(f"r{i}", limit=10)) == 1


def _always_pressed(write_path: WritePath, monkeypatch: pytest.MonkeyPatch) -> None:
    """As if acknowledgements were always waiting: every user of a group commits on its own."""
    monkeypatch.setattr(write_path.structured, "_pressure", lambda: True)
    monkeypatch.setattr(write_path.structured, "stage_budget_s", 0.0)


async def test_with_acknowledgements_waiting_a_group_commits_in_parts(
    write_path: WritePath, monkeypatch: pytest.MonkeyPatch, stores: Stores
) -> None:
    _always_pressed(write_path, monkeypatch)
    requests = [structured(f"p{i % 6}", f"Part fact {i}: crate {i}") for i in range(30)]
    accepted = await asyncio.gather(*(write_path.accept_structured(r) for r in requests))
    await write_path.drain()
    views = [await write_path.task(a.task_id) for a in accepted]  # type: ignore[union-attr]
    assert all(v.status is TaskStatus.DONE for v in views)
    stats = write_path.structured.stats()
    # Fewer groups than tasks (one embedding call each), more transactions than groups.
    assert stats["structured_groups"] < 30 and stats["structured_commits"] > stats["structured_groups"]
    memory_ids = [v.decisions[0].memory_id for v in views]
    assert len(set(memory_ids)) == 30
    # Each part's vectors were written after its commit.
    assert set(await stores.vectors.get_vectors(memory_ids)) == set(memory_ids)


async def test_a_later_part_that_fails_keeps_the_parts_before_it_and_retries_the_rest(
    write_path: WritePath, monkeypatch: pytest.MonkeyPatch, stores: Stores
) -> None:
    _always_pressed(write_path, monkeypatch)
    service = write_path.service
    stage = service.stage_structured

    async def failing_for_poison(tx: Any, requests: list[AddStructuredRequest], *args: Any) -> Any:
        if any("poison" in r.content for r in requests):
            raise RuntimeError("the database went away for this row")
        return await stage(tx, requests, *args)

    monkeypatch.setattr(service, "stage_structured", failing_for_poison)
    # The poisoned user comes third: in a group of all five, two parts commit before it fails.
    requests = [structured("q0", "Fact zero"), structured("q1", "Fact one"), structured("q2", "poison")]
    requests += [structured("q3", "Fact three"), structured("q4", "Fact four")]
    accepted = await asyncio.gather(*(write_path.accept_structured(r) for r in requests))
    await write_path.drain()
    views = [await write_path.task(a.task_id) for a in accepted]  # type: ignore[union-attr]
    assert [v.status for v in views[:2]] == [TaskStatus.DONE] * 2
    assert views[2].status in (TaskStatus.PENDING, TaskStatus.RUNNING)  # left for the next resume
    assert [v.status for v in views[3:]] == [TaskStatus.DONE] * 2
    done_ids = [v.decisions[0].memory_id for v in views if v.status is TaskStatus.DONE]
    # Every committed memory has its vector, those of the parts before the failure included.
    assert set(await stores.vectors.get_vectors(done_ids)) == set(done_ids)
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await tx.changes.page("q2", limit=10) == []
        for user in ("q0", "q1", "q3", "q4"):
            assert len(await tx.changes.page(user, limit=10)) == 1  # exactly once, not again on the retry
