"""Reconcile (L3) over real stores: a removed vector, an orphan vector and a wrong counter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engram.actors.memory_service import MemoryService
from engram.lifecycle.archive import ArchivedItem
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.reconcile import reconcile_user
from engram.models.ids import new_id
from engram.storage.stores import Stores
from engram.storage.vectors import vector_record
from tests.support.service import remember

pytestmark = pytest.mark.integration


async def test_reconcile_repairs_a_removed_vector_an_orphan_vector_and_a_wrong_counter(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores
) -> None:
    kept = await remember(service, "Runs marathons")
    lost = await remember(service, "Reads science fiction")
    other_user = await remember(service, "Grows tomatoes", user_id="u2")
    [original] = (await stores.vectors.get_vectors([lost])).values()
    async with stores.metadata.transaction(readonly=True) as tx:
        [memory] = (await tx.memories.get_many("u1", [kept])).values()
    # The drift: a vector removed behind the metadata's back, a vector with no memory, a bad counter.
    await stores.vectors.delete([lost])
    orphan = new_id()
    stray = np.random.default_rng(1).standard_normal(stores.embedder.dim).astype(np.float32)
    await stores.vectors.upsert([replace(vector_record(memory, stray), memory_id=orphan)])
    async with stores.metadata.transaction() as tx:
        await tx.counters.set("u1", {"total": 7, "app:ghost": 3})

    report = await reconcile_user(lifecycle, "u1", dry_run=True)
    assert (report.vectors_restored, report.orphan_vectors_removed, report.counters_fixed) == (1, 1, 2)
    assert set(await stores.vectors.memory_ids("u1")) == {kept, orphan}  # a dry run repairs nothing

    report = await reconcile_user(lifecycle, "u1")
    assert (report.vectors_restored, report.orphan_vectors_removed, report.counters_fixed) == (1, 1, 2)
    assert set(await stores.vectors.memory_ids("u1")) == {kept, lost}
    [restored] = (await stores.vectors.get_vectors([lost])).values()
    assert float(np.dot(restored, original) / np.linalg.norm(restored) / np.linalg.norm(original)) > 0.999
    async with stores.metadata.transaction(readonly=True) as tx:
        assert {k: v for k, v in (await tx.counters.read("u1")).items() if v} == {"global": 2, "total": 2}
    # Another user's vectors are never touched, and a second pass finds nothing left to fix.
    assert await stores.vectors.memory_ids("u2") == [other_user]
    assert (await reconcile_user(lifecycle, "u1")).changes() == 0


async def test_reconcile_repairs_archive_objects(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores
) -> None:
    mid = await remember(service, "Visited Iceland")
    async with stores.metadata.transaction() as tx:
        cipher = await tx.keys.cipher("u1")
    stray = ArchivedItem(new_id(), "nothing", np.zeros(stores.embedder.dim, dtype=np.float32))
    await lifecycle.archive.put(cipher, "u1", stray)
    report = await reconcile_user(lifecycle, "u1")
    assert report.archive_objects_fixed == 1
    assert await lifecycle.archive.memory_ids("u1") == set()
    assert mid in await stores.vectors.memory_ids("u1")


async def test_reconcile_repairs_the_sealed_vector_copies(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores
) -> None:
    from engram.storage import vector_copies

    kept = await remember(service, "Plays the cello")
    uncopied = await remember(service, "Keeps bees")
    [indexed] = (await stores.vectors.index.get_vectors([uncopied])).values()  # type: ignore[attr-defined]
    async with stores.metadata.transaction() as tx:
        [memory] = (await tx.memories.get_many("u1", [kept])).values()
        # A crash between the index write and the copy's, and a copy left of a memory now gone.
        await vector_copies.remove(tx, [uncopied])
        orphan = replace(vector_record(memory, indexed), memory_id=new_id())
        await vector_copies.put(tx, [orphan])
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await vector_copies.ids_for_user(tx, "u1") == {kept, orphan.memory_id}

    assert (await reconcile_user(lifecycle, "u1", dry_run=True)).vector_copies_fixed == 2
    report = await reconcile_user(lifecycle, "u1")
    assert report.vector_copies_fixed == 2 and report.vectors_restored == 0
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await vector_copies.ids_for_user(tx, "u1") == {kept, uncopied}
        [copy] = (await vector_copies.by_ids(tx, [uncopied])).values()
    assert np.allclose(copy, indexed)  # the copy is the index's vector, sealed again
    assert (await reconcile_user(lifecycle, "u1")).changes() == 0
