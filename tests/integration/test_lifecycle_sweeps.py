"""Lifecycle sweeps over real stores with a hand-moved clock (L1-L4): decay, archive, purge, restore."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import insert, select

from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.archive_vectors import ArchiveBackedVectors
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.plan import SweepCounts
from engram.lifecycle.restore import restore_memory
from engram.lifecycle.sweeps import Sweeper, sweep_users
from engram.models.api import ChangeLogRequest, DeleteRequest, HistoryRequest, RecallRequest
from engram.models.domain import Memory
from engram.models.enums import MemType, OpType, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings
from engram.storage.schema import change_log, switches
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.service import remember

pytestmark = pytest.mark.integration


async def sweep(
    lifecycle: LifecycleStores, host: MailboxHost, now: datetime, *users: str, dry_run: bool = False
) -> SweepCounts:
    """One sweep run over ``users`` (default u1), each user on its mailbox as in the app."""
    return await sweep_users(Sweeper(lifecycle), users or ("u1",), now, host.submit, dry_run=dry_run)


async def memory(stores: Stores, memory_id: str, user_id: str = "u1") -> Memory | None:
    async with stores.metadata.transaction(readonly=True) as tx:
        return await tx.memories.get(user_id, memory_id)


async def status(stores: Stores, memory_id: str, user_id: str = "u1") -> Status | None:
    found = await memory(stores, memory_id, user_id)
    return None if found is None else found.status


async def counters(stores: Stores, user_id: str = "u1") -> dict[str, int]:
    async with stores.metadata.transaction(readonly=True) as tx:
        return {k: v for k, v in (await tx.counters.read(user_id)).items() if v}


async def ops(service: MemoryService, user_id: str = "u1") -> list[tuple[str, OpType]]:
    page = await service.change_log(ChangeLogRequest(user_id=user_id, limit=500))
    return [(c.memory_id, c.op_type) for c in reversed(page.changes)]


async def state(stores: Stores, lifecycle: LifecycleStores, users: list[str]) -> dict[str, Any]:
    """Everything a sweep may change, for before/after comparisons."""
    result: dict[str, Any] = {}
    async with stores.metadata.transaction(readonly=True) as tx:
        for user in users:
            rows = await tx.memories.with_status(user, list(Status))
            result[f"{user}:rows"] = sorted(
                (m.memory_id, m.status.value, round(m.weight, 12), m.weight_at, m.archived_at) for m in rows
            )
            result[f"{user}:counters"] = await tx.counters.read(user)
            result[f"{user}:changes"] = len(await tx.changes.page(user, limit=10_000))
    for user in users:
        result[f"{user}:vectors"] = sorted(await stores.vectors.memory_ids(user))
        result[f"{user}:archive"] = sorted(await lifecycle.archive.memory_ids(user))
    return result


# --- L1 decay and L2 archival ----------------------------------------------------------------------


async def test_untouched_memory_archives_on_the_sweep_after_day_90_and_not_before(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Prefers green tea over coffee")
    for day in range(1, 91):  # the daily job, every day up to and including day 90
        counts = await sweep(lifecycle, host, start + timedelta(days=day))
        assert counts.failed_users == 0
        assert await status(stores, mid) is Status.ACTIVE, f"archived too early, on day {day}"
    kept = await memory(stores, mid)
    assert kept is not None and kept.weight == pytest.approx(0.10, abs=1e-6)  # the sweep stored the decay
    counts = await sweep(lifecycle, host, start + timedelta(days=91))
    assert counts.archived_faded == 1
    archived = await memory(stores, mid)
    assert archived is not None and archived.status is Status.ARCHIVED
    assert archived.archived_at == start + timedelta(days=91)
    # Out of the active index, into the cold archive (content and vector), counters down, logged.
    assert mid not in await stores.vectors.memory_ids("u1")
    async with stores.metadata.transaction(readonly=True) as tx:
        cipher = await tx.keys.cipher("u1")
    item = await lifecycle.archive.get(cipher, "u1", mid)
    assert item is not None and item.content == "Prefers green tea over coffee"
    assert item.vector.shape == (stores.embedder.dim,)
    assert await counters(stores) == {}
    assert (mid, OpType.ARCHIVE) in await ops(service)


async def test_important_memory_survives_far_longer_and_persona_never_fades(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    important = await remember(service, "Is severely allergic to peanuts", is_important=True)
    persona = await remember(service, "Speaks like a pirate", custom_tags=["persona"])
    plain = await remember(service, "Watched a film on Friday", mem_type=MemType.EPISODIC)
    for day in (30, 91, 365, 900):
        await sweep(lifecycle, host, start + timedelta(days=day))
        assert await status(stores, important) is Status.ACTIVE
        if day == 91:  # an ordinary episodic memory (0.60) faded long before
            assert await status(stores, plain) is Status.ARCHIVED
    # 0.90 * exp(-lambda * 0.1 * t) reaches 0.10 near day 951.
    await sweep(lifecycle, host, start + timedelta(days=960))
    assert await status(stores, important) is Status.ARCHIVED
    await sweep(lifecycle, host, start + timedelta(days=3000))
    assert await status(stores, persona) is Status.ACTIVE


async def test_a_recall_in_between_resets_the_decay_clock(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Plays the violin in an amateur orchestra")
    await sweep(lifecycle, host, start + timedelta(days=30))
    clock.now = start + timedelta(days=60)
    response = await service.recall(RecallRequest(user_id="u1", query="violin orchestra"))
    assert [m.memory_id for m in response.memories] == [mid]
    await service.drain()  # R4: last_recalled_at = day 60, weight 0.20 + 0.05
    for day in (91, 95, 99):
        await sweep(lifecycle, host, start + timedelta(days=day))
        assert await status(stores, mid) is Status.ACTIVE
    # 0.25 * exp(-lambda * t) reaches 0.10 about 39.7 days after the recall.
    await sweep(lifecycle, host, start + timedelta(days=101))
    assert await status(stores, mid) is Status.ARCHIVED


async def test_expired_memories_archive(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Has a dentist appointment", expire_at=start + timedelta(days=5))
    assert (await sweep(lifecycle, host, start + timedelta(days=4))).archived_expired == 0
    assert await status(stores, mid) is Status.ACTIVE
    counts = await sweep(lifecycle, host, start + timedelta(days=5, hours=1))
    assert counts.archived_expired == 1
    assert await status(stores, mid) is Status.ARCHIVED
    history = await service.history(HistoryRequest(user_id="u1", memory_id=mid))
    assert [c.op_type for c in history.changes] == [OpType.ADD, OpType.ARCHIVE]
    assert history.changes[-1].reason == "lifecycle: expire_at passed"


# --- L2 purge and sanitizing -----------------------------------------------------------------------


async def test_archived_purge_after_180_days_and_deleted_vanish_after_30_with_sanitized_log(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    faded = await remember(service, "Once visited a pottery class")
    deleted = await remember(service, "Has a cat called Miso")
    await service.delete(DeleteRequest(user_id="u1", memory_id=deleted))
    archived_on = start + timedelta(days=91)
    await sweep(lifecycle, host, archived_on)
    assert await status(stores, faded) is Status.ARCHIVED
    # Deleted on day 0: purged after 30 days, so the day-91 sweep already removed it for good.
    assert await memory(stores, deleted) is None
    await sweep(lifecycle, host, archived_on + timedelta(days=179))
    assert await status(stores, faded) is Status.ARCHIVED
    history = await service.history(HistoryRequest(user_id="u1", memory_id=faded))
    assert [c.op_type for c in history.changes] == [OpType.ADD, OpType.ARCHIVE]
    counts = await sweep(lifecycle, host, archived_on + timedelta(days=181))
    assert counts.purged_archived == 1
    assert await memory(stores, faded) is None
    assert faded not in await lifecycle.archive.memory_ids("u1")
    # Every step stays visible in the change log; the content of purged memories does not.
    page = await service.change_log(ChangeLogRequest(user_id="u1", limit=100))
    chain = [(c.memory_id, c.op_type) for c in reversed(page.changes)]
    assert chain == [
        (faded, OpType.ADD),
        (deleted, OpType.ADD),
        (deleted, OpType.DELETE),
        (faded, OpType.ARCHIVE),
        (deleted, OpType.PURGE),
        (faded, OpType.PURGE),
    ]
    assert all(c.sanitized and c.content_before is None and c.content_after is None for c in page.changes)
    async with stores.metadata.engine.connect() as conn:
        blobs = (await conn.execute(select(change_log.c.content_before, change_log.c.content_after))).all()
    assert all(before is None and after is None for before, after in blobs)


async def test_deleted_memory_stays_until_day_30(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Owns a red bicycle")
    await service.delete(DeleteRequest(user_id="u1", memory_id=mid))
    await sweep(lifecycle, host, start + timedelta(days=29, hours=23))
    assert await status(stores, mid) is Status.DELETED
    counts = await sweep(lifecycle, host, start + timedelta(days=30))
    assert (counts.purged_deleted, counts.sanitized_changes) == (1, 3)  # ADD, DELETE, PURGE
    assert await memory(stores, mid) is None


# --- idempotence and resumption --------------------------------------------------------------------


async def _mixed_users(service: MemoryService, clock: ManualClock) -> list[str]:
    start = clock.now
    users = ["u1", "u2", "u3"]
    for user in users:
        await remember(service, f"{user} likes hiking in the Alps", user_id=user)
        await remember(service, f"{user} is allergic to cats", user_id=user, is_important=True)
        await remember(
            service, f"{user} has a flight on Monday", user_id=user, expire_at=start + timedelta(days=2)
        )
        gone = await remember(service, f"{user} drives a blue car", user_id=user)
        await service.delete(DeleteRequest(user_id=user, memory_id=gone))
    clock.advance(days=40)
    for user in users:
        await remember(service, f"{user} started learning Japanese", user_id=user)
    return users


async def test_running_the_sweep_twice_changes_nothing_the_second_time(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    users = await _mixed_users(service, clock)
    now = clock.now + timedelta(days=60)
    first = await sweep(lifecycle, host, now, *users)
    assert (first.archived_faded, first.archived_expired, first.purged_deleted) == (3, 3, 3)
    before = await state(stores, lifecycle, users)
    second = await sweep(lifecycle, host, now, *users)
    assert second.changes() == 0, second.as_dict()
    assert await state(stores, lifecycle, users) == before
    # A rerun minutes later writes nothing either (decay below the write threshold).
    third = await sweep(lifecycle, host, now + timedelta(minutes=5), *users)
    assert third.changes() == 0, third.as_dict()


class Killed(BaseException):
    """Stands for the process dying: not an Exception, so nothing on the way catches it."""


class DyingObjects(LocalDirObjectStore):
    """A local archive whose process dies on the n-th put or delete."""

    def __init__(self, root: Path, *, die_on_put: int = 0, die_on_delete: int = 0) -> None:
        super().__init__(root)
        self.puts, self.deletes = 0, 0
        self.die_on_put, self.die_on_delete = die_on_put, die_on_delete

    async def put(self, key: str, data: bytes) -> None:
        self.puts += 1
        if self.puts == self.die_on_put:
            raise Killed
        await super().put(key, data)

    async def delete(self, key: str) -> None:
        self.deletes += 1
        if self.deletes == self.die_on_delete:
            raise Killed
        await super().delete(key)


async def test_killed_mid_run_then_restarted_finishes_with_nothing_done_twice(
    service: MemoryService,
    stores: Stores,
    settings: Settings,
    tmp_path: Path,
    clock: ManualClock,
) -> None:
    users = await _mixed_users(service, clock)
    now = clock.now + timedelta(days=60)
    root = tmp_path / "archive"

    async def run(now: datetime, **dies: int) -> SweepCounts:
        """One job run over every user in turn; a kill ends the whole run where it happens."""
        objects = DyingObjects(root, **dies)
        sweeper = Sweeper(
            LifecycleStores(settings, stores.metadata, stores.vectors, stores.embedder, ColdArchive(objects))
        )
        total = SweepCounts()
        for user in users:
            total.add(await sweeper.sweep_user(user, now))
        return total

    # Killed at the second user's first archive write, before that user's metadata commit.
    with pytest.raises(Killed):
        await run(now, die_on_put=3)
    assert await status(stores, (await _ids(stores, "u1"))["hiking"]) is Status.ARCHIVED
    assert await status(stores, (await _ids(stores, "u2"))["hiking"], "u2") is Status.ACTIVE
    restarted = await run(now)
    assert (restarted.archived_faded, restarted.archived_expired, restarted.purged_deleted) == (2, 2, 2)
    archive = ColdArchive(LocalDirObjectStore(root))
    for user in users:
        changes = await ops(service, user)
        ids = await _ids(stores, user)
        assert changes.count((ids["hiking"], OpType.ARCHIVE)) == 1
        assert changes.count((ids["flight"], OpType.ARCHIVE)) == 1
        assert [op for _, op in changes].count(OpType.PURGE) == 1  # the deleted car, once
        assert await archive.memory_ids(user) == {ids["hiking"], ids["flight"]}
        assert set(await stores.vectors.memory_ids(user)) == {ids["cats"], ids["Japanese"]}
        assert await counters(stores, user) == {
            "global": 2,
            "total": 2,
            "important:global": 1,
            "important:total": 1,
        }
    assert (await run(now)).changes() == 0

    # The purge of archived memories: killed after the first user's purge commit, before its
    # archive objects are deleted; the restart removes the leftovers and purges nothing twice.
    later = now + timedelta(days=200)
    with pytest.raises(Killed):
        await run(later, die_on_delete=1)
    final = await run(later)
    assert final.archive_objects_fixed == 2
    assert final.purged_archived == 4
    for user in users:
        assert [op for _, op in await ops(service, user)].count(OpType.PURGE) == 3
        assert await archive.memory_ids(user) == {(await _ids(stores, user))["Japanese"]}
    assert (await run(later)).changes() == 0


async def _ids(stores: Stores, user_id: str) -> dict[str, str]:
    """Memory ids by a keyword of their content."""
    async with stores.metadata.transaction(readonly=True) as tx:
        rows = await tx.memories.with_status(user_id, list(Status))
    keywords = ("hiking", "cats", "flight", "car", "Japanese")
    return {k: m.memory_id for m in rows for k in keywords if m.content and k in m.content}


# --- dry run, switch-off (L4) ----------------------------------------------------------------------


async def test_dry_run_counts_without_changing_anything(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    users = await _mixed_users(service, clock)
    now = clock.now + timedelta(days=60)
    before = await state(stores, lifecycle, users)
    planned = await sweep(lifecycle, host, now, *users, dry_run=True)
    assert await state(stores, lifecycle, users) == before
    done = await sweep(lifecycle, host, now, *users)
    assert planned.as_dict() == {**done.as_dict(), "sanitized_changes": planned.sanitized_changes}


async def test_switched_off_users_are_still_swept(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Collects vinyl records")
    async with stores.metadata.engine.begin() as conn:
        await conn.execute(insert(switches).values(user_id="u1", app_id="", enabled=False, updated_at=start))
    await sweep(lifecycle, host, start + timedelta(days=91))
    assert await status(stores, mid) is Status.ARCHIVED


# --- include_archived recall and RESTORE -----------------------------------------------------------


async def test_include_archived_recall_finds_it_plain_recall_does_not_restore_brings_it_back(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    mid = await remember(service, "Learned to sail on Lake Geneva")
    [original] = (await stores.vectors.get_vectors([mid])).values()
    clock.now = start + timedelta(days=91)
    await sweep(lifecycle, host, clock.now)
    assert await status(stores, mid) is Status.ARCHIVED
    query = "sailing on a lake"
    plain = await service.recall(RecallRequest(user_id="u1", query=query))
    assert mid not in [m.memory_id for m in plain.memories]
    archived = await service.recall(RecallRequest(user_id="u1", query=query, include_archived=True))
    assert [m.memory_id for m in archived.memories] == [mid]
    # The app's recall snapshots read an archived memory's vector from the cold archive.
    source = ArchiveBackedVectors(stores.vectors, lifecycle.archive, stores.metadata)
    from_archive = await source.get_vectors([mid])
    np.testing.assert_allclose(from_archive[mid], original, rtol=1e-6)

    restored = await host.submit("u1", lambda: restore_memory(lifecycle, "u1", mid, clock.now))
    assert restored.status is Status.ACTIVE and restored.archived_at is None
    assert restored.weight == pytest.approx(0.80)
    assert mid in await stores.vectors.memory_ids("u1")
    assert mid not in await lifecycle.archive.memory_ids("u1")
    assert await counters(stores) == {"global": 1, "total": 1}
    again = await service.recall(RecallRequest(user_id="u1", query=query))
    assert [m.memory_id for m in again.memories] == [mid]
    history = await service.history(HistoryRequest(user_id="u1", memory_id=mid))
    assert [c.op_type for c in history.changes] == [OpType.ADD, OpType.ARCHIVE, OpType.RESTORE]
    # Restored at its type's weight, it is not archived again by the next sweep.
    await sweep(lifecycle, host, clock.now + timedelta(days=1))
    assert await status(stores, mid) is Status.ACTIVE
    with pytest.raises(EngramError) as not_archived:
        await restore_memory(lifecycle, "u1", mid, clock.now)
    assert not_archived.value.code is ErrorCode.NOT_FOUND
    with pytest.raises(EngramError):
        await restore_memory(lifecycle, "someone-else", mid, clock.now)
