"""Extraction and evolution through MemoryService.process_add on real stores (issue #3 acceptance)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, Decision, HistoryRequest, RecallRequest
from engram.models.enums import OpType, Ownership, Status
from engram.storage.stores import Stores

pytestmark = pytest.mark.integration


def conversation(*turns: tuple[str, str], when: str | None = None, **fields: object) -> AddRequest:
    messages = [
        {"role": role, "content": text, "msg_id": f"m{i}", **({"timestamp": when} if when else {})}
        for i, (role, text) in enumerate(turns)
    ]
    return AddRequest(user_id="u1", messages=messages, **fields)


async def ingest(service: MemoryService, *turns: tuple[str, str], **fields: object) -> list[Decision]:
    return await service.process_add(conversation(*turns, **fields))


async def active(service: MemoryService, stores: Stores, user_id: str = "u1") -> dict[str, str]:
    snapshot = await service.recaller.snapshots.get(user_id)
    return {m.memory_id: m.content or "" for m in snapshot.memories if m.status is Status.ACTIVE}


async def test_few_shot_cases_of_the_seed(service: MemoryService, stores: Stores) -> None:
    assert await ingest(service, ("user", "Hi.")) == []
    assert await ingest(service, ("user", "There are branches in trees.")) == []
    decisions = await ingest(service, ("user", "Hi, my name is John. I am a software engineer."))
    assert [d.op for d in decisions] == ["ADD", "ADD"]
    assert sorted(d.content or "" for d in decisions) == ["Is a software engineer", "Name is John"]
    assert sorted((await active(service, stores)).values()) == ["Is a software engineer", "Name is John"]
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", [d.memory_id or "" for d in decisions])
    assert {m.source_msg_id for m in rows.values()} == {"m0"}
    assert {m.ownership for m in rows.values()} == {Ownership.USER}


async def test_chinese_conversation_yields_chinese_facts(service: MemoryService) -> None:
    decisions = await ingest(service, ("user", "你好！我叫李雷，我住在杭州，下周要去上海出差。"))
    texts = [d.content or "" for d in decisions]
    assert texts and all(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts)
    assert any("李雷" in t for t in texts) and any("杭州" in t for t in texts)


async def test_system_messages_contribute_nothing(service: MemoryService) -> None:
    decisions = await ingest(
        service, ("system", "My name is Root and I live in the server room."), ("user", "Thanks!")
    )
    assert decisions == []


async def test_assistant_statements_become_agent_memories_only(
    service: MemoryService, stores: Stores
) -> None:
    decisions = await ingest(
        service,
        ("user", "I am allergic to peanuts."),
        ("assistant", "I will remind you to avoid peanuts when you order food."),
    )
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", [d.memory_id or "" for d in decisions if d.op == "ADD"])
    by_owner = {m.ownership: (m.content, m.source_msg_id) for m in rows.values()}
    assert set(by_owner) == {Ownership.USER, Ownership.AGENT}
    assert "peanut" in (by_owner[Ownership.USER][0] or "").lower() and by_owner[Ownership.USER][1] == "m0"
    assert by_owner[Ownership.AGENT][1] == "m1"
    user_only = await service.process_add(
        conversation(("user", "I love jazz."), ("assistant", "I'll play jazz for you."), ownership="USER")
    )
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", [d.memory_id or "" for d in user_only])
    assert {m.ownership for m in rows.values()} == {Ownership.USER}


async def test_same_meaning_is_none(service: MemoryService, stores: Stores) -> None:
    [first] = await ingest(service, ("user", "I like cheese pizza."))
    [second] = await ingest(service, ("user", "I love cheese pizza."))
    assert (first.op, second.op) == ("ADD", "NONE")
    assert second.memory_id == first.memory_id
    assert list((await active(service, stores)).values()) == [first.content]
    history = await service.history(HistoryRequest(user_id="u1", memory_id=first.memory_id or ""))
    assert [c.op_type for c in history.changes] == [OpType.ADD, OpType.NONE]


async def test_new_variety_updates_the_same_memory(service: MemoryService, stores: Stores) -> None:
    [first] = await ingest(service, ("user", "I like cheese pizza."))
    assert first.memory_id is not None
    before = (await stores.vectors.get_vectors([first.memory_id]))[first.memory_id]
    [second] = await ingest(service, ("user", "I like chicken pizza."))
    assert second.op == "UPDATE" and second.memory_id == first.memory_id
    memories = await active(service, stores)
    assert list(memories) == [first.memory_id]
    merged = memories[first.memory_id].lower()
    assert "cheese" in merged and "chicken" in merged
    after = (await stores.vectors.get_vectors([first.memory_id]))[first.memory_id]
    assert not np.allclose(before, after)  # re-embedded


async def test_contradiction_supersedes_and_keeps_history(service: MemoryService) -> None:
    [old] = await service.process_add(
        conversation(("user", "I live in Beijing."), when="2023-03-01T00:00:00Z")
    )
    [new] = await service.process_add(
        conversation(("user", "I moved to Hangzhou."), when="2025-06-01T00:00:00Z")
    )
    assert new.op == "SUPERSEDE" and new.memory_id == old.memory_id

    async def where(**fields: object) -> list[str]:
        response = await service.recall(
            RecallRequest(user_id="u1", query="where do I live", min_relevance=0, **fields)
        )
        return [m.content for m in response.memories]

    now_answer = await where()
    assert any("Hangzhou" in c for c in now_answer) and not any("Beijing" in c for c in now_answer)
    then_answer = await where(as_of=datetime(2024, 1, 1, tzinfo=UTC))
    assert any("Beijing" in c for c in then_answer) and not any("Hangzhou" in c for c in then_answer)
    history = await service.history(HistoryRequest(user_id="u1", memory_id=old.memory_id or ""))
    assert history.memory.status is Status.SUPERSEDED
    assert history.memory.invalid_at == datetime(2025, 6, 1, tzinfo=UTC)
    assert history.memory.superseded_by is not None
    assert [c.op_type for c in history.changes] == [OpType.ADD, OpType.SUPERSEDE]
    assert "Hangzhou" in (history.changes[-1].content_after or "")
    successor = await service.history(HistoryRequest(user_id="u1", memory_id=history.memory.superseded_by))
    assert successor.memory.status is Status.ACTIVE and "Hangzhou" in (successor.memory.content or "")


async def test_late_older_fact_is_stored_as_history(service: MemoryService) -> None:
    await service.process_add(conversation(("user", "I moved to Hangzhou."), when="2025-06-01T00:00:00Z"))
    [late] = await service.process_add(
        conversation(("user", "I live in Beijing."), when="2023-03-01T00:00:00Z")
    )
    assert late.op == "SUPERSEDE"
    history = await service.history(HistoryRequest(user_id="u1", memory_id=late.memory_id or ""))
    assert history.memory.status is Status.SUPERSEDED
    assert history.memory.invalid_at == datetime(2025, 6, 1, tzinfo=UTC)


async def test_duplicates_within_one_batch(service: MemoryService, stores: Stores) -> None:
    decisions = await ingest(service, ("user", "I like green tea."), ("user", "I like green tea!"))
    assert sorted(d.op for d in decisions) in (["ADD"], ["ADD", "NONE"])
    assert len(await active(service, stores)) == 1


async def test_append_mode_adds_with_dedup_only(service: MemoryService, stores: Stores) -> None:
    await ingest(service, ("user", "I like cheese pizza."), strategy={"evolution": "append"})
    decisions = await ingest(
        service, ("user", "I like chicken pizza. I like cheese pizza."), strategy={"evolution": "append"}
    )
    assert len(await active(service, stores)) >= 1
    assert "NONE" in [d.op for d in decisions]


async def test_entities_are_tags_usable_as_filters(service: MemoryService) -> None:
    await ingest(service, ("user", "I moved to Hangzhou last year. My sister Alice lives in Paris."))
    found = await service.recall(
        RecallRequest(user_id="u1", query="family", min_relevance=0, filter={"entities": ["paris"]})
    )
    assert found.memories and all("Paris" in m.entities for m in found.memories)
