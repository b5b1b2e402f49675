"""Cold recall (#30): a recall for a user whose snapshot this process does not hold, answered from
the user's nearest memories instead of a whole snapshot built first.

A snapshot load opens every memory of the user (content, labels, vectors) and indexes all of it
for BM25: ~155 ms of CPU at 500 memories (docs/benchmarks.md). A cold recall reads only the vector
copies with the columns that place each memory (scope, status, validity), keeps those the recall
may see, opens the ``cold_candidates`` nearest by cosine and ranks them exactly as a warm recall
ranks a snapshot: the same gate, signals and formula, over a snapshot of the candidates. What
differs: a memory that matches the query's words but is far from it in meaning is not among the
candidates, and BM25's document frequencies are those of the candidates (bounded in
tests/integration/test_cold_recall.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engram.actors import isolation
from engram.actors.snapshot import RECALLABLE, UserSnapshot, assemble
from engram.models.api import RecallRequest
from engram.models.rules import ranking
from engram.models.settings import RecallSettings
from engram.storage import vector_copies
from engram.storage.metadata import MetadataStore
from engram.storage.quick_reads import QuickReader
from engram.storage.vector_copies import PlacedCopy


@dataclass(frozen=True, slots=True)
class ColdRead:
    """A cold user's recallable memories as placed copies, at the user's change ``version``."""

    version: int
    placed: list[PlacedCopy]


def answers_cold(request: RecallRequest, flt: isolation.RecallFilter, settings: RecallSettings) -> bool:
    """Whether a recall may be answered cold: tag and entity filters need every memory's sealed
    labels, and an explanation describes the memories left out, so those load the snapshot."""
    return settings.cold_candidates > 0 and not request.explain and not flt.tags and not flt.entities


def nearest_visible(
    placed: list[PlacedCopy],
    flt: isolation.RecallFilter,
    query_vector: np.ndarray,
    now: datetime,
    limit: int,
) -> list[PlacedCopy]:
    """The ``limit`` memories nearest the query among those the recall may see, nearest first."""
    seen = [p for p in placed if isolation.placed_visible(flt, p, now) and p.vector is not None]
    if not seen or limit <= 0:
        return []
    matrix = np.vstack([p.vector for p in seen if p.vector is not None])
    cosine = matrix @ np.asarray(query_vector, dtype=np.float32)
    if len(seen) > limit:
        best = np.argpartition(-cosine, limit - 1)[:limit]
        order = best[np.argsort(-cosine[best], kind="stable")]
    else:
        order = np.argsort(-cosine, kind="stable")
    return [seen[int(i)] for i in order]


class ColdRecall:
    """Reads a cold user's placed copies and builds the snapshot of its nearest visible memories."""

    def __init__(
        self,
        metadata: MetadataStore,
        model_name: str,
        dim: int,
        settings: RecallSettings,
        quick: QuickReader | None = None,
    ) -> None:
        """``quick``: the SQLite file read directly (half the time of a read through SQLAlchemy)."""
        self._metadata = metadata
        self._quick = quick
        self._model_name = model_name
        self._dim = dim
        self._settings = settings

    async def read(self, user_id: str) -> ColdRead | None:
        """The user's placed copies; None when some recallable memory has no copy of this model's
        vector (written before copies, or during a re-embedding): only a snapshot load embeds those."""
        if self._quick is not None:
            async with self._metadata.transaction(readonly=True) as tx:
                cipher = await tx.keys.existing(user_id)
            version = self._quick.version(user_id)
            rows = self._quick.placed_rows(user_id)
            placed = vector_copies.opened_placed(user_id, rows, cipher, RECALLABLE)
        else:
            async with self._metadata.transaction(readonly=True) as tx:
                version = await tx.versions.read(user_id)
                placed = await vector_copies.placed_for_user(tx, user_id, RECALLABLE)
        for copy in placed:
            if copy.embedding_model != self._model_name or copy.vector is None:
                return None
            if copy.vector.shape != (self._dim,):
                return None
        return ColdRead(version, placed)

    async def snapshot(
        self,
        read: ColdRead,
        flt: isolation.RecallFilter,
        query_vector: np.ndarray,
        top_k: int,
        now: datetime,
    ) -> UserSnapshot:
        """A snapshot of the nearest visible memories, opened from the store (not cached)."""
        limit = max(self._settings.cold_candidates, ranking.overfetch_limit(top_k, self._settings))
        nearest = nearest_visible(read.placed, flt, query_vector, now, limit)
        user_id = flt.scope.user_id
        async with self._metadata.transaction(readonly=True) as tx:
            opened = await tx.memories.get_many(user_id, [p.memory_id for p in nearest])
        memories = []
        vectors = []
        for copy in nearest:
            memory = opened.get(copy.memory_id)
            # Changed since the first read (the version moved): the warm path's gate decides on the
            # row as it is now, with the vector it had then.
            if memory is not None and memory.content is not None and copy.vector is not None:
                memories.append(memory)
                vectors.append(copy.vector)
        return assemble(read.version, 0.0, memories, vectors, self._dim)
