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
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from engram.actors import statements
from engram.actors.engines.base import Engine
from engram.actors.engines.rules import RulesEngine
from engram.actors.evolution import Evolver, Existing, Plan
from engram.actors.extraction import Fact, extract_facts
from engram.actors.sensitive import screened_fact
from engram.actors.snapshot import SnapshotCache
from engram.models.absent import NO_TASK, not_found
from engram.models.api import AddRequest, Decision
from engram.models.domain import Memory
from engram.models.enums import Level, OpSource, OpType, Status, TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.metrics import METRICS
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import merged_weight, type_initial_weight, weight_now
from engram.models.rules.records import new_memory, placement
from engram.models.settings import Settings
from engram.storage import quarantine_queries
from engram.storage.admission import admit
from engram.storage.embedders import Embedder, EmbeddingError
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.vectors import VectorRecord, VectorStore, vector_record

log = logging.getLogger(__name__)


class _AlreadyFinishedError(Exception):
    """Raised inside the commit transaction to roll it back: another run finished the task first."""


@dataclass
class _Outcome:
    decisions: list[Decision] = field(default_factory=list)
    upserts: list[VectorRecord] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)


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
        self._clock = clock

    async def process(self, request: AddRequest, *, task_id: str | None = None) -> list[Decision]:
        """Extract, evolve and store; returns one decision per extracted fact.

        With ``task_id`` the task is finished DONE in the transaction that commits the plans, and a
        task already finished returns its stored decisions without doing anything (replay).
        """
        if task_id is not None and (stored := await self._finished_decisions(task_id)) is not None:
            return stored
        now = self._clock()
        facts, degraded = await self._extract(request, now)
        facts, refused = self._screen(facts, request.app_id)
        # Poisoning (P5): held facts skip evolution and embedding; they are stored QUARANTINED.
        held = [f for f in facts if f.quarantine]
        facts = [f for f in facts if not f.quarantine]
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
        outcome = _Outcome(decisions=list(skipped))
        try:
            async with self._metadata.transaction() as tx:
                for plan in plans:
                    await self._apply(tx, plan, request, level, app_id, now, new_vectors, hash_key, outcome)
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
            memory = self._memory_for(plan, request, level, app_id, now)
            waiting[scope] = memory.memory_id
            memory.status = Status.QUARANTINED
            reason = f"quarantined ({', '.join(fact.quarantine)}) from {fact.source.value}"
            await tx.memories.insert(memory)
            await tx.changes.add(
                memory, OpType.ADD, OpSource.SYSTEM, reason, now, content_after=memory.content
            )
            decisions.append(_decision("QUARANTINE", memory, memory.content, reason))
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

    async def _apply(
        self,
        tx: MetadataTx,
        plan: Plan,
        request: AddRequest,
        level: Level,
        app_id: str,
        now: datetime,
        new_vectors: dict[str, np.ndarray],
        hash_key: bytes,
        outcome: _Outcome,
    ) -> None:
        if plan.op == "NONE":
            if plan.target is not None:
                await tx.changes.add(plan.target, OpType.NONE, OpSource.SYSTEM, plan.reason, now)
            outcome.decisions.append(_decision("NONE", plan.target, plan.fact.text, plan.reason))
            return
        if plan.op in ("UPDATE", "MERGE"):
            await self._rewrite(tx, plan, now, new_vectors, hash_key, outcome)
            return
        memory = self._memory_for(plan, request, level, app_id, now)
        target = await tx.memories.get(request.user_id, plan.target.memory_id) if plan.target else None
        if plan.op == "SUPERSEDE" and target is not None and target.status is Status.ACTIVE:
            await self._supersede(tx, memory, target, plan.reason, now, outcome)
        else:
            await self._add(tx, memory, plan.reason, now, outcome)
        outcome.upserts.append(vector_record(memory, plan.vector))

    def _memory_for(
        self, plan: Plan, request: AddRequest, level: Level, app_id: str, now: datetime
    ) -> Memory:
        fact: Fact = plan.fact
        return new_memory(
            self.settings.weights,
            user_id=request.user_id,
            app_id=app_id,
            level=level,
            session_id=request.session_id,
            ownership=fact.ownership,
            mem_type=fact.mem_type,
            content=fact.text,
            content_hash=plan.content_hash,
            embedding_model=self._embedder.model_name,
            now=now,
            valid_at=fact.valid_at,
            is_important=False,
            expire_at=fact.expire_at,
            source_msg_id=fact.source_msg_id,
            custom_tags=fact.custom_tags,
            entities=fact.entities,
            source_type=fact.source.value,
        )

    async def _add(
        self, tx: MetadataTx, memory: Memory, reason: str, now: datetime, outcome: _Outcome
    ) -> None:
        outcome.deletes.extend(await admit(tx, self.settings, memory, OpSource.SYSTEM, reason, now))
        outcome.decisions.append(_decision("ADD", memory, memory.content, reason))

    async def _supersede(
        self, tx: MetadataTx, memory: Memory, old: Memory, reason: str, now: datetime, outcome: _Outcome
    ) -> None:
        if memory.valid_at >= old.valid_at:
            # The newer fact wins: the old one stays, closed at the moment the new one became true.
            outcome.deletes.extend(await admit(tx, self.settings, memory, OpSource.SYSTEM, reason, now))
            await self._close(tx, old, by=memory, reason=reason, now=now)
            await tx.counters.add(old.user_id, counter_deltas([old], -1))
            outcome.decisions.append(
                _decision("SUPERSEDE", old, memory.content, f"{reason}; new id {memory.memory_id}")
            )
            return
        # An older statement arrived late: it is history from the start, the current fact stays.
        memory.status = Status.SUPERSEDED
        memory.invalid_at = old.valid_at
        memory.superseded_by = old.memory_id
        await tx.memories.insert(memory)
        await tx.changes.add(
            memory,
            OpType.SUPERSEDE,
            OpSource.SYSTEM,
            f"older than {old.memory_id}: {reason}",
            now,
            content_after=memory.content,
        )
        outcome.decisions.append(
            _decision("SUPERSEDE", memory, memory.content, f"stored as history: {reason}")
        )

    async def _close(self, tx: MetadataTx, old: Memory, *, by: Memory, reason: str, now: datetime) -> None:
        old.status = Status.SUPERSEDED
        old.invalid_at = by.valid_at
        old.superseded_by = by.memory_id
        old.updated_at = now
        await tx.memories.save(old)
        await tx.changes.add(
            old,
            OpType.SUPERSEDE,
            OpSource.SYSTEM,
            f"superseded by {by.memory_id}: {reason}",
            now,
            content_before=old.content,
            content_after=by.content,
        )

    async def _rewrite(
        self,
        tx: MetadataTx,
        plan: Plan,
        now: datetime,
        new_vectors: dict[str, np.ndarray],
        hash_key: bytes,
        outcome: _Outcome,
    ) -> None:
        assert plan.target is not None
        assert plan.text is not None
        memory = await tx.memories.get(plan.target.user_id, plan.target.memory_id)
        if memory is None or memory.status is not Status.ACTIVE or memory.content is None:
            raise EngramError(ErrorCode.NOT_FOUND, "an evolution target vanished mid-write")
        before = memory.content
        base = type_initial_weight(memory, self.settings.weights)
        current = weight_now(memory, now, self.settings.decay)
        # Seed's table: UPDATE resets to the type's initial weight; MERGE keeps the higher, never below it.
        memory.weight = base if plan.op == "UPDATE" else merged_weight(current, base, initial=base)
        memory.weight_at = now
        memory.content = plan.text
        memory.content_hash = content_hash(plan.text, hash_key)
        memory.entities = list(
            dict.fromkeys([*memory.entities, *plan.fact.entities, *statements.entities(plan.text)])
        )[:8]
        memory.embedding_model = self._embedder.model_name
        memory.updated_at = now
        await tx.memories.save(memory)
        op = OpType.UPDATE if plan.op == "UPDATE" else OpType.MERGE
        await tx.changes.add(
            memory, op, OpSource.SYSTEM, plan.reason, now, content_before=before, content_after=plan.text
        )
        outcome.upserts.append(vector_record(memory, new_vectors[plan.text]))
        outcome.decisions.append(_decision(plan.op, memory, plan.text, plan.reason))


def _decision(op: str, memory: Memory | None, content: str | None, reason: str) -> Decision:
    return Decision(op=op, memory_id=memory.memory_id if memory else None, content=content, reason=reason)
