"""Per-user recall snapshots (DESIGN decision 5): a user's recallable memories, their vectors and
their lexical index, held in memory and validated by the user's change version.

A user holds at most a few thousand memories, so scoring all of them in numpy costs well under a
millisecond; the snapshot keeps recall off the vector store's full-collection scan. The version is
bumped by every committed change of content or status; weights moved by recall hits are re-read
(a narrow query: no content, no vectors) when the snapshot's time-to-live lapses.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np

from engram.actors.lexical import Bm25Index, language, tokenize
from engram.models.domain import Memory
from engram.models.enums import Status
from engram.models.metrics import METRICS
from engram.models.tracing import TRACING
from engram.storage import vector_copies
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore
from engram.storage.quick_reads import QuickReader, read_key
from engram.storage.repositories.memories import RecallBookkeeping

# Recall's lexical signal is the idf-weighted share of the query's words that a memory holds
# (``actors.recall.lexical_coverage``). BM25's length normalisation (b = 0.75) ranked a long memory
# holding the query's words under short ones: on LoCoMo dev hit@10 was 0.695 with it and
# 0.717 without, every leave-one-out fold choosing b = 0 (docs/evaluation.md).
LENGTH_NORMALISATION = 0.0


class VectorSource(Protocol):
    """Where a snapshot reads stored vectors: the vector store, or the process that owns it."""

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by memory id (missing ids are left out)."""
        ...


RECALLABLE = (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED)
# Snapshots loaded in the background at once, per cache: each is CPU on the replica's event loop.
MAX_BACKGROUND_LOADS = 2
# What ``SnapshotCache.counts`` reports, in order.
COUNTED = ("cached_users", "cached_bytes", "hits", "loads", "colds", "background_loads")

log = logging.getLogger(__name__)


@dataclass
class UserSnapshot:
    """Everything recall scores for one user, aligned by position."""

    version: int
    loaded_at: float
    memories: list[Memory]
    vectors: np.ndarray
    lexicon: Bm25Index
    # Each memory's distinct entity tokens, as tuples: the collector stops tracking a tuple of strings
    # (a frozenset it walks in every full collection, #30).
    entity_tokens: list[tuple[str, ...]] = field(default_factory=list)
    # Each memory's script (``lexical.language``): lexical evidence only counts within one language.
    languages: list[str | None] = field(default_factory=list)
    # What the snapshot holds in memory (``snapshot_bytes``), counted against the cache's bound.
    nbytes: int = 0


# A loaded memory's own objects beside its text: the record, its lists, datetimes and short
# strings, its entity tokens and script. Measured with tracemalloc on loaded snapshots
# (tests/integration/test_snapshot_warm.py holds the estimate within 2x of the measurement).
MEMORY_OVERHEAD_BYTES = 2_000


def snapshot_bytes(snapshot: UserSnapshot) -> int:
    """An estimate of the memory a snapshot holds: vectors, lexical index, texts and records."""
    texts = sum(
        sys.getsizeof(m.content or "") + (0 if m.context is None else sys.getsizeof(m.context))
        for m in snapshot.memories
    )
    records = MEMORY_OVERHEAD_BYTES * len(snapshot.memories)
    return int(snapshot.vectors.nbytes) + snapshot.lexicon.nbytes() + texts + records


class SnapshotCache:
    """An LRU of user snapshots, reloaded when the user's version moves or the TTL lapses, bounded
    by a count of users and by the bytes the snapshots hold (the newest one is always kept)."""

    def __init__(
        self,
        metadata: MetadataStore,
        vectors: VectorSource,
        embedder: Embedder,
        *,
        max_users: int,
        ttl_s: float,
        max_bytes: int | None = None,
        admit_after: int = 1,
        monotonic: Callable[[], float] = time.monotonic,
        quick: QuickReader | None = None,
    ) -> None:
        """``quick``: synchronous version reads (SQLite) that spare a fresh snapshot a transaction;
        ``admit_after``: cold recalls of a user before its snapshot is loaded for it (``missed``)."""
        self._quick = quick
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder
        self._max_users = max_users
        self._max_bytes = max_bytes
        self._bytes = 0
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._cache: OrderedDict[str, UserSnapshot] = OrderedDict()
        # Recalls answered from a held snapshot, snapshots built (a cold user, or a stale one), and
        # recalls answered without one (``missed``).
        self.hits = 0
        self.loads = 0
        self.colds = 0
        self.background_loads = 0  # of ``loads``: those ``missed`` started
        self._admit_after = admit_after
        # Users recalled cold lately, with how many times: the doorkeeper of background loads.
        self._cold: OrderedDict[str, int] = OrderedDict()
        self._loading: dict[str, asyncio.Task[None]] = {}

    async def get(self, user_id: str) -> UserSnapshot:
        """The user's current snapshot, loading it when missing or stale."""
        held = await self.held(user_id)
        return held if held is not None else await self.load(user_id)

    async def held(self, user_id: str) -> UserSnapshot | None:
        """The user's snapshot if one is held and current (its weights refreshed past the TTL);
        None when the user is cold or changed since."""
        cached = self._cache.get(user_id)
        if cached is None:
            return None
        if self._quick is not None:
            if self._quick.version(user_id) != cached.version:
                return None
            if self._expired(cached):
                # A version read and the weight read are two statements: a change committed
                # between them moves the version, and the next recall reloads the user anyway.
                self._refresh(cached, self._quick.recall_bookkeeping(user_id))
        else:
            async with self._metadata.transaction(readonly=True) as tx:
                if await tx.versions.read(user_id) != cached.version:
                    return None
                if self._expired(cached):
                    self._refresh(cached, await tx.memories.recall_bookkeeping(user_id))
        self._cache.move_to_end(user_id)
        METRICS.snapshot_cache.inc(1, {"event": "hit"})
        TRACING.annotate("engram.snapshot", "hit")
        self.hits += 1
        return cached

    async def load(self, user_id: str) -> UserSnapshot:
        """Build the user's snapshot from the stores and hold it."""
        snapshot = await self._read(user_id)
        self._admit(user_id, snapshot)
        return snapshot

    async def load_on_demand(self, user_id: str) -> UserSnapshot:
        """Build the snapshot a recall of a cold user needs (a small one: ``cold_min_memories``).
        It is held while the cache has room; a full cache holds it only for a user who came back
        (its ``admit_after``-th recall while remembered, as ``missed`` counts), so that users
        recalled once do not push out those who return (skewed traffic, #30)."""
        snapshot = await self._read(user_id)
        seen = self._cold.pop(user_id, 0) + 1
        if user_id in self._cache or seen >= self._admit_after or not self._full_with(snapshot):
            self._admit(user_id, snapshot)
            return snapshot
        self._remember_cold(user_id, seen)
        return snapshot

    async def _read(self, user_id: str) -> UserSnapshot:
        started = time.perf_counter()
        METRICS.snapshot_cache.inc(1, {"event": "miss"})
        if self._quick is not None:
            # Half a load's time on a store of a million memories was SQLAlchemy's, and a tenth the
            # transaction that read the key (#30): one sqlite3 read, the key with the rows.
            key = await read_key(self._metadata, user_id)
            version, rows, copies = self._quick.snapshot_rows(user_id, RECALLABLE, key)
        else:
            async with self._metadata.transaction(readonly=True) as tx:
                version = await tx.versions.read(user_id)
                rows = await tx.memories.with_status(user_id, RECALLABLE)
                copies = await vector_copies.for_user(tx, user_id)
        snapshot = await self._build(version, [m for m in rows if m.content is not None], copies)
        METRICS.snapshot_cache.inc(1, {"event": "load"})
        TRACING.annotate("engram.snapshot", "load")
        self.loads += 1
        METRICS.snapshot_load.observe((time.perf_counter() - started) * 1000)
        return snapshot

    def missed(self, user_id: str) -> None:
        """A recall of this user was answered without its snapshot (``actors.cold_recall``): on the
        user's ``admit_after``-th such recall, load the snapshot in the background.

        Loading every cold user's snapshot would spend the replica on users who never come back
        (with thousands of users drawn evenly, most are recalled once): a user earns a snapshot by
        returning while it is still remembered here (the last ``max_users`` cold users). A user
        whose held snapshot went stale (a change since) has returned already: reloaded at once."""
        METRICS.snapshot_cache.inc(1, {"event": "cold"})
        self.colds += 1
        seen = self._cold.pop(user_id, 0) + 1
        if user_id in self._cache:
            seen = self._admit_after  # held, but changed since: a user who came back already
        if seen >= self._admit_after and user_id not in self._loading:
            if len(self._loading) < MAX_BACKGROUND_LOADS:
                task = asyncio.get_running_loop().create_task(self._load_quietly(user_id))
                self._loading[user_id] = task
                task.add_done_callback(lambda _: self._loading.pop(user_id, None))
                return
            seen = self._admit_after - 1  # busy loading others: the user's next cold recall tries again
        self._remember_cold(user_id, seen)

    def _remember_cold(self, user_id: str, seen: int) -> None:
        """Remember a cold user's recalls so far (the last ``max_users`` such users: the doorkeeper)."""
        self._cold[user_id] = seen
        while len(self._cold) > self._max_users:
            self._cold.popitem(last=False)

    async def settled(self) -> None:
        """Wait for the background loads under way (tests and benchmarks)."""
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def _load_quietly(self, user_id: str) -> None:
        self.background_loads += 1
        try:
            await self.load(user_id)
        except Exception as exc:  # a failed background load only means another cold recall
            log.warning("background snapshot load failed: %s", type(exc).__name__)

    @property
    def bytes(self) -> int:
        """What the cached snapshots hold, by ``snapshot_bytes``."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._cache)

    def counts(self) -> dict[str, float]:
        """Snapshots held (users, bytes) and recalls answered by kind, for ``warm_status``."""
        held = (len(self._cache), self._bytes, self.hits, self.loads, self.colds, self.background_loads)
        return {key: float(value) for key, value in zip(COUNTED, held, strict=True)}

    @staticmethod
    def nothing() -> dict[str, float]:
        """``counts`` of a cache not made yet."""
        return dict.fromkeys(COUNTED, 0.0)

    async def warm(self, limit: int) -> int:
        """Load the snapshots of up to ``limit`` most recently active users, while they fit the
        cache's bounds; returns how many are held."""
        async with self._metadata.transaction(readonly=True) as tx:
            user_ids = await tx.memories.recently_active_users(min(limit, self._max_users))
        for user_id in user_ids:
            if self._max_bytes is not None and self._bytes >= self._max_bytes:
                break
            await self.get(user_id)
            # Less active than every user warmed before it: first to go when the cache is full.
            if user_id in self._cache:
                self._cache.move_to_end(user_id, last=False)
        return sum(1 for user_id in user_ids if user_id in self._cache)

    def note_recall_hits(self, user_id: str, hits: Mapping[str, tuple[float, int]], at: datetime) -> None:
        """Apply recall-hit bookkeeping (weight, count) to a cached snapshot without reloading it."""
        cached = self._cache.get(user_id)
        if cached is not None and hits:
            rows = {m: RecallBookkeeping(weight, at, count, at) for m, (weight, count) in hits.items()}
            _apply_bookkeeping(cached, rows)

    def _admit(self, user_id: str, snapshot: UserSnapshot) -> None:
        replaced = self._cache.pop(user_id, None)
        self._bytes += snapshot.nbytes - (replaced.nbytes if replaced is not None else 0)
        self._cache[user_id] = snapshot
        while len(self._cache) > 1 and self._over_bounds():
            _, evicted = self._cache.popitem(last=False)
            self._bytes -= evicted.nbytes
            METRICS.snapshot_cache.inc(1, {"event": "eviction"})
        METRICS.snapshot_bytes.set(self._bytes)

    def _full_with(self, snapshot: UserSnapshot) -> bool:
        """Whether holding ``snapshot`` would push another one out."""
        too_many = len(self._cache) >= self._max_users
        return too_many or (self._max_bytes is not None and self._bytes + snapshot.nbytes > self._max_bytes)

    def _over_bounds(self) -> bool:
        too_many = len(self._cache) > self._max_users
        return too_many or (self._max_bytes is not None and self._bytes > self._max_bytes)

    def _expired(self, snapshot: UserSnapshot) -> bool:
        return self._monotonic() - snapshot.loaded_at >= self._ttl_s

    def _refresh(self, snapshot: UserSnapshot, rows: Mapping[str, RecallBookkeeping]) -> None:
        # Only recall hits move a memory without a version bump: refresh what they change (no
        # content to decrypt, no vectors) instead of reloading the user.
        _apply_bookkeeping(snapshot, rows)
        snapshot.loaded_at = self._monotonic()

    async def _build(
        self, version: int, memories: list[Memory], copies: dict[str, np.ndarray]
    ) -> UserSnapshot:
        # Only vectors of this embedder's model are ever compared with its query vectors (O2):
        # memories still on another model (a re-embedding under way) are embedded afresh here.
        model, dim = self._embedder.model_name, self._embedder.dim
        same_model = [m for m in memories if m.embedding_model == model]
        stored = {m.memory_id: copies[m.memory_id] for m in same_model if m.memory_id in copies}
        uncopied = [m.memory_id for m in same_model if m.memory_id not in stored]
        if uncopied:
            # Copies are written after the index; rows from before copies existed, or whose copy
            # was lost, come from the vector source.
            stored.update(await self._vectors.get_vectors(uncopied))
        stored = {mid: v for mid, v in stored.items() if np.shape(v) == (dim,)}
        missing = [m for m in memories if m.memory_id not in stored]
        if missing:
            # Archived memories left the active index, and drift is possible until reconcile runs:
            # embed what the vector store lacks so every recallable memory can be scored.
            fresh = await self._embedder.embed([m.content or "" for m in missing])
            stored.update({m.memory_id: fresh[i] for i, m in enumerate(missing)})
        return assemble(version, self._monotonic(), memories, [stored[m.memory_id] for m in memories], dim)


def entity_tokens_of(memory: Memory) -> tuple[str, ...]:
    """The distinct tokens of a memory's entities, in the order first seen."""
    return tuple(dict.fromkeys(t for e in memory.entities for t in tokenize(e)))


def lexical_terms(memory: Memory) -> list[str]:
    """The words recall's lexical signal sees in a memory: its content's, then its context's (the
    message it answered; LoCoMo dev turns hit@10 0.717 -> 0.77, docs/evaluation.md)."""
    terms = tokenize(memory.content or "")
    if memory.context:
        terms.extend(tokenize(memory.context))
    return terms


def assemble(
    version: int, loaded_at: float, memories: list[Memory], vectors: Sequence[np.ndarray], dim: int
) -> UserSnapshot:
    """A snapshot of ``memories`` (with content) and their vectors, aligned by position: the lexical
    index, entity tokens and scripts built over exactly these memories."""
    matrix = (
        np.vstack([np.asarray(v, dtype=np.float32) for v in vectors])
        if memories
        else np.zeros((0, dim), dtype=np.float32)
    )
    snapshot = UserSnapshot(
        version=version,
        loaded_at=loaded_at,
        memories=memories,
        vectors=matrix,
        lexicon=Bm25Index([lexical_terms(m) for m in memories], b=LENGTH_NORMALISATION),
        entity_tokens=[entity_tokens_of(m) for m in memories],
        languages=[language(m.content or "") for m in memories],
    )
    snapshot.nbytes = snapshot_bytes(snapshot)
    return snapshot


def _apply_bookkeeping(snapshot: UserSnapshot, rows: Mapping[str, RecallBookkeeping]) -> None:
    for memory in snapshot.memories:
        row = rows.get(memory.memory_id)
        if row is not None:
            memory.weight, memory.weight_at = row.weight, row.weight_at
            memory.recall_count, memory.last_recalled_at = row.recall_count, row.last_recalled_at
