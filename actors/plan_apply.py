"""Applying evolution plans to the store (SPEC W4): ADD, SUPERSEDE, UPDATE / MERGE and NONE.

Separate from ``ingest`` (extraction, screening, embedding and the flow of an add): everything
here runs inside the add's one transaction and only collects what the vector store must follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from engram.actors import statements
from engram.actors.evolution import Plan
from engram.actors.extraction import Fact
from engram.models.api import AddRequest, Decision
from engram.models.domain import Memory
from engram.models.enums import Level, OpSource, OpType, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import merged_weight, type_initial_weight, weight_now
from engram.models.rules.records import new_memory
from engram.models.settings import Settings
from engram.storage.admission import admit
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataTx
from engram.storage.vectors import VectorRecord, vector_record


@dataclass
class Outcome:
    """What the plans of one add decided, and the vector writes that follow its commit."""

    decisions: list[Decision] = field(default_factory=list)
    upserts: list[VectorRecord] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)


class PlanApplier:
    """Writes each plan's memories, change-log entries and counters inside the caller's transaction."""

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.settings = settings
        self._embedder = embedder

    async def apply(
        self,
        tx: MetadataTx,
        plan: Plan,
        request: AddRequest,
        level: Level,
        app_id: str,
        now: datetime,
        new_vectors: dict[str, np.ndarray],
        hash_key: bytes,
        outcome: Outcome,
    ) -> None:
        """Apply one plan inside ``tx``; its decision and vector writes go to ``outcome``."""
        if plan.op == "NONE":
            if plan.target is not None:
                await tx.changes.add(plan.target, OpType.NONE, OpSource.SYSTEM, plan.reason, now)
            outcome.decisions.append(decision("NONE", plan.target, plan.fact.text, plan.reason))
            return
        if plan.op in ("UPDATE", "MERGE"):
            await self._rewrite(tx, plan, now, new_vectors, hash_key, outcome)
            return
        memory = self.memory_for(plan, request, level, app_id, now)
        target = await tx.memories.get(request.user_id, plan.target.memory_id) if plan.target else None
        if plan.op == "SUPERSEDE" and target is not None and target.status is Status.ACTIVE:
            await self._supersede(tx, memory, target, plan.reason, now, outcome)
        else:
            await self._add(tx, memory, plan.reason, now, outcome)
        outcome.upserts.append(vector_record(memory, plan.vector))

    def memory_for(self, plan: Plan, request: AddRequest, level: Level, app_id: str, now: datetime) -> Memory:
        """The new memory a plan's fact becomes, placed at ``level`` / ``app_id``."""
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
            context=fact.context,
        )

    async def _add(
        self, tx: MetadataTx, memory: Memory, reason: str, now: datetime, outcome: Outcome
    ) -> None:
        outcome.deletes.extend(await admit(tx, self.settings, memory, OpSource.SYSTEM, reason, now))
        outcome.decisions.append(decision("ADD", memory, memory.content, reason))

    async def _supersede(
        self, tx: MetadataTx, memory: Memory, old: Memory, reason: str, now: datetime, outcome: Outcome
    ) -> None:
        if memory.valid_at >= old.valid_at:
            # The newer fact wins: the old one stays, closed at the moment the new one became true.
            outcome.deletes.extend(await admit(tx, self.settings, memory, OpSource.SYSTEM, reason, now))
            await self._close(tx, old, by=memory, reason=reason, now=now)
            await tx.counters.add(old.user_id, counter_deltas([old], -1))
            outcome.decisions.append(
                decision("SUPERSEDE", old, memory.content, f"{reason}; new id {memory.memory_id}")
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
            decision("SUPERSEDE", memory, memory.content, f"stored as history: {reason}")
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
        outcome: Outcome,
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
        memory.entities = tuple(
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
        outcome.decisions.append(decision(plan.op, memory, plan.text, plan.reason))


def decision(op: str, memory: Memory | None, content: str | None, reason: str) -> Decision:
    """The decision reported for one fact: the operation, the memory it concerns, its text, why."""
    return Decision(op=op, memory_id=memory.memory_id if memory else None, content=content, reason=reason)
