"""QuickReader: the synchronous SQLite reads of the recall path agree with the metadata store."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from engram.actors.memory_service import MemoryService
from engram.actors.snapshot import RECALLABLE, SnapshotCache
from engram.models.api import DeleteRequest
from engram.models.settings import Settings
from engram.storage import vector_copies
from engram.storage.crypto import ContentCipher
from engram.storage.embedders import Embedder
from engram.storage.privacy_queries import set_switch
from engram.storage.quick_reads import BOOKKEEPING_SQL, QuickReader, open_quick_reader, read_key
from engram.storage.stores import Stores, open_stores
from tests.conftest import ManualClock
from tests.support.service import remember

pytestmark = pytest.mark.integration


def test_only_sqlite_files_get_a_quick_reader(tmp_path: Path) -> None:
    assert open_quick_reader(f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}") is not None
    assert open_quick_reader("sqlite+aiosqlite:///:memory:") is None
    assert open_quick_reader("postgresql+asyncpg://postgres@127.0.0.1:5432/test") is None


@pytest.fixture
def quick(database_url: str) -> Iterator[QuickReader]:
    reader = open_quick_reader(database_url)
    if reader is None:
        pytest.skip("quick reads exist for SQLite only")
    yield reader
    reader.close()


async def test_versions_and_switches_match_the_store(
    stores: Stores, service: MemoryService, clock: ManualClock, quick: QuickReader
) -> None:
    assert (quick.version("u1"), quick.switches("u1")) == (0, {})
    memory_id = await remember(service, "Likes tea")
    async with stores.metadata.transaction() as tx:
        await set_switch(tx, "u1", "", False, clock.now)
        await set_switch(tx, "u1", "shop", True, clock.now)
    async with stores.metadata.transaction(readonly=True) as tx:
        assert quick.version("u1") == await tx.versions.read("u1") > 0
    assert quick.switches("u1") == {"": False, "shop": True}

    # A snapshot validated by the quick read still sees a delete at once (read-your-writes).
    cache = SnapshotCache(
        stores.metadata, stores.vectors, stores.embedder, max_users=5, ttl_s=60, quick=quick
    )
    assert len((await cache.get("u1")).memories) == 1
    await service.delete(DeleteRequest(user_id="u1", memory_id=memory_id))
    assert (await cache.get("u1")).memories == []


async def test_recall_bookkeeping_matches_the_store(
    stores: Stores, service: MemoryService, clock: ManualClock, quick: QuickReader
) -> None:
    ids = [await remember(service, text) for text in ("Likes tea", "Plays chess")]
    await service.record_recall_hits("u1", [ids[0]], clock.now)  # one with a hit, one without
    await service.delete(DeleteRequest(user_id="u1", memory_id=ids[1]))  # not ACTIVE: left out
    async with stores.metadata.transaction(readonly=True) as tx:
        expected = await tx.memories.recall_bookkeeping("u1")
    assert quick.recall_bookkeeping("u1") == expected
    assert set(expected) == {ids[0]} and expected[ids[0]].last_recalled_at == clock.now
    assert quick.recall_bookkeeping("nobody") == {}


async def test_the_placed_read_opens_memories_as_the_store_does(
    stores: Stores, service: MemoryService, clock: ManualClock, quick: QuickReader
) -> None:
    plain = await remember(service, "Likes tea")
    full = await remember(
        service,
        "Flies to Lisbon on Friday",
        app_id="travel",
        session_id="s1",
        is_important=True,
        custom_tags=["trip"],
        expire_at=clock.now + timedelta(days=3),
        source_msg_id="m7",
    )
    await service.record_recall_hits("u1", [plain], clock.now)
    gone = await remember(service, "Plays chess")
    await service.delete(DeleteRequest(user_id="u1", memory_id=gone))
    ids = [plain, full, gone, "no-such-memory", plain]
    async with stores.metadata.transaction(readonly=True) as tx:
        expected = await tx.memories.get_many("u1", ids)
        cipher = await tx.keys.existing("u1")
    assert set(expected) == {plain, full, gone}
    read = quick.placed_read("u1", RECALLABLE, cipher)
    # The deleted memory is not recallable: not read, so not opened.
    assert read.memories_of(ids) == {m: expected[m] for m in (plain, full)}
    assert [row[0] for row in read.placed] == list(read.rows) and set(read.rows) == {plain, full}
    assert quick.placed_read("u2", RECALLABLE, cipher).memories_of(ids) == {}, "another user's"
    assert quick.placed_read("u1", RECALLABLE, None).memories_of(ids)[full].content is None, "no key"


async def test_per_user_status_reads_search_by_user(
    stores: Stores, database_url: str, quick: QuickReader
) -> None:
    # SQLite has no statistics here: it must still pick an index that leads with the user rather
    # than walk every user's ACTIVE rows through a (status, ...) index.
    dedup = "SELECT memory_id FROM memories WHERE user_id = ? AND content_hash = ? AND status = ?"
    with contextlib.closing(sqlite3.connect(str(make_url(database_url).database))) as conn:
        for sql, args in ((BOOKKEEPING_SQL, ("u1", "ACTIVE")), (dedup, ("u1", "h", "ACTIVE"))):
            plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))
            assert "(user_id=? AND" in plan, plan


async def test_a_snapshots_rows_and_the_recallable_count_match_the_store(
    stores: Stores, service: MemoryService, clock: ManualClock, quick: QuickReader
) -> None:
    kept = [await remember(service, text) for text in ("Likes tea", "Plays chess", "Lives in Porto")]
    gone = await remember(service, "Owns a red bike")
    await service.delete(DeleteRequest(user_id="u1", memory_id=gone))  # deleted: not recallable
    await remember(service, "Likes jazz", user_id="u2")  # another user's: never read
    async with stores.metadata.transaction(readonly=True) as tx:
        version = await tx.versions.read("u1")
        rows = await tx.memories.with_status("u1", RECALLABLE)
        copies = await vector_copies.for_user(tx, "u1")
        cipher = await tx.keys.existing("u1")
    assert {m.memory_id for m in rows} == set(kept) and set(copies) >= set(kept)
    read_version, read_rows, read_copies = quick.snapshot_rows("u1", RECALLABLE, cipher)
    assert (read_version, read_rows) == (version, rows)
    assert set(read_copies) == set(copies)
    assert all((read_copies[m] == copies[m]).all() for m in copies)
    assert quick.count_with_status("u1", RECALLABLE) == 3
    assert quick.count_with_status("nobody", RECALLABLE) == 0
    no_key = quick.snapshot_rows("u1", RECALLABLE, None)
    assert no_key[2] == {} and all(m.content is None for m in no_key[1]), "no key, nothing opens"
    # The keys live in this database: read with the rows, in the same transaction.
    assert not stores.metadata.keyring.separate
    with_key = quick.snapshot_rows("u1", RECALLABLE, stores.metadata.keyring)
    assert (with_key[0], with_key[1]) == (version, rows) and set(with_key[2]) == set(copies)
    async with stores.metadata.transaction() as tx:
        assert await tx.keys.shred("u1")
    shredded = quick.snapshot_rows("u1", RECALLABLE, stores.metadata.keyring)
    assert shredded[2] == {} and all(m.content is None for m in shredded[1]), "a shredded key opens nothing"


async def test_with_a_separate_key_store_quick_reads_open_rows_with_the_users_cipher(
    settings: Settings, embedder: Embedder, clock: ManualClock, tmp_path: Path
) -> None:
    settings.storage.key_database_url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    stores = await open_stores(settings, embedder=embedder)
    quick = open_quick_reader(settings.storage.resolved_database_url())
    assert quick is not None and stores.metadata.keyring.separate
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
        kept = await remember(service, "Likes tea")
        await service.drain()
        # The content database holds no key: the cipher comes from the key store, read apart.
        key = await read_key(stores.metadata, "u1")
        assert isinstance(key, ContentCipher)
        _, rows, copies = quick.snapshot_rows("u1", RECALLABLE, key)
        assert [m.content for m in rows] == ["Likes tea"] and set(copies) == {kept}
        read = quick.placed_read("u1", RECALLABLE, key)
        assert [row[0] for row in read.placed] == [kept] and read.cipher is key
        async with stores.metadata.transaction() as tx:
            assert await tx.keys.shred("u1")
        assert await read_key(stores.metadata, "u1") is None  # shredded: nothing to open with
    finally:
        quick.close()
        await stores.close()
