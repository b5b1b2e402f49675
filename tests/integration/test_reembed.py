"""Moving to a new embedding model (#18): recall never compares vectors of two models, and
``engram reembed`` leaves every memory on the new model with exactly one vector, in this process,
through a shard while writes go on, and after a kill -9 in the middle of a run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from sqlalchemy import func, select

from engram.actors.memory_service import MemoryService
from engram.actors.snapshot import SnapshotCache
from engram.lifecycle.archive import build_archive
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.reembed import ReembedCounts, reembed_all
from engram.lifecycle.restore import restore_memory
from engram.lifecycle.sweeps import Sweeper, run_inline
from engram.models.api import AddStructuredRequest
from engram.models.enums import MemType, Ownership, Status
from engram.models.rules.sharding import shard_name
from engram.models.settings import Settings
from engram.serve.shard import Shard
from engram.storage import vector_copies
from engram.storage.database import create_engine
from engram.storage.embedders import Embedder
from engram.storage.schema import memories
from engram.storage.stores import Stores, open_stores
from engram.storage.vectors import MilvusVectorStore
from tests.conftest import ManualClock
from tests.support.embedding_server import embedding_server, hashed_vector
from tests.support.service import remember

pytestmark = pytest.mark.integration

NEW_MODEL = "hash-32"
NEW_COLLECTION = "hash_vectors"


def _unit(text: str) -> np.ndarray:
    vector = np.asarray(hashed_vector(text, 32), dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _new_settings(data_dir: Path, url: str, **embedder: Any) -> Settings:
    return Settings(
        storage={"data_dir": data_dir, "collection": NEW_COLLECTION},
        embedder={"provider": "openai", "base_url": url, "model": NEW_MODEL, **embedder},
        serve={"extraction_replicas": 0},
    )


async def _populate(
    data_dir: Path, embedder: Embedder, clock: ManualClock, users: int, per_user: int
) -> dict[str, str]:
    """Memories on the USE model (one of user u0's archived); content by memory id."""
    settings = Settings(storage={"data_dir": data_dir})
    stores = await open_stores(settings, embedder=embedder)
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    contents: dict[str, str] = {}
    try:
        for u in range(users):
            for i in range(per_user):
                text = f"user {u} remembers fact {i} about the {['sea', 'hills', 'city', 'tea'][i % 4]}"
                expiry = {"expire_at": clock.now + timedelta(days=1)} if (u, i) == (0, 0) else {}
                contents[await remember(service, text, f"u{u}", **expiry)] = text
        lifecycle = _lifecycle(settings, stores)
        counts = await Sweeper(lifecycle).sweep_user("u0", clock.now + timedelta(days=2))
        assert counts.archived_expired == 1
        await service.drain()
    finally:
        await stores.close()
    return contents


def _lifecycle(settings: Settings, stores: Stores) -> LifecycleStores:
    return LifecycleStores(
        settings, stores.metadata, stores.vectors, stores.embedder, build_archive(settings)
    )


async def _rows(stores: Stores) -> list[Any]:
    query = select(memories.c.memory_id, memories.c.user_id, memories.c.status, memories.c.embedding_model)
    async with stores.metadata.engine.connect() as conn:
        return list((await conn.execute(query)).all())


async def _assert_all_on_the_new_model(stores: Stores, contents: dict[str, str]) -> None:
    """Every memory on the new model; the new collection and the copies hold one vector per active
    memory, the archive the archived one's, each the new model's vector of its content."""
    rows = await _rows(stores)
    assert {r.memory_id for r in rows} == set(contents)
    assert {r.embedding_model for r in rows} == {NEW_MODEL}
    active = {r.memory_id for r in rows if r.status == Status.ACTIVE.value}
    index = stores.vectors.index  # type: ignore[attr-defined]
    assert await index.count() == len(active)
    indexed = [mid for user in {r.user_id for r in rows} for mid in await index.memory_ids(user)]
    assert sorted(indexed) == sorted(active)
    found = await index.get_vectors(sorted(active))
    async with stores.metadata.transaction(readonly=True) as tx:
        copies = await vector_copies.by_ids(tx, sorted(contents))
    async with stores.metadata.engine.connect() as conn:
        copy_count = (
            await conn.execute(select(func.count()).select_from(vector_copies.memory_vectors))
        ).scalar()
    assert copy_count == len(active)
    for memory_id in active:
        assert np.allclose(found[memory_id], _unit(contents[memory_id]), atol=1e-5)
        assert np.allclose(copies[memory_id], _unit(contents[memory_id]), atol=1e-5)


async def test_recall_never_compares_two_models_and_reembed_moves_every_memory(
    tmp_path: Path, embedder: Embedder, clock: ManualClock
) -> None:
    data = tmp_path / "data"
    contents = await _populate(data, embedder, clock, users=3, per_user=4)
    archived_id = next(mid for mid, text in contents.items() if text.startswith("user 0 remembers fact 0"))
    async with embedding_server(dim=32) as server:
        settings = _new_settings(data, server.url)
        stores = await open_stores(settings)
        try:
            # Before any re-embedding the old vectors (USE, 512-d) are never used: the snapshot
            # holds the new model's vectors of every recallable memory, embedded as it loads.
            cache = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60)
            before = len(server.bodies)
            snapshot = await cache.get("u1")
            assert snapshot.vectors.shape == (4, 32)
            for memory, row in zip(snapshot.memories, snapshot.vectors, strict=True):
                assert np.allclose(row, _unit(contents[memory.memory_id]), atol=1e-5)
            assert sum(len(b["input"]) for b in server.bodies[before:]) == 4

            progress: list[tuple[int, int]] = []
            lifecycle = _lifecycle(settings, stores)
            counts = await reembed_all(
                lifecycle,
                run_inline,
                batch_users=1,
                on_batch=lambda done, total, _: progress.append((done, total)),
            )
            assert (counts.users, counts.reembedded, counts.archived, counts.failed_users) == (3, 12, 1, 0)
            assert progress == [(1, 3), (2, 3), (3, 3)]
            await _assert_all_on_the_new_model(stores, contents)
            async with stores.metadata.transaction(readonly=True) as tx:
                cipher = await tx.keys.cipher("u0")
            item = await lifecycle.archive.get(cipher, "u0", archived_id)
            assert item is not None and np.allclose(item.vector, _unit(contents[archived_id]), atol=1e-5)

            # Now the stored vectors are the new model's: a fresh snapshot embeds nothing.
            before = len(server.bodies)
            fresh = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60)
            assert (await fresh.get("u2")).vectors.shape == (4, 32)
            assert server.bodies[before:] == []

            # A rerun finds nothing left; a restored memory comes back with its new vector.
            again = await reembed_all(lifecycle, run_inline)
            assert (again.users, again.reembedded) == (0, 0)
            await restore_memory(lifecycle, "u0", archived_id, clock.now + timedelta(days=2))
            restored = await stores.vectors.get_vectors([archived_id])
            assert np.allclose(restored[archived_id], _unit(contents[archived_id]), atol=1e-5)
        finally:
            await stores.close()


async def test_an_unembeddable_memory_stays_on_its_model_for_the_next_run(
    tmp_path: Path, embedder: Embedder, clock: ManualClock
) -> None:
    from tests.support.chat_server import Reply

    data = tmp_path / "data"
    contents = await _populate(data, embedder, clock, users=1, per_user=3)
    broken = {"on": True}

    def fault(texts: list[str]) -> Reply | None:
        if broken["on"] and any("fact 1" in t for t in texts):
            return Reply(raw={"data": []})
        return None

    async with embedding_server(dim=32, fault=fault) as server:
        settings = _new_settings(data, server.url)
        stores = await open_stores(settings)
        try:
            lifecycle = _lifecycle(settings, stores)
            counts = await reembed_all(lifecycle, run_inline)
            assert (counts.reembedded, counts.unembeddable) == (2, 1)
            models = {r.memory_id: r.embedding_model for r in await _rows(stores)}
            stuck = next(mid for mid, text in contents.items() if "fact 1" in text)
            assert models[stuck] == "use-multilingual-v3"
            broken["on"] = False
            assert (await reembed_all(lifecycle, run_inline)).reembedded == 1
            await _assert_all_on_the_new_model(stores, contents)
        finally:
            await stores.close()


async def test_reembed_through_a_shard_keeps_the_users_writes_going(
    tmp_path: Path, embedder: Embedder, clock: ManualClock
) -> None:
    data = tmp_path / "data"
    contents = await _populate(data, embedder, clock, users=4, per_user=3)
    async with embedding_server(dim=32, delay_s=0.02) as server:
        shard = Shard(_new_settings(data, server.url), 0)
        backend = await shard.backend()
        try:

            async def write(user_id: str, n: int) -> str:
                request = AddStructuredRequest(
                    user_id=user_id,
                    ownership=Ownership.USER,
                    mem_type=MemType.SEMANTIC,
                    content=f"{user_id} new fact {n} written during the move",
                    sync=True,
                )
                created = await backend.add_structured(request)
                contents[created.memory_id] = request.content  # type: ignore[union-attr]
                return created.memory_id  # type: ignore[union-attr]

            users = [f"u{u}" for u in range(4)]
            counts, *written = await asyncio.gather(
                shard.reembed_users(users), *(write(u, n) for u in users for n in range(2))
            )
            assert isinstance(counts, ReembedCounts)
            assert counts.failed_users == 0 and len(written) == 8
            assert counts.reembedded == 12  # the old memories; the new ones were written on the new model
            stores = shard._stores
            assert stores is not None
            await _assert_all_on_the_new_model(stores, contents)
        finally:
            await shard.close()


async def _progress_lines(process: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    assert process.stdout is not None
    return [json.loads(line) for line in (await process.stdout.read()).decode().splitlines() if line.strip()]


async def test_reembed_killed_midway_resumes_and_leaves_each_memory_on_the_new_model_once(
    tmp_path: Path, embedder: Embedder, clock: ManualClock
) -> None:
    data = tmp_path / "data"
    users = 30
    contents = await _populate(data, embedder, clock, users=users, per_user=2)
    engram = [sys.executable, "-m", "engram.serve.cli"]
    async with embedding_server(dim=32, delay_s=0.05) as server:
        config = tmp_path / "engram.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "storage": {"data_dir": str(data), "collection": NEW_COLLECTION},
                    "embedder": {"provider": "openai", "base_url": server.url, "model": NEW_MODEL},
                }
            )
        )
        env = {**os.environ, "ENGRAM_CONFIG": str(config)}
        # A running app serves the data dir (milvus-lite's server in its process, lock included):
        # the command says what to do instead.
        from milvus_lite.server_manager import server_manager_instance

        served = str(data / "vectors.db")
        server_manager_instance.start_and_get_uri(served)
        try:
            held = await asyncio.create_subprocess_exec(
                *engram, "reembed", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
            )
            _, err = await asyncio.wait_for(held.communicate(), timeout=120)
        finally:
            server_manager_instance.release_server(served)
        assert held.returncode == 2 and b"--address" in err
        first = await asyncio.create_subprocess_exec(
            *engram, "reembed", "--batch-users", "1", stdout=asyncio.subprocess.PIPE, env=env
        )
        assert first.stdout is not None
        line = json.loads(await asyncio.wait_for(first.stdout.readline(), timeout=120))
        assert line["users_done"] == 1 and line["users_total"] == users
        first.send_signal(signal.SIGKILL)
        assert await first.wait() == -signal.SIGKILL

        # The kill landed mid-run: some users are on the new model, others not yet.
        # (Read from the database alone: opening the vector file here would lock the next run out.)
        database = create_engine(Settings(storage={"data_dir": data}).storage.resolved_database_url())
        async with database.connect() as conn:
            query = select(memories.c.user_id).where(memories.c.embedding_model == NEW_MODEL).distinct()
            moved = {row[0] for row in (await conn.execute(query)).all()}
        await database.dispose()
        assert 1 <= len(moved) < users

        second = await asyncio.create_subprocess_exec(
            *engram, "reembed", "--batch-users", "8", stdout=asyncio.subprocess.PIPE, env=env
        )
        lines = await asyncio.wait_for(_progress_lines(second), timeout=300)
        assert await second.wait() == 0
        assert lines[-1]["left"] == 0 and lines[-1]["model"] == NEW_MODEL
        assert lines[0]["users_total"] <= users - len(moved) + 1  # the rerun takes up what was left

    stores = await open_stores(
        Settings(storage={"data_dir": data, "collection": NEW_COLLECTION}), embedder=_Fixed()
    )
    try:
        await _assert_all_on_the_new_model(stores, contents)
    finally:
        await stores.close()
    assert isinstance(stores.vectors.index, MilvusVectorStore)  # type: ignore[attr-defined]


class _Fixed:
    """The new model's name and dimension, for reopening the stores without its server."""

    model_name = NEW_MODEL
    dim = 32

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([_unit(t) for t in texts]) if texts else np.zeros((0, 32), dtype=np.float32)


class _LoopShard:
    """A ``Shard`` answering as its Ray actor would: ``reembed_users.remote(batch)`` then ``get``."""

    def __init__(self, shard: Shard, loop: asyncio.AbstractEventLoop) -> None:
        self.shard, self.loop = shard, loop
        self.batches: list[list[str]] = []
        self.reembed_users = self

    def remote(self, batch: list[str]) -> list[str]:
        self.batches.append(batch)
        return batch

    def get(self, batch: list[str]) -> ReembedCounts:
        return self.loop.run_until_complete(self.shard.reembed_users(batch))


def test_reembed_through_shards_hands_each_shard_its_users_in_batches(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    from engram.serve.reembed_job import left, reembed_through_shards

    data = tmp_path / "data"
    loop = asyncio.new_event_loop()
    try:
        contents = loop.run_until_complete(_populate(data, embedder, ManualClock(), users=5, per_user=2))
        server_cm = embedding_server(dim=32)
        server = loop.run_until_complete(server_cm.__aenter__())
        settings = _new_settings(data, server.url)
        shard = Shard(settings, 0)
        loop.run_until_complete(shard.backend())
        actor = _LoopShard(shard, loop)
        names: list[str] = []

        def get_actor(name: str) -> _LoopShard:
            names.append(name)
            return actor

        counts = reembed_through_shards(settings, batch_users=2, get_actor=get_actor, get=actor.get)
        assert set(names) == {shard_name(settings.serve.app_name, 0)}
        assert actor.batches == [["u0", "u1"], ["u2", "u3"], ["u4"]]
        assert (counts.users, counts.reembedded, counts.failed_users) == (5, 10, 0)
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(x["users_done"], x["users_total"]) for x in lines] == [(2, 5), (4, 5), (5, 5)]
        assert left(settings) == 0
        stores = shard._stores
        assert stores is not None
        loop.run_until_complete(_assert_all_on_the_new_model(stores, contents))
        loop.run_until_complete(shard.close())
        loop.run_until_complete(server_cm.__aexit__(None, None, None))
    finally:
        loop.close()
