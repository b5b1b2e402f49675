"""Sealing what rows written before migration 0005 hold in the clear: custom tags, entity names and
content-bearing change reasons (a migration has no keys, so the stores do it when they open).

Batched, one transaction per batch, idempotent: a sealed row is never selected again. A row whose
user has no data key any more (shredded by a purge) has nothing to seal with: its plain values
are simply blanked, as the purge would have done.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, select, update

from engram.models.enums import OpType
from engram.storage.metadata import MetadataStore
from engram.storage.repositories.rows import seal_labels, seal_reason
from engram.storage.schema import change_log, memories

log = logging.getLogger(__name__)

_MEMORY_COLUMNS = (memories.c.memory_id, memories.c.user_id, memories.c.custom_tags, memories.c.entities)
_CHANGE_COLUMNS = (change_log.c.change_id, change_log.c.memory_id, change_log.c.user_id, change_log.c.reason)


async def reseal_plaintext(metadata: MetadataStore, batch: int = 500) -> int:
    """Seal every old row's tags, entities and reasons; returns how many rows changed."""
    changed = 0
    while True:
        async with metadata.transaction() as tx:
            rows = (
                await tx.conn.execute(
                    select(
                        memories.c.memory_id, memories.c.user_id, memories.c.custom_tags, memories.c.entities
                    )
                    .where(memories.c.labels.is_(None))
                    .limit(batch)
                )
            ).all()
            for memory_id, user_id, tags, entities in rows:
                cipher = await tx.keys.existing(user_id)
                labels = b"" if cipher is None else seal_labels(cipher, memory_id, tags, entities)
                await tx.conn.execute(
                    update(memories)
                    .where(memories.c.memory_id == memory_id)
                    .values(custom_tags=[], entities=[], labels=labels)
                )
        changed += len(rows)
        if len(rows) < batch:
            break
    while True:
        async with metadata.transaction() as tx:
            entries = (
                await tx.conn.execute(
                    select(
                        change_log.c.change_id,
                        change_log.c.memory_id,
                        change_log.c.user_id,
                        change_log.c.reason,
                    )
                    .where(
                        and_(
                            change_log.c.reason_sealed.is_(None),
                            change_log.c.reason != "",
                            # The purge's own entry says only that a purge happened: the audit trail.
                            change_log.c.op_type != OpType.PURGE.value,
                        )
                    )
                    .limit(batch)
                )
            ).all()
            for change_id, memory_id, user_id, reason in entries:
                cipher = await tx.keys.existing(user_id)
                sealed = None if cipher is None else seal_reason(cipher, memory_id, reason)
                await tx.conn.execute(
                    update(change_log)
                    .where(change_log.c.change_id == change_id)
                    .values(reason="", reason_sealed=sealed)
                )
        changed += len(entries)
        if len(entries) < batch:
            break
    if changed:
        log.info("sealed the tags, entities and reasons of %d rows written before migration 0005", changed)
    return changed
