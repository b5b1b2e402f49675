"""Memory rows: written sealed, read opened, and the column-only reads of capacity and recall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from engram.models.domain import Memory
from engram.models.enums import Status
from engram.storage.id_lists import among
from engram.storage.repositories.keys import UserKeys
from engram.storage.repositories.rows import memory_from_row, open_labels, seal_labels
from engram.storage.schema import memories


@dataclass(frozen=True, slots=True)
class EvictionRow:
    """What capacity eviction needs to know of an active memory (no content)."""

    memory_id: str
    user_id: str
    app_id: str
    weight: float
    weight_at: datetime
    is_important: bool
    last_recalled_at: datetime | None
    custom_tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RecallBookkeeping:
    """What recall hits change on a memory (R4): its weight and when, and its hit count."""

    weight: float
    weight_at: datetime
    recall_count: int
    last_recalled_at: datetime | None


class MemoryRepository:
    """The ``memories`` table within one transaction."""

    def __init__(self, conn: AsyncConnection, keys: UserKeys) -> None:
        self.conn = conn
        self._keys = keys

    async def insert(self, memory: Memory) -> None:
        """Insert a new memory row."""
        await self.conn.execute(memories.insert().values(**await self._to_row(memory)))

    async def insert_many(self, rows: Sequence[Memory]) -> None:
        """Insert several new memory rows in one statement."""
        if rows:
            await self.conn.execute(memories.insert(), [await self._to_row(m) for m in rows])

    async def save(self, memory: Memory) -> None:
        """Overwrite every column of an existing memory row."""
        row = await self._to_row(memory)
        await self.conn.execute(
            update(memories)
            .where(and_(memories.c.memory_id == memory.memory_id, memories.c.user_id == memory.user_id))
            .values(**row)
        )

    async def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (another user's id is never found)."""
        found = await self.get_many(user_id, [memory_id])
        return found.get(memory_id)

    async def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """The user's memories among ``memory_ids``, keyed by id."""
        if not memory_ids:
            return {}
        query = select(memories).where(
            and_(memories.c.user_id == user_id, among(self.conn, memories.c.memory_id, memory_ids))
        )
        return {m.memory_id: m for m in await self._load(user_id, query)}

    async def with_status(self, user_id: str, statuses: Sequence[Status]) -> list[Memory]:
        """All of the user's memories in the given states (at most capacity plus history)."""
        query = select(memories).where(
            and_(memories.c.user_id == user_id, memories.c.status.in_([s.value for s in statuses]))
        )
        return await self._load(user_id, query)

    async def find_by_hashes(self, user_id: str, content_hashes: Sequence[str]) -> dict[str, list[Memory]]:
        """The user's active memories with any of these content hashes, by hash (one query)."""
        if not content_hashes:
            return {}
        query = select(memories).where(
            and_(
                memories.c.user_id == user_id,
                memories.c.content_hash.in_(sorted(set(content_hashes))),
                memories.c.status == Status.ACTIVE.value,
            )
        )
        found: dict[str, list[Memory]] = {}
        for memory in await self._load(user_id, query):
            found.setdefault(memory.content_hash, []).append(memory)
        return found

    async def eviction_rows(self, user_id: str, app_id: str | None) -> list[EvictionRow]:
        """Active memories of one dimension (``app_id`` "" = global, None = all) for eviction."""
        conditions = [memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value]
        if app_id is not None:
            conditions.append(memories.c.app_id == app_id)
        query = select(
            memories.c.memory_id,
            memories.c.app_id,
            memories.c.weight,
            memories.c.weight_at,
            memories.c.is_important,
            memories.c.last_recalled_at,
            memories.c.custom_tags,
            memories.c.entities,
            memories.c.labels,
        ).where(and_(*conditions))
        rows = (await self.conn.execute(query)).mappings().all()
        cipher = await self._keys.cipher(user_id) if rows else None
        return [
            EvictionRow(
                memory_id=r["memory_id"],
                user_id=user_id,
                app_id=r["app_id"],
                weight=r["weight"],
                weight_at=r["weight_at"],
                is_important=r["is_important"],
                last_recalled_at=r["last_recalled_at"],
                custom_tags=open_labels(cipher, r)[0] if cipher is not None else (),
            )
            for r in rows
        ]

    async def count_active(self, user_id: str) -> dict[tuple[str, bool], int]:
        """Active memories of the user counted by (app_id, is_important), from the rows themselves."""
        query = (
            select(memories.c.app_id, memories.c.is_important, func.count())
            .where(and_(memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value))
            .group_by(memories.c.app_id, memories.c.is_important)
        )
        return {(app, bool(imp)): n for app, imp, n in (await self.conn.execute(query)).all()}

    async def count_by_model(self, user_id: str, statuses: Sequence[Status]) -> dict[str, int]:
        """The user's memories in ``statuses`` counted by the embedding model of their vectors."""
        query = (
            select(memories.c.embedding_model, func.count())
            .where(and_(memories.c.user_id == user_id, memories.c.status.in_([s.value for s in statuses])))
            .group_by(memories.c.embedding_model)
        )
        return {str(model): int(n) for model, n in (await self.conn.execute(query)).all()}

    async def load(self, user_id: str, query: Select[Any]) -> list[Memory]:
        """Run a select of whole memory rows of one user and decrypt them (queries built elsewhere)."""
        return await self._load(user_id, query)

    async def _load(self, user_id: str, query: Select[Any]) -> list[Memory]:
        rows = (await self.conn.execute(query)).mappings().all()
        if not rows:
            return []
        # A read never makes a key: a purged user's rows read as content-less (P8).
        cipher = await self._keys.existing(user_id)
        return [memory_from_row(row, cipher) for row in rows]

    async def _to_row(self, memory: Memory) -> dict[str, Any]:
        if memory.content is None:
            raise ValueError("a memory without readable content cannot be written")
        cipher = await self._keys.cipher(memory.user_id)
        return {
            "memory_id": memory.memory_id,
            "user_id": memory.user_id,
            "app_id": memory.app_id,
            "session_id": memory.session_id,
            "level": memory.level.value,
            "ownership": memory.ownership.value,
            "mem_type": memory.mem_type.value,
            "content": cipher.encrypt(memory.content),
            "context": None if memory.context is None else cipher.encrypt(memory.context),
            "weight": memory.weight,
            "weight_at": memory.weight_at,
            "status": memory.status.value,
            "is_important": memory.is_important,
            "recall_count": memory.recall_count,
            "created_at": memory.created_at,
            "updated_at": memory.updated_at,
            "last_recalled_at": memory.last_recalled_at,
            "expire_at": memory.expire_at,
            "archived_at": memory.archived_at,
            "deleted_at": memory.deleted_at,
            "content_hash": memory.content_hash,
            "source_session_id": memory.source_session_id,
            "source_msg_id": memory.source_msg_id,
            "custom_tags": [],
            "entities": [],
            "labels": seal_labels(cipher, memory.memory_id, memory.custom_tags, memory.entities),
            "vector_ref": memory.vector_ref,
            "embedding_model": memory.embedding_model,
            "valid_at": memory.valid_at,
            "invalid_at": memory.invalid_at,
            "superseded_by": memory.superseded_by,
            "confidence": memory.confidence,
            "source_type": memory.source_type,
        }

    async def mark_status(
        self, user_id: str, memory_ids: Sequence[str], status: Status, at: datetime
    ) -> None:
        """Move memories to ARCHIVED or DELETED at ``at`` without touching their content."""
        stamps: dict[str, Any] = {"status": status.value, "updated_at": at}
        if status is Status.ARCHIVED:
            stamps["archived_at"] = at
        elif status is Status.DELETED:
            stamps["deleted_at"] = at
        else:
            raise ValueError(f"mark_status handles ARCHIVED and DELETED, not {status}")
        await self.conn.execute(
            update(memories)
            .where(and_(memories.c.user_id == user_id, memories.c.memory_id.in_(list(memory_ids))))
            .values(**stamps)
        )

    async def record_recall_hits(
        self, user_id: str, hits: Mapping[str, tuple[float, int]], at: datetime
    ) -> None:
        """Store many hits' bookkeeping (memory_id -> (weight, recall_count)) in one statement.

        Rows that are no longer ACTIVE are left alone; callers read the rows in the same
        transaction, so they know which ones those are.
        """
        if not hits:
            return
        statement = (
            update(memories)
            .where(
                and_(
                    memories.c.user_id == bindparam("b_user_id"),
                    memories.c.memory_id == bindparam("b_memory_id"),
                    memories.c.status == Status.ACTIVE.value,
                )
            )
            .values(
                weight=bindparam("b_weight"),
                weight_at=bindparam("b_at"),
                last_recalled_at=bindparam("b_at"),
                recall_count=bindparam("b_count"),
            )
        )
        rows = [
            {"b_user_id": user_id, "b_memory_id": m, "b_weight": w, "b_at": at, "b_count": c}
            for m, (w, c) in hits.items()
        ]
        await self.conn.execute(statement, rows)

    async def recently_active_users(self, limit: int) -> list[str]:
        """Users whose memories were written or recalled most recently, most recent first."""
        last_active = func.max(func.coalesce(memories.c.last_recalled_at, memories.c.updated_at))
        query = (
            select(memories.c.user_id)
            .where(memories.c.status == Status.ACTIVE.value)
            .group_by(memories.c.user_id)
            .order_by(last_active.desc(), memories.c.user_id)
            .limit(limit)
        )
        return [str(user_id) for user_id in (await self.conn.execute(query)).scalars()]

    async def recall_bookkeeping(self, user_id: str) -> dict[str, RecallBookkeeping]:
        """Weight and hit columns of the user's ACTIVE memories (no content: nothing to decrypt)."""
        query = select(
            memories.c.memory_id,
            memories.c.weight,
            memories.c.weight_at,
            memories.c.recall_count,
            memories.c.last_recalled_at,
        ).where(and_(memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value))
        return {
            row.memory_id: RecallBookkeeping(
                row.weight, row.weight_at, row.recall_count, row.last_recalled_at
            )
            for row in (await self.conn.execute(query)).all()
        }
