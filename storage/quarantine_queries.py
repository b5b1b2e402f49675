"""Metadata queries of the quarantine (P5, C12): memories held for review, of one user or of all.

Plain functions over a ``MetadataTx`` so that they join the caller's transaction; values reach SQL
only as bound parameters. Content is decrypted with each user's own key.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, select, update
from sqlalchemy.sql.elements import ColumnElement

from engram.models.domain import Memory
from engram.models.enums import Level, Ownership, Status
from engram.storage.metadata import MetadataTx
from engram.storage.repositories.rows import keyset_after
from engram.storage.schema import memories

HeldScope = tuple[str, str, Level, str | None, Ownership]
"""What makes two held memories of a user the same: content hash, app, level, session, ownership."""


async def held_scopes(tx: MetadataTx, user_id: str) -> dict[HeldScope, str]:
    """The scope of every memory of the user held for review, with its id (no content read)."""
    query = select(
        memories.c.content_hash,
        memories.c.app_id,
        memories.c.level,
        memories.c.session_id,
        memories.c.ownership,
        memories.c.memory_id,
    ).where(and_(memories.c.user_id == user_id, memories.c.status == Status.QUARANTINED.value))
    return {
        (digest, app_id, Level(level), session_id, Ownership(ownership)): memory_id
        for digest, app_id, level, session_id, ownership, memory_id in (await tx.conn.execute(query)).all()
    }


async def held_page(
    tx: MetadataTx,
    *,
    user_id: str | None,
    app_id: str | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[Memory]:
    """One page of held memories in (created_at, memory_id) order, of one user or of every user."""
    conditions: list[ColumnElement[bool]] = [memories.c.status == Status.QUARANTINED.value]
    if user_id is not None:
        conditions.append(memories.c.user_id == user_id)
    if app_id is not None:
        conditions.append(memories.c.app_id == app_id)
    if after is not None:
        conditions.append(keyset_after(memories.c.created_at, memories.c.memory_id, after))
    order = (memories.c.created_at, memories.c.memory_id)
    query = select(memories.c.memory_id, memories.c.user_id).where(and_(*conditions)).order_by(*order)
    page = (await tx.conn.execute(query.limit(limit))).all()
    by_user: dict[str, list[str]] = {}
    for memory_id, owner in page:
        by_user.setdefault(owner, []).append(memory_id)
    loaded: dict[str, Memory] = {}
    for owner, ids in by_user.items():
        rows = select(memories).where(and_(memories.c.user_id == owner, memories.c.memory_id.in_(ids)))
        loaded.update({m.memory_id: m for m in await tx.memories.load(owner, rows)})
    return [loaded[memory_id] for memory_id, _ in page if memory_id in loaded]


async def held_among(tx: MetadataTx, user_id: str, memory_ids: Sequence[str]) -> list[Memory]:
    """The user's memories among ``memory_ids`` that are held for review, in the order given."""
    found = await tx.memories.get_many(user_id, list(dict.fromkeys(memory_ids)))
    return [
        found[i] for i in dict.fromkeys(memory_ids) if i in found and found[i].status is Status.QUARANTINED
    ]


async def set_held_status(
    tx: MetadataTx, user_id: str, memory_ids: Sequence[str], status: Status, at: datetime
) -> None:
    """Move held memories to ACTIVE (released) or DELETED (refused); others are left alone."""
    if status not in (Status.ACTIVE, Status.DELETED):
        raise ValueError(f"a held memory is released or deleted, not made {status}")
    stamps: dict[str, object] = {"status": status.value, "updated_at": at}
    if status is Status.DELETED:
        stamps["deleted_at"] = at
    else:
        stamps["weight_at"] = at
    await tx.conn.execute(
        update(memories)
        .where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id.in_(list(memory_ids)),
                memories.c.status == Status.QUARANTINED.value,
            )
        )
        .values(**stamps)
    )
