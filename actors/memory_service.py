"""The in-process memory core: every write and read of one deployment's stores, free of Ray.

The per-user actors (next layer) call this class and guarantee that writes for one user never run
concurrently; that is why nothing here takes a lock. Each write commits the memory row, its
counters, its change-log entry and the user's version in one transaction, then updates the vector
store (DESIGN decision 3: metadata is the truth, vectors follow, reconcile repairs drift).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from engram.actors import statements
from engram.actors.engines.base import Engine
from engram.actors.engines.factory import engine_from_settings
from engram.actors.engines.metered import metered
from engram.actors.hit_writer import HitTurn
from engram.actors.ingest import Ingestor
from engram.actors.recall import Recaller
from engram.actors.sensitive import screened_content, screened_request
from engram.actors.snapshot import VectorSource
from engram.actors.views import change_view, memory_view
from engram.models.absent import NO_ACTIVE_MEMORY, NO_MEMORY, NO_MEMORY_TO_DELETE, not_found
from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchDeleteRequest,
    BatchItemResult,
    ChangeLogPage,
    ChangeLogRequest,
    Decision,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    RecallRequest,
    RecallResponse,
    UpdateRequest,
)
from engram.models.domain import Memory, utcnow
from engram.models.enums import Level, OpSource, OpType, Ownership, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.provenance import Source
from engram.models.rules import capacity, poisoning
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import recovered_weight, type_initial_weight, weight_now
from engram.models.rules.records import new_memory, placement
from engram.models.settings import Settings
from engram.storage import quarantine_queries
from engram.storage.admission import admit_many, check_important_mark
from engram.storage.compressed import compressed_from
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorStore, vector_record

log = logging.getLogger(__name__)


class MemoryService:
    """add_structured, recall, update, delete, batch_delete, history and change_log over real stores."""

    def __init__(
        self,
        settings: Settings,
        metadata: MetadataStore,
        vectors: VectorStore,
        embedder: Embedder,
        clock: Callable[[], datetime] = utcnow,
        engine: Engine | None = None,
        recall_vectors: VectorSource | None = None,
    ) -> None:
        """``recall_vectors``: where recall snapshots read vectors (default: ``vectors``)."""
        self.settings = settings
        self.metadata = metadata
        self.vectors = vectors
        self.embedder = embedder
        self.clock = clock
        self.recaller = Recaller(settings, metadata, recall_vectors or vectors, embedder, clock)
        self.ingestor = Ingestor(
            settings,
            metadata,
            vectors,
            embedder,
            self.recaller.snapshots,
            engine or metered(engine_from_settings(settings.engine)),
            clock,
        )
        self._background: set[asyncio.Task[None]] = set()

    # --- writes -------------------------------------------------------------------------------

    async def process_add(self, request: AddRequest) -> list[Decision]:
        """Extract facts from a conversation and evolve them into the store (W3-W5)."""
        return await self.ingestor.process(request)

    async def add_structured(
        self, request: AddStructuredRequest, *, op_source: OpSource = OpSource.USER
    ) -> MemoryCreated:
        """Store one ready memory (W6): dedup by content hash, enforce capacity, embed, log."""
        [result] = await self.add_structured_batch([request], op_source=op_source)
        if result.code:
            raise EngramError(ErrorCode(result.code), result.msg)
        assert result.memory_id is not None
        return MemoryCreated(memory_id=result.memory_id)

    async def add_structured_batch(
        self, requests: Sequence[AddStructuredRequest], *, op_source: OpSource = OpSource.USER
    ) -> list[BatchItemResult]:
        """Store ready memories of one user in order, as if one by one, in one transaction: one
        embedding call, one dedup query, bulk inserts while the limits leave room (``admit_many``),
        one vector upsert; an item refused (42901, 42902) is refused alone."""
        if not requests:
            return []
        now = self.clock()
        kept, refused = self.screen_structured(requests)
        if not kept:
            return [refused[i] for i in range(len(requests))]
        vectors = await self.embedder.embed([r.content for _, r in kept])
        async with self.metadata.transaction() as tx:
            staged = await self.stage_structured(tx, [r for _, r in kept], now, op_source)
        await self.write_vectors([staged], [vectors])
        for (index, _), result in zip(kept, staged.results, strict=True):
            refused[index] = result.model_copy(update={"index": index})
        return [refused[i] for i in range(len(requests))]

    def screen_structured(
        self, requests: Sequence[AddStructuredRequest]
    ) -> tuple[list[tuple[int, AddStructuredRequest]], dict[int, BatchItemResult]]:
        """Secrets and PII redacted before hashing and embedding (P5): the items kept (with their
        index) and a 40004 result for each item the policy refuses."""
        kept: list[tuple[int, AddStructuredRequest]] = []
        refused: dict[int, BatchItemResult] = {}
        for index, request in enumerate(requests):
            try:
                kept.append((index, screened_request(request, self.settings.privacy.sensitive)))
            except EngramError as exc:
                refused[index] = BatchItemResult(index=index, code=exc.code.value, msg=exc.message)
        return kept, refused

    async def stage_structured(
        self,
        tx: MetadataTx,
        requests: Sequence[AddStructuredRequest],
        now: datetime,
        op_source: OpSource = OpSource.USER,
    ) -> StagedMemories:
        """Admit ready memories of one user inside ``tx``, in order, as if one by one; the caller
        embeds them and calls ``write_vectors`` after the commit."""
        user_id = requests[0].user_id
        if any(r.user_id != user_id for r in requests):
            raise ValueError("staged memories belong to one user")
        results: dict[int, BatchItemResult] = {}
        repeats: dict[int, int] = {}  # item -> the earlier item of the batch with the same memory
        cipher = await tx.keys.cipher(user_id)
        digests = [content_hash(r.content, cipher.hash_key) for r in requests]
        stored = await tx.memories.find_by_hashes(user_id, digests)
        # The same content in the same scope is one memory, already stored or earlier in the batch.
        known: dict[Scope, str] = {}
        for memory in (m for found in stored.values() for m in found):
            known.setdefault(_scope_of(memory), memory.memory_id)
        first_in_batch: dict[Scope, int] = {}
        new: list[tuple[int, Memory]] = []
        # Content that reads as an instruction to the agent (P5) is held for review: no admission,
        # no vector, no capacity; the same content already held is that memory.
        held = await quarantine_queries.held_scopes(tx, user_id)
        for index, (request, digest) in enumerate(zip(requests, digests, strict=True)):
            memory = self._structured_memory(request, digest, now)
            scope = _scope_of(memory)
            if scope in known:
                results[index] = BatchItemResult(index=index, memory_id=known[scope])
            elif scope in first_in_batch:
                repeats[index] = first_in_batch[scope]
            elif scope in held:
                results[index] = BatchItemResult(index=index, memory_id=held[scope])
            elif (verdict := poisoning.assess(request.content, Source.STRUCTURED)).quarantine:
                held[scope] = memory.memory_id
                await self._hold(tx, memory, verdict.signals, op_source, now)
                results[index] = BatchItemResult(index=index, memory_id=memory.memory_id)
            else:
                first_in_batch[scope] = index
                new.append((index, memory))
        outcomes = await admit_many(tx, self.settings, [m for _, m in new], op_source, "add_structured", now)
        staged = StagedMemories()
        for (index, memory), outcome in zip(new, outcomes, strict=True):
            if isinstance(outcome, EngramError):
                results[index] = BatchItemResult(index=index, code=outcome.code.value, msg=outcome.message)
                continue
            staged.evicted.extend(outcome)
            staged.admitted.append((index, memory))
            results[index] = BatchItemResult(index=index, memory_id=memory.memory_id)
        for index, earlier in repeats.items():
            results[index] = results[earlier].model_copy(update={"index": index})
        if staged.admitted:
            await tx.versions.bump(user_id)
        staged.results = [results[i] for i in range(len(requests))]
        return staged

    async def _hold(
        self, tx: MetadataTx, memory: Memory, signals: Sequence[str], op_source: OpSource, now: datetime
    ) -> None:
        memory.status = Status.QUARANTINED
        reason = f"quarantined ({', '.join(signals)}) from {Source.STRUCTURED.value}"
        await tx.memories.insert(memory)
        await tx.changes.add(memory, OpType.ADD, op_source, reason, now, content_after=memory.content)

    async def write_vectors(self, staged: Sequence[StagedMemories], vectors: Sequence[np.ndarray]) -> None:
        """After the commit: evicted vectors out, then the admitted memories' vectors in, for any
        number of staged batches at once (``vectors[k]`` holds the rows of ``staged[k]``'s items)."""
        evicted = [memory_id for batch in staged for memory_id in batch.evicted]
        if evicted:
            await self.vectors.delete(evicted)
        gone = set(evicted)
        records = [
            vector_record(memory, rows[index])
            for batch, rows in zip(staged, vectors, strict=True)
            for index, memory in batch.admitted
            if memory.memory_id not in gone
        ]
        if records:
            await self.vectors.upsert(records)

    def _structured_memory(self, request: AddStructuredRequest, digest: str, now: datetime) -> Memory:
        level, app_id = placement(request.level, request.app_id, request.session_id)
        return new_memory(
            self.settings.weights,
            user_id=request.user_id,
            app_id=app_id,
            level=level,
            session_id=request.session_id,
            ownership=request.ownership,
            mem_type=request.mem_type,
            content=request.content,
            content_hash=digest,
            embedding_model=self.embedder.model_name,
            now=now,
            valid_at=request.valid_at,
            is_important=request.is_important,
            expire_at=request.expire_at,
            source_msg_id=request.source_msg_id,
            custom_tags=request.custom_tags,
            entities=statements.entities(request.content),
            source_type=Source.STRUCTURED.value,
        )

    async def update(self, request: UpdateRequest, *, op_source: OpSource = OpSource.USER) -> MemoryView:
        """Change content and/or metadata (M1); only a content change re-embeds (W9)."""
        now = self.clock()
        fields = request.model_fields_set
        if request.content is not None:
            request = request.model_copy(update={"content": await self._screened_update(request)})
        content_changes = request.content is not None
        vector = (await self.embedder.embed([request.content]))[0] if request.content is not None else None
        async with self.metadata.transaction() as tx:
            memory = await tx.memories.get(request.user_id, request.memory_id)
            if memory is None or memory.status is not Status.ACTIVE or memory.content is None:
                raise not_found(NO_ACTIVE_MEMORY, request.memory_id)
            before = replace(memory, custom_tags=list(memory.custom_tags))
            current = self._decayed(memory, now)
            if request.content is not None and request.content != memory.content:
                cipher = await tx.keys.cipher(memory.user_id)
                memory.content = request.content
                memory.content_hash = content_hash(request.content, cipher.hash_key)
                memory.embedding_model = self.embedder.model_name
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
                    memory.custom_tags = list(dict.fromkeys(request.custom_tags))
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
            await self.vectors.delete([memory.memory_id])
            return held
        if content_changes and vector is not None:
            await self.vectors.upsert([vector_record(memory, vector)])
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
        async with self.metadata.transaction(readonly=True) as tx:
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

    async def delete(self, request: DeleteRequest, *, op_source: OpSource = OpSource.USER) -> DeleteResult:
        """Soft-delete one memory (M2): out of recall at once; 40401 when there is none."""
        result = await self._delete(request.user_id, [request.memory_id], op_source)
        if not result.deleted:
            raise not_found(NO_MEMORY_TO_DELETE, request.memory_id)
        return result

    async def batch_delete(
        self, request: BatchDeleteRequest, *, op_source: OpSource = OpSource.USER
    ) -> DeleteResult:
        """Soft-delete many memories with one aggregated counter update (M2)."""
        return await self._delete(request.user_id, list(dict.fromkeys(request.memory_ids)), op_source)

    async def _delete(self, user_id: str, memory_ids: list[str], op_source: OpSource) -> DeleteResult:
        now = self.clock()
        async with self.metadata.transaction() as tx:
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
            await self.vectors.delete(sorted(deleted))
        return DeleteResult(
            deleted=[i for i in memory_ids if i in deleted],
            not_found=[i for i in memory_ids if i not in deleted],
        )

    # --- reads --------------------------------------------------------------------------------

    async def recall(self, request: RecallRequest) -> RecallResponse:
        """The most relevant visible memories (R1-R6); hit bookkeeping runs after the answer (R4)."""
        return await self.recaller.recall(request, hits=self._record_hits_in_background)

    def _record_hits_in_background(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        task = asyncio.create_task(self.record_recall_hits(user_id, memory_ids, at))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def record_recall_hits(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """R4: count the hit, reset the decay clock and recover weight up to the type's initial."""
        await self.record_recall_hit_turns([HitTurn(user_id, list(memory_ids), at)])

    async def record_recall_hit_turns(self, turns: Sequence[HitTurn]) -> None:
        """R4 for many users' hits in one transaction (``HitWriter``); each as if stored alone."""
        stored: list[tuple[HitTurn, dict[str, tuple[float, int]]]] = []
        async with self.metadata.transaction() as tx:
            await tx.keys.prefetch({turn.user_id for turn in turns})
            for turn in turns:
                stored.append((turn, await self._stage_recall_hits(tx, turn)))
        # No version bump: a hit changes no content, and a bump would discard the snapshot on every
        # recall. This process's snapshot takes the new weights now, other processes within the TTL.
        for turn, hits in stored:
            self.recaller.snapshots.note_recall_hits(turn.user_id, hits, turn.at)

    async def _stage_recall_hits(self, tx: MetadataTx, turn: HitTurn) -> dict[str, tuple[float, int]]:
        hits: dict[str, tuple[float, int]] = {}
        for memory in (await tx.memories.get_many(turn.user_id, turn.memory_ids)).values():
            if memory.status is not Status.ACTIVE or memory.content is None:
                continue
            cap = type_initial_weight(memory, self.settings.weights)
            weight = recovered_weight(self._decayed(memory, turn.at), self.settings.recall.delta_recall, cap)
            hits[memory.memory_id] = (weight, memory.recall_count + 1)
        # One statement for all hits: per-row updates were most of a shard's recall cost.
        await tx.memories.record_recall_hits(turn.user_id, hits, turn.at)
        return hits

    async def drain(self) -> None:
        """Wait for background recall-hit bookkeeping (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        """One memory and its full change chain, oldest first (M3)."""
        async with self.metadata.transaction(readonly=True) as tx:
            memory = await tx.memories.get(request.user_id, request.memory_id)
            if memory is None:
                raise not_found(NO_MEMORY, request.memory_id)
            changes = await tx.changes.history(request.user_id, request.memory_id)
            sources = await compressed_from(tx, request.user_id, request.memory_id)
        return HistoryResponse(
            memory=memory_view(memory, self._decayed(memory, self.clock())),
            changes=[change_view(c) for c in changes],
            compressed_from=sources,
        )

    async def change_log(self, request: ChangeLogRequest) -> ChangeLogPage:
        """The user's changes by dimension and time range, newest first, paginated (M3)."""
        async with self.metadata.transaction(readonly=True) as tx:
            entries = await tx.changes.page(
                request.user_id,
                app_id=request.app_id,
                op_type=request.op_type,
                since=request.since,
                until=request.until,
                before_change_id=int(request.cursor) if request.cursor else None,
                limit=request.limit,
            )
        next_cursor = str(entries[-1].change_id) if len(entries) == request.limit else None
        return ChangeLogPage(changes=[change_view(e) for e in entries], next_cursor=next_cursor)

    def _decayed(self, memory: Memory, now: datetime) -> float:
        return weight_now(memory, now, self.settings.decay)


Scope = tuple[str, str, Level, str | None, Ownership]
"""What makes two memories of a user the same one: content hash, app, level, session, ownership."""


def _scope_of(memory: Memory) -> Scope:
    return (memory.content_hash, memory.app_id, memory.level, memory.session_id, memory.ownership)


@dataclass
class StagedMemories:
    """What ``stage_structured`` did: each item's result, the memories admitted (with their item
    index), and the ids evicted to make room."""

    results: list[BatchItemResult] = field(default_factory=list)
    admitted: list[tuple[int, Memory]] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
