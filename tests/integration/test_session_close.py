"""``session/close`` (L6, C8) over real stores: promotion with capacity check, drop, continuity."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from engram.actors.engine_outputs import VALUE_SESSION_TASK, MemoryValue, SessionValuation
from engram.actors.engines.base import EngineError, StructuredRequest
from engram.actors.engines.rules import RulesEngine
from engram.actors.memory_service import MemoryService
from engram.actors.session_close import SessionCloser
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.sweeps import Sweeper, run_inline, sweep_users
from engram.models.api import SessionCloseRequest
from engram.models.enums import Level, OpType, Status
from engram.models.settings import Settings
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.auth import AUTH_OFF
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration


def in_session(**fields: Any) -> dict[str, Any]:
    return {"level": Level.SESSION, "session_id": "s1", **fields}


async def get(stores: Stores, memory_id: str) -> Any:
    async with stores.metadata.transaction(readonly=True) as tx:
        return await tx.memories.get("u1", memory_id)


async def counters(stores: Stores) -> dict[str, int]:
    async with stores.metadata.transaction(readonly=True) as tx:
        return {k: v for k, v in (await tx.counters.read("u1")).items() if v}


async def test_valuable_session_memories_are_promoted_and_the_rest_dropped(
    service: MemoryService, stores: Stores
) -> None:
    important = await remember(
        service, "Is allergic to shellfish", app_id="chef", **in_session(is_important=True)
    )
    flagged = await remember(service, "Wants recipes without garlic", app_id="chef", **in_session())
    recalled = await remember(service, "Cooks for four people on Sundays", app_id="chef", **in_session())
    chatter = await remember(service, "Asked what time it is", app_id="chef", **in_session())
    elsewhere = await remember(service, "Likes jazz", session_id="s2", level=Level.SESSION)
    scope = {"app_id": "chef", "session_id": "s1", "include_global": False}
    assert recalled in await recall_ids(service, "cooking for four on Sunday", scope=scope)
    await service.drain()  # R4 bookkeeping: recall_count 1

    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", app_id="chef", session_id="s1", must_promote=[flagged])
    )
    assert sorted(result.promoted) == sorted([important, flagged, recalled])
    assert result.dropped == [chatter]
    assert result.continuity_memory_id is None and result.capacity_refused == []
    for mid in result.promoted:
        promoted = await get(stores, mid)
        assert (promoted.level, promoted.app_id, promoted.session_id) == (Level.APP, "chef", None)
        assert promoted.source_session_id == "s1"
    assert (await get(stores, chatter)).status is Status.DELETED
    assert (await get(stores, elsewhere)).status is Status.ACTIVE  # another session is untouched
    assert chatter not in await stores.vectors.memory_ids("u1")
    # Promoted memories are recalled at app scope without naming the session: the index followed.
    assert important in await recall_ids(service, "shellfish allergy", scope={"app_id": "chef"})
    assert await counters(stores) == {
        "app:chef": 3,
        "global": 1,
        "total": 4,
        "important:app:chef": 1,
        "important:total": 1,
    }


async def test_promotion_to_a_full_app_evicts_like_an_admission(
    settings: Settings, service: MemoryService, stores: Stores, clock: ManualClock
) -> None:
    settings.capacity.app_limit = 3
    app_memories = [await remember(service, f"Support ticket note {i}", app_id="desk") for i in range(3)]
    clock.advance(days=10)
    session = await remember(service, "Prefers email over phone", **in_session(is_important=True))
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", app_id="desk", session_id="s1")
    )
    assert result.promoted == [session]
    promoted = await get(stores, session)
    assert (promoted.level, promoted.app_id) == (Level.APP, "desk")
    statuses = [(await get(stores, mid)).status for mid in app_memories]
    assert statuses.count(Status.ARCHIVED) == 1  # evicted down to 90% of the limit to make room
    assert (await counters(stores))["app:desk"] == 3
    assert "global" not in await counters(stores)


async def test_promotion_refused_by_capacity_drops_the_memory(
    settings: Settings, service: MemoryService, stores: Stores
) -> None:
    settings.capacity.app_limit = 2
    settings.capacity.important_ratio = 1.0
    for i in range(2):  # full of memories that may never be evicted
        await remember(service, f"Critical runbook step {i}", app_id="ops", is_important=True)
    session = await remember(service, "Pages the on-call engineer at night", **in_session())
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", app_id="ops", session_id="s1", must_promote=[session])
    )
    assert (result.promoted, result.capacity_refused, result.dropped) == ([], [session], [session])
    dropped = await get(stores, session)
    assert dropped.status is Status.DELETED and dropped.level is Level.SESSION
    assert await counters(stores) == {"app:ops": 2, "total": 2, "important:app:ops": 2, "important:total": 2}


async def test_to_be_continued_keeps_a_continuity_memory_that_expires_after_24_hours(
    settings: Settings, service: MemoryService, stores: Stores, clock: ManualClock, tmp_path: Path
) -> None:
    start = clock.now
    await remember(service, "Was planning a trip to Portugal", **in_session())
    await remember(service, "Compared train and flight prices", **in_session())
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", session_id="s1", to_be_continued=True)
    )
    assert result.promoted == [] and len(result.dropped) == 2
    continuity = result.continuity_memory_id
    assert continuity is not None
    kept = await get(stores, continuity)
    assert kept.level is Level.SESSION and kept.session_id == "s1" and "continuity" in kept.custom_tags
    assert kept.expire_at == start + timedelta(hours=24)
    assert "Portugal" in kept.content and "train" in kept.content
    scope = {"session_id": "s1"}
    clock.now = start + timedelta(hours=23)
    assert continuity in await recall_ids(service, "trip to Portugal", scope=scope)
    clock.now = start + timedelta(hours=25)
    assert continuity not in await recall_ids(service, "trip to Portugal", scope=scope)
    archive = ColdArchive(LocalDirObjectStore(tmp_path / "archive"))
    lifecycle = LifecycleStores(settings, stores.metadata, stores.vectors, stores.embedder, archive)
    counts = await sweep_users(Sweeper(lifecycle), ["u1"], clock.now, run_inline)
    assert counts.archived_expired == 1
    assert (await get(stores, continuity)).status is Status.ARCHIVED


async def test_the_continuity_period_comes_from_settings(
    settings: Settings, service: MemoryService, stores: Stores, clock: ManualClock
) -> None:
    settings.lifecycle.continuity_ttl_hours = 6
    await remember(service, "Drafting a cover letter", **in_session())
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", session_id="s1", to_be_continued=True)
    )
    assert result.continuity_memory_id is not None
    kept = await get(stores, result.continuity_memory_id)
    assert kept.expire_at == clock.now + timedelta(hours=6)


async def test_closing_an_empty_session_changes_nothing(service: MemoryService, stores: Stores) -> None:
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", session_id="nothing-here", to_be_continued=True)
    )
    assert (result.promoted, result.dropped, result.continuity_memory_id) == ([], [], None)


# --- valuation by the engine layer ------------------------------------------------------------------


class ValuingEngine:
    """An LLM engine that keeps the session memories whose content holds one of ``keep`` words."""

    name = "fake-llm"
    is_llm = True

    def __init__(self, *keep: str, fail: bool = False) -> None:
        self.keep, self.fail = keep, fail
        self.requests: list[StructuredRequest] = []

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.requests.extend(requests)
        answers: list[BaseModel | EngineError] = []
        for request in requests:
            if self.fail or request.task != VALUE_SESSION_TASK:
                answers.append(EngineError("no valid answer"))
                continue
            values = [
                MemoryValue(ref=m["ref"], keep=any(w in m["content"] for w in self.keep), reason="test")
                for m in request.payload["memories"]
            ]
            values.append(MemoryValue(ref="42", keep=True, reason="invented"))  # never shown: ignored
            answers.append(SessionValuation(memories=values))
        return answers

    async def close(self) -> None:
        pass


class CountingRules(RulesEngine):
    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.calls += 1
        return await super().generate(requests)


def with_engine(settings: Settings, stores: Stores, clock: ManualClock, engine: Any) -> MemoryService:
    return MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )


async def test_an_llm_engine_chooses_which_session_memories_to_keep(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = ValuingEngine("allergic", "Lisbon", "Likes")
    service = with_engine(settings, stores, clock, engine)
    kept = await remember(service, "Is allergic to shellfish", app_id="chef", **in_session())
    planned = await remember(service, "Plans a trip to Lisbon in May", app_id="chef", **in_session())
    chatter = await remember(service, "Asked what time it is", app_id="chef", **in_session())
    important = await remember(
        service, "Said goodbye politely", app_id="chef", **in_session(is_important=True)
    )
    flagged = await remember(service, "Wanted a joke", app_id="chef", **in_session())
    elsewhere = await remember(service, "Likes jazz", session_id="s2", level=Level.SESSION)

    result = await SessionCloser(service).close(  # the default valuer uses the service's engine
        SessionCloseRequest(user_id="u1", app_id="chef", session_id="s1", must_promote=[flagged])
    )
    # Kept by the engine, plus the important and flagged ones it said no to; the invented ref is ignored.
    assert sorted(result.promoted) == sorted([kept, planned, important, flagged])
    assert result.dropped == [chatter]
    assert (await get(stores, chatter)).status is Status.DELETED
    assert (await get(stores, elsewhere)).status is Status.ACTIVE  # the engine only saw session s1
    # One request, about the memories the deterministic rule does not promote anyway.
    [request] = engine.requests
    assert sorted(m["memory_id"] for m in request.payload["memories"]) == sorted([kept, planned, chatter])
    for mid in (kept, planned):
        promoted = await get(stores, mid)
        assert (promoted.level, promoted.app_id, promoted.session_id) == (Level.APP, "chef", None)
    assert await counters(stores) == {
        "app:chef": 4,
        "global": 1,
        "total": 5,
        "important:app:chef": 1,
        "important:total": 1,
    }
    await service.drain()


async def test_a_failing_engine_falls_back_to_the_deterministic_rule(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = ValuingEngine("allergic", fail=True)
    service = with_engine(settings, stores, clock, engine)
    important = await remember(service, "Is allergic to shellfish", **in_session(is_important=True))
    other = await remember(service, "Is allergic to cats", **in_session())
    result = await SessionCloser(service).close(SessionCloseRequest(user_id="u1", session_id="s1"))
    assert (result.promoted, result.dropped) == ([important], [other])
    assert len(engine.requests) == 2  # asked, retried once, then the rule decided
    await service.drain()


async def test_the_rules_engine_is_never_asked_to_value_a_session(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = CountingRules()
    service = with_engine(settings, stores, clock, engine)
    flagged = await remember(service, "Plans a trip to Lisbon in May", **in_session())
    other = await remember(service, "Is allergic to cats", **in_session())
    result = await SessionCloser(service).close(
        SessionCloseRequest(user_id="u1", session_id="s1", must_promote=[flagged])
    )
    assert (result.promoted, result.dropped) == ([flagged], [other])
    assert engine.calls == 0
    await service.drain()


# --- through the HTTP app and the local backend (mailbox) -----------------------------------------


@pytest.fixture
async def http(service: MemoryService, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    write_path = WritePath(service)
    backend = LocalBackend(wire_core(service, write_path))
    app = build_http_app(
        lambda: backend, auth=lambda: AUTH_OFF, max_body_bytes=settings.limits.max_request_bytes
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client
    await write_path.close()


async def test_session_close_route(http: httpx.AsyncClient, service: MemoryService, stores: Stores) -> None:
    keep = await remember(service, "Is vegetarian", **in_session(is_important=True))
    drop = await remember(service, "Said hello", **in_session())
    response = await http.post(
        "/memory/v1/session/close", json={"user_id": "u1", "session_id": "s1", "to_be_continued": True}
    )
    body = response.json()
    assert response.status_code == 200 and body["code"] == 0
    assert body["data"]["promoted"] == [keep] and body["data"]["dropped"] == [drop]
    assert body["data"]["continuity_memory_id"]
    changes = await http.post("/memory/v1/history", json={"user_id": "u1", "memory_id": drop})
    assert [c["op_type"] for c in changes.json()["data"]["changes"]] == [OpType.ADD, OpType.DELETE]
    bad = await http.post("/memory/v1/session/close", json={"user_id": "u1"})
    assert bad.json()["code"] == 40001
