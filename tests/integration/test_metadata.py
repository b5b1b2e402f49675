"""The metadata store on real SQLite and real PostgreSQL: schema, encryption, counters, log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select, text
from sqlalchemy.engine import Connection

from engram.models.domain import Memory
from engram.models.enums import Level, OpSource, OpType, Status
from engram.models.ids import new_id
from engram.storage.crypto import LocalKeyFileProvider
from engram.storage.database import create_engine
from engram.storage.keyring import KeyRing
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade
from engram.storage.schema import change_log, memories, metadata
from tests.conftest import POSTGRES_TEST_DB
from tests.support.memories import build_memory

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = "I keep my spare key under the blue flowerpot"


def _memory(user_id: str, content: str = SECRET, app_id: str = "") -> Memory:
    return build_memory(
        T0,
        memory_id=new_id(),
        user_id=user_id,
        app_id=app_id,
        level=Level.APP if app_id else Level.GLOBAL,
        content=content,
        content_hash="h" * 64,
        embedding_model="test-model",
    )


@pytest.fixture
async def store(database_url: str, tmp_path: Path) -> MetadataStore:
    engine = create_engine(database_url)
    await upgrade(engine)
    store = MetadataStore(engine, KeyRing(LocalKeyFileProvider(tmp_path / "master.key")))
    yield store  # type: ignore[misc]
    await store.close()


async def test_migration_creates_exactly_the_declared_schema(store: MetadataStore) -> None:
    def diff(conn: Connection) -> list[object]:
        return list(compare_metadata(MigrationContext.configure(conn), metadata))

    async with store.engine.connect() as conn:
        assert await conn.run_sync(diff) == []
    await upgrade(store.engine)  # a second upgrade is a no-op


async def test_memory_round_trips_and_is_encrypted_at_rest(store: MetadataStore) -> None:
    memory = _memory("alice")
    async with store.transaction() as tx:
        await tx.memories.insert(memory)
        await tx.changes.add(memory, OpType.ADD, OpSource.USER, "test", T0, content_after=SECRET)
    async with store.transaction() as tx:
        loaded = await tx.memories.get("alice", memory.memory_id)
        assert loaded == memory
        assert await tx.memories.get("bob", memory.memory_id) is None
    async with store.engine.connect() as conn:
        raw_content = (await conn.execute(select(memories.c.content))).scalar_one()
        raw_change = (await conn.execute(select(change_log.c.content_after))).scalar_one()
    for raw in (bytes(raw_content), bytes(raw_change)):
        assert SECRET.encode() not in raw
        assert b"flowerpot" not in raw


async def test_sqlite_file_never_holds_plaintext(tmp_path: Path) -> None:
    db_file = tmp_path / "plain.db"
    engine = create_engine(f"sqlite+aiosqlite:///{db_file}")
    await upgrade(engine)
    store = MetadataStore(engine, KeyRing(LocalKeyFileProvider(tmp_path / "master.key")))
    async with store.transaction() as tx:
        memory = _memory("alice")
        await tx.memories.insert(memory)
        await tx.changes.add(memory, OpType.ADD, OpSource.USER, "test", T0, content_after=SECRET)
    await store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("plain.db*"))  # noqa: ASYNC240
    assert b"flowerpot" not in raw
    assert b"alice" in raw  # the file is the one written: ids are plaintext, content is not


async def test_shred_makes_content_unreadable_at_once(store: MetadataStore, tmp_path: Path) -> None:
    memory = _memory("carol")
    async with store.transaction() as tx:
        await tx.memories.insert(memory)
        await tx.changes.add(memory, OpType.ADD, OpSource.USER, "test", T0, content_after=SECRET)
        other = _memory("dave")
        await tx.memories.insert(other)
    async with store.transaction() as tx:
        assert await tx.keys.shred("carol") is True
    # A second process with its own key cache must not read it either.
    fresh = MetadataStore(store.engine, KeyRing(LocalKeyFileProvider(tmp_path / "master.key")))
    for reader in (store, fresh):
        async with reader.transaction() as tx:
            gone = await tx.memories.get("carol", memory.memory_id)
            assert gone is not None and gone.content is None
            [change] = await tx.changes.history("carol", memory.memory_id)
            assert change.content_after is None
            kept = await tx.memories.get("dave", other.memory_id)
            assert kept is not None and kept.content == SECRET


async def test_two_keyrings_agree_on_one_data_key(store: MetadataStore, tmp_path: Path) -> None:
    other = MetadataStore(store.engine, KeyRing(LocalKeyFileProvider(tmp_path / "master.key")))
    memory = _memory("erin")
    async with store.transaction() as tx:
        await tx.memories.insert(memory)
    async with other.transaction() as tx:
        loaded = await tx.memories.get("erin", memory.memory_id)
    assert loaded is not None and loaded.content == SECRET


async def test_counters_upsert_and_versions(store: MetadataStore) -> None:
    async with store.transaction() as tx:
        await tx.counters.add("frank", {"global": 2, "total": 2})
        await tx.counters.add("frank", {"global": -1, "total": -1, "app:x": 3})
        assert await tx.versions.read("frank") == 0
        assert await tx.versions.bump("frank") == 1
        assert await tx.versions.bump("frank") == 2
    async with store.transaction() as tx:
        assert await tx.counters.read("frank") == {"global": 1, "total": 1, "app:x": 3}
        await tx.counters.set("frank", {"global": 7})
        assert (await tx.counters.read("frank"))["global"] == 7


async def test_transaction_rolls_back_everything_on_error(store: MetadataStore) -> None:
    memory = _memory("gina")

    async def fail_midway() -> None:
        async with store.transaction() as tx:
            await tx.memories.insert(memory)
            await tx.counters.add("gina", {"total": 1})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await fail_midway()
    async with store.transaction() as tx:
        assert await tx.memories.get("gina", memory.memory_id) is None
        assert await tx.counters.read("gina") == {}


async def test_change_log_filters_and_pages(store: MetadataStore) -> None:
    async with store.transaction() as tx:
        for i in range(5):
            memory = _memory("hank", f"fact {i}", app_id="app1" if i % 2 else "")
            await tx.memories.insert(memory)
            await tx.changes.add(memory, OpType.ADD, OpSource.USER, "add", T0 + timedelta(hours=i))
    async with store.transaction() as tx:
        page = await tx.changes.page("hank", limit=2)
        assert [e.op_time for e in page] == [T0 + timedelta(hours=4), T0 + timedelta(hours=3)]
        rest = await tx.changes.page("hank", before_change_id=page[-1].change_id, limit=10)
        assert len(rest) == 3
        in_app = await tx.changes.page("hank", app_id="app1")
        assert {e.app_id for e in in_app} == {"app1"} and len(in_app) == 2
        window = await tx.changes.page("hank", since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
        assert len(window) == 2
        assert await tx.changes.page("hank", op_type=OpType.DELETE) == []


async def test_mark_status_and_eviction_rows(store: MetadataStore) -> None:
    first, second = _memory("ivy"), _memory("ivy", "second", app_id="a")
    async with store.transaction() as tx:
        await tx.memories.insert(first)
        await tx.memories.insert(second)
        assert {r.memory_id for r in await tx.memories.eviction_rows("ivy", None)} == {
            first.memory_id,
            second.memory_id,
        }
        assert [r.memory_id for r in await tx.memories.eviction_rows("ivy", "a")] == [second.memory_id]
        await tx.memories.mark_status("ivy", [first.memory_id], Status.ARCHIVED, T0)
        assert [r.memory_id for r in await tx.memories.eviction_rows("ivy", None)] == [second.memory_id]
        loaded = await tx.memories.get("ivy", first.memory_id)
        assert loaded is not None and loaded.status is Status.ARCHIVED and loaded.archived_at == T0


async def test_database_is_the_requested_backend(store: MetadataStore, database_url: str) -> None:
    async with store.engine.connect() as conn:
        if database_url.startswith("postgresql"):
            assert (await conn.execute(text("SELECT current_database()"))).scalar() == POSTGRES_TEST_DB
        else:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
