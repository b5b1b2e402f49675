"""The change log (M3): one sealed entry per change of a memory, read back a page at a time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engram.models.domain import ChangeLogEntry, Memory
from engram.models.enums import OpSource, OpType
from engram.storage.repositories.keys import UserKeys
from engram.storage.repositories.memories import EvictionRow
from engram.storage.repositories.rows import change_from_row, seal_reason
from engram.storage.schema import change_log


class ChangeLogRepository:
    """The ``change_log`` table within one transaction."""

    def __init__(self, conn: AsyncConnection, keys: UserKeys) -> None:
        self.conn = conn
        self._keys = keys

    async def add(
        self,
        memory: Memory | EvictionRow,
        op_type: OpType,
        op_source: OpSource,
        reason: str,
        at: datetime,
        *,
        content_before: str | None = None,
        content_after: str | None = None,
    ) -> None:
        """Append one change-log entry; contents are encrypted like the memory's."""
        cipher = await self._keys.cipher(memory.user_id)
        await self.conn.execute(
            change_log.insert().values(
                memory_id=memory.memory_id,
                user_id=memory.user_id,
                app_id=memory.app_id,
                op_type=op_type.value,
                op_source=op_source.value,
                op_time=at,
                reason="",
                reason_sealed=seal_reason(cipher, memory.memory_id, reason),
                content_before=None if content_before is None else cipher.encrypt(content_before),
                content_after=None if content_after is None else cipher.encrypt(content_after),
                sanitized=False,
            )
        )

    async def add_new_memories(
        self, rows: Sequence[Memory], op_source: OpSource, reason: str, at: datetime
    ) -> None:
        """The ADD entries of several new memories in one statement (as ``add_change`` writes each)."""
        if not rows:
            return
        values = []
        for memory in rows:
            cipher = await self._keys.cipher(memory.user_id)
            values.append(
                {
                    "memory_id": memory.memory_id,
                    "user_id": memory.user_id,
                    "app_id": memory.app_id,
                    "op_type": OpType.ADD.value,
                    "op_source": op_source.value,
                    "op_time": at,
                    "reason": "",
                    "reason_sealed": seal_reason(cipher, memory.memory_id, reason),
                    "content_before": None,
                    "content_after": None if memory.content is None else cipher.encrypt(memory.content),
                    "sanitized": False,
                }
            )
        await self.conn.execute(change_log.insert(), values)

    async def history(self, user_id: str, memory_id: str) -> list[ChangeLogEntry]:
        """Every change of one memory, oldest first."""
        query = (
            select(change_log)
            .where(and_(change_log.c.user_id == user_id, change_log.c.memory_id == memory_id))
            .order_by(change_log.c.change_id)
        )
        return await self._load(user_id, query)

    async def page(
        self,
        user_id: str,
        *,
        app_id: str | None = None,
        op_type: OpType | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_change_id: int | None = None,
        limit: int = 50,
    ) -> list[ChangeLogEntry]:
        """The user's changes, newest first, filtered by dimension, op and time range."""
        conditions = [change_log.c.user_id == user_id]
        if app_id is not None:
            conditions.append(change_log.c.app_id == app_id)
        if op_type is not None:
            conditions.append(change_log.c.op_type == op_type.value)
        if since is not None:
            conditions.append(change_log.c.op_time >= since)
        if until is not None:
            conditions.append(change_log.c.op_time < until)
        if before_change_id is not None:
            conditions.append(change_log.c.change_id < before_change_id)
        query = (
            select(change_log).where(and_(*conditions)).order_by(change_log.c.change_id.desc()).limit(limit)
        )
        return await self._load(user_id, query)

    async def load(self, user_id: str, query: Select[Any]) -> list[ChangeLogEntry]:
        """Run a select of whole change-log rows of one user and decrypt them."""
        return await self._load(user_id, query)

    async def _load(self, user_id: str, query: Select[Any]) -> list[ChangeLogEntry]:
        rows = (await self.conn.execute(query)).mappings().all()
        if not rows:
            return []
        # A read never makes a key: a purged user's log reads as its content-free entries (P8).
        cipher = await self._keys.existing(user_id)
        return [change_from_row(row, cipher) for row in rows]
