"""The vector index as a recall process searches it: a Milvus server, opened on first use.

A Recall replica writes nothing, and may start before any shard has created the collection, so it
opens its own client lazily; while the index cannot be opened, cold recalls read the user's sealed
copies instead (``actors.cold_recall``), and the open is tried again after ``RETRY_S``. milvus-lite
has one owner process (the shard), so a process over it gets no ``IndexSearch`` at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import numpy as np

from engram.models.settings import StorageSettings
from engram.storage.vector_filters import VectorScope
from engram.storage.vectors import MilvusVectorStore, is_server_uri

log = logging.getLogger(__name__)

# Strong consistency waits for the server's next time tick: 390 ms p50 per search under a write
# load, against 5 ms Bounded (docs/benchmarks.md). What Bounded may not show yet, a cold recall adds
# from the sealed copies written since (``actors.cold_recall.INDEX_LAG_S``).
CONSISTENCY = "Bounded"
# After a failed open, the index is left alone this long (a restarting Milvus, a missing collection).
RETRY_S = 10.0


class IndexSearch:
    """``search`` over a vector store opened on first use; ``ready`` tells whether it is open."""

    def __init__(self, store: MilvusVectorStore, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._opened = False
        self._retry_at = 0.0
        self._lock = asyncio.Lock()
        self.searches = 0  # how many cold recalls asked the index (tests, figures)

    async def ready(self) -> bool:
        """Open the store if it is not open yet and a retry is due; whether it is open."""
        if self._opened:
            return True
        if self._clock() < self._retry_at:
            return False
        async with self._lock:
            if not self._opened and self._clock() >= self._retry_at:
                try:
                    await self._store.start()
                    self._opened = True
                except Exception as exc:  # cold recalls fall back to the sealed copies meanwhile
                    log.warning("vector index not searchable yet: %s", type(exc).__name__)
                    self._retry_at = self._clock() + RETRY_S
        return self._opened

    async def search(self, vector: np.ndarray, scope: VectorScope, limit: int) -> list[tuple[str, float]]:
        """Nearest memories visible in ``scope`` as (memory_id, cosine similarity), best first."""
        self.searches += 1
        return await self._store.search(vector, scope, limit, consistency=CONSISTENCY)

    async def get_vectors(self, memory_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by memory id (missing ids are left out)."""
        return await self._store.get_vectors(memory_ids)

    async def close(self) -> None:
        """Close the client, if it was opened."""
        if self._opened:
            self._opened = False
            await self._store.close()


def index_search(storage: StorageSettings, dim: int) -> IndexSearch | None:
    """An ``IndexSearch`` of the configured collection when it lives on a Milvus server, else None."""
    uri = storage.resolved_milvus_uri()
    if not is_server_uri(uri):
        return None
    token = storage.milvus_token.get_secret_value()
    return IndexSearch(MilvusVectorStore(uri, storage.collection, dim, token=token))
