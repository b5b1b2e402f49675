"""Cold recall (#30): a recall for a user whose snapshot this process does not hold, answered from
the user's best candidates instead of a whole snapshot built first.

A snapshot load opens every memory of the user (content, labels, vectors) and indexes all of it
for BM25: ~155 ms of CPU at 500 memories (docs/benchmarks.md). A cold recall reads only the vector
copies and texts with the columns that place each memory (scope, status, validity), keeps those
the recall may see, picks ``cold_candidates`` of them (half by the query's words in their text,
the rest by cosine: ``candidates``), opens those and ranks them exactly as a warm recall ranks a
snapshot: the same gate, signals and formula, over a snapshot of the candidates. What differs: a
memory that neither channel picks is not ranked, and BM25's document frequencies are those of the
candidates (the agreement is measured in tests/integration/test_cold_recall.py).

On a Milvus server, which any process may search, the candidates come from the vector index
instead (``actors.cold_index``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engram.actors import isolation
from engram.actors.cold_index import IndexedCold, IndexRead, VectorSearch
from engram.actors.lexical import fold, search_terms
from engram.actors.snapshot import RECALLABLE, UserSnapshot, assemble
from engram.models.api import RecallRequest
from engram.models.rules import ranking
from engram.models.settings import RecallSettings
from engram.storage import vector_copies
from engram.storage.metadata import MetadataStore
from engram.storage.quick_reads import PlacedRead, QuickReader, read_key
from engram.storage.vector_copies import PlacedCopy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ColdRead:
    """A cold user's recallable memories as placed copies, at the user's change ``version``."""

    version: int
    placed: list[PlacedCopy]
    # The SQLite file's read (``QuickReader.placed_read``), which opens the candidates itself.
    rows: PlacedRead | None = None
    # Set when the candidates are to be searched in the vector index (``placed`` is then empty).
    index: IndexRead | None = None


def answers_cold(request: RecallRequest, flt: isolation.RecallFilter, settings: RecallSettings) -> bool:
    """Whether a recall may be answered cold: tag and entity filters need every memory's sealed
    labels, and an explanation describes the memories left out, so those load the snapshot."""
    return settings.cold_candidates > 0 and not request.explain and not flt.tags and not flt.entities


def candidates(
    placed: list[PlacedCopy],
    flt: isolation.RecallFilter,
    query_vector: np.ndarray,
    query: str,
    now: datetime,
    limit: int,
) -> list[PlacedCopy]:
    """Up to ``limit`` memories the recall may see: the best half by the query's words found in
    their text (``lexical.search_terms``, weighted by rarity), the rest nearest by cosine.

    By cosine alone, 100 candidates of 662 LoCoMo turns held the evidence of 64% of questions in
    the top 10 against 74% for the warm recall (docs/benchmarks.md): lexical evidence, most of
    the ranking's weight, must reach the candidates too."""
    seen = [p for p in placed if p.vector is not None and isolation.placed_visible(flt, p, now)]
    if not seen or limit <= 0:
        return []
    chosen = dict.fromkeys(_by_words(seen, query, limit // 2))
    matrix = np.vstack([p.vector for p in seen if p.vector is not None])
    cosine = matrix @ np.asarray(query_vector, dtype=np.float32)
    for i in np.argsort(-cosine, kind="stable"):
        if len(chosen) >= limit:
            break
        chosen.setdefault(int(i))
    return [seen[i] for i in chosen]


def _by_words(seen: list[PlacedCopy], query: str, limit: int) -> list[int]:
    """Positions of the ``limit`` memories whose text holds the most of the query's rarer terms."""
    terms = search_terms(query)
    if not terms or limit <= 0:
        return []
    texts = [fold(_words_of(p)) for p in seen]
    # Term by term (a row per term, then transposed): a fifth of the time of a row per memory.
    found = np.array([[term in text for text in texts] for term in terms], dtype=bool).T
    df = found.sum(axis=0)
    idf = np.log1p((len(seen) - df + 0.5) / (df + 0.5))
    score = found @ idf
    return [int(i) for i in np.argsort(-score, kind="stable")[:limit] if score[i] > 0]


def _words_of(copy: PlacedCopy) -> str:
    # A memory's context counts as its words, as in the lexicon a warm recall ranks by.
    content = copy.content or ""
    return f"{content} {copy.context}" if copy.context else content


class ColdRecall:
    """Reads a cold user's placed copies and builds the snapshot of its nearest visible memories."""

    def __init__(
        self,
        metadata: MetadataStore,
        model_name: str,
        dim: int,
        settings: RecallSettings,
        quick: QuickReader | None = None,
        index: VectorSearch | None = None,
    ) -> None:
        """``quick``: the SQLite file read directly (half the time of a read through SQLAlchemy);
        ``index``: a vector index this process may search (a Milvus server), for the candidates."""
        self._metadata = metadata
        self._quick = quick
        self._indexed = None if index is None else IndexedCold(metadata, model_name, dim, settings, index)
        self._model_name = model_name
        self._dim = dim
        self._settings = settings

    async def read(self, user_id: str) -> ColdRead | None:
        """The user's placed copies; None when the snapshot should be loaded instead: the user has
        some but no more than ``cold_min_memories`` memories, or some recallable memory has no copy of this
        model's vector (written before copies, or during a re-embedding: a load embeds those)."""
        if self._indexed is not None and await self._indexed.ready():
            found = await self._indexed.read(user_id, self._small)
            return None if found is None else ColdRead(found.version, [], index=found)
        return await self._placed_read(user_id)

    async def _placed_read(self, user_id: str) -> ColdRead | None:
        if self._quick is not None:
            # Counted first: reading a small user's placed rows only to load the snapshot after was
            # a quarter of that load on a store of a million memories (#30).
            if self._small(self._quick.count_with_status(user_id, RECALLABLE)):
                return None
            key = await read_key(self._metadata, user_id)
            rows = self._quick.placed_read(user_id, RECALLABLE, key)
            version = rows.version
            placed = vector_copies.opened_placed(user_id, rows.placed, rows.cipher, RECALLABLE)
        else:
            rows = None
            async with self._metadata.transaction(readonly=True) as tx:
                version = await tx.versions.read(user_id)
                placed = await vector_copies.placed_for_user(tx, user_id, RECALLABLE)
            if self._small(len(placed)):
                return None
        for copy in placed:
            if copy.embedding_model != self._model_name or copy.vector is None:
                return None
            if copy.vector.shape != (self._dim,):
                return None
        return ColdRead(version, placed, rows)

    def _small(self, memories: int) -> bool:
        # A user without memories is answered cold: nothing to load, and an empty snapshot held for
        # every unknown user id would push real ones out of the cache.
        return 0 < memories <= self._settings.cold_min_memories

    async def snapshot(
        self,
        read: ColdRead,
        flt: isolation.RecallFilter,
        query_vector: np.ndarray,
        query: str,
        top_k: int,
        now: datetime,
    ) -> UserSnapshot:
        """A snapshot of the recall's candidates (``candidates``), opened from the store (not cached)."""
        if read.index is not None and self._indexed is not None:
            try:
                return await self._indexed.snapshot(read.index, flt, query_vector, top_k, now)
            except Exception as exc:  # the index went away: the copies answer, as without one
                log.warning("vector index search failed, reading the copies: %s", type(exc).__name__)
                placed = await self._placed_read(flt.scope.user_id)
                if placed is None:
                    raise
                read = placed
        limit = max(self._settings.cold_candidates, ranking.overfetch_limit(top_k, self._settings))
        nearest = candidates(read.placed, flt, query_vector, query, now, limit)
        user_id = flt.scope.user_id
        ids = [p.memory_id for p in nearest]
        if read.rows is not None:
            opened = read.rows.memories_of(ids)
        else:
            async with self._metadata.transaction(readonly=True) as tx:
                opened = await tx.memories.get_many(user_id, ids)
        memories = []
        vectors = []
        for copy in nearest:
            memory = opened.get(copy.memory_id)
            # Read again through SQLAlchemy, a memory may have changed since the first read (the
            # version moved): the warm path's gate decides on the row as it is now, with the vector
            # it had then. The SQLite file's rows come from the first read itself.
            if memory is not None and memory.content is not None and copy.vector is not None:
                memories.append(memory)
                vectors.append(copy.vector)
        return assemble(read.version, 0.0, memories, vectors, self._dim)
