"""A recall's explanation (``explain: true``, #31): each result's signals, and why the best memories
that were left out were left out.

Pure functions over what the recall already computed (the snapshot, the visible positions, their
signals, the ranked results) plus the user's quarantined memories. Only memories of the recall's own
scope are described: its user, and the levels, app and session the scope names (the scope asked for,
when an app's switch narrowed it). A memory of another app or session is never named, whatever the
key could read elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engram.actors import isolation
from engram.actors.isolation import RecallFilter
from engram.actors.snapshot import UserSnapshot
from engram.models.api_explain import (
    LeftOutReason,
    MemoryExplanation,
    RecallExplanation,
    Signal,
    SignalContribution,
)
from engram.models.domain import Memory
from engram.models.enums import Status
from engram.models.rules.ranking import Ranked, RankInput
from engram.storage.vector_filters import VectorScope

# How many left-out memories an explanation describes, best relevance first.
LEFT_OUT_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Scored:
    """Signals of some memories, aligned with ``memories``: values and the fusion weights."""

    memories: Sequence[Memory]
    semantic: np.ndarray
    lexical: np.ndarray  # NaN: absent for that memory
    entity: np.ndarray
    weights: np.ndarray  # per memory: the fusion weights of semantic, lexical, entity
    relevance: np.ndarray


@dataclass(frozen=True, slots=True)
class RankedRecall:
    """What the two ranking stages decided over the visible memories."""

    visible: Scored
    inputs: dict[str, RankInput]
    scores: dict[str, float]  # stage 2's score of every memory of the pool
    ranked: Sequence[Ranked]
    min_relevance: float
    top_k: int


def contributions(scored: Scored, i: int) -> list[SignalContribution]:
    """The signals of memory ``i`` of ``scored``: value, normalised weight, share of its relevance."""
    values = (scored.semantic[i], scored.lexical[i], scored.entity[i])
    present = [0.0 if np.isnan(v) else float(w) for v, w in zip(values, scored.weights[i], strict=True)]
    total = sum(present)
    out = []
    for signal, value, weight in zip(Signal, values, present, strict=True):
        share = weight / total if total > 0 else 0.0
        known = None if np.isnan(value) else round(float(value), 6)
        out.append(
            SignalContribution(
                signal=signal,
                value=known,
                weight=round(share, 6),
                contribution=round(share * (known or 0.0), 6),
            )
        )
    return out


def describable_scope(flt: RecallFilter, switched_off: VectorScope | None) -> VectorScope:
    """The levels, app and session a recall may describe: its scope (or the one asked for, when a
    switch narrowed it), without the ownership and type filters, which only narrow what is shown."""
    return _levels_only(switched_off if switched_off is not None else flt.scope)


def left_out_reason(
    memory: Memory, flt: RecallFilter, now: datetime, *, switched_off: VectorScope | None
) -> tuple[LeftOutReason, str | None, datetime | None]:
    """Why a memory of the describable scope is not visible to this recall: (reason, detail, when)."""
    if memory.status is Status.QUARANTINED:
        return LeftOutReason.QUARANTINED, None, memory.updated_at
    if switched_off is not None and not isolation.in_scope(_levels_only(flt.scope), memory):
        return LeftOutReason.SWITCHED_OFF, f"app {memory.app_id}'s memory switch is off", None
    scope = flt.scope
    if scope.ownerships and memory.ownership not in scope.ownerships:
        return LeftOutReason.OUT_OF_SCOPE, "filter.ownership", None
    if scope.mem_types and memory.mem_type not in scope.mem_types:
        return LeftOutReason.OUT_OF_SCOPE, "filter.mem_type", None
    if flt.tags and flt.tags.isdisjoint(memory.custom_tags):
        return LeftOutReason.OUT_OF_SCOPE, "filter.custom_tags", None
    if flt.entities and flt.entities.isdisjoint(e.casefold() for e in memory.entities):
        return LeftOutReason.OUT_OF_SCOPE, "filter.entities", None
    if flt.as_of is not None:
        return LeftOutReason.NOT_VALID_AT_AS_OF, None, memory.valid_at
    if memory.status is Status.SUPERSEDED:
        return LeftOutReason.SUPERSEDED, None, memory.invalid_at
    if memory.status is Status.ARCHIVED:
        return LeftOutReason.ARCHIVED, None, memory.archived_at
    if memory.invalid_at is not None and memory.invalid_at <= now:
        return LeftOutReason.EXPIRED, "its validity ended", memory.invalid_at
    return LeftOutReason.EXPIRED, "expire_at passed", memory.expire_at


def _levels_only(scope: VectorScope) -> VectorScope:
    return dataclasses.replace(scope, ownerships=frozenset(), mem_types=frozenset())


def explain(
    recall: RankedRecall,
    hidden: Scored,
    flt: RecallFilter,
    now: datetime,
    *,
    switched_off: VectorScope | None,
    shown: int = LEFT_OUT_SHOWN,
) -> RecallExplanation:
    """The explanation of one recall: ``recall`` over its visible memories, ``hidden`` the memories of
    the describable scope it could not see (superseded, archived, expired, filtered, switched off,
    quarantined), already scored the same way."""
    visible = recall.visible
    position = {m.memory_id: i for i, m in enumerate(visible.memories)}
    results = []
    for r in recall.ranked:
        i = position[r.memory_id]
        results.append(
            MemoryExplanation(
                memory_id=r.memory_id,
                relevance=round(r.relevance, 6),
                signals=contributions(visible, i),
                weight=round(r.weight, 6),
                trust=round(recall.inputs[r.memory_id].trust, 6),
                score=round(r.score, 6),
            )
        )
    returned = {r.memory_id for r in recall.ranked}
    candidates: list[tuple[float, MemoryExplanation]] = []
    for i, memory in enumerate(visible.memories):
        if memory.memory_id not in returned:
            candidates.append((float(visible.relevance[i]), _visible_left_out(recall, i)))
    describable = {m.memory_id for m in visible.memories} | {m.memory_id for m in hidden.memories}
    for i, memory in enumerate(hidden.memories):
        reason, detail, at = left_out_reason(memory, flt, now, switched_off=switched_off)
        successor = memory.superseded_by if memory.superseded_by in describable else None
        relevance = float(hidden.relevance[i])
        candidates.append(
            (
                relevance,
                MemoryExplanation(
                    memory_id=memory.memory_id,
                    relevance=round(relevance, 6),
                    signals=contributions(hidden, i),
                    reason=reason,
                    detail=detail,
                    superseded_by=successor if reason is LeftOutReason.SUPERSEDED else None,
                    at=at,
                ),
            )
        )
    candidates.sort(key=lambda c: (-c[0], c[1].memory_id))
    return RecallExplanation(
        min_relevance=recall.min_relevance,
        top_k=recall.top_k,
        results=results,
        left_out=[e for _, e in candidates[:shown]],
    )


def _visible_left_out(recall: RankedRecall, i: int) -> MemoryExplanation:
    visible = recall.visible
    memory = visible.memories[i]
    relevance = float(visible.relevance[i])
    base = MemoryExplanation(
        memory_id=memory.memory_id, relevance=round(relevance, 6), signals=contributions(visible, i)
    )
    if relevance < recall.min_relevance:
        detail = f"min_relevance {recall.min_relevance:g}"
        return base.model_copy(update={"reason": LeftOutReason.BELOW_MIN_RELEVANCE, "detail": detail})
    item = recall.inputs.get(memory.memory_id)
    if item is None:
        detail = "outside the candidate pool (over-fetch) by relevance"
        return base.model_copy(update={"reason": LeftOutReason.RANKED_BELOW_TOP_K, "detail": detail})
    return base.model_copy(
        update={
            "reason": LeftOutReason.RANKED_BELOW_TOP_K,
            "detail": f"top_k {recall.top_k}",
            "weight": round(item.weight, 6),
            "trust": round(item.trust, 6),
            "score": round(recall.scores[memory.memory_id], 6),
        }
    )


def hidden_positions(snapshot: UserSnapshot, visible: set[int], scope: VectorScope) -> list[int]:
    """Positions of the snapshot's memories in the describable ``scope`` that the recall could not see."""
    return [i for i, m in enumerate(snapshot.memories) if i not in visible and isolation.in_scope(scope, m)]
