"""Nothing a person said is readable at rest (#17, SPEC P3): custom tags, entity names and change
reasons are sealed with the user's key, and rows from before migration 0005 are sealed on open."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, HistoryRequest, RecallRequest
from engram.models.settings import Settings
from engram.storage.schema import change_log, memories, user_keys
from engram.storage.stores import Stores, open_stores
from tests.support.service import remember

pytestmark = pytest.mark.integration

TAG = "oncology-ward-7"
PLACE = "Quixadaburg"


def _raw(settings: Settings) -> bytes:
    """Every byte SQLite keeps on disk for the metadata database (main file and write-ahead log)."""
    base = settings.storage.data_dir / "engram.db"
    return b"".join(p.read_bytes() for p in (base, Path(f"{base}-wal")) if p.exists())


async def test_tags_entities_and_reasons_never_reach_the_disk_in_the_clear(tmp_path: Path) -> None:
    settings = Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})
    stores = await open_stores(settings)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        tagged = await remember(service, "Visits the clinic on Mondays", custom_tags=[TAG])
        said = AddRequest.model_validate(
            {"user_id": "u1", "messages": [{"role": "user", "content": f"I moved to {PLACE} last spring."}]}
        )
        [decision] = await service.process_add(said)
        # Read back through the stores: tags filter, entities and reasons are all there.
        found = await service.recall(
            RecallRequest(user_id="u1", query="clinic", min_relevance=0, filter={"custom_tags": [TAG]})
        )
        assert [m.memory_id for m in found.memories] == [tagged]
        history = await service.history(HistoryRequest(user_id="u1", memory_id=decision.memory_id or ""))
        assert PLACE in history.memory.entities
        assert history.changes[0].reason  # the evolution's reason, opened
        async with stores.metadata.engine.connect() as conn:
            plain = (await conn.execute(select(memories.c.custom_tags, memories.c.entities))).all()
            reasons = (await conn.execute(select(change_log.c.reason))).scalars().all()
        assert all(tags == [] and entities == [] for tags, entities in plain)
        assert set(reasons) == {""}
    finally:
        await stores.close()
    raw = _raw(settings)
    assert TAG.encode() not in raw and PLACE.encode() not in raw
    assert b"Visits the clinic" not in raw  # content was sealed before this issue too


async def _legacy_rows(stores: Stores) -> None:
    """Make the stored rows look written before migration 0005: labels and reasons in the clear."""
    async with stores.metadata.engine.begin() as conn:
        await conn.execute(update(memories).values(labels=None, custom_tags=[TAG], entities=[PLACE]))
        await conn.execute(
            update(change_log).values(reason=f"legacy reason about {PLACE}", reason_sealed=None)
        )


async def test_rows_written_before_the_migration_are_sealed_when_the_stores_open(tmp_path: Path) -> None:
    settings = Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})
    stores = await open_stores(settings)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        kept = await remember(service, "Collects maps")
        gone = await remember(service, "Secret hobby", "purged-user")
        await _legacy_rows(stores)
        async with stores.metadata.transaction() as tx:
            await tx.keys.shred("purged-user")  # as a full purge leaves it: no key to seal with
        async with stores.metadata.engine.connect() as conn:
            keys_before = (await conn.execute(select(func.count()).select_from(user_keys))).scalar_one()
    finally:
        await stores.close()

    reopened = await open_stores(settings)
    try:
        async with reopened.metadata.engine.connect() as conn:
            rows = {
                r.memory_id: r
                for r in (
                    await conn.execute(
                        select(
                            memories.c.memory_id,
                            memories.c.custom_tags,
                            memories.c.entities,
                            memories.c.labels,
                        )
                    )
                ).all()
            }
            reasons = (await conn.execute(select(change_log.c.reason, change_log.c.reason_sealed))).all()
            keys_after = (await conn.execute(select(func.count()).select_from(user_keys))).scalar_one()
        assert all(r.custom_tags == [] and r.entities == [] and r.labels is not None for r in rows.values())
        assert all(reason == "" for reason, _ in reasons)
        assert keys_after == keys_before  # sealing never made a key for the purged user
        service = MemoryService(settings, reopened.metadata, reopened.vectors, reopened.embedder)
        history = await service.history(HistoryRequest(user_id="u1", memory_id=kept))
        assert history.memory.custom_tags == [TAG] and history.memory.entities == [PLACE]
        assert history.changes[0].reason == f"legacy reason about {PLACE}"
        async with reopened.metadata.transaction(readonly=True) as tx:
            purged = (await tx.memories.get_many("purged-user", [gone]))[gone]
        assert purged.custom_tags == () and purged.entities == ()
    finally:
        await reopened.close()
