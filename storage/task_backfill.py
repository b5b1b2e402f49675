"""Filling who may read each write task recorded before migration 0008 (``write_tasks.app_id`` and
``reach``) from its payload, which needs the user's key: the stores do it when they open.

Batched and idempotent: a filled row is never selected again. A payload that cannot be read (the
user's key was shredded, or the payload was dropped) leaves the task to admin keys only.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select, update

from engram.models.rules.task_reach import task_reach
from engram.storage.metadata import MetadataStore
from engram.storage.schema import write_tasks


async def backfill_task_reach(metadata: MetadataStore, batch: int = 500) -> int:
    """Fill ``app_id`` / ``reach`` of every task that has none; returns how many rows changed."""
    changed = 0
    while True:
        async with metadata.transaction() as tx:
            query = (
                select(
                    write_tasks.c.task_id, write_tasks.c.user_id, write_tasks.c.kind, write_tasks.c.payload
                )
                .where(write_tasks.c.reach.is_(None))
                .limit(batch)
            )
            rows = (await tx.conn.execute(query)).all()
            for task_id, user_id, kind, payload in rows:
                cipher = await tx.keys.existing(user_id)
                plain = cipher.decrypt(bytes(payload)) if cipher is not None and payload else None
                app_id, reach = task_reach(kind, _mapping(plain))
                await tx.conn.execute(
                    update(write_tasks)
                    .where(write_tasks.c.task_id == task_id)
                    .values(app_id=app_id, reach=reach)
                )
        changed += len(rows)
        if len(rows) < batch:
            return changed


def _mapping(plain: str | None) -> dict[str, Any] | None:
    if not plain:
        return None
    try:
        value = json.loads(plain)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
