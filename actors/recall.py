"""The recall pipeline (SPEC R1-R6): resolve scope, embed, over-fetch, gate, decay, rank."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from actors import isolation, ranking
from actors.views import recalled_memory
from lifecycle.decay import decayed_weight, is_decay_exempt
from models.api import RecallRequest, RecallResponse
from models.domain import Memory
from models.errors import EngramError, ErrorCode
from models.settings import Settings
from storage.embedders import Embedder
from storage.metadata import MetadataStore
from storage.vectors import VectorStore


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """The response and the ids whose recall-hit bookkeeping (R4) is still to be done."""

    response: RecallResponse
    hit_ids: list[str]


class Recaller:
    """Answers recall requests from the stores; holds no per-user state."""

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

    async def recall(self, request: RecallRequest) -> RecallOutcome:
        """Run the pipeline within the request's timeout; past it, fail with 50401 (R5)."""
        timeout_ms = request.timeout_ms or self.settings.recall.timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await self._recall(request)
        except TimeoutError as exc:
            raise EngramError(
                ErrorCode.RECALL_TIMEOUT, f"recall did not finish within {timeout_ms} ms"
            ) from exc

    async def _recall(self, request: RecallRequest) -> RecallOutcome:
        settings = self.settings.recall
        flt = isolation.resolve(request)
        query_vector = (await self._embedder.embed([request.query]))[0]
        top_k = request.top_k or settings.default_top_k
        limit = ranking.overfetch_limit(top_k, settings)
        candidates = await self._vectors.search(query_vector, flt.scope, limit)
        if not candidates:
            return RecallOutcome(RecallResponse(hit=False, memories=[]), [])
        async with self._metadata.transaction() as tx:
            rows = await tx.get_memories(request.user_id, [memory_id for memory_id, _ in candidates])
        now = self._clock()
        visible: dict[str, Memory] = {}
        inputs: list[ranking.RankInput] = []
        for memory_id, cosine in candidates:
            memory = rows.get(memory_id)
            if memory is None or memory.content is None or not isolation.visible(flt, memory, now):
                continue
            visible[memory_id] = memory
            inputs.append(
                ranking.RankInput(
                    memory_id=memory_id,
                    relevance=ranking.cosine_to_relevance(cosine, settings),
                    weight=self._current_weight(memory, now),
                )
            )
        min_relevance = settings.min_relevance if request.min_relevance is None else request.min_relevance
        ranked = ranking.rank(inputs, top_k=top_k, min_relevance=min_relevance, settings=settings)
        hits = [
            recalled_memory(visible[r.memory_id], relevance=r.relevance, weight=r.weight, score=r.score)
            for r in ranked
        ]
        return RecallOutcome(RecallResponse(hit=bool(hits), memories=hits), [r.memory_id for r in ranked])

    def _current_weight(self, memory: Memory, now: datetime) -> float:
        # R3: the weight used for ranking is decayed to now, whatever the sweep last wrote.
        return decayed_weight(
            memory.weight,
            memory.weight_at,
            now,
            is_important=memory.is_important,
            exempt=is_decay_exempt(memory.custom_tags, self.settings.decay),
            settings=self.settings.decay,
        )
