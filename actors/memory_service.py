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
from datetime import datetime

import numpy as np

from engram.actors.edits import Edits
from engram.actors.engines.base import Engine
from engram.actors.engines.factory import engine_from_settings
from engram.actors.engines.metered import metered
from engram.actors.hit_writer import HitTurn
from engram.actors.ingest import Ingestor
from engram.actors.recall import Recaller
from engram.actors.snapshot import VectorSource
from engram.actors.structured_writes import StagedMemories, StructuredWrites
from engram.actors.views import change_view, memory_view
from engram.models.absent import NO_MEMORY, not_found
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
from engram.models.enums import OpSource, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.rules.decay import recovered_weight, type_initial_weight, weight_now
from engram.models.settings import Settings
from engram.storage.compressed import compressed_from
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorStore

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
        # The write paths with rules of their own (W6; M1, M2), over the same stores and clock.
        self.structured = StructuredWrites(settings, metadata, vectors, embedder, clock)
        self.edits = Edits(settings, metadata, vectors, embedder, clock)
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
        """Store ready memories of one user in order, as if one by one, in one transaction; an item
        refused (40004, 42901, 42902) is refused alone (``StructuredWrites.add_batch``)."""
        return await self.structured.add_batch(requests, op_source)

    def screen_structured(
        self, requests: Sequence[AddStructuredRequest]
    ) -> tuple[list[tuple[int, AddStructuredRequest]], dict[int, BatchItemResult]]:
        """The items kept after redaction (with their index) and a 40004 result for each refused (P5)."""
        return self.structured.screen(requests)

    async def stage_structured(
        self,
        tx: MetadataTx,
        requests: Sequence[AddStructuredRequest],
        now: datetime,
        op_source: OpSource = OpSource.USER,
    ) -> StagedMemories:
        """Admit ready memories of one user inside ``tx``, in order, as if one by one; the caller
        embeds them and calls ``write_vectors`` after the commit."""
        return await self.structured.stage(tx, requests, now, op_source)

    async def write_vectors(self, staged: Sequence[StagedMemories], vectors: Sequence[np.ndarray]) -> None:
        """After the commit: evicted vectors out, the admitted memories' vectors in."""
        await self.structured.write_vectors(staged, vectors)

    async def update(self, request: UpdateRequest, *, op_source: OpSource = OpSource.USER) -> MemoryView:
        """Change content and/or metadata (M1); only a content change re-embeds (W9)."""
        return await self.edits.update(request, op_source)

    async def delete(self, request: DeleteRequest, *, op_source: OpSource = OpSource.USER) -> DeleteResult:
        """Soft-delete one memory (M2): out of recall at once; 40401 when there is none."""
        return await self.edits.delete(request, op_source)

    async def batch_delete(
        self, request: BatchDeleteRequest, *, op_source: OpSource = OpSource.USER
    ) -> DeleteResult:
        """Soft-delete many memories with one aggregated counter update (M2)."""
        return await self.edits.batch_delete(request, op_source)

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
        """Wait for background recall-hit bookkeeping and snapshot loads (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.recaller.snapshots.settled()

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
