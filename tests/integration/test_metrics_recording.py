"""What each path records, over real stores with metrics kept in memory: recall outcomes, snapshot
cache, acknowledgements and task times, decisions, capacity, sweeps and reconcile (SPEC O3)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.sweeps import Sweeper, run_inline, sweep_users
from engram.models.api import AddRequest, AddStructuredRequest, RecallRequest
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import MemoryInstruments
from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.metrics import recorded_metrics
from tests.support.service import remember

pytestmark = pytest.mark.integration

RECALLS = "engram_recall_latency_ms"


@pytest.fixture
def metrics() -> Iterator[MemoryInstruments]:
    with recorded_metrics() as memory:
        yield memory


async def test_recalls_are_counted_by_outcome_with_candidates_and_snapshot_events(
    service: MemoryService, metrics: MemoryInstruments
) -> None:
    await remember(service, "Keeps a bonsai called Kiyoshi")
    await remember(service, "Works night shifts at the harbour")
    for _ in range(3):
        assert (await service.recall(RecallRequest(user_id="u1", query="what is my bonsai called"))).hit
    assert not (await service.recall(RecallRequest(user_id="nobody", query="bonsai"))).hit
    assert metrics.count(RECALLS, outcome="hit") == 3
    assert metrics.count(RECALLS, outcome="miss") == 1
    assert metrics.values("engram_recall_candidates") == [2, 2, 2, 0]
    # u1, a small user (recall.cold_min_memories), is loaded on its first recall and then held;
    # nobody has nothing to load and is answered cold.
    assert metrics.total("engram_snapshot_cache_total", event="cold") == 1
    assert metrics.total("engram_snapshot_cache_total", event="load") == 1
    assert metrics.total("engram_snapshot_cache_total", event="miss") == 1
    assert metrics.total("engram_snapshot_cache_total", event="hit") == 2
    assert metrics.count("engram_snapshot_load_ms") == 1
    assert metrics.label_values().isdisjoint({"u1", "nobody", "Keeps a bonsai called Kiyoshi"})


async def test_a_recall_past_its_timeout_counts_as_timeout(
    service: MemoryService, metrics: MemoryInstruments
) -> None:
    class StalledEmbedder:
        model_name = service.embedder.model_name
        dim = service.embedder.dim

        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            await asyncio.Event().wait()  # a dependency that never answers
            raise AssertionError("unreachable")

    service.recaller._embedder = StalledEmbedder()
    with pytest.raises(EngramError):
        await service.recall(RecallRequest(user_id="u1", query="anything", timeout_ms=50))
    assert metrics.count(RECALLS, outcome="timeout") == 1
    assert metrics.values(RECALLS, outcome="timeout")[0] >= 50


async def test_an_add_task_records_its_ack_its_time_to_done_its_decisions_and_pending_tasks(
    service: MemoryService, metrics: MemoryInstruments, clock: ManualClock
) -> None:
    write_path = WritePath(service, shard=3)
    request = AddRequest(user_id="u1", messages=[{"role": "user", "content": "I moved to Lisbon last year."}])
    await write_path.accept_add(request)
    assert metrics.values("engram_tasks_pending", shard="3") == [1]
    clock.advance(seconds=2)  # the task runs on the service's clock: two seconds after acceptance
    await write_path.drain()
    assert metrics.count("engram_write_ack_ms", kind="add", app="") == 1
    assert metrics.values("engram_task_latency_ms", kind="add", status="DONE") == [2000.0]
    assert metrics.total("engram_evolution_decisions_total", op="ADD") == 1
    assert metrics.values("engram_tasks_pending", shard="3") == [0]
    await write_path.close()


async def test_app_ids_label_acks_and_recalls_only_when_opted_in(
    service: MemoryService, settings: Settings, metrics: MemoryInstruments
) -> None:
    write_path = WritePath(service)
    said = [{"role": "user", "content": "I moved to Lisbon last year."}]
    await write_path.accept_add(AddRequest(user_id="u1", app_id="shop", messages=said))
    settings.metrics.app_id_labels = True  # read from the live settings on every write and recall
    await write_path.accept_add(AddRequest(user_id="u1", app_id="shop", messages=said))
    await service.recall(RecallRequest(user_id="u1", query="Lisbon", scope={"app_id": "shop"}))
    await write_path.close()
    assert metrics.count("engram_write_ack_ms", app="") == 1
    assert metrics.count("engram_write_ack_ms", app="shop") == 1
    assert metrics.count(RECALLS, app="shop") == 1


async def test_capacity_evictions_and_refusals_are_counted(
    service: MemoryService, settings: Settings, metrics: MemoryInstruments
) -> None:
    settings.capacity.global_limit = 5
    for i in range(5):
        await remember(service, f"Fact number {i} about the garden")
    await remember(service, "One more fact about the garden")  # full: evicts down to 90%
    assert metrics.total("engram_capacity_evictions_total") >= 1
    await remember(service, "An important fact", is_important=True)
    with pytest.raises(EngramError) as refused:
        await service.add_structured(
            AddStructuredRequest(
                user_id="u1",
                ownership="USER",
                mem_type="SEMANTIC",
                content="A second important fact",
                is_important=True,
                sync=True,
            )
        )
    assert refused.value.code is ErrorCode.IMPORTANT_LIMIT_EXCEEDED
    assert metrics.total("engram_capacity_refusals_total", code="42902") == 1


async def test_sweeps_count_their_actions_and_time_and_reconcile_its_repairs(
    service: MemoryService,
    settings: Settings,
    stores: Stores,
    clock: ManualClock,
    tmp_path: Path,
    metrics: MemoryInstruments,
) -> None:
    lifecycle = LifecycleStores(
        settings, stores.metadata, stores.vectors, stores.embedder, ColdArchive(LocalDirObjectStore(tmp_path))
    )
    kept = await remember(service, "Prefers green tea over coffee")
    await remember(service, "Plays the cello on Sundays")
    await stores.vectors.delete([kept])  # drift for reconcile to repair
    sweeper = Sweeper(lifecycle)
    first = await sweep_users(sweeper, ["u1"], clock.now + timedelta(days=1), run_inline)
    assert first.vectors_restored == 1
    assert metrics.total("engram_reconcile_repairs_total", kind="vectors_restored") == 1
    assert metrics.total("engram_reconcile_repairs_total") == first.vectors_restored + first.counters_fixed
    later = await sweep_users(sweeper, ["u1"], clock.now + timedelta(days=91), run_inline)
    assert later.archived_faded == 2 and later.failed_users == 0
    assert metrics.total("engram_sweep_actions_total", action="archived_faded") == 2
    assert metrics.count("engram_sweep_user_ms", result="ok") == 2
