"""Evolution with an LLM engine: proposals validated by code, failures degrade to the rules (W4, W5).

The LLM is the real OpenAI engine talking HTTP to a scripted server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engram.actors.engines.openai_engine import OpenAIEngine
from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, Decision
from engram.models.enums import Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.chat_server import Reply, chat_server, is_extraction

pytestmark = pytest.mark.integration

Script = Callable[[str, dict[str, Any]], Reply]


def facts(*texts: str) -> Reply:
    return Reply(json.dumps({"facts": [{"text": t, "kind": "preference"} for t in texts]}))


def proposal(event: str, target: str | None = None, text: str | None = None) -> Reply:
    return Reply(json.dumps({"event": event, "target": target, "text": text, "reason": "scripted"}))


@pytest.fixture
async def llm_service(
    settings: Settings, stores: Stores, clock: ManualClock
) -> AsyncIterator[Callable[[Script], Any]]:
    """Builds a MemoryService whose engine is OpenAIEngine against a scripted loopback server."""
    # Generous: a loaded CI machine can take over half a second for a first loopback request, and
    # a test that is not about timeouts must not degrade. The timeout test sets its own.
    settings.evolution.llm_timeout_s = 30.0
    opened: list[Any] = []

    async def make(script: Script) -> MemoryService:
        def answer(body: dict[str, Any]) -> Reply:
            prompt = body["messages"][-1]["content"]
            return script("extract" if is_extraction(body) else "evolve", {"prompt": prompt, "body": body})

        context = chat_server(answer)
        server = await context.__aenter__()
        opened.append(context)
        engine = OpenAIEngine(server.url, "scripted", timeout_s=2.0)
        return MemoryService(
            settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
        )

    yield make
    for context in opened:
        await context.__aexit__(None, None, None)


def said(text: str) -> AddRequest:
    return AddRequest(user_id="u1", messages=[{"role": "user", "content": text, "msg_id": "m1"}])


async def contents(service: MemoryService) -> list[str]:
    snapshot = await service.recaller.snapshots.get("u1")
    return sorted(m.content or "" for m in snapshot.memories if m.status is Status.ACTIVE)


async def seed_pizza(make: Callable[[Script], Any]) -> tuple[MemoryService, Decision]:
    service = await make(lambda kind, _: facts("Likes cheese pizza"))
    [first] = await service.process_add(said("I like cheese pizza"))
    return service, first


async def test_valid_llm_update_is_applied(llm_service: Callable[[Script], Any]) -> None:
    _, first = await seed_pizza(llm_service)
    service = await llm_service(
        lambda kind, _: (
            facts("Likes chicken pizza")
            if kind == "extract"
            else proposal("UPDATE", "0", "Likes cheese pizza and chicken pizza")
        )
    )
    [decision] = await service.process_add(said("I like chicken pizza"))
    assert (decision.op, decision.memory_id) == ("UPDATE", first.memory_id)
    assert decision.reason.startswith("LLM")
    assert await contents(service) == ["Likes cheese pizza and chicken pizza"]


async def test_llm_citing_an_unknown_id_is_rejected(llm_service: Callable[[Script], Any]) -> None:
    _, first = await seed_pizza(llm_service)
    service = await llm_service(
        lambda kind, _: (
            facts("Likes chicken pizza") if kind == "extract" else proposal("UPDATE", "7", "Hacked")
        )
    )
    [decision] = await service.process_add(said("I like chicken pizza"))
    assert "unknown memory" in decision.reason and "rejected" in decision.reason
    assert "Hacked" not in await contents(service)
    assert decision.op == "UPDATE" and decision.memory_id == first.memory_id  # the rules decided


async def test_llm_timeout_degrades_and_the_write_lands(
    llm_service: Callable[[Script], Any], settings: Settings
) -> None:
    await seed_pizza(llm_service)
    settings.evolution.llm_timeout_s = 0.5  # the scripted evolve answer takes 5 s
    service = await llm_service(
        lambda kind, _: facts("Lives in Lisbon") if kind == "extract" else Reply(delay_s=5, content="{}")
    )
    [decision] = await service.process_add(said("I live in Lisbon"))
    assert decision.op == "ADD" and "LLM timed out" in decision.reason
    assert "Lives in Lisbon" in await contents(service)


async def test_supersede_without_contradiction_keeps_both(llm_service: Callable[[Script], Any]) -> None:
    await seed_pizza(llm_service)
    service = await llm_service(
        lambda kind, _: facts("Plays tennis on Sundays") if kind == "extract" else proposal("SUPERSEDE", "0")
    )
    [decision] = await service.process_add(said("I play tennis on Sundays"))
    assert decision.op == "ADD" and "without a real contradiction" in decision.reason
    assert await contents(service) == ["Likes cheese pizza", "Plays tennis on Sundays"]


async def test_malformed_extraction_fails_with_nothing_written(
    llm_service: Callable[[Script], Any], stores: Stores, settings: Settings
) -> None:
    # With degraded mode off; on (the default) the rules engine extracts instead (test_degraded_mode).
    settings.evolution.degraded_mode = False
    calls: list[str] = []

    def broken(kind: str, _: dict[str, Any]) -> Reply:
        calls.append(kind)
        return Reply('{"facts": [{"text": ')

    service = await llm_service(broken)
    with pytest.raises(EngramError) as err:
        await service.process_add(said("I like cheese pizza"))
    assert err.value.code is ErrorCode.EXTRACTION_FAILED
    assert calls == ["extract", "extract"]  # asked once, retried once
    assert await contents(service) == []
    async with stores.metadata.transaction() as tx:
        assert await tx.counters.read("u1") == {}


@pytest.mark.parametrize("event", ["NONE", "ADD"])
async def test_llm_missing_a_changed_value_is_overruled(
    llm_service: Callable[[Script], Any], event: str
) -> None:
    # Issue #13: a new code is never a repeat (NONE) and must not stay current beside the old (ADD).
    old, new = "Locker code at the Lisbon office is K011bb64", "Locker code at the Lisbon office is K021c9d0"
    first = await llm_service(lambda kind, _: facts(old) if kind == "extract" else proposal(event, "0"))
    await first.process_add(said("My locker code at the Lisbon office is K011bb64"))
    service = await llm_service(lambda kind, _: facts(new) if kind == "extract" else proposal(event, "0"))
    [decision] = await service.process_add(said("My locker code at the Lisbon office is K021c9d0"))
    assert decision.op == "SUPERSEDE", decision.reason
    assert await contents(service) == [new]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Works at Acme", "No longer works at Acme"),
        ("Likes jazz", "No longer likes jazz"),
        ("喜欢喝咖啡", "不再喜欢喝咖啡了"),
    ],
)
async def test_an_llm_add_of_an_ended_value_or_a_reversed_preference_supersedes(
    llm_service: Callable[[Script], Any], old: str, new: str
) -> None:
    # #31: the LLM's decisions are checked against the rules' own analysis of the two facts.
    # The messages only need to be about the speaker; the scripted LLM extracts the facts.
    first = await llm_service(lambda kind, _: facts(old) if kind == "extract" else proposal("ADD"))
    await first.process_add(said(f"I told you: {old}"))
    service = await llm_service(lambda kind, _: facts(new) if kind == "extract" else proposal("ADD"))
    [decision] = await service.process_add(said(f"I told you: {new}"))
    assert decision.op == "SUPERSEDE", decision.reason
    assert await contents(service) == [new]
