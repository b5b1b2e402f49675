"""A user's edits of stored memories (SPEC M1, M2): update, delete and batch_delete.

Separate from ``memory_service`` because an edit has rules of its own: a content change is
screened, re-embedded and may be held for review; the weight and the capacity counters follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from engram.actors.sensitive import screened_content
from engram.actors.views import memory_view
from engram.models.absent import NO_ACTIVE_MEMORY, NO_MEMORY_TO_DELETE, not_found
from engram.models.api import BatchDeleteRequest, DeleteRequest, DeleteResult, MemoryView, UpdateRequest
from engram.models.domain import Memory
from engram.models.enums import OpSource, OpType, Status
from engram.models.hashing import content_hash
from engram.models.provenance import Source
from engram.models.rules import capacity, poisoning
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import type_initial_weight, weight_now
from engram.models.settings import Settings
from engram.storage.admission import check_important_mark
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorStore, vector_record


class Edits:
    """update, delete and batch_delete over the service's stores."""

    def __init__(
        self,
        settings: Settings,
        metadata: MetadataStore,
        vectors: VectorStore,
        embedder: Embedder,
        clock: Callable[[], datetime],
    ) -> None:
        self.settings = settings
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder
        self._clock = clock

    async def update(self, request: UpdateRequest, op_source: OpSource) -> MemoryView:
        """Change content and/or metadata (M1); only a content change re-embeds (W9)."""
        now = self._clock()
        fields = request.model_fields_set
        if request.content is not None:
            request = request.model_copy(update={"content": await self._screened_update(request)})
        content_changes = request.content is not None
        vector = (await self._embedder.embed([request.content]))[0] if request.content is not None else None
        async with self._metadata.transaction() as tx:
            memory = await tx.memories.get(request.user_id, request.memory_id)
            if memory is None or memory.status is not Status.ACTIVE or memory.content is None:
                raise not_found(NO_ACTIVE_MEMORY, request.memory_id)
            before = replace(memory)
            current = weight_now(memory, now, self.settings.decay)
            if request.content is not None and request.content != memory.content:
                cipher = await tx.keys.cipher(memory.user_id)
                memory.content = request.content
                memory.content_hash = content_hash(request.content, cipher.hash_key)
                memory.embedding_model = self._embedder.model_name
            else:
                content_changes = False
            verdict = poisoning.assess(memory.content, Source.STRUCTURED) if content_changes else None
            held: MemoryView | None = None
            if verdict is not None and verdict.quarantine:
                # New content aimed at the agent is held like a new write of it would be (P5).
                held = await self._hold_update(tx, request, before, memory, verdict.signals, op_source, now)
            else:
                if "is_important" in fields and request.is_important is not None:
                    memory.is_important = request.is_important
                if "expire_at" in fields:
                    memory.expire_at = request.expire_at
                if "custom_tags" in fields and request.custom_tags is not None:
                    memory.custom_tags = tuple(dict.fromkeys(request.custom_tags))
                if memory.is_important and not before.is_important:
                    await check_important_mark(tx, self.settings, memory)
                memory.weight = self._weight_after_update(memory, current, content_changes)
                memory.weight_at = now
                memory.updated_at = now
                await tx.memories.save(memory)
                await tx.changes.add(
                    memory,
                    OpType.UPDATE,
                    op_source,
                    "update: " + ", ".join(sorted(f for f in fields if f not in {"user_id", "memory_id"})),
                    now,
                    content_before=before.content,
                    content_after=memory.content,
                )
                if memory.is_important != before.is_important:
                    own = capacity.important_dimension(capacity.dimension_for(memory.app_id))
                    sign = 1 if memory.is_important else -1
                    await tx.counters.add(
                        memory.user_id, {own: sign, capacity.important_dimension("total"): sign}
                    )
                await tx.versions.bump(memory.user_id)
        if held is not None:
            await self._vectors.delete([memory.memory_id])
            return held
        if content_changes and vector is not None:
            await self._vectors.upsert([vector_record(memory, vector)])
        return memory_view(memory)

    async def _hold_update(
        self,
        tx: MetadataTx,
        request: UpdateRequest,
        before: Memory,
        memory: Memory,
        signals: Sequence[str],
        op_source: OpSource,
        now: datetime,
    ) -> MemoryView:
        """Move an updated memory to QUARANTINED: out of capacity and the index until released."""
        memory.status = Status.QUARANTINED
        memory.updated_at = now
        await tx.memories.save(memory)
        fields = sorted(f for f in request.model_fields_set if f not in {"user_id", "memory_id"})
        reason = (
            f"update: {', '.join(fields)}; quarantined ({', '.join(signals)}) from {Source.STRUCTURED.value}"
        )
        await tx.changes.add(
            memory,
            OpType.UPDATE,
            op_source,
            reason,
            now,
            content_before=before.content,
            content_after=memory.content,
        )
        # Held memories are not counted (the release admits it again, counting it then).
        deltas: dict[str, int] = {}
        for dimension in capacity.dimensions_for(memory.app_id):
            deltas[dimension] = -1
            if before.is_important:
                deltas[capacity.important_dimension(dimension)] = -1
        await tx.counters.add(memory.user_id, deltas)
        await tx.versions.bump(memory.user_id)
        return memory_view(memory)

    async def _screened_update(self, request: UpdateRequest) -> str:
        """The new content with secrets and PII redacted by the memory's app policy; 40004 if refused."""
        assert request.content is not None
        async with self._metadata.transaction(readonly=True) as tx:
            memory = await tx.memories.get(request.user_id, request.memory_id)
        app_id = memory.app_id if memory is not None else None
        return screened_content(request.content, self.settings.privacy.sensitive, app_id)

    def _weight_after_update(self, memory: Memory, current: float, content_changed: bool) -> float:
        base = type_initial_weight(memory, self.settings.weights)
        # A corrected statement starts afresh at its type's weight (the seed's UPDATE rule); a mark
        # as important lifts it to at least the important weight; other metadata keeps the weight.
        if content_changed:
            return base
        if memory.is_important:
            return max(current, self.settings.weights.important)
        return current

    async def delete(self, request: DeleteRequest, op_source: OpSource) -> DeleteResult:
        """Soft-delete one memory (M2): out of recall at once; 40401 when there is none."""
        result = await self._delete(request.user_id, [request.memory_id], op_source)
        if not result.deleted:
            raise not_found(NO_MEMORY_TO_DELETE, request.memory_id)
        return result

    async def batch_delete(self, request: BatchDeleteRequest, op_source: OpSource) -> DeleteResult:
        """Soft-delete many memories with one aggregated counter update (M2)."""
        return await self._delete(request.user_id, list(dict.fromkeys(request.memory_ids)), op_source)

    async def _delete(self, user_id: str, memory_ids: list[str], op_source: OpSource) -> DeleteResult:
        now = self._clock()
        async with self._metadata.transaction() as tx:
            found = await tx.memories.get_many(user_id, memory_ids)
            targets = [m for m in found.values() if m.status is not Status.DELETED]
            if targets:
                await tx.memories.mark_status(user_id, [m.memory_id for m in targets], Status.DELETED, now)
                for memory in targets:
                    await tx.changes.add(
                        memory, OpType.DELETE, op_source, "delete", now, content_before=memory.content
                    )
                active = [m for m in targets if m.status is Status.ACTIVE]
                await tx.counters.add(user_id, counter_deltas(active, -1))
                await tx.versions.bump(user_id)
        deleted = {m.memory_id for m in targets}
        if deleted:
            await self._vectors.delete(sorted(deleted))
        return DeleteResult(
            deleted=[i for i in memory_ids if i in deleted],
            not_found=[i for i in memory_ids if i not in deleted],
        )
