"""Degraded mode (W5) and per-fact embedding failures (W9) through the write path (issue #13).

An LLM engine that errors or hangs on extraction: the add still lands through the rules engine and
its task says "degraded". One fact the embedder cannot embed: it is skipped and reported, the others land.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest
from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.api import AddRequest, Message
from engram.models.enums import Role, Status, TaskStatus
from engram.models.settings import Settings
from engram.storage.embedders import Embedder, EmbeddingError
from engram.storage.stores import Stores
from tests.conftest import ManualClock

pytestmark = pytest.mark.integration
GUARD_S = 60


class DownLlm:
    """An LLM engine that is down: every request fails (``hang``: never answers), counting calls."""

    name = "down"
    is_llm = True

    def __init__(self, *, hang: bool = False) -> None:
        self.calls = 0
        self._hang = hang

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.calls += 1
        if self._hang:
            await asyncio.sleep(3600)
        return [EngineError("engine unavailable") for _ in requests]

    async def close(self) -> None:
        """Nothing to release."""


class PickyEmbedder:
    """The real embedder, except that any text holding ``refused`` cannot be embedded."""

    def __init__(self, inner: Embedder, refused: str) -> None:
        self._inner = inner
        self._refused = refused
        self.model_name = inner.model_name
        self.dim = inner.dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = await self._inner.embed(texts)
        failed = [i for i, t in enumerate(texts) if self._refused in t]
        if failed:
            vectors[failed] = 0.0
            raise EmbeddingError(failed, vectors)
        return vectors


def said(text: str) -> AddRequest:
    return AddRequest(user_id="u1", messages=[Message(role=Role.USER, content=text, msg_id="m1")])


async def active(service: MemoryService) -> list[str]:
    snapshot = await service.recaller.snapshots.get("u1")
    return sorted(m.content or "" for m in snapshot.memories if m.status is Status.ACTIVE)


@pytest.mark.parametrize("hang", [False, True], ids=["errors", "times-out"])
async def test_an_llm_down_on_extraction_degrades_to_the_rules_engine(
    settings: Settings, stores: Stores, clock: ManualClock, hang: bool
) -> None:
    settings.evolution.llm_timeout_s = 0.5
    engine = DownLlm(hang=hang)
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(said("I live in Lisbon and I work as a nurse."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.DONE, view.error
    assert [d.op for d in view.decisions] == ["ADD", "ADD"]
    reason = "timeout" if hang else "engine_error"
    assert all(d.reason.startswith(f"degraded: extraction LLM failed ({reason})") for d in view.decisions)
    assert await active(service) == ["Lives in Lisbon", "Works as a nurse"]
    # The LLM was not asked again to evolve what it could not extract.
    assert engine.calls == (1 if hang else 2)
    await path.close()


async def test_degraded_mode_off_fails_the_add(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    settings.evolution.degraded_mode = False
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=DownLlm()
    )
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(said("I live in Lisbon."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.FAILED and view.error is not None and view.error.startswith("50001 ")
    assert await active(service) == []
    await path.close()


async def test_an_unembeddable_fact_is_skipped_and_the_others_land(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    embedder = PickyEmbedder(stores.embedder, refused="nurse")
    service = MemoryService(settings, stores.metadata, stores.vectors, embedder, clock=clock)
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(said("I live in Lisbon. I work as a nurse. I'm allergic to peanuts."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.DONE, view.error
    ops = sorted((d.op, d.content) for d in view.decisions)
    assert ops == [
        ("ADD", "Is allergic to peanuts"),
        ("ADD", "Lives in Lisbon"),
        ("SKIPPED", "Works as a nurse"),
    ]
    assert "embedding failed" in next(d.reason for d in view.decisions if d.op == "SKIPPED")
    assert await active(service) == ["Is allergic to peanuts", "Lives in Lisbon"]
    assert await stores.vectors.count() == 2
    await path.close()


async def test_when_no_fact_can_be_embedded_the_task_reports_each(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    embedder = PickyEmbedder(stores.embedder, refused="Lisbon")
    service = MemoryService(settings, stores.metadata, stores.vectors, embedder, clock=clock)
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(said("I live in Lisbon."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.DONE and [d.op for d in view.decisions] == ["SKIPPED"]
    assert await active(service) == []
    await path.close()
