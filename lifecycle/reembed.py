"""Moving memories to a new embedding model (SPEC O2, D1 ``embedding_model``): ``engram reembed``.

The process's embedder is the new model (``embedder`` settings) writing to a collection of its own
(``storage.collection``, checked by ``storage.collection_models``). For one user, every memory with
a vector (active, superseded, archived) still on another model is embedded again: the new vector is
written first (index and sealed copy, or the archive object), then the memory row is switched to
the new model in one commit. A crash between the two leaves the row on the old model with the new
vector already stored; the rerun embeds it again and overwrites the same record, so every memory
ends on the new model with exactly one vector. Recall meanwhile compares the query only with
vectors of its own model (``actors.snapshot``). Deleted memories are left: they are never compared
and are purged. The work of one user runs on that user's mailbox, so writes and sweeps go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Self

import numpy as np

from engram.lifecycle.archive import ArchivedItem
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.sweeps import Submit, each_user
from engram.models.domain import Memory
from engram.models.enums import Status
from engram.storage.embedders import EmbeddingError
from engram.storage.sweep_queries import WITH_VECTORS, set_embedding_model, users_to_reembed
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)


@dataclass
class ReembedCounts:
    """What a re-embedding run did: users visited, memories moved (archived among them), memories
    that could not be embedded (left on their old model for the next run), users that failed."""

    users: int = 0
    reembedded: int = 0
    archived: int = 0
    unembeddable: int = 0
    failed_users: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, other: Self) -> Self:
        """Add ``other``'s counts into this one (returns self)."""
        for name in self.as_dict():
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)
        return self

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain mapping (progress lines, JSON; never content)."""
        return {f.name: int(getattr(self, f.name)) for f in fields(self) if f.name != "failures"}


async def reembed_user(stores: LifecycleStores, user_id: str) -> ReembedCounts:
    """Move one user's memories to the embedder's model; run it on the user's mailbox."""
    model = stores.embedder.model_name
    async with stores.metadata.transaction(readonly=True) as tx:
        rows = await tx.memories.with_status(user_id, WITH_VECTORS)
    # Content None: sealed under a shredded key (a purge in progress); nothing to embed.
    stale = [m for m in rows if m.embedding_model != model and m.content is not None]
    counts = ReembedCounts(users=1)
    if not stale:
        return counts
    embedded, failed = await _embed(stores, stale)
    counts.unembeddable = len(failed)
    indexed = [(m, v) for m, v in embedded if m.status is not Status.ARCHIVED]
    archived = [(m, v) for m, v in embedded if m.status is Status.ARCHIVED]
    if indexed:
        await stores.vectors.upsert([vector_record(m, v) for m, v in indexed])
    if archived:
        async with stores.metadata.transaction(readonly=True) as tx:
            cipher = await tx.keys.cipher(user_id)
        for memory, vector in archived:
            await stores.archive.put(
                cipher, user_id, ArchivedItem(memory.memory_id, memory.content or "", vector)
            )
    moved = [m.memory_id for m, _ in embedded]
    if moved:
        async with stores.metadata.transaction() as tx:
            await set_embedding_model(tx, user_id, moved, model)
            await tx.versions.bump(user_id)
    counts.reembedded = len(moved)
    counts.archived = len(archived)
    return counts


async def _embed(
    stores: LifecycleStores, stale: Sequence[Memory]
) -> tuple[list[tuple[Memory, np.ndarray]], list[Memory]]:
    """The memories with their new vectors, and those the embedder could not embed (W9)."""
    try:
        vectors = await stores.embedder.embed([m.content or "" for m in stale])
        failed: set[int] = set()
    except EmbeddingError as exc:
        vectors, failed = exc.vectors, set(exc.indices)
        log.warning("reembed: %d memories could not be embedded; they stay on their model", len(failed))
    embedded = [(m, vectors[i]) for i, m in enumerate(stale) if i not in failed]
    return embedded, [m for i, m in enumerate(stale) if i in failed]


ReembedProgress = Callable[[int, int, ReembedCounts], None]
"""Told (users done, users in all, counts so far) after each batch of users."""


async def reembed_all(
    stores: LifecycleStores,
    submit: Submit[ReembedCounts],
    *,
    batch_users: int = 64,
    concurrency: int = 4,
    on_batch: ReembedProgress | None = None,
) -> ReembedCounts:
    """Move every user still on another model, a batch of users at a time; resumable (a rerun
    finds only the users left)."""
    async with stores.metadata.engine.connect() as conn:
        user_ids = await users_to_reembed(conn, stores.embedder.model_name)
    total = ReembedCounts()
    for start in range(0, len(user_ids), batch_users):
        batch = user_ids[start : start + batch_users]
        total.add(
            await each_user(
                batch,
                lambda user_id: reembed_user(stores, user_id),
                submit,
                ReembedCounts(),
                what="reembed",
                concurrency=concurrency,
            )
        )
        if on_batch is not None:
            on_batch(start + len(batch), len(user_ids), total)
    return total
