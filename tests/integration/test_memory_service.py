"""MemoryService over real stores: write, recall, update, delete, history, capacity, isolation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest

from engram.actors.memory_service import MemoryService
from engram.models.api import (
    AddRequest,
    BatchDeleteRequest,
    ChangeLogRequest,
    DeleteRequest,
    HistoryRequest,
    RecallRequest,
    UpdateRequest,
)
from engram.models.enums import Level, MemType, OpType, Ownership, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration


async def counters(stores: Stores, user_id: str = "u1") -> dict[str, int]:
    async with stores.metadata.transaction() as tx:
        return {k: v for k, v in (await tx.counters.read(user_id)).items() if v}


async def test_write_then_recall_finds_the_closest_english(service: MemoryService) -> None:
    taxi = await remember(service, "Prefers taking a taxi over the subway")
    await remember(service, "Is allergic to peanuts")
    await remember(service, "Works as a software engineer")
    await remember(service, "Lives in Hangzhou")
    response = await service.recall(RecallRequest(user_id="u1", query="call me a cab"))
    assert response.hit
    assert response.memories[0].memory_id == taxi
    top = response.memories[0]
    assert top.score == pytest.approx(0.7 * top.relevance + 0.3 * top.weight, abs=1e-5)
    assert all(m.relevance >= 0.3 for m in response.memories)


async def test_chinese_query_finds_the_taxi_preference(service: MemoryService) -> None:
    taxi = await remember(service, "出门习惯打车")
    await remember(service, "名字是张伟")
    await remember(service, "对花生过敏")
    await remember(service, "在杭州的一家互联网公司做软件工程师")
    await remember(service, "喜欢吃辣的川菜")
    assert (await recall_ids(service, "帮我叫个车"))[0] == taxi
    assert (await recall_ids(service, "帮我订一辆出租车"))[0] == taxi


async def test_recall_drops_irrelevant_and_reports_no_hit(service: MemoryService) -> None:
    await remember(service, "Is allergic to peanuts")
    response = await service.recall(RecallRequest(user_id="u1", query="quantum chromodynamics lecture"))
    assert response.hit is False and response.memories == []
    assert await recall_ids(service, "peanuts", user_id="someone-else") == []


async def test_recall_hit_counts_and_recovers_weight(
    service: MemoryService, stores: Stores, clock: ManualClock
) -> None:
    memory_id = await remember(service, "Prefers taking a taxi over the subway")
    clock.advance(days=30)
    decayed = 0.8 * np.exp(-np.log(8) / 90 * 30)
    [hit] = (await service.recall(RecallRequest(user_id="u1", query="taxi"))).memories
    assert hit.weight == pytest.approx(decayed, abs=1e-4)  # R3: lazy decay at recall
    await service.drain()
    async with stores.metadata.transaction() as tx:
        stored = await tx.memories.get("u1", memory_id)
    assert stored is not None
    assert stored.recall_count == 1 and stored.last_recalled_at == clock.now
    assert stored.weight == pytest.approx(decayed + 0.05, abs=1e-4)
    for _ in range(10):
        await service.recall(RecallRequest(user_id="u1", query="taxi"))
        await service.drain()
    async with stores.metadata.transaction() as tx:
        stored = await tx.memories.get("u1", memory_id)
    assert stored is not None and stored.weight == pytest.approx(0.8)  # capped at the type's initial


async def test_update_without_content_change_keeps_the_vector(
    service: MemoryService, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = await remember(service, "Likes cheese pizza")
    before = (await stores.vectors.get_vectors([memory_id]))[memory_id]
    embedded: list[Sequence[str]] = []
    original = stores.embedder.embed

    async def counting_embed(texts: Sequence[str]) -> np.ndarray:
        embedded.append(list(texts))
        return await original(texts)

    # The embedder is the session's shared one: monkeypatch restores it for every later test.
    monkeypatch.setattr(service.embedder, "embed", counting_embed)
    view = await service.update(
        UpdateRequest(user_id="u1", memory_id=memory_id, is_important=True, custom_tags=["food"])
    )
    assert view.is_important and view.custom_tags == ["food"] and view.weight == pytest.approx(0.9)
    assert embedded == []
    after = (await stores.vectors.get_vectors([memory_id]))[memory_id]
    assert np.array_equal(before, after)

    view = await service.update(UpdateRequest(user_id="u1", memory_id=memory_id, content="Hates pizza"))
    assert embedded == [["Hates pizza"]]
    assert view.content == "Hates pizza"
    changed = (await stores.vectors.get_vectors([memory_id]))[memory_id]
    assert not np.allclose(before, changed)
    assert (await recall_ids(service, "hates pizza"))[0] == memory_id
    assert await counters(stores) == {"global": 1, "total": 1, "important:global": 1, "important:total": 1}


async def test_delete_and_batch_delete_leave_recall_and_counters(
    service: MemoryService, stores: Stores
) -> None:
    ids = [await remember(service, f"Owns a pet number {i} named Rex{i}", app_id="app1") for i in range(4)]
    keep = await remember(service, "Owns a cat named Tom")
    assert await counters(stores) == {"app:app1": 4, "global": 1, "total": 5}
    await service.delete(DeleteRequest(user_id="u1", memory_id=ids[0]))
    assert ids[0] not in await recall_ids(service, "pet", scope={"app_id": "app1"}, min_relevance=0)
    result = await service.batch_delete(
        BatchDeleteRequest(user_id="u1", memory_ids=[ids[1], ids[2], ids[0], "f" * 32])
    )
    assert result.deleted == [ids[1], ids[2]] and result.not_found == [ids[0], "f" * 32]
    remaining = await recall_ids(service, "pet", scope={"app_id": "app1"}, min_relevance=0)
    assert set(remaining) == {ids[3], keep}
    assert await counters(stores) == {"app:app1": 1, "global": 1, "total": 2}
    assert await stores.vectors.count("u1") == 2
    with pytest.raises(EngramError) as err:
        await service.delete(DeleteRequest(user_id="u1", memory_id=ids[1]))
    assert err.value.code is ErrorCode.NOT_FOUND
    with pytest.raises(EngramError) as err:
        await service.delete(DeleteRequest(user_id="other", memory_id=keep))
    assert err.value.code is ErrorCode.NOT_FOUND


async def test_history_and_change_log_are_complete(service: MemoryService, clock: ManualClock) -> None:
    memory_id = await remember(service, "Lives in Beijing")
    clock.advance(hours=1)
    await service.update(UpdateRequest(user_id="u1", memory_id=memory_id, content="Lives in Hangzhou"))
    clock.advance(hours=1)
    await service.delete(DeleteRequest(user_id="u1", memory_id=memory_id))
    history = await service.history(HistoryRequest(user_id="u1", memory_id=memory_id))
    assert history.memory.status is Status.DELETED
    assert [(c.op_type, c.content_before, c.content_after) for c in history.changes] == [
        (OpType.ADD, None, "Lives in Beijing"),
        (OpType.UPDATE, "Lives in Beijing", "Lives in Hangzhou"),
        (OpType.DELETE, "Lives in Hangzhou", None),
    ]
    page = await service.change_log(ChangeLogRequest(user_id="u1", limit=2))
    assert [c.op_type for c in page.changes] == [OpType.DELETE, OpType.UPDATE]
    assert page.next_cursor is not None
    rest = await service.change_log(ChangeLogRequest(user_id="u1", cursor=page.next_cursor, limit=2))
    assert [c.op_type for c in rest.changes] == [OpType.ADD] and rest.next_cursor is None


async def test_duplicate_content_is_stored_once(service: MemoryService, stores: Stores) -> None:
    first = await remember(service, "Likes cheese pizza.")
    again = await remember(service, "  likes CHEESE pizza ")
    assert again == first
    assert await counters(stores) == {"global": 1, "total": 1}
    other_scope = await remember(service, "Likes cheese pizza.", app_id="app1")
    assert other_scope != first


async def test_capacity_evicts_the_lowest_weight_first_one_write_at_a_time(
    tmp_path: object, settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    settings.capacity.app_limit = 10
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    weak = [
        await remember(service, f"Watched film number {i}", app_id="a", mem_type=MemType.EPISODIC)
        for i in range(3)
    ]
    clock.advance(days=200)  # episodic memories at 0.60 decay below 0.10
    strong = [await remember(service, f"Speaks language number {i}", app_id="a") for i in range(7)]
    assert (await counters(stores))["app:a"] == 10
    newest = await remember(service, "Plays the violin", app_id="a")
    # Down to 90% (9), then the new one (10): one victim, a faded one (weight <= 0.10: deleted).
    assert (await counters(stores))["app:a"] == 10
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", [*weak, *strong, newest])
    victims = [i for i in weak if rows[i].status is Status.DELETED]
    assert len(victims) == 1
    assert {rows[i].status for i in [*strong, newest]} == {Status.ACTIVE}
    history = await service.history(HistoryRequest(user_id="u1", memory_id=victims[0]))
    assert history.changes[-1].op_type is OpType.DELETE and history.changes[-1].reason == "capacity eviction"
    await remember(service, "Plays the cello", app_id="a")
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", weak)
    assert sum(rows[i].status is Status.DELETED for i in weak) == 2  # the next write takes the next one


async def test_capacity_archives_victims_above_threshold(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    settings.capacity.global_limit = 5
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    ids = [await remember(service, f"Visited city number {i}") for i in range(5)]
    await remember(service, "Visited Lisbon")
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", ids)
    archived = [i for i in ids if rows[i].status is Status.ARCHIVED]
    assert len(archived) == 1  # floor(0.9 * 5) = 4 kept, then the new one
    assert archived[0] not in await recall_ids(service, "visited city", min_relevance=0, top_k=50)


async def test_full_dimension_of_important_memories_rejects(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    settings.capacity.app_limit = 3
    settings.capacity.important_ratio = 1.0
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    for i in range(3):
        await remember(service, f"Critical fact {i}", app_id="a", is_important=True)
    with pytest.raises(EngramError) as err:
        await remember(service, "One fact too many", app_id="a")
    assert err.value.code is ErrorCode.CAPACITY_FULL
    assert (await counters(stores))["app:a"] == 3


async def test_important_limit_has_its_own_code(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    settings.capacity.app_limit = 10  # 20% -> 2 important marks
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    for i in range(2):
        await remember(service, f"Important fact {i}", app_id="a", is_important=True)
    plain = await remember(service, "Plain fact", app_id="a")
    with pytest.raises(EngramError) as err:
        await remember(service, "Third important fact", app_id="a", is_important=True)
    assert err.value.code is ErrorCode.IMPORTANT_LIMIT_EXCEEDED
    with pytest.raises(EngramError) as err:
        await service.update(UpdateRequest(user_id="u1", memory_id=plain, is_important=True))
    assert err.value.code is ErrorCode.IMPORTANT_LIMIT_EXCEEDED


async def test_scope_isolation_levels_apps_sessions(service: MemoryService) -> None:
    glob = await remember(service, "Prefers window seats on flights")
    app_a = await remember(service, "Prefers window seats on trains", app_id="a")
    app_b = await remember(service, "Prefers window seats on buses", app_id="b")
    sess = await remember(
        service, "Prefers window seats in this chat", app_id="a", session_id="s1", level=Level.SESSION
    )
    other = await remember(service, "Prefers window seats everywhere", user_id="u2")
    everything = {glob, app_a, app_b, sess, other}

    async def seen(**scope: object) -> set[str]:
        return set(await recall_ids(service, "window seat", scope=scope, min_relevance=0, top_k=50))

    assert await seen() == {glob}
    assert await seen(app_id="a") == {glob, app_a}
    assert await seen(app_id="a", include_global=False) == {app_a}
    assert await seen(app_id="a", session_id="s1") == {glob, app_a, sess}
    assert await seen(app_id="b", session_id="s1") == {glob, app_b}
    assert other not in await seen(app_id="a", session_id="s1") and len(everything) == 5
    with pytest.raises(EngramError) as err:
        await seen(cross_app={"enabled": True})
    assert err.value.code is ErrorCode.CROSS_APP_NOT_ENABLED


async def test_filters_by_ownership_type_and_tags(service: MemoryService) -> None:
    user_fact = await remember(service, "Enjoys hiking in the mountains", custom_tags=["outdoor"])
    agent_fact = await remember(service, "I recommend mountain hikes to the user", ownership=Ownership.AGENT)
    episode = await remember(service, "Hiked Mount Tai last May", mem_type=MemType.EPISODIC)

    async def ids(**flt: object) -> set[str]:
        return set(await recall_ids(service, "mountain hiking", filter=flt, min_relevance=0))

    assert await ids(ownership=["AGENT"]) == {agent_fact}
    assert await ids(mem_type=["EPISODIC"]) == {episode}
    assert await ids(custom_tags=["outdoor"]) == {user_fact}


@pytest.mark.parametrize(
    "tag",
    ['a"b', "x' or '1'=='1", '"] or user_key != "', "a || b", "tag) or (1 == 1", "back\\slash", "%_*"],
)
async def test_filter_values_are_matched_literally(service: MemoryService, tag: str) -> None:
    tagged = await remember(service, "Keeps a diary every night", custom_tags=[tag])
    await remember(service, "Keeps a journal of dreams", custom_tags=["plain"])
    await remember(service, "Keeps a diary too", user_id="victim", custom_tags=[tag])
    assert await recall_ids(service, "diary", filter={"custom_tags": [tag]}, min_relevance=0) == [tagged]
    history = await service.history(HistoryRequest(user_id="u1", memory_id=tagged))
    assert history.memory.custom_tags == [tag]


async def test_expired_and_superseded_facts_are_not_current(
    service: MemoryService, stores: Stores, clock: ManualClock
) -> None:
    soon = await remember(service, "Is travelling to Tokyo", expire_at=clock.now + timedelta(days=2))
    assert await recall_ids(service, "travel to Tokyo") == [soon]
    clock.advance(days=3)
    assert await recall_ids(service, "travel to Tokyo") == []
    # Superseded: a newer value of the same attribute ends the old fact's validity.
    [old] = await service.process_add(_said("I live in Beijing.", "2023-03-01T00:00:00Z"))
    [new] = await service.process_add(_said("I moved to Hangzhou.", "2025-06-01T00:00:00Z"))
    assert new.op == "SUPERSEDE" and new.memory_id == old.memory_id
    current = await recall_ids(service, "where do I live", min_relevance=0)
    assert old.memory_id not in current
    successor = (await service.history(HistoryRequest(user_id="u1", memory_id=old.memory_id or ""))).memory
    assert successor.status is Status.SUPERSEDED and successor.superseded_by in current


def _said(text: str, when: str) -> AddRequest:
    return AddRequest(
        user_id="u1", messages=[{"role": "user", "content": text, "msg_id": "m0", "timestamp": when}]
    )


async def test_recall_times_out_with_its_code(service: MemoryService) -> None:
    class StalledEmbedder:
        model_name = service.embedder.model_name
        dim = service.embedder.dim

        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            await asyncio.Event().wait()  # a dependency that never answers
            raise AssertionError("unreachable")

    service.recaller._embedder = StalledEmbedder()
    with pytest.raises(EngramError) as err:
        await service.recall(RecallRequest(user_id="u1", query="anything", timeout_ms=50))
    assert err.value.code is ErrorCode.RECALL_TIMEOUT


async def test_ranking_weights_come_from_settings(service: MemoryService, settings: Settings) -> None:
    await remember(service, "Drinks green tea every morning")
    strong = await remember(service, "Drinks tea", is_important=True)
    settings.recall.relevance_weight, settings.recall.weight_weight = 0.0, 1.0
    assert (await recall_ids(service, "green tea in the morning", min_relevance=0))[0] == strong
