"""The recall pipeline (SPEC R1-R6) over per-user snapshots (DESIGN decision 5).

resolve scope -> (embed query || load snapshot) -> visibility gate -> hybrid relevance (semantic,
BM25, entity match) -> over-fetch a candidate pool by relevance -> stage 1 min_relevance -> stage 2
relevance x weight with lazily decayed weights -> top_k.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engram.actors import isolation, recall_explain
from engram.actors.cold_index import VectorSearch
from engram.actors.cold_recall import ColdRead, ColdRecall, answers_cold
from engram.actors.lexical import Bm25Index, fuse, language, tokenize
from engram.actors.profile import Profiles
from engram.actors.recall_explain import Scored
from engram.actors.snapshot import SnapshotCache, UserSnapshot, VectorSource, entity_tokens_of
from engram.actors.views import recalled_memory
from engram.models.api import RecallRequest, RecallResponse
from engram.models.api_explain import RecallExplanation
from engram.models.domain import Memory
from engram.models.enums import Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS, app_label
from engram.models.provenance import source_of, trust_of, trust_score
from engram.models.rules import ranking
from engram.models.rules.decay import weight_now
from engram.models.settings import RecallSettings, Settings
from engram.models.tracing import TRACING
from engram.storage.embedders import Embedder
from engram.storage.embedding_base import IDENTITY, Calibration, calibration_of, embed_queries
from engram.storage.metadata import MetadataStore
from engram.storage.quick_reads import open_quick_reader
from engram.storage.vector_filters import VectorScope

# Where a recall's hit bookkeeping (R4) goes, called with (user id, ids of the memories hit, when)
# once the answer is ready and never awaited: each process queues it its own way (the shard on the
# user's mailbox, a Recall replica in a buffer for the shard, a bare MemoryService in the background).
HitSink = Callable[[str, Sequence[str], datetime], object]
# An explanation scores at most this many of the user's quarantined memories (newest first).
QUARANTINE_EXPLAINED = 50


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """The response and the ids whose recall-hit bookkeeping (R4) is still to be done."""

    response: RecallResponse
    hit_ids: list[str]


class Recaller:
    """Answers recall requests from per-user snapshots; holds no state but that cache."""

    def __init__(
        self,
        settings: Settings,
        metadata: MetadataStore,
        vectors: VectorSource,
        embedder: Embedder,
        clock: Callable[[], datetime],
        index: VectorSearch | None = None,
    ) -> None:
        """``index``: a vector index this process may search, for cold recalls' candidates."""
        self.settings = settings
        self._metadata = metadata
        self._embedder = embedder
        self._calibration = calibration_of(embedder)
        self._clock = clock
        quick = open_quick_reader(settings.storage.resolved_database_url())
        self.snapshots = SnapshotCache(
            metadata,
            vectors,
            embedder,
            max_users=settings.recall.snapshot_cache_users,
            max_bytes=settings.recall.snapshot_cache_bytes,
            admit_after=settings.recall.snapshot_admit_after,
            ttl_s=settings.recall.snapshot_ttl_s,
            quick=quick,
        )
        self.index = index
        self.cold = ColdRecall(metadata, embedder.model_name, embedder.dim, settings.recall, quick, index)
        self.profiles = Profiles(settings, metadata, clock)

    async def close(self) -> None:
        """Let go of the vector index's client, if this recaller searches one."""
        if self.index is not None:
            await self.index.close()

    async def recall(self, request: RecallRequest, hits: HitSink) -> RecallResponse:
        """Run the pipeline within the request's timeout (past it, fail with 50401: R5); the ids
        the answer hit go to ``hits``."""
        timeout_ms = request.timeout_ms or self.settings.recall.timeout_ms
        started = time.perf_counter()
        outcome = "error"
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                result = await self._recall(request)
                if request.include_profile:
                    # The profile of the recall's scope (global facts, plus its app's), read-only.
                    profile = await self.profiles.current(request.user_id, request.scope.app_id)
                    response = result.response.model_copy(update={"profile": profile})
                    result = RecallOutcome(response, result.hit_ids)
            outcome = "hit" if result.response.hit else "miss"
            if result.hit_ids:
                hits(request.user_id, result.hit_ids, self._clock())
            return result.response
        except TimeoutError as exc:
            outcome = "timeout"
            raise EngramError(
                ErrorCode.RECALL_TIMEOUT, f"recall did not finish within {timeout_ms} ms"
            ) from exc
        finally:
            METRICS.recall_latency.observe(
                (time.perf_counter() - started) * 1000,
                {"outcome": outcome, "app": app_label(self.settings.metrics, request.scope.app_id)},
            )

    async def _recall(self, request: RecallRequest) -> RecallOutcome:
        flt = isolation.resolve(request)
        cold = answers_cold(request, flt, self.settings.recall)
        vectors, source = await asyncio.gather(
            self._embed_query(request.query), self._snapshot(request.user_id, cold=cold)
        )
        if isinstance(source, ColdRead):
            top_k = request.top_k or self.settings.recall.default_top_k
            snapshot = await self.cold.snapshot(source, flt, vectors[0], request.query, top_k, self._clock())
        else:
            snapshot = source
        with TRACING.span("engram.recall.rank"):
            outcome = await self._ranked(request, flt, vectors, snapshot)
        if isinstance(source, ColdRead):
            self.snapshots.missed(request.user_id)
        return outcome

    async def _embed_query(self, query: str) -> np.ndarray:
        with TRACING.span("engram.recall.embed"):
            return await embed_queries(self._embedder, [query])

    async def _snapshot(self, user_id: str, *, cold: bool) -> UserSnapshot | ColdRead:
        """The user's held snapshot; else, when the recall may be answered cold, the user's placed
        copies (``actors.cold_recall``); else the snapshot, loaded."""
        with TRACING.span("engram.recall.snapshot"):
            if not cold:
                return await self.snapshots.get(user_id)
            held = await self.snapshots.held(user_id)
            if held is not None:
                return held
            read = await self.cold.read(user_id)
            if read is None:
                return await self.snapshots.load_on_demand(user_id)
            TRACING.annotate("engram.snapshot", "cold")
            return read

    async def _ranked(
        self, request: RecallRequest, flt: isolation.RecallFilter, vectors: np.ndarray, snapshot: UserSnapshot
    ) -> RecallOutcome:
        settings = self.settings.recall
        now = self._clock()
        positions = [i for i, m in enumerate(snapshot.memories) if isolation.visible(flt, m, now)]
        METRICS.recall_candidates.observe(len(positions))
        TRACING.annotate("engram.candidates", len(positions))
        signals = relevance_signals(
            snapshot, positions, vectors[0], request.query, settings, self._calibration
        )
        relevance = signals.fused()
        top_k = request.top_k or settings.default_top_k
        pool = np.argsort(-relevance, kind="stable")[: ranking.overfetch_limit(top_k, settings)]
        memories = [snapshot.memories[positions[int(p)]] for p in pool]
        inputs = [
            ranking.RankInput(
                m.memory_id, float(relevance[int(p)]), self._current_weight(m, now), memory_trust(m)
            )
            for m, p in zip(memories, pool, strict=True)
        ]
        by_id = {m.memory_id: m for m in memories}
        min_relevance = settings.min_relevance if request.min_relevance is None else request.min_relevance
        ranked = ranking.rank(inputs, top_k=top_k, min_relevance=min_relevance, settings=settings)
        hits = [
            recalled_memory(by_id[r.memory_id], relevance=r.relevance, weight=r.weight, score=r.score)
            for r in ranked
        ]
        response = RecallResponse(hit=bool(hits), memories=hits)
        if request.explain:
            outcome = recall_explain.RankedRecall(
                visible=_scored([snapshot.memories[i] for i in positions], signals, relevance),
                inputs={item.memory_id: item for item in inputs},
                scores={item.memory_id: ranking.score_of(item, settings) for item in inputs},
                ranked=ranked,
                min_relevance=min_relevance,
                top_k=top_k,
            )
            explanation = await self._explain(
                request, flt, snapshot, set(positions), vectors[0], outcome, now
            )
            response = response.model_copy(update={"explanation": explanation})
        return RecallOutcome(response, [r.memory_id for r in ranked])

    async def _explain(
        self,
        request: RecallRequest,
        flt: isolation.RecallFilter,
        snapshot: UserSnapshot,
        visible: set[int],
        query_vector: np.ndarray,
        outcome: recall_explain.RankedRecall,
        now: datetime,
    ) -> RecallExplanation:
        """The explanation of a recall (``explain: true``); the only recall that reads quarantine."""
        settings = self.settings.recall
        asked = request.switched_off_scope
        switched_off = isolation.resolve(request.model_copy(update={"scope": asked})).scope if asked else None
        scope = recall_explain.describable_scope(flt, switched_off)
        hidden = recall_explain.hidden_positions(snapshot, visible, scope)
        signals = relevance_signals(
            snapshot, hidden, query_vector, request.query, settings, self._calibration
        )
        held = await self._quarantined(request.user_id, scope)
        scored_hidden = _scored([snapshot.memories[i] for i in hidden], signals, signals.fused())
        if held:
            scored_hidden = _joined(scored_hidden, await self._score_apart(held, query_vector, request.query))
        return recall_explain.explain(outcome, scored_hidden, flt, now, switched_off=switched_off)

    async def _quarantined(self, user_id: str, scope: VectorScope) -> list[Memory]:
        async with self._metadata.transaction(readonly=True) as tx:
            held = await tx.memories.with_status(user_id, (Status.QUARANTINED,))
        found = [m for m in held if m.content is not None and isolation.in_scope(scope, m)]
        found.sort(key=lambda m: m.updated_at, reverse=True)
        return found[:QUARANTINE_EXPLAINED]

    async def _score_apart(self, memories: list[Memory], query_vector: np.ndarray, query: str) -> Scored:
        """Signals of memories outside the snapshot (quarantined): semantic and entity; lexical
        evidence is absent, as they are not in the user's lexical index."""
        settings = self.settings.recall
        embedded = await self._embedder.embed([m.content or "" for m in memories])
        cosine = np.asarray(embedded, dtype=np.float32) @ np.asarray(query_vector, dtype=np.float32)
        entity_tokens = [entity_tokens_of(m) for m in memories]
        entity = entity_overlap(entity_tokens, set(tokenize(query)))
        signals = RelevanceSignals(
            semantic=ranking.cosines_to_relevance(self._calibration.apply(cosine), settings),
            lexical=np.full(len(memories), np.nan),
            entity=entity,
            w_semantic=settings.semantic_weight,
            w_lexical=settings.lexical_weight,
            w_entity=settings.entity_weight if entity.any() else 0.0,
        )
        return _scored(memories, signals, signals.fused())

    def _current_weight(self, memory: Memory, now: datetime) -> float:
        # R3: the weight used for ranking is decayed to now, whatever the sweep last wrote.
        return weight_now(memory, now, self.settings.decay)


def memory_trust(memory: Memory) -> float:
    """The trust score of a memory's source, for trust-weighted ranking (P5)."""
    return trust_score(trust_of(source_of(memory.source_type, memory.ownership)))


@dataclass(frozen=True, slots=True)
class RelevanceSignals:
    """The three relevance signals of some memories (lexical NaN where absent) and the fusion
    weights this query gives them (a signal no memory shows for the query weighs 0)."""

    semantic: np.ndarray
    lexical: np.ndarray
    entity: np.ndarray
    w_semantic: float
    w_lexical: float
    w_entity: float

    def fused(self) -> np.ndarray:
        """Relevance in [0, 1]: the weighted mean of the signals present (``lexical.fuse``)."""
        if self.w_semantic + self.w_lexical + self.w_entity <= 0:
            return np.zeros(len(self.semantic), dtype=np.float64)
        return fuse(
            self.semantic,
            self.lexical,
            self.entity,
            w_semantic=self.w_semantic,
            w_lexical=self.w_lexical,
            w_entity=self.w_entity,
        )


def relevance_signals(
    snapshot: UserSnapshot,
    positions: list[int],
    query_vector: np.ndarray,
    query: str,
    settings: RecallSettings,
    calibration: Calibration = IDENTITY,
) -> RelevanceSignals:
    """The semantic, lexical and entity signals of the memories at ``positions`` for ``query``;
    ``calibration`` maps the embedder's cosines onto USE's scale first."""
    index = np.asarray(positions, dtype=np.int64)
    cosine = snapshot.vectors[index] @ np.asarray(query_vector, dtype=np.float32)
    semantic = ranking.cosines_to_relevance(calibration.apply(cosine), settings)
    query_tokens = tokenize(query)
    other = _other_language(snapshot, positions, language(query))
    # In a mixed store a query word that no memory of the query's language holds may be held, in
    # translation, by a memory of the other language: it counts in the coverage, so one shared
    # common word ("work", 喜欢) does not lift same-language memories to full coverage above it.
    lexical = lexical_coverage(snapshot.lexicon, query_tokens, count_unseen=bool(other.any()))[index]
    # Across languages lexical overlap is no evidence either way: NaN marks it absent for that memory,
    # so the semantic signal decides there (``fuse``) instead of a zero holding the memory down.
    lexical[other] = np.nan
    entity = entity_overlap([snapshot.entity_tokens[i] for i in positions], set(query_tokens))
    # A signal that no memory shows for this query is absent, not evidence against every memory:
    # when nothing shares a word with the query, a paraphrase ("call me a cab" / "prefers taxis")
    # is judged on meaning alone instead of being held under min_relevance by the lexical share.
    return RelevanceSignals(
        semantic=semantic,
        lexical=lexical,
        entity=entity,
        w_semantic=settings.semantic_weight,
        w_lexical=settings.lexical_weight if np.nan_to_num(lexical, nan=0.0).any() else 0.0,
        w_entity=settings.entity_weight if entity.any() else 0.0,
    )


def entity_overlap(entity_tokens: Sequence[tuple[str, ...]], query_tokens: set[str]) -> np.ndarray:
    """Each memory's share of its (distinct) entity tokens that the query names."""
    return np.array(
        [sum(t in query_tokens for t in tokens) / len(tokens) if tokens else 0.0 for tokens in entity_tokens],
        dtype=np.float64,
    )


def _other_language(snapshot: UserSnapshot, positions: list[int], query_language: str | None) -> np.ndarray:
    """Mask of the memories at ``positions`` written in another language than the query."""
    if query_language is None:
        return np.zeros(len(positions), dtype=bool)
    known = snapshot.languages
    return np.array(
        [
            (known[i] if i < len(known) else language(snapshot.memories[i].content or ""))
            not in (None, query_language)
            for i in positions
        ],
        dtype=bool,
    )


def lexical_coverage(
    lexicon: Bm25Index, query_tokens: list[str], *, count_unseen: bool = False
) -> np.ndarray:
    """BM25 divided by the query's total idf: about the IDF-weighted share of the query a memory holds.

    Dividing by the best document instead would lift a weak match on one common word to 1.0 and push
    irrelevant memories over min_relevance. ``count_unseen``: a query word no memory holds counts at
    the idf of an unseen term instead of 0 (measured against a monolingual store, it costs LoCoMo
    hit@10, docs/evaluation.md, so only mixed stores use it).
    """
    distinct = dict.fromkeys(query_tokens)
    unseen = lexicon.unseen_idf() if count_unseen else 0.0
    total_idf = sum(lexicon.idf(t) or unseen for t in distinct)
    if total_idf <= 0:
        return np.zeros(len(lexicon), dtype=np.float64)
    coverage: np.ndarray = np.clip(lexicon.scores(query_tokens) / total_idf, 0.0, 1.0)
    return coverage


def _scored(memories: Sequence[Memory], signals: RelevanceSignals, relevance: np.ndarray) -> Scored:
    return Scored(
        memories=memories,
        semantic=signals.semantic,
        lexical=signals.lexical,
        entity=signals.entity,
        weights=np.tile([signals.w_semantic, signals.w_lexical, signals.w_entity], (len(memories), 1)),
        relevance=relevance,
    )


def _joined(a: Scored, b: Scored) -> Scored:
    return Scored(
        memories=[*a.memories, *b.memories],
        semantic=np.concatenate([a.semantic, b.semantic]),
        lexical=np.concatenate([a.lexical, b.lexical]),
        entity=np.concatenate([a.entity, b.entity]),
        weights=np.concatenate([a.weights, b.weights]),
        relevance=np.concatenate([a.relevance, b.relevance]),
    )
