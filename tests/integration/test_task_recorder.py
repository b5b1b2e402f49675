"""Group commit of accepted tasks (#11) on real SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from engram.actors.task_recorder import TaskRecorder
from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.ids import new_id
from engram.storage.schema import write_tasks
from engram.storage.stores import Stores

pytestmark = pytest.mark.integration

AT = datetime(2026, 11, 30, tzinfo=UTC)


def _task(user_id: str, task_id: str | None = None) -> WriteTask:
    return WriteTask(
        task_id=task_id or new_id(),
        user_id=user_id,
        kind="add",
        status=TaskStatus.PENDING,
        payload={"messages": []},
        created_at=AT,
        updated_at=AT,
    )


async def _count(stores: Stores, task_ids: list[str]) -> int:
    async with stores.metadata.engine.connect() as conn:
        query = select(func.count()).select_from(write_tasks).where(write_tasks.c.task_id.in_(task_ids))
        return int((await conn.execute(query)).scalar_one())


async def test_concurrent_accepts_share_commits_and_all_land(stores: Stores) -> None:
    recorder = TaskRecorder(stores.metadata.transaction)
    tasks = [_task(f"u{i % 7}") for i in range(60)]
    await asyncio.gather(*(recorder.record(t) for t in tasks))
    assert await _count(stores, [t.task_id for t in tasks]) == 60
    assert recorder.stats()["recorded"] == 60
    assert recorder.stats()["groups"] < 60, "every task got a commit of its own: no grouping"


async def test_a_failing_group_is_retried_alone_and_only_the_bad_task_fails(stores: Stores) -> None:
    recorder = TaskRecorder(stores.metadata.transaction)
    existing = _task("u1")
    await recorder.record(existing)
    good = [_task("u2"), _task("u3"), _task("u2")]
    duplicate = _task("u1", task_id=existing.task_id)  # violates the primary key
    results = await asyncio.gather(
        recorder.record(good[0]),
        recorder.record(duplicate),
        recorder.record(good[1]),
        recorder.record(good[2]),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None and results[3] is None
    assert isinstance(results[1], Exception)
    # The group's first commit rolled back as a whole; the good tasks landed once each on retry.
    assert await _count(stores, [t.task_id for t in good]) == 3
    assert await _count(stores, [existing.task_id]) == 1


async def test_callers_resume_in_arrival_order(stores: Stores) -> None:
    recorder = TaskRecorder(stores.metadata.transaction, max_group=4)
    resumed: list[int] = []

    async def accept(n: int) -> None:
        await recorder.record(_task("same-user"))
        resumed.append(n)

    await asyncio.gather(*(accept(n) for n in range(20)))
    assert resumed == list(range(20))
    assert recorder.stats()["groups"] >= 5  # max_group bounds a group


async def test_a_caller_that_goes_away_does_not_undo_the_others(stores: Stores) -> None:
    recorder = TaskRecorder(stores.metadata.transaction)
    kept, gone = _task("u1"), _task("u2")
    leaving = asyncio.create_task(recorder.record(gone))
    staying = asyncio.create_task(recorder.record(kept))
    await asyncio.sleep(0)
    leaving.cancel()
    await staying
    await recorder.idle()
    assert await _count(stores, [kept.task_id]) == 1
    # The cancelled caller was never acknowledged; its row may exist (it resumes at the next start).
    assert await _count(stores, [gone.task_id]) in (0, 1)


async def test_settled_waits_for_what_was_handed_in_so_far(stores: Stores) -> None:
    recorder = TaskRecorder(stores.metadata.transaction)
    await recorder.settled()  # nothing handed in: returns at once
    tasks = [_task(f"s{i}") for i in range(5)]
    pending = [asyncio.create_task(recorder.record(t)) for t in tasks]
    await asyncio.sleep(0)  # the records are queued
    await recorder.settled()
    assert await _count(stores, [t.task_id for t in tasks]) == 5
    await asyncio.gather(*pending)
