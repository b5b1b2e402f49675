"""Reconcile (L3): metadata is the truth; the vector index, its sealed copies, the archive and the
counters follow it.

For one user: active and superseded memories must have a vector, nothing else may; the same holds
for the sealed copies recall snapshots load (a copy is taken from the index); archived memories
must have an archive object, nothing else may; counters must equal the counts of the active rows.
Drift is repaired (unless ``dry_run``) and counted; the log line holds counts only.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

from engram.lifecycle.archive import ArchivedItem
from engram.lifecycle.context import LifecycleStores, vectors_for
from engram.lifecycle.plan import SweepCounts
from engram.models.enums import Status
from engram.models.metrics import METRICS
from engram.models.rules import capacity
from engram.storage import vector_copies
from engram.storage.sweep_queries import statuses
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)

INDEXED = (Status.ACTIVE, Status.SUPERSEDED)
# The SweepCounts fields a repair moves (engram_reconcile_repairs_total's kind label).
REPAIRS = (
    "vectors_restored",
    "orphan_vectors_removed",
    "counters_fixed",
    "archive_objects_fixed",
    "vector_copies_fixed",
)


def expected_counters(active: Mapping[tuple[str, bool], int]) -> dict[str, int]:
    """Capacity counters implied by active rows counted by (app_id, is_important) (D3)."""
    counts: Counter[str] = Counter()
    for (app_id, important), n in active.items():
        for dimension in capacity.dimensions_for(app_id):
            counts[dimension] += n
            if important:
                counts[capacity.important_dimension(dimension)] += n
    return dict(counts)


def counter_drift(expected: Mapping[str, int], stored: Mapping[str, int]) -> dict[str, int]:
    """The counters to overwrite, with their right values (absent dimensions count as 0)."""
    return {
        dimension: expected.get(dimension, 0)
        for dimension in sorted(set(expected) | set(stored))
        if expected.get(dimension, 0) != stored.get(dimension, 0)
    }


async def reconcile_user(stores: LifecycleStores, user_id: str, *, dry_run: bool = False) -> SweepCounts:
    """Compare and repair one user's vectors, archive objects and counters; returns what was fixed."""
    async with stores.metadata.transaction(readonly=True) as tx:
        state = await statuses(tx, user_id)
        drift = counter_drift(
            expected_counters(await tx.memories.count_active(user_id)), await tx.counters.read(user_id)
        )
        copies = await vector_copies.ids_for_user(tx, user_id)
    indexed = {mid for mid, s in state.items() if s in INDEXED}
    archived = {mid for mid, s in state.items() if s is Status.ARCHIVED}
    stored = set(await stores.vectors.memory_ids(user_id))
    objects = await stores.archive.memory_ids(user_id)
    missing_vectors = sorted(indexed - stored)
    orphan_vectors = sorted(stored - indexed)
    missing_objects = sorted(archived - objects)
    orphan_objects = sorted(objects - archived)
    # A copy is missing after a crash between the index write and the copy's (a slower snapshot
    # load, never a wrong one); vectors restored below get their copy with them.
    missing_copies = sorted((indexed & stored) - copies)
    orphan_copies = sorted(copies - indexed)
    counts = SweepCounts(
        vectors_restored=len(missing_vectors),
        orphan_vectors_removed=len(orphan_vectors),
        counters_fixed=len(drift),
        archive_objects_fixed=len(missing_objects) + len(orphan_objects),
        vector_copies_fixed=len(missing_copies) + len(orphan_copies),
    )
    if dry_run or not counts.changes():
        return counts
    if drift:
        async with stores.metadata.transaction() as tx:
            # Recounted inside the write transaction: the repair writes exact values, not a stale diff.
            fresh = counter_drift(
                expected_counters(await tx.memories.count_active(user_id)), await tx.counters.read(user_id)
            )
            await tx.counters.set(user_id, fresh)
    if orphan_vectors:
        await stores.vectors.delete(orphan_vectors)
    if orphan_objects:
        await stores.archive.delete(user_id, orphan_objects)
    if orphan_copies or missing_copies:
        await _repair_copies(stores, user_id, missing_copies, orphan_copies)
    if missing_vectors or missing_objects:
        async with stores.metadata.transaction(readonly=True) as tx:
            found = await tx.memories.get_many(user_id, missing_vectors + missing_objects)
            # Never a new key: without one (a purged user) nothing is readable to repair.
            cipher = await tx.keys.existing(user_id)
        readable = [m for m in found.values() if m.content is not None and cipher is not None]
        vectors = await vectors_for(stores, readable)
        upserts = [
            vector_record(m, vectors[m.memory_id]) for m in readable if m.memory_id in set(missing_vectors)
        ]
        if upserts:
            await stores.vectors.upsert(upserts)
        for memory in readable:
            if memory.memory_id in set(missing_objects):
                item = ArchivedItem(memory.memory_id, memory.content or "", vectors[memory.memory_id])
                assert cipher is not None  # readable memories exist only with a key
                await stores.archive.put(cipher, user_id, item)
    METRICS.counts(METRICS.reconcile_repairs, "kind", {k: getattr(counts, k) for k in REPAIRS})
    log.info("reconcile of user %s repaired %s", user_id, counts.as_dict())
    return counts


async def _repair_copies(
    stores: LifecycleStores, user_id: str, missing: list[str], orphans: list[str]
) -> None:
    index = getattr(stores.vectors, "index", stores.vectors)  # the index behind the copying store
    from_index = await index.get_vectors(missing) if missing else {}
    async with stores.metadata.transaction() as tx:
        await vector_copies.remove(tx, orphans)
        found = await tx.memories.get_many(user_id, list(from_index))
        records = [vector_record(m, from_index[m.memory_id]) for m in found.values()]
        await vector_copies.put(tx, records)
