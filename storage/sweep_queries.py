"""The metadata queries of the sweeps and the re-embedding, over one transaction (no content decrypted).

Every write is conditioned on the state the sweep decided from, so a step that was already done
(by an earlier, interrupted run) matches no row and is not done again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import and_, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from engram.models.domain import SweepRow
from engram.models.enums import OpSource, OpType, Status
from engram.models.settings import StorageSettings
from engram.storage.crypto import ContentCipher
from engram.storage.database import create_engine
from engram.storage.metadata import MetadataTx
from engram.storage.repositories.rows import open_labels
from engram.storage.schema import change_log, memories

SWEPT = (Status.ACTIVE, Status.ARCHIVED, Status.DELETED)
T = TypeVar("T")

WITH_VECTORS = (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED)
"""The statuses whose memories hold a vector (in the index, or in the cold archive)."""


async def sweep_rows(tx: MetadataTx, user_id: str, cipher: ContentCipher | None) -> list[SweepRow]:
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
        for r in (await tx.conn.execute(query)).mappings().all()
    ]


async def statuses(tx: MetadataTx, user_id: str) -> dict[str, Status]:
    """Every memory of the user with its status."""
    query = select(memories.c.memory_id, memories.c.status).where(memories.c.user_id == user_id)
    return {mid: Status(status) for mid, status in (await tx.conn.execute(query)).all()}


async def store_weights(tx: MetadataTx, user_id: str, weights: Mapping[str, float], at: datetime) -> None:
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
    await tx.conn.execute(
        statement, [{"b_memory_id": mid, "b_weight": weight} for mid, weight in weights.items()]
    )


async def archive_active(
    tx: MetadataTx, user_id: str, memory_id: str, weight: float | None, at: datetime
) -> bool:
    """Move one ACTIVE memory to ARCHIVED at ``at``; False when it is no longer active."""
    values: dict[str, object] = {"status": Status.ARCHIVED.value, "archived_at": at, "updated_at": at}
    if weight is not None:
        values.update(weight=weight, weight_at=at)
    result = await tx.conn.execute(
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


async def delete_rows(tx: MetadataTx, user_id: str, memory_ids: Sequence[str], status: Status) -> int:
    """Physically delete the user's memories among ``memory_ids`` that are still in ``status``."""
    if not memory_ids:
        return 0
    result = await tx.conn.execute(
        delete(memories).where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id.in_(list(memory_ids)),
                memories.c.status == status.value,
            )
        )
    )
    return int(result.rowcount or 0)


async def sanitize_changes(tx: MetadataTx, user_id: str, memory_ids: Sequence[str]) -> int:
    """Blank the content of every change-log entry of these memories (L2); returns entries changed."""
    if not memory_ids:
        return 0
    result = await tx.conn.execute(
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
    tx: MetadataTx,
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
        await tx.conn.execute(change_log.insert(), rows)


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


# --- re-embedding (engram reembed) ------------------------------------------------------------


async def users_to_reembed(conn: AsyncConnection, model: str) -> list[str]:
    """Users holding a memory with a vector on a model other than ``model``, in id order."""
    query = (
        select(memories.c.user_id)
        .where(
            and_(
                memories.c.embedding_model != model,
                memories.c.status.in_([s.value for s in WITH_VECTORS]),
            )
        )
        .distinct()
        .order_by(memories.c.user_id)
    )
    return [row[0] for row in (await conn.execute(query)).all()]


async def memories_left(conn: AsyncConnection, model: str) -> int:
    """How many memories with a vector are not on ``model`` yet."""
    query = select(memories.c.memory_id).where(
        and_(memories.c.embedding_model != model, memories.c.status.in_([s.value for s in WITH_VECTORS]))
    )
    return len((await conn.execute(query)).all())


async def set_embedding_model(tx: MetadataTx, user_id: str, memory_ids: Sequence[str], model: str) -> None:
    """Record that these memories' vectors are now on ``model``."""
    await tx.conn.execute(
        update(memories)
        .where(and_(memories.c.user_id == user_id, memories.c.memory_id.in_(list(memory_ids))))
        .values(embedding_model=model)
    )


async def archived_owners(tx: MetadataTx, memory_ids: Sequence[str]) -> dict[str, list[str]]:
    """The ARCHIVED memories among ``memory_ids``, by the user who owns them."""
    query = select(memories.c.memory_id, memories.c.user_id).where(
        and_(memories.c.memory_id.in_(list(memory_ids)), memories.c.status == Status.ARCHIVED.value)
    )
    owners: dict[str, list[str]] = {}
    for memory_id, user_id in (await tx.conn.execute(query)).all():
        owners.setdefault(user_id, []).append(memory_id)
    return owners


async def read_once(storage: StorageSettings, query: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """One query on the metadata database alone, over an engine opened for it (no vector store:
    that belongs to whoever serves)."""
    engine = create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms)
    try:
        async with engine.connect() as conn:
            return await query(conn)
    finally:
        await engine.dispose()
