"""Storing ready memories (SPEC W6): screening, dedup, admission in bulk, then their vectors.

Separate from ``memory_service`` because the structured writer (``actors.structured_writer``)
stages many users' batches in its own transactions with these same steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from engram.actors import statements
from engram.actors.sensitive import screened_request
from engram.models.api import AddStructuredRequest, BatchItemResult
from engram.models.api_base import bounded_context
from engram.models.domain import Memory
from engram.models.enums import Level, OpSource, OpType, Ownership, Status
from engram.models.errors import EngramError
from engram.models.hashing import content_hash
from engram.models.provenance import Source
from engram.models.rules import poisoning
from engram.models.rules.records import new_memory, placement
from engram.models.settings import Settings
from engram.storage import quarantine_queries
from engram.storage.admission import admit_many
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorStore, vector_record

Scope = tuple[str, str, Level, str | None, Ownership]
"""What makes two memories of a user the same one: content hash, app, level, session, ownership."""


@dataclass
class StagedMemories:
    """What ``StructuredWrites.stage`` did: each item's result, the memories admitted (with their
    item index), and the ids evicted to make room."""

    results: list[BatchItemResult] = field(default_factory=list)
    admitted: list[tuple[int, Memory]] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)


class StructuredWrites:
    """add_structured_batch and its steps (screen, stage, write vectors) over the service's stores."""

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

    async def add_batch(
        self, requests: Sequence[AddStructuredRequest], op_source: OpSource
    ) -> list[BatchItemResult]:
        """Store ready memories of one user in order, as if one by one, in one transaction: one
        embedding call, one dedup query, bulk inserts while the limits leave room (``admit_many``),
        one vector upsert; an item refused (42901, 42902) is refused alone."""
        if not requests:
            return []
        now = self._clock()
        kept, refused = self.screen(requests)
        if not kept:
            return [refused[i] for i in range(len(requests))]
        vectors = await self._embedder.embed([r.content for _, r in kept])
        async with self._metadata.transaction() as tx:
            staged = await self.stage(tx, [r for _, r in kept], now, op_source)
        await self.write_vectors([staged], [vectors])
        for (index, _), result in zip(kept, staged.results, strict=True):
            refused[index] = result.model_copy(update={"index": index})
        return [refused[i] for i in range(len(requests))]

    def screen(
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

    async def stage(
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
            memory = self._memory(request, digest, now)
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
            await self._vectors.delete(evicted)
        gone = set(evicted)
        records = [
            vector_record(memory, rows[index])
            for batch, rows in zip(staged, vectors, strict=True)
            for index, memory in batch.admitted
            if memory.memory_id not in gone
        ]
        if records:
            await self._vectors.upsert(records)

    def _memory(self, request: AddStructuredRequest, digest: str, now: datetime) -> Memory:
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
            embedding_model=self._embedder.model_name,
            now=now,
            valid_at=request.valid_at,
            is_important=request.is_important,
            expire_at=request.expire_at,
            source_msg_id=request.source_msg_id,
            custom_tags=request.custom_tags,
            entities=statements.entities(request.content),
            source_type=Source.STRUCTURED.value,
            context=bounded_context(request.context),
        )


def _scope_of(memory: Memory) -> Scope:
    return (memory.content_hash, memory.app_id, memory.level, memory.session_id, memory.ownership)
