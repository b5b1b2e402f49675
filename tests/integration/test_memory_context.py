"""A memory's context, the message it answered (#31): its words find the memory, it is never said
back as content, it is sealed at rest, screened like content, wiped by a forget, and the extraction
path gives each fact the message before its own. Real SQLite / PostgreSQL, milvus-lite, CPU embedder."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, RecallRequest, UpdateRequest
from engram.models.api_explain import Signal
from engram.models.settings import Settings
from engram.storage.privacy_queries import mark_purged
from engram.storage.schema import memories
from engram.storage.stores import Stores, open_stores
from tests.support.service import remember

pytestmark = pytest.mark.integration

QUESTION = "Where did you go camping last summer?"
ANSWER = "I went to Woodhaven with the kids."


async def _lexical_values(service: MemoryService, query: str) -> dict[str, float | None]:
    response = await service.recall(RecallRequest(user_id="u1", query=query, explain=True, min_relevance=0))
    assert response.explanation is not None
    explained = response.explanation.results + response.explanation.left_out
    return {e.memory_id: next(s.value for s in e.signals if s.signal is Signal.LEXICAL) for e in explained}


async def test_the_context_words_find_the_memory_and_are_never_said_back(service: MemoryService) -> None:
    answered = await remember(service, ANSWER, context=QUESTION)
    bare = await remember(service, "I went to Lisbon with my sister.")
    lexical = await _lexical_values(service, "camping last summer")
    # Only the context holds the query's words: without it both memories would read 0 here.
    assert (lexical[answered] or 0) > 0.5 and not lexical[bare]
    found = await service.recall(RecallRequest(user_id="u1", query="camping last summer", min_relevance=0))
    assert found.memories[0].memory_id == answered
    assert found.memories[0].content == ANSWER
    assert QUESTION not in found.model_dump_json()


async def test_the_context_survives_an_update_and_goes_with_a_purge(
    service: MemoryService, stores: Stores
) -> None:
    answered = await remember(service, ANSWER, context=QUESTION, custom_tags=["trips"])
    await service.update(UpdateRequest(user_id="u1", memory_id=answered, content="I went to Woodhaven."))
    async with stores.metadata.transaction() as tx:
        stored = await tx.memories.get("u1", answered)
    assert stored is not None and (stored.content, stored.context) == ("I went to Woodhaven.", QUESTION)
    async with stores.metadata.transaction() as tx:
        await mark_purged(tx, "u1", [answered], datetime.now(UTC), "purge")
    async with stores.metadata.engine.connect() as conn:
        left = (await conn.execute(select(memories.c.context, memories.c.content))).all()
    assert [tuple(r) for r in left] == [(None, b"")]


async def test_a_secret_in_the_context_is_redacted(service: MemoryService, stores: Stores) -> None:
    card = "4111 1111 1111 1111"
    answered = await remember(service, "Sent it an hour ago.", context=f"Did you pay with card {card}?")
    async with stores.metadata.transaction() as tx:
        stored = await tx.memories.get("u1", answered)
    assert stored is not None and stored.context is not None and "pay with card" in stored.context
    assert "4111" not in stored.context


async def test_an_extracted_fact_keeps_the_message_before(service: MemoryService, stores: Stores) -> None:
    request = AddRequest.model_validate(
        {
            "user_id": "u1",
            "messages": [
                {"role": "system", "content": "You are a travel agent."},
                {"role": "assistant", "content": "Which city do you fly to for the marathon?"},
                {"role": "user", "content": "I am flying to Rotterdam in April."},
            ],
        }
    )
    decisions = await service.process_add(request)
    ids = [d.memory_id for d in decisions if d.op == "ADD" and d.memory_id]
    assert ids
    async with stores.metadata.transaction() as tx:
        stored = await tx.memories.get_many("u1", ids)
    assert {m.context for m in stored.values()} == {"Which city do you fly to for the marathon?"}
    lexical = await _lexical_values(service, "marathon")
    assert all((lexical[i] or 0) > 0 for i in ids)
    # A system prompt is no turn of the conversation: a first message has no context.
    alone = AddRequest.model_validate(
        {
            "user_id": "u1",
            "messages": [
                {"role": "system", "content": "You are a travel agent."},
                {"role": "user", "content": "I collect stamps from Peru."},
            ],
        }
    )
    firsts = [d.memory_id for d in await service.process_add(alone) if d.op == "ADD" and d.memory_id]
    async with stores.metadata.transaction() as tx:
        assert firsts and all(m.context is None for m in (await tx.memories.get_many("u1", firsts)).values())


async def test_the_context_is_sealed_on_disk(tmp_path: Path) -> None:
    """Sealed like content, in its own column (read by the cold path without opening labels)."""
    settings = Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})
    stores = await open_stores(settings)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        await remember(service, ANSWER, context="Quixadaburg or Woodhaven for the trip?")
    finally:
        await stores.close()
    base = settings.storage.data_dir / "engram.db"
    raw = b"".join(p.read_bytes() for p in (base, Path(f"{base}-wal")) if p.exists())
    assert b"Quixadaburg" not in raw
