"""RESTORE: an archived memory back to ACTIVE, its vector back from the cold archive (L2, R1).

Runs on the user's mailbox like every other write. The restored memory is admitted like a new one
(capacity check and eviction, W8) and starts afresh at its type's initial weight: with its old,
faded weight the next sweep would archive it again at once.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from engram.lifecycle.context import LifecycleStores, vectors_for
from engram.models.absent import NO_ARCHIVED_MEMORY, not_found
from engram.models.domain import Memory
from engram.models.enums import OpSource, OpType, Status
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import type_initial_weight
from engram.storage.admission import make_room
from engram.storage.vectors import vector_record


async def restore_memory(
    stores: LifecycleStores,
    user_id: str,
    memory_id: str,
    now: datetime,
    *,
    op_source: OpSource = OpSource.USER,
) -> Memory:
    """Bring one ARCHIVED memory back to ACTIVE; 40401 when the user has no such archived memory."""
    async with stores.metadata.transaction() as tx:
        memory = await tx.memories.get(user_id, memory_id)
        if memory is None or memory.status is not Status.ARCHIVED or memory.content is None:
            raise not_found(NO_ARCHIVED_MEMORY, memory_id)
        cipher = await tx.keys.cipher(user_id)
        memory.status = Status.ACTIVE
        memory.archived_at = None
        # A compressed original (L5) leaves its summary's ``compressed_from``; the summary stays.
        memory.superseded_by = None
        if memory.expire_at is not None and memory.expire_at <= now:
            memory.expire_at = None  # restoring an expired memory means the caller wants it kept
        memory.weight = type_initial_weight(memory, stores.settings.weights)
        # The archived vector is of the model the memory was on: if the embedder changed since and
        # ``engram reembed`` has not reached this memory yet, it is embedded again.
        other_model = memory.embedding_model != stores.embedder.model_name
        memory.embedding_model = stores.embedder.model_name
        memory.weight_at = now
        memory.updated_at = now
        evicted = await make_room(tx, stores.settings, memory, now)
        await tx.memories.save(memory)
        await tx.changes.add(
            memory, OpType.RESTORE, op_source, "restore from archive", now, content_after=memory.content
        )
        await tx.counters.add(user_id, counter_deltas([memory], +1))
        await tx.versions.bump(user_id)
    item = await stores.archive.get(cipher, user_id, memory_id)
    if item is not None and not other_model and np.shape(item.vector) == (stores.embedder.dim,):
        vector = item.vector
    elif other_model:
        vector = (await stores.embedder.embed([memory.content]))[0]
    else:
        vector = (await vectors_for(stores, [memory]))[memory_id]
    if evicted:
        await stores.vectors.delete(evicted)
    await stores.vectors.upsert([vector_record(memory, vector)])
    await stores.archive.delete(user_id, [memory_id])
    return memory
