"""Write transactions through the metadata store's gate, on real SQLite (and none on PostgreSQL)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engram.storage.crypto import LocalKeyFileProvider
from engram.storage.database import create_engine
from engram.storage.keyring import KeyRing
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade

pytestmark = pytest.mark.integration


@pytest.fixture
async def store(database_url: str, tmp_path: Path) -> MetadataStore:
    engine = create_engine(database_url)
    await upgrade(engine)
    store = MetadataStore(engine, KeyRing(LocalKeyFileProvider(tmp_path / "master.key")), write_wait_s=5.0)
    yield store  # type: ignore[misc]
    await store.close()


async def test_on_sqlite_an_acknowledgement_commit_goes_ahead_of_queued_writers(
    store: MetadataStore, database_url: str
) -> None:
    if not database_url.startswith("sqlite"):
        assert store.write_gate is None  # a server database takes its writers side by side
        return
    assert store.write_gate is not None
    entered: list[str] = []
    release = asyncio.Event()
    holding = asyncio.Event()

    async def holder() -> None:
        async with store.transaction() as tx:
            await tx.versions.bump("u-holder")
            entered.append("holder")
            holding.set()
            await release.wait()

    async def writer(name: str, *, urgent: bool = False) -> None:
        async with store.transaction(urgent=urgent) as tx:
            entered.append(name)
            await tx.versions.bump(f"u-{name}")

    first = asyncio.create_task(holder())
    await holding.wait()
    # A writer reaches the gate in its first step (no I/O before it): one turn of the loop queues it.
    others = [asyncio.create_task(writer(f"w{i}")) for i in range(3)]
    await asyncio.sleep(0)
    assert store.write_gate.waiting == 3
    ack = asyncio.create_task(writer("ack", urgent=True))
    await asyncio.sleep(0)
    assert store.write_gate.waiting == 4
    # Readers never queue behind the writers.
    async with store.transaction(readonly=True) as tx:
        assert await tx.versions.read("u-holder") == 0  # not committed yet
    release.set()
    await asyncio.gather(first, *others, ack)
    assert entered == ["holder", "ack", "w0", "w1", "w2"]
    async with store.transaction(readonly=True) as tx:
        assert [await tx.versions.read(f"u-{n}") for n in ("holder", "ack", "w0", "w1", "w2")] == [1] * 5


async def test_a_write_that_fails_rolls_back_and_lets_the_next_writer_in(store: MetadataStore) -> None:
    async def failing() -> None:
        async with store.transaction() as tx:
            await tx.versions.bump("u1")
            raise RuntimeError("fails inside the transaction")

    with pytest.raises(RuntimeError):
        await failing()
    async with store.transaction(urgent=True) as tx:
        await tx.versions.bump("u2")
    async with store.transaction(readonly=True) as tx:
        assert (await tx.versions.read("u1"), await tx.versions.read("u2")) == (0, 1)
