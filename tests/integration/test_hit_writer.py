"""Recall-hit bookkeeping of many users in grouped transactions (actors/hit_writer.py, R4, #11)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from engram.actors.hit_writer import HitTurn
from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.api import AddStructuredRequest, MemoryCreated
from engram.models.enums import MemType, Ownership
from engram.storage.stores import Stores
from tests.conftest import ManualClock

pytestmark = pytest.mark.integration

USERS = [f"hit-u{i}" for i in range(12)]


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service, MailboxHost(reap_every_s=0))
    yield path
    await path.close()


async def _memories(write_path: WritePath, user_id: str, count: int) -> list[str]:
    ids = []
    for n in range(count):
        created = await write_path.accept_structured(
            AddStructuredRequest(
                user_id=user_id,
                ownership=Ownership.USER,
                mem_type=MemType.SEMANTIC,
                content=f"{user_id} keeps locker {n} on floor {n + 2}.",
                sync=True,
            )
        )
        assert isinstance(created, MemoryCreated)
        ids.append(created.memory_id)
    return ids


async def _recall_counts(stores: Stores, user_id: str, ids: Sequence[str]) -> list[int]:
    async with stores.metadata.transaction(readonly=True) as tx:
        found = await tx.memories.get_many(user_id, ids)
    return [found[i].recall_count for i in ids]


async def test_many_users_hits_share_transactions_and_each_counts_as_alone(
    write_path: WritePath, stores: Stores, clock: ManualClock
) -> None:
    ids = {user: await _memories(write_path, user, 2) for user in USERS}
    before = write_path.hits.stats()
    # As a recall replica's hit message arrives: every user's hits queued at once, each on its mailbox.
    for user in USERS:
        write_path.record_recall_hits(user, ids[user], clock.now)
    # A user's second recall waits for their first (per-user order): it counts on top of it.
    write_path.record_recall_hits(USERS[0], ids[USERS[0]][:1], clock.now)
    await write_path.drain()
    after = write_path.hits.stats()
    turns, groups = after["hit_turns"] - before["hit_turns"], after["hit_groups"] - before["hit_groups"]
    assert turns == len(USERS) + 1
    assert groups < turns  # turns handed in while one was written went in together
    assert await _recall_counts(stores, USERS[0], ids[USERS[0]]) == [2, 1]
    for user in USERS[1:]:
        assert await _recall_counts(stores, user, ids[user]) == [1, 1]


async def test_a_failing_group_is_retried_one_user_at_a_time(
    write_path: WritePath, stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = {user: await _memories(write_path, user, 1) for user in USERS[:4]}
    bad = USERS[2]
    service = write_path.service
    stage = service._stage_recall_hits
    written: list[list[str]] = []

    async def failing_for_bad(tx: object, turn: HitTurn) -> dict[str, tuple[float, int]]:
        if turn.user_id == bad:
            raise RuntimeError("this user's row cannot be written")
        return await stage(tx, turn)  # type: ignore[arg-type]

    async def recording(turns: Sequence[HitTurn]) -> None:
        written.append([turn.user_id for turn in turns])
        await MemoryService.record_recall_hit_turns(service, turns)

    monkeypatch.setattr(service, "_stage_recall_hits", failing_for_bad)
    monkeypatch.setattr(write_path.hits, "_write_group", recording)
    results = await asyncio.gather(
        *(write_path.hits.record(user, ids[user], clock.now) for user in USERS[:4]), return_exceptions=True
    )
    failures = [user for user, result in zip(USERS[:4], results, strict=True) if result is not None]
    assert failures == [bad]
    assert isinstance(results[2], RuntimeError)
    # One group that failed whole (nothing of it stayed), then each turn alone.
    assert any(len(group) > 1 and bad in group for group in written)
    assert [bad] in written
    for user in USERS[:4]:
        assert await _recall_counts(stores, user, ids[user]) == [0 if user == bad else 1]
