"""Capacity counters per user and dimension (D3), and each user's change version."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from engram.storage.repositories.rows import upsert
from engram.storage.schema import capacity_counters, user_versions


class CounterRepository:
    """The ``capacity_counters`` table within one transaction."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def read(self, user_id: str) -> dict[str, int]:
        """All capacity counters of the user, by dimension (O(1) per dimension, D3)."""
        query = select(capacity_counters.c.dimension, capacity_counters.c.count).where(
            capacity_counters.c.user_id == user_id
        )
        return dict((await self.conn.execute(query)).all())

    async def add(self, user_id: str, deltas: Mapping[str, int]) -> None:
        """Add each delta to its dimension's counter, creating counters as needed."""
        for dimension, delta in deltas.items():
            if delta == 0:
                continue
            values = {"user_id": user_id, "dimension": dimension, "count": delta}
            statement = upsert(self.conn, capacity_counters, values)
            await self.conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["user_id", "dimension"],
                    set_={"count": capacity_counters.c.count + delta},
                )
            )

    async def set(self, user_id: str, counts: Mapping[str, int]) -> None:
        """Overwrite counters with exact values (reconcile)."""
        for dimension, count in counts.items():
            values = {"user_id": user_id, "dimension": dimension, "count": count}
            statement = upsert(self.conn, capacity_counters, values)
            await self.conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["user_id", "dimension"], set_={"count": count}
                )
            )


class VersionRepository:
    """The ``user_versions`` table: a user's change version, which recall caches compare."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def bump(self, user_id: str) -> int:
        """Advance the user's change version (recall caches compare it) and return it."""
        statement = upsert(self.conn, user_versions, {"user_id": user_id, "version": 1})
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=["user_id"], set_={"version": user_versions.c.version + 1}
            )
        )
        return await self.read(user_id)

    async def read(self, user_id: str) -> int:
        """The user's current change version (0 before any change)."""
        query = select(user_versions.c.version).where(user_versions.c.user_id == user_id)
        value = (await self.conn.execute(query)).scalar_one_or_none()
        return int(value or 0)
