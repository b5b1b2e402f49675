"""The metadata queries of the sweeps, over one transaction's connection (no content decrypted).

Every write is conditioned on the state the sweep decided from, so a step that was already done
(by an earlier, interrupted run) matches no row and is not done again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from engram.lifecycle.plan import SweepRow
from engram.models.enums import OpSource, OpType, Status
from engram.storage.crypto import ContentCipher
from engram.storage.metadata import open_labels
from engram.storage.schema import change_log, memories

SWEPT = (Status.ACTIVE, Status.ARCHIVED, Status.DELETED)


async def sweep_rows(conn: AsyncConnection, user_id: str, cipher: ContentCipher | None) -> list[SweepRow]:
    """The user's active, archived and deleted memories as the sweep sees them (tags opened)."""
    query = select(
        memories.c.memory_id,
        memories.c.app_id,
        memories.c.status,
        memories.c.weight,
        memories.c.weight_at,
        memories.c.is_important,
        memories.c.custom_tags,
        memories.c.entities,
        memories.c.labels,
        memories.c.expire_at,
        memories.c.archived_at,
        memories.c.deleted_at,
    ).where(and_(memories.c.user_id == user_id, memories.c.status.in_([s.value for s in SWEPT])))
    return [
        SweepRow(
            memory_id=r["memory_id"],
            app_id=r["app_id"],
            status=Status(r["status"]),
            weight=r["weight"],
            weight_at=r["weight_at"],
            is_important=r["is_important"],
            custom_tags=open_labels(cipher, r)[0],
            expire_at=r["expire_at"],
            archived_at=r["archived_at"],
            deleted_at=r["deleted_at"],
        )
        for r in (await conn.execute(query)).mappings().all()
    ]


async def statuses(conn: AsyncConnection, user_id: str) -> dict[str, Status]:
    """Every memory of the user with its status."""
    query = select(memories.c.memory_id, memories.c.status).where(memories.c.user_id == user_id)
    return {mid: Status(status) for mid, status in (await conn.execute(query)).all()}


async def store_weights(
    conn: AsyncConnection, user_id: str, weights: Mapping[str, float], at: datetime
) -> None:
    """Write decayed weights of active memories in one batched statement."""
    if not weights:
        return
    statement = (
        update(memories)
        .where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id == bindparam("b_memory_id"),
                memories.c.status == Status.ACTIVE.value,
            )
        )
        .values(weight=bindparam("b_weight"), weight_at=at)
    )
    await conn.execute(
        statement, [{"b_memory_id": mid, "b_weight": weight} for mid, weight in weights.items()]
    )


async def archive_active(
    conn: AsyncConnection, user_id: str, memory_id: str, weight: float | None, at: datetime
) -> bool:
    """Move one ACTIVE memory to ARCHIVED at ``at``; False when it is no longer active."""
    values: dict[str, object] = {"status": Status.ARCHIVED.value, "archived_at": at, "updated_at": at}
    if weight is not None:
        values.update(weight=weight, weight_at=at)
    result = await conn.execute(
        update(memories)
        .where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id == memory_id,
                memories.c.status == Status.ACTIVE.value,
            )
        )
        .values(**values)
    )
    return bool(result.rowcount)


async def delete_rows(conn: AsyncConnection, user_id: str, memory_ids: Sequence[str], status: Status) -> int:
    """Physically delete the user's memories among ``memory_ids`` that are still in ``status``."""
    if not memory_ids:
        return 0
    result = await conn.execute(
        delete(memories).where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id.in_(list(memory_ids)),
                memories.c.status == status.value,
            )
        )
    )
    return int(result.rowcount or 0)


async def sanitize_changes(conn: AsyncConnection, user_id: str, memory_ids: Sequence[str]) -> int:
    """Blank the content of every change-log entry of these memories (L2); returns entries changed."""
    if not memory_ids:
        return 0
    result = await conn.execute(
        update(change_log)
        .where(
            and_(
                change_log.c.user_id == user_id,
                change_log.c.memory_id.in_(list(memory_ids)),
                change_log.c.sanitized.is_(False),
            )
        )
        .values(content_before=None, content_after=None, reason="", reason_sealed=None, sanitized=True)
    )
    return int(result.rowcount or 0)


async def add_purge_entries(
    conn: AsyncConnection,
    user_id: str,
    apps: Sequence[tuple[str, str]],
    op_source: OpSource,
    reason: str,
    at: datetime,
) -> None:
    """One content-free PURGE entry per (memory_id, app_id), its fixed reason plain: writing it
    needs no data key, so a sweep never makes one for a user whose key was shredded (P8). The
    sweep's ``sanitize_changes`` then marks them sanitized with the memory's other entries."""
    rows: list[dict[str, Any]] = [
        {
            "memory_id": memory_id,
            "user_id": user_id,
            "app_id": app_id,
            "op_type": OpType.PURGE.value,
            "op_source": op_source.value,
            "op_time": at,
            "reason": reason,
            "content_before": None,
            "content_after": None,
            "sanitized": False,
        }
        for memory_id, app_id in apps
    ]
    if rows:
        await conn.execute(change_log.insert(), rows)


async def user_ids_page(conn: AsyncConnection, *, after: str | None, limit: int) -> list[str]:
    """Distinct ids of users holding memories, in order, after ``after`` (keyset pagination)."""
    query = select(memories.c.user_id).group_by(memories.c.user_id).order_by(memories.c.user_id)
    if after is not None:
        query = query.where(memories.c.user_id > after)
    return [row[0] for row in (await conn.execute(query.limit(limit))).all()]


async def count_memories(conn: AsyncConnection) -> dict[str, int]:
    """Memories of every user by status (benchmarks, reports)."""
    query = select(memories.c.status, func.count()).group_by(memories.c.status)
    return {status: int(n) for status, n in (await conn.execute(query)).all()}
