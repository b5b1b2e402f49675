"""Admission of active memories (SPEC W8, D3): important-mark limit, capacity, eviction, counters.

Runs inside the caller's metadata transaction so that evictions, the new row and the counters
commit together. Callers serialise writes per user; nothing here locks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from engram.models.domain import Memory
from engram.models.enums import OpSource, OpType, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS
from engram.models.rules import capacity
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.decay import weight_now
from engram.models.settings import Settings
from engram.storage.metadata import MetadataTx
from engram.storage.repositories.memories import EvictionRow


async def check_important_mark(tx: MetadataTx, settings: Settings, memory: Memory) -> None:
    """42902 when one more important mark would pass 20% of the memory's dimension (W8)."""
    own = capacity.dimension_for(memory.app_id)
    counts = await tx.counters.read(memory.user_id)
    if not capacity.important_allowed(
        counts.get(capacity.important_dimension(own), 0) + 1, own, settings.capacity
    ):
        METRICS.capacity_refusals.inc(1, {"code": str(ErrorCode.IMPORTANT_LIMIT_EXCEEDED.value)})
        raise EngramError(
            ErrorCode.IMPORTANT_LIMIT_EXCEEDED,
            f"at most {capacity.important_limit(own, settings.capacity)} important memories "
            f"are allowed in dimension {own!r}",
        )


async def make_room(tx: MetadataTx, settings: Settings, memory: Memory, now: datetime) -> list[str]:
    """Admit one new active memory: check its important mark, evict down to 90% where full (W8).

    Returns the evicted memory ids (their vectors must leave the index); 42901 when the memory's
    dimension or the user's total is full of memories that may not be evicted.
    """
    if memory.is_important:
        await check_important_mark(tx, settings, memory)
    counts = await tx.counters.read(memory.user_id)
    own, total = capacity.dimensions_for(memory.app_id)
    evicted: list[str] = []
    for dimension, app_filter in ((own, memory.app_id), (total, None)):
        limit = capacity.limit_for(dimension, settings.capacity)
        count = counts.get(dimension, 0) - (len(evicted) if dimension == total else 0)
        if count < limit:
            continue
        rows = [
            r
            for r in await tx.memories.eviction_rows(memory.user_id, app_filter)
            if r.memory_id not in evicted
        ]
        plan = capacity.select_victims(
            [_candidate(settings, r, now) for r in rows], count, limit, settings.capacity
        )
        if not plan.fits:
            METRICS.capacity_refusals.inc(1, {"code": str(ErrorCode.CAPACITY_FULL.value)})
            raise EngramError(
                ErrorCode.CAPACITY_FULL,
                f"dimension {dimension!r} is full ({count}/{limit}) and holds nothing evictable",
            )
        by_id = {r.memory_id: r for r in rows}
        await _evict(tx, [by_id[i] for i in plan.archive], Status.ARCHIVED, now)
        await _evict(tx, [by_id[i] for i in plan.delete], Status.DELETED, now)
        evicted.extend(plan.victims)
    return evicted


def _candidate(settings: Settings, row: EvictionRow, now: datetime) -> capacity.EvictionCandidate:
    weight = weight_now(row, now, settings.decay)
    return capacity.EvictionCandidate(row.memory_id, weight, row.last_recalled_at, row.is_important)


async def _evict(tx: MetadataTx, rows: Sequence[EvictionRow], status: Status, now: datetime) -> None:
    if not rows:
        return
    user_id = rows[0].user_id
    await tx.memories.mark_status(user_id, [r.memory_id for r in rows], status, now)
    op = OpType.ARCHIVE if status is Status.ARCHIVED else OpType.DELETE
    deltas: Counter[str] = Counter()
    for row in rows:
        await tx.changes.add(row, op, OpSource.SYSTEM, "capacity eviction", now)
        for dimension in capacity.dimensions_for(row.app_id):
            deltas[dimension] -= 1
    await tx.counters.add(user_id, deltas)
    action = "archived" if status is Status.ARCHIVED else "deleted"
    METRICS.capacity_evictions.inc(len(rows), {"action": action})


async def admit(
    tx: MetadataTx, settings: Settings, memory: Memory, op_source: OpSource, reason: str, now: datetime
) -> list[str]:
    """Insert a new active memory with its ADD entry and counters, making room first; returns evictions."""
    evicted = await make_room(tx, settings, memory, now)
    await tx.memories.insert(memory)
    await tx.changes.add(memory, OpType.ADD, op_source, reason, now, content_after=memory.content)
    await tx.counters.add(memory.user_id, counter_deltas([memory], +1))
    return evicted


def fits_without_eviction(counts: Counter[str], memory: Memory, settings: Settings) -> bool:
    """True when ``memory`` may be admitted as is: its dimension and the user's total have room
    and an important mark stays within its limit (what ``make_room`` would let through untouched)."""
    own, total = capacity.dimensions_for(memory.app_id)
    limits = settings.capacity
    if counts[own] >= capacity.limit_for(own, limits) or counts[total] >= capacity.limit_for(total, limits):
        return False
    if not memory.is_important:
        return True
    return capacity.important_allowed(counts[capacity.important_dimension(own)] + 1, own, limits)


async def admit_many(
    tx: MetadataTx,
    settings: Settings,
    new: Sequence[Memory],
    op_source: OpSource,
    reason: str,
    now: datetime,
) -> list[list[str] | EngramError]:
    """Admit new memories of one user in order, with the outcome of each as if admitted one by one:
    its evictions, or the EngramError (42901, 42902) that refused it.

    Memories that fit as they are go in together (one insert, one change-log insert, one counter
    update); the first that would evict or be refused is admitted alone, inside a savepoint, after
    the ones before it.
    """
    if not new:
        return []
    user_id = new[0].user_id
    counts: Counter[str] = Counter(await tx.counters.read(user_id))
    outcomes: list[list[str] | EngramError] = []
    waiting: list[Memory] = []

    async def flush() -> None:
        if waiting:
            await tx.memories.insert_many(waiting)
            await tx.changes.add_new_memories(waiting, op_source, reason, now)
            await tx.counters.add(user_id, counter_deltas(waiting, +1))
            waiting.clear()

    for memory in new:
        if fits_without_eviction(counts, memory, settings):
            waiting.append(memory)
            counts.update(counter_deltas([memory], +1))
            outcomes.append([])
            continue
        await flush()
        try:
            async with tx.savepoint():
                outcomes.append(await admit(tx, settings, memory, op_source, reason, now))
        except EngramError as exc:
            outcomes.append(exc)
        counts = Counter(await tx.counters.read(user_id))
    await flush()
    return outcomes
