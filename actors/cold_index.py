"""Cold recall from the vector index (#30): where the index is a Milvus server, which any process
may search, a cold recall's candidates are its nearest ``cold_index_candidates`` memories in the
recall's scope, and only those rows and copies are read from the database, never the user's whole
store. The lexical channel of ``actors.cold_recall.candidates`` is lost, so this path takes twice
the candidates: by cosine alone, 200 of 662 LoCoMo turns kept the evidence of more questions in the
top 10 than the default 100 chosen half by words (docs/evaluation.md).

The search runs at Bounded consistency (``storage.index_search``), which may not show a vector
written in the last seconds: the user's sealed copies written since ``INDEX_LAG_S`` ago join the
candidates, so a memory written just before the recall is never missed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from engram.actors import isolation
from engram.actors.snapshot import RECALLABLE, UserSnapshot, assemble
from engram.models.domain import Memory, utcnow
from engram.models.rules import ranking
from engram.models.settings import RecallSettings
from engram.storage import vector_copies
from engram.storage.metadata import MetadataStore
from engram.storage.vector_filters import VectorScope

# How far behind a Bounded search may be (the server's graceful time, 5 s by default), with room
# for the clocks of the writer's and the reader's hosts.
INDEX_LAG_S = 60.0
# More recent copies than this (an import under way): the user's snapshot is loaded instead.
MAX_RECENT = 500


class VectorSearch(Protocol):
    """The vector index searched by a cold recall (``storage.index_search.IndexSearch``)."""

    async def ready(self) -> bool:
        """Whether the index can be searched now."""
        ...

    async def search(self, vector: np.ndarray, scope: VectorScope, limit: int) -> list[tuple[str, float]]:
        """Nearest memories visible in ``scope`` as (memory_id, cosine similarity), best first."""
        ...

    async def get_vectors(self, memory_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by memory id (missing ids are left out)."""
        ...

    async def close(self) -> None:
        """Let go of the index's client."""
        ...


@dataclass(frozen=True, slots=True)
class IndexRead:
    """A cold user's change ``version`` and the ids of its copies the index may not show yet."""

    version: int
    recent: tuple[str, ...]


class IndexedCold:
    """Builds a cold recall's snapshot from the vector index's nearest memories."""

    def __init__(
        self,
        metadata: MetadataStore,
        model_name: str,
        dim: int,
        settings: RecallSettings,
        index: VectorSearch,
    ) -> None:
        self._metadata = metadata
        self._model_name = model_name
        self._dim = dim
        self._settings = settings
        self._index = index

    async def ready(self) -> bool:
        """Whether the index can be searched now (else the caller reads the copies)."""
        return await self._index.ready()

    async def read(self, user_id: str, small: Callable[[int], bool]) -> IndexRead | None:
        """The user's version and recent copies; None when the snapshot should be loaded instead:
        ``small`` says so of the user's count, some memory has another model's vector (a
        re-embedding under way: the index would never offer it), or an import is under way."""
        since = utcnow() - timedelta(seconds=INDEX_LAG_S)
        async with self._metadata.transaction(readonly=True) as tx:
            version = await tx.versions.read(user_id)
            models = await tx.memories.count_by_model(user_id, RECALLABLE)
            recent = await vector_copies.written_since(tx, user_id, since, MAX_RECENT + 1)
        if small(sum(models.values())) or set(models) - {self._model_name} or len(recent) > MAX_RECENT:
            return None
        return IndexRead(version, tuple(recent))

    async def snapshot(
        self,
        read: IndexRead,
        flt: isolation.RecallFilter,
        query_vector: np.ndarray,
        top_k: int,
        now: datetime,
    ) -> UserSnapshot:
        """A snapshot of the index's nearest ``cold_index_candidates`` memories the recall may see,
        and of the recent ones."""
        limit = max(self._settings.cold_index_candidates, ranking.overfetch_limit(top_k, self._settings))
        # Twice as many asked: the index knows scope, not status or validity (superseded and
        # expired memories keep their vectors until they are purged).
        hits = await self._index.search(query_vector, flt.scope, 2 * limit)
        user_id = flt.scope.user_id
        recent = set(read.recent)
        # The recent ones first (always taken), then the index's, nearest first.
        queue = list(dict.fromkeys([*read.recent, *(memory_id for memory_id, _ in hits)]))
        taken: list[tuple[Memory, np.ndarray | None]] = []
        nearest = done = 0
        async with self._metadata.transaction(readonly=True) as tx:
            # Read in rounds of what is still wanted, plus a quarter for those the gate turns away.
            while done < len(queue) and nearest < limit:
                wanted = limit - nearest
                chunk = queue[done : done + len(recent) * (done == 0) + wanted + wanted // 4]
                done += len(chunk)
                opened = await vector_copies.memories_with_copies(tx, user_id, chunk)
                for memory_id in chunk:
                    memory, vector = opened.get(memory_id, (None, None))
                    if memory is None or memory.content is None or memory.status not in RECALLABLE:
                        continue
                    if not isolation.placed_visible(flt, memory, now):
                        continue
                    if memory_id in recent or nearest < limit:
                        nearest += memory_id not in recent
                        taken.append((memory, vector))
        # A copy missing (a write between its row and its copy): the index has the vector.
        lacking = [m.memory_id for m, vector in taken if vector is None]
        found = await self._index.get_vectors(lacking) if lacking else {}
        memories: list[Memory] = []
        vectors: list[np.ndarray] = []
        for memory, vector in taken:
            vector = found.get(memory.memory_id) if vector is None else vector
            if vector is not None and vector.shape == (self._dim,):
                memories.append(memory)
                vectors.append(vector)
        return assemble(read.version, 0.0, memories, vectors, self._dim)
