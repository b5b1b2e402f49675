"""Sealed copies of indexed vectors in the metadata database, kept in step by a vector-store wrapper.

A recall snapshot needs all of one user's vectors at once. milvus-lite answers that slowly (14-28 ms
per 100 ids by primary key, ~340 ms by user filter over 100k rows, measured in docs/benchmarks.md),
so every vector written to the index is also sealed with its user's data key into ``memory_vectors``
and a snapshot reads rows and vectors in one read transaction. The index stays the durable store of
record for vectors (reconcile compares against it); a missing copy only means a slower load.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import delete, insert, select

from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.schema import memory_vectors
from engram.storage.vector_filters import VectorScope
from engram.storage.vectors import VectorRecord, VectorStore

_DTYPE = np.dtype("<f4")
# Keeps every IN list well under the bound-parameter limits of SQLite and PostgreSQL.
_CHUNK = 500


def _chunks(ids: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(ids))
    return [unique[i : i + _CHUNK] for i in range(0, len(unique), _CHUNK)]


def _encode(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=_DTYPE).tobytes()


def _decode(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=_DTYPE).copy()


async def put(tx: MetadataTx, records: Sequence[VectorRecord]) -> None:
    """Store (or replace) the sealed copies of these vectors."""
    if not records:
        return
    latest = {r.memory_id: r for r in records}
    await remove(tx, list(latest))
    rows = []
    for record in latest.values():
        cipher = await tx.keys.cipher(record.user_id)
        sealed = cipher.seal_bytes(_encode(record.vector), record.memory_id)
        rows.append({"memory_id": record.memory_id, "user_id": record.user_id, "vector": sealed})
    await tx.conn.execute(insert(memory_vectors), rows)


async def for_user(tx: MetadataTx, user_id: str) -> dict[str, np.ndarray]:
    """Every readable vector copy of one user, by memory id."""
    query = select(memory_vectors.c.memory_id, memory_vectors.c.vector).where(
        memory_vectors.c.user_id == user_id
    )
    rows = (await tx.conn.execute(query)).all()
    # A read never makes a key: copies sealed under a shredded one are unreadable anyway (P8).
    cipher = await tx.keys.existing(user_id) if rows else None
    if cipher is None:
        return {}
    found: dict[str, np.ndarray] = {}
    for memory_id, blob in rows:
        data = cipher.open_bytes(bytes(blob), memory_id)
        if data is not None:  # None: sealed under a shredded key
            found[memory_id] = _decode(data)
    return found


async def ids_for_user(tx: MetadataTx, user_id: str) -> set[str]:
    """Ids of every copy one user has (reconcile compares them with the metadata and the index)."""
    query = select(memory_vectors.c.memory_id).where(memory_vectors.c.user_id == user_id)
    return set((await tx.conn.execute(query)).scalars().all())


async def by_ids(tx: MetadataTx, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """The readable vector copies of these memories (of any users), by memory id."""
    found: dict[str, np.ndarray] = {}
    for chunk in _chunks(memory_ids):
        query = select(memory_vectors).where(memory_vectors.c.memory_id.in_(chunk))
        for row in (await tx.conn.execute(query)).mappings().all():
            cipher = await tx.keys.existing(row["user_id"])
            data = None if cipher is None else cipher.open_bytes(bytes(row["vector"]), row["memory_id"])
            if data is not None:
                found[row["memory_id"]] = _decode(data)
    return found


async def remove(tx: MetadataTx, memory_ids: Sequence[str]) -> None:
    """Drop the copies of these memories."""
    for chunk in _chunks(memory_ids):
        await tx.conn.execute(delete(memory_vectors).where(memory_vectors.c.memory_id.in_(chunk)))


async def remove_user(tx: MetadataTx, user_id: str) -> None:
    """Drop every copy of one user."""
    await tx.conn.execute(delete(memory_vectors).where(memory_vectors.c.user_id == user_id))


class CopyingVectorStore:
    """A ``VectorStore`` that keeps the sealed copies in step with every write to the index."""

    def __init__(self, index: VectorStore, metadata: MetadataStore) -> None:
        self.index = index
        self._metadata = metadata

    async def start(self) -> None:
        """Open the index."""
        await self.index.start()

    async def close(self) -> None:
        """Close the index (the metadata store is closed by its owner)."""
        await self.index.close()

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Drop the old copies, write to the index, then the new copies.

        A crash between two steps leaves a copy missing (a slower snapshot load), never one that
        disagrees with the index (a re-embedded memory scored with its old vector).
        """
        async with self._metadata.transaction() as tx:
            await remove(tx, [r.memory_id for r in records])
        await self.index.upsert(records)
        async with self._metadata.transaction() as tx:
            await put(tx, records)

    async def delete(self, memory_ids: Sequence[str]) -> None:
        """Remove from the copies, then the index."""
        async with self._metadata.transaction() as tx:
            await remove(tx, memory_ids)
        await self.index.delete(memory_ids)

    async def search(self, vector: np.ndarray, scope: VectorScope, limit: int) -> list[tuple[str, float]]:
        """Nearest memories, from the index."""
        return await self.index.search(vector, scope, limit)

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors from the copies, the rest from the index."""
        async with self._metadata.transaction(readonly=True) as tx:
            found = await by_ids(tx, memory_ids)
        missing = [m for m in memory_ids if m not in found]
        if missing:
            found.update(await self.index.get_vectors(missing))
        return found

    async def count(self, user_id: str | None = None) -> int:
        """Number of indexed vectors."""
        return await self.index.count(user_id)

    async def delete_user(self, user_id: str) -> None:
        """Remove every vector and copy of one user."""
        async with self._metadata.transaction() as tx:
            await remove_user(tx, user_id)
        await self.index.delete_user(user_id)

    async def compact(self) -> int | None:
        """Compact the index (deleted vectors leave its files); the sealed copies are rows of the
        metadata database, gone with its secure delete and checkpoint."""
        compact = getattr(self.index, "compact", None)
        return await compact() if callable(compact) else None

    async def memory_ids(self, user_id: str) -> list[str]:
        """Ids of the user's indexed vectors."""
        return await self.index.memory_ids(user_id)
