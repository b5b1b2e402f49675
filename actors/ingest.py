"""Ingesting a conversation (SPEC W3-W5): extract facts, plan evolution, commit the plans atomically.

Extraction runs first and may fail with 50001 before anything is written; with an LLM engine that
fails or times out, ``evolution.degraded_mode`` has the rules engine extract instead (W5). A fact that
cannot be embedded is skipped and reported in the task, the others go on (W9). All plans of one request
then commit in one metadata transaction with their change-log entries and counters, so a failure
leaves nothing half-written; the vector store follows (DESIGN decision 3). With a task id, the task
is marked DONE in that same transaction, so an accepted write takes effect exactly once (W1).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import numpy as np

from engram.actors.engines.base import Engine
from engram.actors.engines.rules import RulesEngine
from engram.actors.evolution import Evolver, Existing, Plan
from engram.actors.extraction import Fact, extract_facts
from engram.actors.plan_apply import Outcome, PlanApplier, decision
from engram.actors.sensitive import screened_fact
from engram.actors.snapshot import SnapshotCache
from engram.models.absent import NO_TASK, not_found
from engram.models.api import AddRequest, Decision
from engram.models.enums import OpSource, OpType, Status, TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.metrics import METRICS
from engram.models.rules.records import placement
from engram.models.settings import Settings
from engram.models.tracing import TRACING
from engram.storage import quarantine_queries
from engram.storage.embedders import Embedder, EmbeddingError
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorStore

log = logging.getLogger(__name__)


class _AlreadyFinishedError(Exception):
    """Raised inside the commit transaction to roll it back: another run finished the task first."""


class Ingestor:
    """Turns one ``add`` request into committed memories and the decisions taken."""

    def __init__(
        self,
        settings: Settings,
        metadata: MetadataStore,
        vectors: VectorStore,
        embedder: Embedder,
        snapshots: SnapshotCache,
        engine: Engine,
        clock: Callable[[], datetime],
    ) -> None:
        self.settings = settings
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder
        self._snapshots = snapshots
        self.engine = engine
        self._evolver = Evolver(settings.evolution, engine)
        self._rules = RulesEngine()  # extracts in degraded mode, when the LLM engine fails (W5)
        self._applier = PlanApplier(settings, embedder)
        self._clock = clock

    async def process(self, request: AddRequest, *, task_id: str | None = None) -> list[Decision]:
        """Extract, evolve and store; returns one decision per extracted fact.

        With ``task_id`` the task is finished DONE in the transaction that commits the plans, and a
        task already finished returns its stored decisions without doing anything (replay).
        """
        if task_id is not None and (stored := await self._finished_decisions(task_id)) is not None:
            return stored
        now = self._clock()
        with TRACING.span("engram.extract"):
            facts, degraded = await self._extract(request, now)
            TRACING.annotate("engram.facts", len(facts))
            TRACING.annotate("engram.degraded", degraded is not None)
        facts, refused = self._screen(facts, request.app_id)
        # Poisoning (P5): held facts skip evolution and embedding; they are stored QUARANTINED.
        held = [f for f in facts if f.quarantine]
        facts = [f for f in facts if not f.quarantine]
        with TRACING.span("engram.embed", {"engram.texts": len(facts)}):
            facts, vectors, skipped = await self._embed_facts(facts)
        skipped = refused + skipped
        if not facts:
            decisions = list(skipped)
            if task_id is not None or held:
                async with self._metadata.transaction() as tx:
                    decisions += await self._hold(tx, request, held, now)
                    decisions = decisions or (
                        [Decision(op="NONE", reason=f"{degraded}; nothing to remember")] if degraded else []
                    )
                    if task_id is not None:
                        await tx.tasks.finish(
                            task_id,
                            TaskStatus.DONE,
                            decisions=[d.model_dump(mode="json") for d in decisions],
                            error=None,
                            at=now,
                        )
                held_ops = Counter(d.op for d in decisions if d.op == "QUARANTINE")
                METRICS.counts(METRICS.evolution_decisions, "op", held_ops)
            elif degraded:
                decisions = [Decision(op="NONE", reason=f"{degraded}; nothing to remember")]
            return decisions
        with TRACING.span("engram.evolve", {"engram.facts": len(facts)}):
            level, app_id = placement(request.level, request.app_id, request.session_id)
            snapshot = await self._snapshots.get(request.user_id)
            existing = [
                Existing(m, snapshot.vectors[i])
                for i, m in enumerate(snapshot.memories)
                if m.status is Status.ACTIVE
                and (m.app_id, m.level, m.session_id) == (app_id, level, request.session_id)
            ]
            async with self._metadata.transaction() as tx:
                hash_key = (await tx.keys.cipher(request.user_id)).hash_key
            plans = await self._evolver.plan(
                facts,
                vectors,
                existing,
                lambda text: content_hash(text, hash_key),
                mode=request.strategy.evolution,
                use_llm=degraded is None,
            )
            if degraded is not None:
                # The task says so (W5): every decision of a degraded add was taken without the LLM.
                plans = [replace(p, reason=f"{degraded}; {p.reason}") for p in plans]
            plans, new_vectors = await self._embed_rewrites(plans)
        with TRACING.span("engram.commit", {"engram.plans": len(plans)}):
            outcome = Outcome(decisions=list(skipped))
            try:
                async with self._metadata.transaction() as tx:
                    for plan in plans:
                        await self._applier.apply(
                            tx, plan, request, level, app_id, now, new_vectors, hash_key, outcome
                        )
                    outcome.decisions += await self._hold(tx, request, held, now)
                    await tx.versions.bump(request.user_id)
                    if task_id is not None and not await tx.tasks.finish(
                        task_id,
                        TaskStatus.DONE,
                        decisions=[d.model_dump(mode="json") for d in outcome.decisions],
                        error=None,
                        at=now,
                    ):
                        raise _AlreadyFinishedError
            except _AlreadyFinishedError:
                assert task_id is not None
                return await self._finished_decisions(task_id) or []
            METRICS.counts(METRICS.evolution_decisions, "op", Counter(d.op for d in outcome.decisions))
            if outcome.deletes:
                await self._vectors.delete(outcome.deletes)
            if outcome.upserts:
                await self._vectors.upsert(outcome.upserts)
        return outcome.decisions

    async def _extract(self, request: AddRequest, now: datetime) -> tuple[list[Fact], str | None]:
        """The request's facts, and why the rules engine extracted them instead of the LLM, if it did.

        With ``evolution.degraded_mode`` an LLM that fails or times out on extraction does not fail
        the add (W5): the rules engine extracts it and evolution decides by the deterministic rules.
        """
        settings = self.settings
        if not self.engine.is_llm:
            return await extract_facts(self.engine, request, now, settings.extraction), None
        try:
            async with asyncio.timeout(settings.evolution.llm_timeout_s):
                return await extract_facts(self.engine, request, now, settings.extraction), None
        except TimeoutError:
            reason = "timeout"
        except EngramError as exc:
            if exc.code is not ErrorCode.EXTRACTION_FAILED:
                raise
            reason = "engine_error"
        if not settings.evolution.degraded_mode:
            raise EngramError(
                ErrorCode.EXTRACTION_FAILED, f"extraction LLM failed ({reason}); degraded mode is off"
            )
        METRICS.degraded.inc(1, {"stage": "extraction", "reason": reason})
        log.warning("extraction LLM failed (%s); the rules engine extracts this add", reason)
        facts = await extract_facts(self._rules, request, now, settings.extraction)
        return facts, f"degraded: extraction LLM failed ({reason}), rules engine used"

    def _screen(self, facts: list[Fact], app_id: str | None) -> tuple[list[Fact], list[Decision]]:
        """Facts with secrets and PII redacted, before hashing and embedding (P5), and a SKIPPED
        decision for each fact the policy refuses."""
        kept: list[Fact] = []
        refused: list[Decision] = []
        for fact in facts:
            screened = screened_fact(fact, self.settings.privacy.sensitive, app_id)
            if isinstance(screened, Decision):
                refused.append(screened)
            else:
                kept.append(screened)
        return kept, refused

    async def _hold(
        self, tx: MetadataTx, request: AddRequest, held: list[Fact], now: datetime
    ) -> list[Decision]:
        """Store flagged facts QUARANTINED inside ``tx`` (P5): no evolution, no vector, no capacity
        counted until an admin releases them; the same text already held in the scope is held once."""
        if not held:
            return []
        level, app_id = placement(request.level, request.app_id, request.session_id)
        hash_key = (await tx.keys.cipher(request.user_id)).hash_key
        waiting = await quarantine_queries.held_scopes(tx, request.user_id)
        decisions: list[Decision] = []
        for fact in held:
            digest = content_hash(fact.text, hash_key)
            scope = (digest, app_id, level, request.session_id, fact.ownership)
            if scope in waiting:
                decisions.append(Decision(op="NONE", reason="already held for review"))
                continue
            plan = Plan(op="ADD", fact=fact, content_hash=digest, vector=np.zeros(0), reason="")
            memory = self._applier.memory_for(plan, request, level, app_id, now)
            waiting[scope] = memory.memory_id
            memory.status = Status.QUARANTINED
            reason = f"quarantined ({', '.join(fact.quarantine)}) from {fact.source.value}"
            await tx.memories.insert(memory)
            await tx.changes.add(
                memory, OpType.ADD, OpSource.SYSTEM, reason, now, content_after=memory.content
            )
            decisions.append(decision("QUARANTINE", memory, memory.content, reason))
        return decisions

    async def _embed_facts(self, facts: list[Fact]) -> tuple[list[Fact], np.ndarray, list[Decision]]:
        """The facts that could be embedded with their vectors, and a SKIPPED decision for each other (W9)."""
        try:
            return facts, await self._embedder.embed([f.text for f in facts]), []
        except EmbeddingError as exc:
            failed, partial = set(exc.indices), exc.vectors
        log.warning("%d of %d facts could not be embedded; they are skipped", len(failed), len(facts))
        kept = [i for i in range(len(facts)) if i not in failed]
        skipped = [
            Decision(op="SKIPPED", content=facts[i].text, reason="embedding failed; not stored")
            for i in sorted(failed)
        ]
        return [facts[i] for i in kept], partial[kept], skipped

    async def _embed_rewrites(self, plans: list[Plan]) -> tuple[list[Plan], dict[str, np.ndarray]]:
        """Vectors of the UPDATE / MERGE texts; a rewrite whose text cannot be embedded becomes an ADD."""
        rewritten = list(dict.fromkeys(p.text for p in plans if p.op in ("UPDATE", "MERGE") and p.text))
        if not rewritten:
            return plans, {}
        try:
            return plans, dict(zip(rewritten, await self._embedder.embed(rewritten), strict=True))
        except EmbeddingError as exc:
            failed = {rewritten[i] for i in exc.indices}
            vectors = {t: exc.vectors[i] for i, t in enumerate(rewritten) if t not in failed}
        return [
            replace(
                p, op="ADD", target=None, text=None, reason=f"{p.reason}; merged text not embeddable, added"
            )
            if p.op in ("UPDATE", "MERGE") and p.text in failed
            else p
            for p in plans
        ], vectors

    async def _finished_decisions(self, task_id: str) -> list[Decision] | None:
        """The stored decisions of a finished task (empty when it FAILED); None while unfinished."""
        async with self._metadata.transaction() as tx:
            task = await tx.tasks.get(task_id)
        if task is None:
            raise not_found(NO_TASK, task_id)
        if task.status in (TaskStatus.PENDING, TaskStatus.RUNNING):
            return None
        return [Decision.model_validate(d) for d in task.decisions]
