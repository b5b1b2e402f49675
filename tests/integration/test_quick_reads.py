"""QuickReader: the synchronous SQLite reads of the recall path agree with the metadata store."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.memory_service import MemoryService
from actors.snapshot import SnapshotCache
from models.api import AddStructuredRequest, DeleteRequest, MemoryCreated
from models.enums import MemType, Ownership
from storage.privacy_queries import set_switch
from storage.quick_reads import open_quick_reader
from storage.stores import Stores
from tests.conftest import ManualClock

pytestmark = pytest.mark.integration


def test_only_sqlite_files_get_a_quick_reader(tmp_path: Path) -> None:
    assert open_quick_reader(f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}") is not None
    assert open_quick_reader("sqlite+aiosqlite:///:memory:") is None
    assert open_quick_reader("postgresql+asyncpg://postgres@127.0.0.1:5432/test") is None


async def test_versions_and_switches_match_the_store(
    stores: Stores, service: MemoryService, clock: ManualClock, database_url: str
) -> None:
    quick = open_quick_reader(database_url)
    if quick is None:
        pytest.skip("quick reads exist for SQLite only")
    assert (quick.version("u1"), quick.switches("u1")) == (0, {})
    request = AddStructuredRequest(
        user_id="u1", content="Likes tea", ownership=Ownership.USER, mem_type=MemType.SEMANTIC, sync=True
    )
    created = await service.add_structured(request)
    assert isinstance(created, MemoryCreated)
    async with stores.metadata.transaction() as tx:
        await set_switch(tx, "u1", "", False, clock.now)
        await set_switch(tx, "u1", "shop", True, clock.now)
    async with stores.metadata.transaction(readonly=True) as tx:
        assert quick.version("u1") == await tx.version("u1") > 0
    assert quick.switches("u1") == {"": False, "shop": True}

    # A snapshot validated by the quick read still sees a delete at once (read-your-writes).
    cache = SnapshotCache(
        stores.metadata, stores.vectors, stores.embedder, max_users=5, ttl_s=60, quick=quick
    )
    assert len((await cache.get("u1")).memories) == 1
    await service.delete(DeleteRequest(user_id="u1", memory_id=created.memory_id))
    assert (await cache.get("u1")).memories == []
    quick.close()
