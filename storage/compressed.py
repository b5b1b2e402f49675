"""The metadata side of compression (L5): originals archived into a summary, and the link back.

A compressed original is ARCHIVED with ``superseded_by`` naming its summary (no column of its own:
a superseded fact points at its successor the same way, but stays SUPERSEDED, never ARCHIVED).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, select, update

from engram.models.enums import Status
from engram.storage.metadata import MetadataTx
from engram.storage.schema import memories


async def archive_into(
    tx: MetadataTx, user_id: str, memory_ids: Sequence[str], summary_id: str, at: datetime
) -> int:
    """Archive the user's ACTIVE memories among ``memory_ids`` as compressed into ``summary_id``;
    returns how many were still active (the caller undoes the transaction unless all were)."""
    if not memory_ids:
        return 0
    result = await tx.conn.execute(
        update(memories)
        .where(
            and_(
                memories.c.user_id == user_id,
                memories.c.memory_id.in_(list(memory_ids)),
                memories.c.status == Status.ACTIVE.value,
            )
        )
        .values(status=Status.ARCHIVED.value, archived_at=at, updated_at=at, superseded_by=summary_id)
    )
    return int(result.rowcount or 0)


async def compressed_from(tx: MetadataTx, user_id: str, summary_id: str) -> list[str]:
    """Ids of the user's memories compressed into ``summary_id`` (archived, not yet purged), in order."""
    query = (
        select(memories.c.memory_id)
        .where(
            and_(
                memories.c.user_id == user_id,
                memories.c.superseded_by == summary_id,
                memories.c.status == Status.ARCHIVED.value,
            )
        )
        .order_by(memories.c.valid_at, memories.c.memory_id)
    )
    return [str(mid) for mid in (await tx.conn.execute(query)).scalars()]
