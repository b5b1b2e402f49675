"""Sealed copies of indexed vectors in the metadata database, kept in step by a vector-store wrapper.

A recall snapshot needs all of one user's vectors at once. milvus-lite answers that slowly (14-28 ms
per 100 ids by primary key, ~340 ms by user filter over 100k rows, measured in docs/benchmarks.md),
so every vector written to the index is also sealed with its user's data key into ``memory_vectors``
and a snapshot reads rows and vectors in one read transaction. The index stays the durable store of
record for vectors (reconcile compares against it); a missing copy only means a slower load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Select, String, bindparam, delete, insert, select, type_coerce

from engram.models.domain import Memory, utcnow
from engram.models.enums import Level, MemType, Ownership, Status
from engram.storage.crypto import ContentCipher
from engram.storage.id_lists import among
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.repositories.rows import memory_from_row
from engram.storage.schema import memories, memory_vectors
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


def _decode_readonly(data: bytes) -> np.ndarray:
    # A cold recall reads 500 copies to keep 100: the copy ``_decode`` makes for a vector a snapshot
    # keeps was a seventh of opening them.
    return np.frombuffer(data, dtype=_DTYPE)


async def put(tx: MetadataTx, records: Sequence[VectorRecord]) -> None:
    """Store (or replace) the sealed copies of these vectors."""
    if not records:
        return
    latest = {r.memory_id: r for r in records}
    await remove(tx, list(latest))
    written = utcnow()
    rows = []
    for record in latest.values():
        cipher = await tx.keys.cipher(record.user_id)
        sealed = cipher.seal_bytes(_encode(record.vector), record.memory_id)
        rows.append(
            {
                "memory_id": record.memory_id,
                "user_id": record.user_id,
                "vector": sealed,
                "written_at": written,
            }
        )
    await tx.conn.execute(insert(memory_vectors), rows)


async def for_user(tx: MetadataTx, user_id: str) -> dict[str, np.ndarray]:
    """Every readable vector copy of one user, by memory id."""
    rows = (await tx.conn.execute(copies_statement(), {"user_id": user_id})).all()
    # A read never makes a key: copies sealed under a shredded one are unreadable anyway (P8).
    cipher = await tx.keys.existing(user_id) if rows else None
    return opened_copies(rows, cipher)


def copies_statement() -> Select[Any]:
    """Every sealed copy of one user (``user_id`` bound at execution): what ``opened_copies`` opens."""
    return select(memory_vectors.c.memory_id, memory_vectors.c.vector).where(
        memory_vectors.c.user_id == bindparam("user_id")
    )


def opened_copies(rows: Sequence[Sequence[Any]], cipher: ContentCipher | None) -> dict[str, np.ndarray]:
    """``(memory_id, sealed)`` rows of one user opened with their cipher, by memory id; without
    the user's key nothing is readable: {}."""
    if cipher is None:
        return {}
    found: dict[str, np.ndarray] = {}
    for memory_id, blob in rows:
        data = cipher.open_bytes(bytes(blob), memory_id)
        if data is not None:  # None: sealed under a shredded key
            found[memory_id] = _decode(data)
    return found


# Not frozen: a frozen dataclass sets each field through ``object.__setattr__``, which was 1.2 ms of
# a cold recall's 500 copies (a third of opening them); nothing changes one after it is read.
@dataclass(slots=True)
class PlacedCopy:
    """One memory's vector beside the columns that place it (scope, status, validity, model):
    enough to tell whether a recall may see it, without opening its content."""

    memory_id: str
    user_id: str
    app_id: str
    session_id: str | None
    level: Level
    ownership: Ownership
    mem_type: MemType
    status: Status
    # As the driver gave it: read (``valid_at``) only by a recall ``as_of`` an instant.
    valid_stored: object
    invalid_at: datetime | None
    expire_at: datetime | None
    embedding_model: str
    # The memory's text (None when it does not open) and its context, for a cold recall's lexical
    # candidates.
    content: str | None
    context: str | None
    # None: the memory has no readable copy (written before copies existed, or its copy was lost).
    vector: np.ndarray | None

    @property
    def valid_at(self) -> datetime:
        """When the fact became valid."""
        return _instant(self.valid_stored) or datetime.min.replace(tzinfo=UTC)


# The instants come back as the driver gives them (text on SQLite, datetimes on PostgreSQL) and
# are read by ``_instant``: SQLAlchemy's result processing of three datetime columns was a third of
# a cold read of 500 memories.
_PLACED = (
    memories.c.memory_id,
    memories.c.app_id,
    memories.c.session_id,
    memories.c.level,
    memories.c.ownership,
    memories.c.mem_type,
    memories.c.status,
    type_coerce(memories.c.valid_at, String),
    type_coerce(memories.c.invalid_at, String),
    type_coerce(memories.c.expire_at, String),
    memories.c.embedding_model,
    memories.c.content,
    memories.c.context,
    memory_vectors.c.vector,
)
# The names of those columns, as a row gives them.
PLACED_COLUMNS = tuple(select(*_PLACED).selected_columns.keys())
_LEVELS = {e.value: e for e in Level}
_OWNERSHIPS = {e.value: e for e in Ownership}
_MEM_TYPES = {e.value: e for e in MemType}
_STATUSES = {e.value: e for e in Status}


def _instant(value: object) -> datetime | None:
    """A stored instant as an aware UTC datetime (SQLite keeps naive UTC text)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def placed_statement() -> Select[Any]:
    """Every memory of one user (``user_id`` bound at execution) with its placing columns and its
    sealed copy, if any: what ``opened_placed`` reads (statuses are filtered there)."""
    return (
        select(*_PLACED)
        .outerjoin(memory_vectors, memory_vectors.c.memory_id == memories.c.memory_id)
        .where(memories.c.user_id == bindparam("user_id"))
    )


async def placed_for_user(tx: MetadataTx, user_id: str, statuses: Sequence[Status]) -> list[PlacedCopy]:
    """The user's memories in ``statuses``, each with its placing columns and its vector copy (a
    cold recall picks its candidates from these before it opens any content)."""
    rows = (await tx.conn.execute(placed_statement(), {"user_id": user_id})).all()
    cipher = await tx.keys.existing(user_id) if rows else None
    return opened_placed(user_id, rows, cipher, statuses)


def opened_placed(
    user_id: str, rows: Sequence[Sequence[Any]], cipher: ContentCipher | None, statuses: Sequence[Status]
) -> list[PlacedCopy]:
    """Rows of ``placed_statement`` in ``statuses``, their copies opened. A memory without a readable
    copy comes with ``vector`` None; without the user's key nothing is readable: []."""
    if cipher is None:
        return []
    wanted = {s.value for s in statuses}
    placed: list[PlacedCopy] = []
    for (
        mid,
        app,
        session,
        level,
        owner,
        mem_type,
        status,
        valid,
        invalid,
        expire,
        model,
        text,
        context,
        blob,
    ) in rows:
        if status not in wanted:
            continue
        data = None if blob is None else cipher.open_bytes(bytes(blob), mid)
        placed.append(
            PlacedCopy(
                mid,
                user_id,
                app,
                session,
                _LEVELS[level],
                _OWNERSHIPS[owner],
                _MEM_TYPES[mem_type],
                _STATUSES[status],
                valid,
                _instant(invalid),
                _instant(expire),
                model,
                cipher.decrypt(bytes(text)) if text else None,
                cipher.decrypt(bytes(context)) if context else None,
                None if data is None else _decode_readonly(data),
            )
        )
    return placed


async def memories_with_copies(
    tx: MetadataTx, user_id: str, memory_ids: Sequence[str]
) -> dict[str, tuple[Memory, np.ndarray | None]]:
    """These memories of one user, opened, each with its opened vector copy (None: no readable
    copy), in one read: a cold recall's candidates from the vector index."""
    found: dict[str, tuple[Memory, np.ndarray | None]] = {}
    for chunk in _chunks(memory_ids):
        query = (
            select(memories, memory_vectors.c.vector.label("sealed_vector"))
            .outerjoin(memory_vectors, memory_vectors.c.memory_id == memories.c.memory_id)
            .where(memories.c.user_id == user_id, among(tx.conn, memories.c.memory_id, chunk))
        )
        rows = (await tx.conn.execute(query)).mappings().all()
        # A read never makes a key: a purged user's rows read as content-less (P8).
        cipher = await tx.keys.existing(user_id) if rows else None
        for row in rows:
            memory_id, blob = row["memory_id"], row["sealed_vector"]
            data = None if blob is None or cipher is None else cipher.open_bytes(bytes(blob), memory_id)
            found[memory_id] = (memory_from_row(row, cipher), None if data is None else _decode(data))
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


async def written_since(tx: MetadataTx, user_id: str, since: datetime, limit: int) -> list[str]:
    """Ids of the user's copies written at or after ``since`` (at most ``limit``, newest first)."""
    query = (
        select(memory_vectors.c.memory_id)
        .where(memory_vectors.c.user_id == user_id, memory_vectors.c.written_at >= since)
        .order_by(memory_vectors.c.written_at.desc())
        .limit(limit)
    )
    return list((await tx.conn.execute(query)).scalars().all())


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
