"""Compression (L5) over real stores: similar low-weight memories become one summary, atomically."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram.actors.compression import EngineSummarizer
from engram.actors.engines.openai_engine import OpenAIEngine
from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.compression import Compressor
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.plan import SweepCounts
from engram.lifecycle.reconcile import counter_drift, expected_counters, reconcile_user
from engram.lifecycle.restore import restore_memory
from engram.lifecycle.sweeps import Sweeper, sweep_users
from engram.models.api import HistoryRequest, RecallRequest, SessionCloseRequest
from engram.models.domain import Memory
from engram.models.enums import Level, MemType, OpType, Status
from engram.models.rules.compression import SUMMARY_SOURCE
from engram.models.settings import Settings
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.storage.embedders import Embedder
from engram.storage.stores import Stores, open_stores
from tests.conftest import ManualClock
from tests.support.chat_server import Reply, chat_server
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
COFFEE = "Ordered coffee at the station cafe on {:%Y-%m-%d}"
# Episodic memories start at 0.60 and fall below max_weight (0.50) about 8 days after their write.
LATER = timedelta(days=40)


async def sweep(lifecycle: LifecycleStores, host: MailboxHost, now: datetime) -> SweepCounts:
    counts = await sweep_users(Sweeper(lifecycle), ["u1"], now, host.submit)
    assert counts.failed_users == 0, counts.failures
    return counts


async def coffee_run(service: MemoryService, clock: ManualClock, days: int, **fields: Any) -> list[str]:
    """One "ordered coffee" episodic memory a day for ``days`` days, each written on its day."""
    start, ids = clock.now, []
    for day in range(days):
        clock.now = start + timedelta(days=day)
        ids.append(await remember(service, COFFEE.format(clock.now), mem_type=MemType.EPISODIC, **fields))
    clock.now = start
    return ids


async def rows(stores: Stores, user_id: str = "u1") -> dict[str, Memory]:
    async with stores.metadata.transaction(readonly=True) as tx:
        return {m.memory_id: m for m in await tx.memories.with_status(user_id, list(Status))}


async def counters(stores: Stores, user_id: str = "u1") -> dict[str, int]:
    async with stores.metadata.transaction(readonly=True) as tx:
        return {k: v for k, v in (await tx.counters.read(user_id)).items() if v}


async def drift(stores: Stores, user_id: str = "u1") -> dict[str, int]:
    """Counters that disagree with the active rows (empty: the counters followed every change)."""
    async with stores.metadata.transaction(readonly=True) as tx:
        return counter_drift(
            expected_counters(await tx.memories.count_active(user_id)), await tx.counters.read(user_id)
        )


def summaries(found: dict[str, Memory]) -> list[Memory]:
    return [m for m in found.values() if m.source_type == SUMMARY_SOURCE and m.status is Status.ACTIVE]


async def test_thirty_coffee_orders_become_one_summary_that_answers_where_i_get_coffee(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    coffee = await coffee_run(service, clock, 30)
    other_app = await coffee_run(service, clock, 5, app_id="work")  # another dimension, too few
    home = await remember(service, "Lives in Hangzhou near the river")
    tea = await remember(service, "Drinks green tea at home in the evening")
    clock.now = start + LATER - timedelta(days=2)
    fresh = await coffee_run(service, clock, 10, app_id="news")  # similar but above max_weight
    before = await counters(stores)
    now = clock.now = start + LATER

    counts = await sweep(lifecycle, host, now)

    assert (counts.compression_summaries, counts.compressed_memories) == (1, 30)
    found = await rows(stores)
    [summary] = summaries(found)
    assert (
        summary.content
        == "Ordered coffee at the station cafe (regularly: 30 times from 2026-01-01 to 2026-01-30)"
    )
    assert (summary.app_id, summary.level, summary.mem_type) == ("", Level.GLOBAL, MemType.SEMANTIC)
    for mid in coffee:  # archived, not deleted, and linked to the summary
        assert (found[mid].status, found[mid].superseded_by, found[mid].archived_at) == (
            Status.ARCHIVED,
            summary.memory_id,
            now,
        )
    for mid in [*other_app, *fresh, home, tea]:
        assert (found[mid].status, found[mid].superseded_by) == (Status.ACTIVE, None)

    # Recall of the compressed fact finds the summary, and none of the originals.
    top = await recall_ids(service, "where do I usually get coffee", top_k=5)
    assert top[0] == summary.memory_id
    assert not set(top) & set(coffee)

    # History: COMPRESS on the summary (which lists its originals) and on each original.
    history = await service.history(HistoryRequest(user_id="u1", memory_id=summary.memory_id))
    assert [c.op_type for c in history.changes] == [OpType.COMPRESS]
    assert history.changes[0].content_after == summary.content
    assert history.compressed_from == coffee  # oldest first
    original = await service.history(HistoryRequest(user_id="u1", memory_id=coffee[0]))
    assert [c.op_type for c in original.changes] == [OpType.ADD, OpType.COMPRESS]
    assert original.changes[-1].reason == f"compression: into {summary.memory_id}"
    assert original.compressed_from == []

    # Vectors follow: the summary indexed, the originals out of the index and in the cold archive.
    indexed = set(await stores.vectors.memory_ids("u1"))
    assert summary.memory_id in indexed and not indexed & set(coffee)
    assert set(coffee) <= await lifecycle.archive.memory_ids("u1")
    # Capacity: 30 out, 1 in, in the global dimension and the total; nothing else moved.
    assert await counters(stores) == {
        **before,
        "global": before["global"] - 29,
        "total": before["total"] - 29,
    }
    assert await drift(stores) == {}

    # A rerun compresses nothing more and finds nothing to repair; archived originals come back
    # in recall that includes the archive.
    again = await sweep(lifecycle, host, now + timedelta(days=1))
    assert again.compression_summaries == again.compressed_memories == 0
    assert again.vectors_restored == again.orphan_vectors_removed == again.counters_fixed == 0
    assert again.archive_objects_fixed == 0
    archived = await service.recall(
        RecallRequest(user_id="u1", query="coffee at the station cafe", top_k=50, include_archived=True)
    )
    assert set(coffee) & {m.memory_id for m in archived.memories}

    # Restoring one original brings it back on its own; the summary keeps the others.
    restored = await restore_memory(lifecycle, "u1", coffee[0], now + timedelta(days=1))
    assert (restored.status, restored.superseded_by) == (Status.ACTIVE, None)
    history = await service.history(HistoryRequest(user_id="u1", memory_id=summary.memory_id))
    assert history.compressed_from == coffee[1:]


async def test_a_dry_run_counts_the_groups_and_changes_nothing(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    coffee = await coffee_run(service, clock, 12)
    counts = await sweep_users(Sweeper(lifecycle), ["u1"], start + LATER, host.submit, dry_run=True)
    assert (counts.compression_summaries, counts.compressed_memories) == (1, 12)
    found = await rows(stores)
    assert all(found[mid].status is Status.ACTIVE for mid in coffee) and not summaries(found)


async def test_compression_can_be_switched_off(
    service: MemoryService,
    stores: Stores,
    lifecycle: LifecycleStores,
    host: MailboxHost,
    clock: ManualClock,
    settings: Settings,
) -> None:
    start = clock.now
    await coffee_run(service, clock, 12)
    settings.lifecycle.compression.enabled = False
    counts = await sweep(lifecycle, host, start + LATER)
    assert counts.compression_summaries == 0 and not summaries(await rows(stores))


class InjectedCrashError(Exception):
    """The fault injected into a compression."""


STEPS = [
    "summarized",
    "objects_written",
    "originals_archived",
    "summary_inserted",
    "logged",
    "committed",
    "summary_indexed",
]
COMMITTED = {"committed", "summary_indexed"}


@pytest.mark.parametrize("step", STEPS)
async def test_a_compression_interrupted_at_any_step_leaves_the_originals_or_the_summary_current(
    step: str,
    service: MemoryService,
    stores: Stores,
    lifecycle: LifecycleStores,
    host: MailboxHost,
    clock: ManualClock,
) -> None:
    start = clock.now
    coffee = await coffee_run(service, clock, 10)
    now = start + LATER
    reached: list[str] = []

    async def crash_at(name: str) -> None:
        reached.append(name)
        if name == step:
            raise InjectedCrashError(name)

    with pytest.raises(InjectedCrashError):
        await Compressor(lifecycle, on_step=crash_at).compress_user("u1", now)
    # The fault landed mid-work: after the steps before it, and before every step after it.
    assert reached == STEPS[: STEPS.index(step) + 1]

    found = await rows(stores)
    current = summaries(found)
    originals = {found[mid].status for mid in coffee}
    if step in COMMITTED:
        [summary] = current
        assert originals == {Status.ARCHIVED}
        assert {found[mid].superseded_by for mid in coffee} == {summary.memory_id}
    else:
        assert current == [] and originals == {Status.ACTIVE}
        assert not [m for m in found.values() if m.source_type == SUMMARY_SOURCE]  # rolled back, not hidden
    assert await drift(stores) == {}  # counters moved with the rows, in the same transaction

    # Reconcile repairs whatever vector or archive object the crash left behind.
    await reconcile_user(lifecycle, "u1")
    found = await rows(stores)
    indexed = {mid for mid, m in found.items() if m.status in (Status.ACTIVE, Status.SUPERSEDED)}
    assert set(await stores.vectors.memory_ids("u1")) == indexed
    archived = {mid for mid, m in found.items() if m.status is Status.ARCHIVED}
    assert await lifecycle.archive.memory_ids("u1") == archived

    # The next sweep finishes the work (or has nothing left to do): exactly one summary in the end.
    counts = await sweep(lifecycle, host, now)
    assert counts.compression_summaries == (0 if step in COMMITTED else 1)
    assert counts.vectors_restored == counts.orphan_vectors_removed == counts.archive_objects_fixed == 0
    found = await rows(stores)
    [summary] = summaries(found)
    assert {found[mid].status for mid in coffee} == {Status.ARCHIVED}
    assert (await recall_ids(service, "where do I usually get coffee"))[0] == summary.memory_id


async def test_a_session_close_compresses_the_dimension_it_promoted_into(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, clock: ManualClock
) -> None:
    start = clock.now
    shop = await coffee_run(service, clock, 10, app_id="shop")
    elsewhere = await coffee_run(service, clock, 10)  # global: not touched by a close in "shop"
    clock.now = start + LATER
    session = await remember(service, "Prefers oat milk", app_id="shop", level=Level.SESSION, session_id="s1")
    write_path = WritePath(service)
    backend = LocalBackend(wire_core(service, write_path, lifecycle))
    try:
        result = await backend.session_close(
            SessionCloseRequest(user_id="u1", app_id="shop", session_id="s1", must_promote=[session])
        )
    finally:
        await write_path.close()
    assert result.promoted == [session]
    found = await rows(stores)
    [summary] = summaries(found)
    assert summary.app_id == "shop" and {found[mid].status for mid in shop} == {Status.ARCHIVED}
    assert {found[mid].status for mid in elsewhere} == {Status.ACTIVE}
    assert found[session].status is Status.ACTIVE  # just promoted: far above max_weight
    assert await drift(stores) == {}


async def test_an_llm_engine_writes_the_summary(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    coffee = await coffee_run(service, clock, 10)
    said = "Usually gets coffee at the station cafe (10 times, 2026-01-01 to 2026-01-10)"
    async with chat_server(lambda body: Reply(json.dumps({"text": said}))) as server:
        engine = OpenAIEngine(server.url, "scripted", timeout_s=5.0)
        lifecycle.summarize = EngineSummarizer(engine, service.settings.evolution)
        try:
            counts = await sweep(lifecycle, host, start + LATER)
        finally:
            await engine.close()
    assert counts.compression_summaries == 1
    [summary] = summaries(await rows(stores))
    assert summary.content == said
    [body] = server.bodies  # one request, showing every memory of the group with its date
    prompt = body["messages"][-1]["content"]
    assert all(COFFEE.format(start + timedelta(days=d)) in prompt for d in range(len(coffee)))


async def test_a_failing_llm_engine_leaves_the_summary_to_the_deterministic_merge(
    service: MemoryService, stores: Stores, lifecycle: LifecycleStores, host: MailboxHost, clock: ManualClock
) -> None:
    start = clock.now
    await coffee_run(service, clock, 10)
    async with chat_server(lambda body: Reply("not json at all")) as server:
        engine = OpenAIEngine(server.url, "scripted", timeout_s=5.0)
        lifecycle.summarize = EngineSummarizer(engine, service.settings.evolution)
        try:
            await sweep(lifecycle, host, start + LATER)
        finally:
            await engine.close()
    [summary] = summaries(await rows(stores))
    assert (
        summary.content
        == "Ordered coffee at the station cafe (regularly: 10 times from 2026-01-01 to 2026-01-10)"
    )


@pytest.mark.parametrize("step", ["summary_inserted", "committed"])
async def test_a_compression_killed_mid_work_leaves_the_originals_or_the_summary_current(
    step: str, settings: Settings, embedder: Embedder, clock: ManualClock, tmp_path: Path
) -> None:
    data, archive_dir = settings.storage.data_dir, tmp_path / "archive"
    stores = await open_stores(settings, embedder=embedder)
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    coffee = await coffee_run(service, clock, 10)
    now = clock.now + LATER
    await service.drain()
    await close_vectors(stores, data)
    # The child owns the data dir now; it stops at ``step`` (inside the metadata transaction for
    # summary_inserted, just after the commit for committed) and is killed there with SIGKILL.
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.compress_child",
        str(data),
        str(archive_dir),
        now.isoformat(),
        step,
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=180)
        assert line.decode().strip() == f"at {step}"  # the kill lands mid-work, at this step
        child.send_signal(signal.SIGKILL)
        assert await child.wait() == -signal.SIGKILL
    finally:
        if child.returncode is None:  # a failed assertion must not leave the child behind
            child.kill()
            await child.wait()

    stores = await open_stores(settings, embedder=embedder)
    try:
        found = await rows(stores)
        current = summaries(found)
        if step == "committed":
            [summary] = current
            assert {found[mid].status for mid in coffee} == {Status.ARCHIVED}
            assert summary.memory_id not in await stores.vectors.memory_ids("u1")  # killed before its vector
        else:
            assert current == [] and {found[mid].status for mid in coffee} == {Status.ACTIVE}
            assert not [m for m in found.values() if m.source_type == SUMMARY_SOURCE]
        assert await drift(stores) == {}
        lifecycle = LifecycleStores(
            settings,
            stores.metadata,
            stores.vectors,
            stores.embedder,
            ColdArchive(LocalDirObjectStore(archive_dir)),
        )
        host = MailboxHost(reap_every_s=0)
        try:
            counts = await sweep(lifecycle, host, now)
        finally:
            await host.close()
        # The sweep finishes what was left (the whole compression, or the summary's vector).
        assert counts.compression_summaries == (0 if step == "committed" else 1)
        assert counts.vectors_restored == (1 if step == "committed" else 0)
        found = await rows(stores)
        [summary] = summaries(found)
        assert {found[mid].status for mid in coffee} == {Status.ARCHIVED}
        indexed = set(await stores.vectors.memory_ids("u1"))
        assert summary.memory_id in indexed and not indexed & set(coffee)
    finally:
        await close_vectors(stores, data)


async def close_vectors(stores: Stores, data: Path) -> None:
    """Close the stores and let go of milvus-lite's data dir (it stays served by this process else)."""
    await stores.close()
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(data / "vectors.db"))
