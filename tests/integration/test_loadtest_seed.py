"""The load tests' bulk seeder writes what the app would: readable rows, their ADD entries,
counters, the user's version, and the text's own vector in the index and its sealed copy."""

from __future__ import annotations

import numpy as np
import pytest

from engram.loadtest.seed import seed
from engram.models.enums import OpType, Status
from engram.models.settings import Settings
from engram.storage import vector_copies
from engram.storage.embedders import Embedder
from engram.storage.stores import open_stores

pytestmark = pytest.mark.integration


async def test_seeded_users_hold_their_memories_with_each_texts_own_vector(
    settings: Settings, embedder: Embedder
) -> None:
    # 30 memories a user draw repeated texts across users: each must still get its own text's vector.
    assert await seed(settings, 3, 30, progress=False, embedder=embedder) == 90
    stores = await open_stores(settings, embedder=embedder)
    try:
        texts: list[str] = []
        for user_id in ("lt-0", "lt-1", "lt-2"):
            async with stores.metadata.transaction(readonly=True) as tx:
                rows = await tx.memories.with_status(user_id, [Status.ACTIVE])
                copies = await vector_copies.for_user(tx, user_id)
                version = await tx.versions.read(user_id)
                counters = await tx.counters.read(user_id)
                entries = [e for m in rows for e in await tx.changes.history(user_id, m.memory_id)]
            assert len(rows) == 30 and version >= 1 and max(counters.values()) == 30
            assert sorted(e.op_type for e in entries) == [OpType.ADD] * 30
            assert {e.content_after for e in entries} == {m.content for m in rows}
            assert set(copies) == {m.memory_id for m in rows}
            indexed = await stores.vectors.get_vectors([m.memory_id for m in rows])
            own = await embedder.embed([m.content or "" for m in rows])
            for memory, vector in zip(rows, own, strict=True):
                assert np.allclose(copies[memory.memory_id], vector, atol=1e-5)
                assert np.allclose(indexed[memory.memory_id], vector, atol=1e-5)
            texts += [m.content or "" for m in rows]
        assert len(set(texts)) < len(texts)  # some text is held by two users: one vector, shared right
    finally:
        await stores.close()
