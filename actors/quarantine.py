"""The quarantine (P5, C12): memories held for review, listed, released or deleted by an admin.

A held memory (status QUARANTINED) is written by the add path when the poisoning check flags a fact
(``models.rules.poisoning``) and by an import of a flagged or held line. It has no vector, is in no
snapshot (never recalled, never an evolution candidate) and counts against no capacity. Release
admits it like a new memory (important mark, capacity and eviction, counters), embeds it and puts
it in the index; delete soft-deletes it like ``delete``. Release and delete run on the user's mailbox.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from engram.actors.memory_service import MemoryService
from engram.actors.privacy import decode_cursor, encode_cursor
from engram.actors.views import memory_view
from engram.models.enums import OpSource, OpType, Status
from engram.models.errors import EngramError
from engram.models.quarantine import (
    HeldMemory,
    QuarantineDecisionRequest,
    QuarantineListRequest,
    QuarantinePage,
    QuarantineResult,
    RefusedRelease,
)
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import type_initial_weight
from engram.storage import privacy_queries as q
from engram.storage import quarantine_queries as held
from engram.storage.admission import make_room
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)


class QuarantineService:
    """List, release and delete held memories over one MemoryService's stores."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    async def list_held(self, request: QuarantineListRequest) -> QuarantinePage:
        """Held memories of one user (or all users), oldest first, each with why it was held."""
        after = decode_cursor(request.cursor) if request.cursor else None
        async with self.service.metadata.transaction(readonly=True) as tx:
            page = await held.held_page(
                tx, user_id=request.user_id, app_id=request.app_id, after=after, limit=request.limit
            )
            by_user: dict[str, list[str]] = defaultdict(list)
            for memory in page:
                by_user[memory.user_id].append(memory.memory_id)
            reasons: dict[str, str] = {}
            for user_id, ids in by_user.items():
                for change in await q.changes_of(tx, user_id, ids):
                    if change.op_type is OpType.ADD:
                        reasons.setdefault(change.memory_id, change.reason)
        last = page[-1] if len(page) == request.limit else None
        return QuarantinePage(
            memories=[
                HeldMemory(
                    **memory_view(m).model_dump(), user_id=m.user_id, reason=reasons.get(m.memory_id, "")
                )
                for m in page
            ],
            next_cursor=encode_cursor(last.created_at, last.memory_id) if last else None,
        )

    async def release(
        self, request: QuarantineDecisionRequest, *, op_source: OpSource = OpSource.ADMIN
    ) -> QuarantineResult:
        """Make held memories ACTIVE through normal admission, embed and index them; a memory that
        admission refuses (42901, 42902) stays held and is listed with its code."""
        user_id = request.user_id
        now = self.service.clock()
        async with self.service.metadata.transaction(readonly=True) as tx:
            candidates = [m for m in await held.held_among(tx, user_id, request.memory_ids) if m.content]
        vectors = (
            await self.service.embedder.embed([m.content or "" for m in candidates]) if candidates else None
        )
        released, refused, evicted = [], [], []
        records = []
        async with self.service.metadata.transaction() as tx:
            for index, memory in enumerate(candidates):
                memory.status = Status.ACTIVE
                memory.weight = type_initial_weight(memory, self.service.settings.weights)
                memory.weight_at = memory.updated_at = now
                memory.embedding_model = self.service.embedder.model_name
                try:
                    async with tx.savepoint():
                        evicted += await make_room(tx, self.service.settings, memory, now)
                        await tx.memories.save(memory)
                        await tx.changes.add(
                            memory,
                            OpType.RESTORE,
                            op_source,
                            "released from quarantine",
                            now,
                            content_after=memory.content,
                        )
                        await tx.counters.add(user_id, counter_deltas([memory], +1))
                except EngramError as exc:
                    refused.append(
                        RefusedRelease(memory_id=memory.memory_id, code=exc.code.value, msg=exc.message)
                    )
                    continue
                released.append(memory.memory_id)
                assert vectors is not None
                records.append(vector_record(memory, vectors[index]))
            if released:
                await tx.versions.bump(user_id)
        if evicted:
            await self.service.vectors.delete(evicted)
        gone = set(evicted)
        if records := [r for r in records if r.memory_id not in gone]:
            await self.service.vectors.upsert(records)
        log.info("released %d held memories of user %s (%d refused)", len(released), user_id, len(refused))
        handled = set(released) | {r.memory_id for r in refused}
        return QuarantineResult(
            done=released,
            not_held=[i for i in dict.fromkeys(request.memory_ids) if i not in handled],
            refused=refused,
        )

    async def delete(
        self, request: QuarantineDecisionRequest, *, op_source: OpSource = OpSource.ADMIN
    ) -> QuarantineResult:
        """Soft-delete held memories (the sweep removes them after the deleted-retention period)."""
        user_id = request.user_id
        now = self.service.clock()
        async with self.service.metadata.transaction() as tx:
            targets = await held.held_among(tx, user_id, request.memory_ids)
            if targets:
                await held.set_held_status(tx, user_id, [m.memory_id for m in targets], Status.DELETED, now)
                for memory in targets:
                    await tx.changes.add(
                        memory,
                        OpType.DELETE,
                        op_source,
                        "deleted from quarantine",
                        now,
                        content_before=memory.content,
                    )
                await tx.versions.bump(user_id)
        done = {m.memory_id for m in targets}
        log.info("deleted %d held memories of user %s", len(done), user_id)
        return QuarantineResult(
            done=[i for i in dict.fromkeys(request.memory_ids) if i in done],
            not_held=[i for i in dict.fromkeys(request.memory_ids) if i not in done],
        )
