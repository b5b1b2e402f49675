"""The durable, serialized write path on real stores (SQLite and PostgreSQL, milvus-lite): W1, W2, W8."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from engram.actors.engines.base import Engine, EngineError, StructuredRequest
from engram.actors.engines.factory import engine_from_settings
from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.task_runner import KIND_ADD
from engram.actors.write_path import WritePath
from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchDeleteRequest,
    DeleteRequest,
    MemoryCreated,
    RecallRequest,
    TaskAccepted,
    UpdateRequest,
)
from engram.models.domain import WriteTask
from engram.models.enums import MemType, OpType, Ownership, TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.ids import new_id
from engram.models.settings import Settings
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.schema import write_tasks
from engram.storage.stores import Stores, open_stores
from engram.storage.write_gate import WriteGateTimeoutError
from tests.conftest import ManualClock

pytestmark = pytest.mark.integration

GUARD_S = 60  # only a guard against a hang; nothing depends on timing

FACTS = [
    "I am allergic to peanuts.",
    "I live in Lisbon.",
    "My sister is called Maria.",
    "I work as a nurse.",
    "I play the cello every weekend.",
]


def add_request(text: str, user_id: str = "u1") -> AddRequest:
    return AddRequest(user_id=user_id, messages=[{"role": "user", "content": text, "msg_id": "m0"}])


def structured(content: str, *, sync: bool, user_id: str = "u1") -> AddStructuredRequest:
    return AddStructuredRequest(
        user_id=user_id, ownership=Ownership.USER, mem_type=MemType.SEMANTIC, content=content, sync=sync
    )


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service, MailboxHost(reap_every_s=0))
    yield path
    await path.close()


async def active_counts(metadata: MetadataStore, user_id: str = "u1") -> dict[str, int]:
    """What the counters must say, counted from the ACTIVE rows themselves."""
    async with metadata.transaction() as tx:
        rows = await tx.memories.count_active(user_id)
    expected: dict[str, int] = {}
    for (app_id, important), n in rows.items():
        dims = [f"app:{app_id}" if app_id else "global", "total"]
        for dim in dims + ([f"important:{d}" for d in dims] if important else []):
            expected[dim] = expected.get(dim, 0) + n
    return expected


async def counters(metadata: MetadataStore, user_id: str = "u1") -> dict[str, int]:
    async with metadata.transaction() as tx:
        return {k: v for k, v in (await tx.counters.read(user_id)).items() if v}


async def ops(metadata: MetadataStore, user_id: str = "u1") -> list[OpType]:
    """The user's change log, oldest first."""
    async with metadata.transaction() as tx:
        return [e.op_type for e in reversed(await tx.changes.page(user_id, limit=100_000))]


# --- the task methods of the metadata store ---------------------------------------------------


def _task(user_id: str, created_at: datetime, status: TaskStatus = TaskStatus.PENDING) -> WriteTask:
    payload = add_request("I keep my spare key under the blue flowerpot.", user_id).model_dump(mode="json")
    return WriteTask(
        task_id=new_id(),
        user_id=user_id,
        kind=KIND_ADD,
        status=status,
        payload=payload,
        created_at=created_at,
        updated_at=created_at,
    )


async def test_task_rows_round_trip_encrypted(stores: Stores, clock: ManualClock) -> None:
    task = _task("alice", clock.now)
    async with stores.metadata.transaction() as tx:
        await tx.tasks.insert(task)
    async with stores.metadata.transaction() as tx:
        assert await tx.tasks.get(task.task_id) == task
        assert await tx.tasks.get(new_id()) is None
        assert await tx.tasks.start(task.task_id, clock.advance(seconds=1)) == 1
        assert await tx.tasks.start(task.task_id, clock.now) == 2
        running = await tx.tasks.get(task.task_id)
    assert running is not None and running.status is TaskStatus.RUNNING and running.attempts == 2
    decisions = [
        {"op": "ADD", "memory_id": "m" * 32, "content": "spare key under the flowerpot", "reason": ""}
    ]
    async with stores.metadata.transaction() as tx:
        assert await tx.tasks.finish(
            task.task_id, TaskStatus.DONE, decisions=decisions, error=None, at=clock.now
        )
        # Finished once means finished: a second finisher and a late start both see nothing to do.
        assert not await tx.tasks.finish(
            task.task_id, TaskStatus.FAILED, decisions=None, error="x", at=clock.now
        )
        assert await tx.tasks.start(task.task_id, clock.now) == 0
        assert not await tx.tasks.finish(new_id(), TaskStatus.DONE, decisions=[], error=None, at=clock.now)
        done = await tx.tasks.get(task.task_id)
    async with stores.metadata.engine.connect() as conn:
        raw = (await conn.execute(select(write_tasks).where(write_tasks.c.task_id == task.task_id))).one()
    assert done is not None and done.status is TaskStatus.DONE
    assert done.decisions == decisions and done.error is None and done.updated_at == clock.now
    assert b"flowerpot" not in bytes(raw.payload) and b"flowerpot" not in bytes(raw.result)
    with pytest.raises(ValueError, match="DONE or FAILED"):
        async with stores.metadata.transaction() as tx:
            await tx.tasks.finish(task.task_id, TaskStatus.RUNNING, decisions=None, error=None, at=clock.now)


async def test_unfinished_tasks_oldest_first_and_paged(stores: Stores, clock: ManualClock) -> None:
    t0 = clock.now
    tasks = [
        _task("bob", t0 + timedelta(seconds=3)),
        _task("carol", t0 + timedelta(seconds=1), TaskStatus.RUNNING),
        _task("bob", t0 + timedelta(seconds=2), TaskStatus.DONE),
        _task("bob", t0 + timedelta(seconds=1)),
        _task("dave", t0, TaskStatus.FAILED),
        _task("dave", t0 + timedelta(seconds=4)),
    ]
    async with stores.metadata.transaction() as tx:
        for task in tasks:
            await tx.tasks.insert(task)
    unfinished = sorted(
        (t for t in tasks if t.status in (TaskStatus.PENDING, TaskStatus.RUNNING)),
        key=lambda t: (t.created_at, t.task_id),
    )
    async with stores.metadata.transaction() as tx:
        assert await tx.tasks.unfinished() == unfinished
        first = await tx.tasks.unfinished(limit=2)
        rest = await tx.tasks.unfinished(limit=10, after=(first[-1].created_at, first[-1].task_id))
    assert first + rest == unfinished


# --- accepting and processing -----------------------------------------------------------------


class GatedEngine:
    """The configured engine, held at a gate so a test can see a task RUNNING."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.name = inner.name
        self.is_llm = inner.is_llm
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.generate(requests)

    async def close(self) -> None:
        await self.inner.close()


class BrokenEngine:
    """An engine whose every answer is an error (the LLM being down), counting the calls."""

    name = "broken"
    is_llm = True

    def __init__(self, error: Exception | None = None) -> None:
        self.calls = 0
        self._raise = error

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.calls += 1
        if self._raise is not None:
            raise self._raise
        return [EngineError("engine unavailable") for _ in requests]

    async def close(self) -> None:
        return None


async def test_add_is_recorded_then_done_with_decisions_and_recallable(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = GatedEngine(engine_from_settings(settings.engine))
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(add_request("I am allergic to peanuts."))
    assert accepted.accepted
    assert (await path.task(accepted.task_id)).status in (TaskStatus.PENDING, TaskStatus.RUNNING)
    await asyncio.wait_for(engine.entered.wait(), GUARD_S)
    assert (await path.task(accepted.task_id)).status is TaskStatus.RUNNING
    engine.gate.set()
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.DONE and view.error is None
    assert [d.op for d in view.decisions] == ["ADD"]
    memory_id = view.decisions[0].memory_id
    response = await service.recall(RecallRequest(user_id="u1", query="peanut allergy"))
    assert memory_id in [m.memory_id for m in response.memories]
    await path.close()
    await service.drain()


async def test_unknown_task_is_40401(write_path: WritePath) -> None:
    with pytest.raises(EngramError) as caught:
        await write_path.task(new_id())
    assert caught.value.code is ErrorCode.NOT_FOUND


async def test_200_concurrent_writes_for_one_user_keep_exact_counters_within_capacity(
    settings: Settings, write_path: WritePath, stores: Stores
) -> None:
    limit = 20
    settings.capacity.global_limit = limit
    requests = [
        structured(f"Remembered item {i:03d} about topic {i * 7919 % 1000}", sync=i % 2 == 0)
        for i in range(200)
    ]
    answers = await asyncio.wait_for(
        asyncio.gather(*(write_path.accept_structured(r) for r in requests)), GUARD_S
    )
    await asyncio.wait_for(write_path.drain(), GUARD_S)
    assert all(isinstance(a, MemoryCreated) for a in answers[0::2])
    tasks = [a for a in answers[1::2] if isinstance(a, TaskAccepted)]
    assert len(tasks) == 100
    for accepted in tasks:
        view = await write_path.task(accepted.task_id)
        assert view.status is TaskStatus.DONE and [d.op for d in view.decisions] == ["ADD"]
    expected = await active_counts(stores.metadata)
    assert await counters(stores.metadata) == expected
    assert 0 < expected["global"] <= limit
    # Replaying the change log in commit order: the number of active memories never passed the limit.
    active = peak = 0
    history = await ops(stores.metadata)
    for op in history:
        active += {OpType.ADD: 1, OpType.ARCHIVE: -1, OpType.DELETE: -1}.get(op, 0)
        peak = max(peak, active)
    assert peak <= limit and active == expected["global"]
    assert history.count(OpType.ADD) == 200


async def test_users_write_side_by_side_without_conflicts(write_path: WritePath, stores: Stores) -> None:
    for user in ("a", "b"):  # keys exist: only the writes themselves overlap
        async with stores.metadata.transaction() as tx:
            await tx.keys.cipher(user)

    async def user_a() -> list[MemoryCreated | TaskAccepted]:
        return [
            await write_path.accept_structured(structured(f"Item a{i}", sync=True, user_id="a"))
            for i in range(60)
        ]

    async def user_b() -> list[MemoryCreated | TaskAccepted]:
        return [
            await write_path.accept_structured(structured(f"Item b{i}", sync=False, user_id="b"))
            for i in range(60)
        ]

    created, accepted = await asyncio.wait_for(asyncio.gather(user_a(), user_b()), GUARD_S)
    await asyncio.wait_for(write_path.drain(), GUARD_S)
    assert all(isinstance(c, MemoryCreated) for c in created)
    views = [await write_path.task(a.task_id) for a in accepted if isinstance(a, TaskAccepted)]
    assert [v.status for v in views] == [TaskStatus.DONE] * 60
    assert write_path.host.failed == 0
    for user in ("a", "b"):
        assert await counters(stores.metadata, user) == {"global": 60, "total": 60}


async def test_updates_deletes_and_recall_hits_run_on_the_mailbox(
    write_path: WritePath, stores: Stores, clock: ManualClock
) -> None:
    ids = []
    for text in ("Likes green tea", "Owns a bicycle", "Speaks Portuguese"):
        created = await write_path.accept_structured(structured(text, sync=True))
        assert isinstance(created, MemoryCreated)
        ids.append(created.memory_id)
    view = await write_path.update(UpdateRequest(user_id="u1", memory_id=ids[0], is_important=True))
    assert view.is_important
    write_path.record_recall_hits("u1", [ids[1]], clock.now)
    assert (await write_path.delete(DeleteRequest(user_id="u1", memory_id=ids[2]))).deleted == [ids[2]]
    result = await write_path.batch_delete(BatchDeleteRequest(user_id="u1", memory_ids=[ids[2], ids[1]]))
    assert result.deleted == [ids[1]] and result.not_found == [ids[2]]
    await write_path.drain()
    async with stores.metadata.transaction() as tx:
        hit = await tx.memories.get("u1", ids[1])
    # The hit was queued before the batch delete, so it was counted before the memory left.
    assert hit is not None and hit.recall_count == 1
    assert await counters(stores.metadata) == await active_counts(stores.metadata)


# --- durability -------------------------------------------------------------------------------


async def test_unfinished_tasks_resume_after_a_restart_exactly_once(
    settings: Settings, stores: Stores, embedder: Embedder, clock: ManualClock
) -> None:
    tasks = [_task("u1", clock.now + timedelta(seconds=i)) for i in range(len(FACTS))]
    for task, fact in zip(tasks, FACTS, strict=True):
        task.payload = add_request(fact).model_dump(mode="json")
    # The last one was being processed when its process died: RUNNING, one attempt, nothing written.
    tasks[-1].status, tasks[-1].attempts = TaskStatus.RUNNING, 1
    async with stores.metadata.transaction() as tx:
        for task in tasks:
            await tx.tasks.insert(task)
    await stores.close()  # the old process is gone; milvus-lite allows one owner

    reopened = await open_stores(settings, embedder=embedder)
    try:
        service = MemoryService(settings, reopened.metadata, reopened.vectors, reopened.embedder, clock=clock)
        path = WritePath(service, MailboxHost(reap_every_s=0))
        assert await path.resume(owns=lambda user: user != "someone-else") == len(FACTS)
        await asyncio.wait_for(path.drain(), GUARD_S)
        views = [await path.task(t.task_id) for t in tasks]
        assert all(v.status is TaskStatus.DONE for v in views)
        assert [[d.op for d in v.decisions] for v in views] == [["ADD"]] * len(FACTS)
        stored = {d.memory_id for v in views for d in v.decisions}
        async with reopened.metadata.transaction() as tx:
            rows = await tx.memories.get_many("u1", [m for m in stored if m])
            done = await tx.tasks.get(tasks[-1].task_id)
        assert len(rows) == len(FACTS) == await reopened.vectors.count()
        assert len({m.content_hash for m in rows.values()}) == len(FACTS)
        assert done is not None and done.attempts == 2
        before = (await ops(reopened.metadata), await counters(reopened.metadata))
        assert before[0] == [OpType.ADD] * len(FACTS)

        # Replays of finished tasks change nothing: resume finds none, a re-queue and a direct call skip.
        assert await path.resume() == 0
        for task in tasks:
            path.schedule(task.user_id, task.task_id, task.kind)
        await asyncio.wait_for(path.drain(), GUARD_S)
        replayed = await service.ingestor.process(add_request(FACTS[0]), task_id=tasks[0].task_id)
        assert replayed == views[0].decisions
        assert (await ops(reopened.metadata), await counters(reopened.metadata)) == before
        assert [await path.task(t.task_id) for t in tasks] == views
        await path.close()
    finally:
        await reopened.close()


async def test_extraction_failure_ends_failed_with_50001_and_writes_nothing(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    # With degraded mode off; on (the default) the rules engine extracts instead (test_degraded_mode).
    settings.evolution.degraded_mode = False
    engine = BrokenEngine()
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    path = WritePath(service, MailboxHost(reap_every_s=0))
    accepted = await path.accept_add(add_request("I live in Lisbon and I work as a nurse."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.FAILED and view.decisions == []
    assert view.error is not None and view.error.startswith("50001 ")
    assert engine.calls == 2  # one retry (W3)
    assert await ops(stores.metadata) == [] and await counters(stores.metadata) == {}
    assert await stores.vectors.count() == 0
    await path.close()


async def test_an_unexpected_crash_leaves_the_task_for_resume_until_attempts_run_out(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = BrokenEngine(RuntimeError("connection reset"))
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    # No in-process retries: each failure here stands for a process dying mid-task.
    path = WritePath(service, MailboxHost(reap_every_s=0), max_attempts=2, retry_delays_s=())
    accepted = await path.accept_add(add_request("I live in Lisbon."))
    await asyncio.wait_for(path.drain(), GUARD_S)
    assert (await path.task(accepted.task_id)).status is TaskStatus.RUNNING
    assert await path.resume() == 1
    await asyncio.wait_for(path.drain(), GUARD_S)
    assert (await path.task(accepted.task_id)).status is TaskStatus.RUNNING
    assert await path.resume() == 1
    await asyncio.wait_for(path.drain(), GUARD_S)
    view = await path.task(accepted.task_id)
    assert view.status is TaskStatus.FAILED and view.error == "50301 gave up after 2 attempts"
    assert engine.calls == 2
    assert await ops(stores.metadata) == []
    await path.close()


class FlakyEngine(GatedEngine):
    """The configured engine, failing its first ``failures`` calls (a replica lost for a moment)."""

    def __init__(self, inner: Engine, failures: int) -> None:
        super().__init__(inner)
        self.gate.set()
        self.failures = failures
        self.calls = 0

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionResetError("the extraction replica went away")
        return await super().generate(requests)


async def attempts_of(metadata: MetadataStore, task_id: str) -> int:
    async with metadata.engine.connect() as conn:
        query = select(write_tasks.c.attempts).where(write_tasks.c.task_id == task_id)
        return int((await conn.execute(query)).scalar_one())


async def until_done(path: WritePath, task_id: str) -> None:
    """Poll the task until DONE (a retry's timer may be running: no drain alone finishes it)."""
    while (await path.task(task_id)).status is not TaskStatus.DONE:
        await path.drain()
        await asyncio.sleep(0.01)


async def test_a_passing_failure_is_retried_in_process_and_spends_no_attempt(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = FlakyEngine(engine_from_settings(settings.engine), failures=2)
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    # Two failures in a row, under max_attempts=1: without the retries (or with each spending an
    # attempt) the task would wait for a resume, or end FAILED.
    path = WritePath(service, MailboxHost(reap_every_s=0), max_attempts=1, retry_delays_s=(0.01, 0.02))
    accepted = await path.accept_add(add_request("I live in Lisbon."))

    await asyncio.wait_for(until_done(path, accepted.task_id), GUARD_S)
    assert engine.calls == 3 and await attempts_of(stores.metadata, accepted.task_id) == 1
    assert await ops(stores.metadata) == [OpType.ADD]
    await path.close()


async def test_a_task_whose_start_the_store_refuses_is_retried_in_process(
    settings: Settings, stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside a CPU hog the task's first transaction waited past the write gate's limit; the
    # error left the task PENDING until the next start, and its user's writes never finished (#26).
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    path = WritePath(service, MailboxHost(reap_every_s=0), retry_delays_s=(0.01,))
    accepted = await path.accept_add(add_request("I live in Lisbon."))
    original = stores.metadata.transaction
    refusals = [WriteGateTimeoutError("waited past the write gate's limit")]

    @contextlib.asynccontextmanager
    async def refusing(*, readonly: bool = False, urgent: bool = False) -> AsyncIterator[MetadataTx]:
        if not readonly and refusals:
            raise refusals.pop()
        async with original(readonly=readonly, urgent=urgent) as tx:
            yield tx

    monkeypatch.setattr(stores.metadata, "transaction", refusing)

    await asyncio.wait_for(until_done(path, accepted.task_id), GUARD_S)
    assert not refusals, "the store's refusal was not what the task met first"
    assert await ops(stores.metadata) == [OpType.ADD]
    await path.close()


async def test_a_retry_needs_no_write_of_its_own_to_spend_no_attempt(
    settings: Settings, stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside a CPU hog the store refused the write that gave a failed try's attempt back: each
    passing failure then spent an attempt and a task ended FAILED, 'gave up' (#26). A retry counts
    no attempt, with no write of its own to be refused."""
    engine = FlakyEngine(engine_from_settings(settings.engine), failures=2)
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    path = WritePath(service, MailboxHost(reap_every_s=0), max_attempts=1, retry_delays_s=(0.01,) * 6)
    accepted = await path.accept_add(add_request("I live in Lisbon."))
    original = stores.metadata.transaction
    refused_after: set[int] = set()

    @contextlib.asynccontextmanager
    async def busy(*, readonly: bool = False, urgent: bool = False) -> AsyncIterator[MetadataTx]:
        # The first write after each failed extraction waits past the write gate's limit.
        if not readonly and engine.calls in (1, 2) and engine.calls not in refused_after:
            refused_after.add(engine.calls)
            raise WriteGateTimeoutError("waited past the write gate's limit")
        async with original(readonly=readonly, urgent=urgent) as tx:
            yield tx

    monkeypatch.setattr(stores.metadata, "transaction", busy)

    await asyncio.wait_for(until_done(path, accepted.task_id), GUARD_S)
    assert refused_after == {1, 2} and engine.calls == 3
    assert await attempts_of(stores.metadata, accepted.task_id) == 1
    assert await ops(stores.metadata) == [OpType.ADD]
    await path.close()


async def test_past_its_retries_a_task_waits_for_the_next_resume(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = BrokenEngine(ConnectionResetError("the extraction replica went away"))
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    path = WritePath(service, MailboxHost(reap_every_s=0), max_attempts=2, retry_delays_s=(0.01, 0.01))
    accepted = await path.accept_add(add_request("I live in Lisbon."))

    async def three_calls() -> None:
        while engine.calls < 3 or path.pending_tasks or path._retry_timers:
            await path.drain()
            await asyncio.sleep(0.01)

    await asyncio.wait_for(three_calls(), GUARD_S)
    # The first try and two retries; only the first try counted an attempt.
    assert engine.calls == 3
    assert (await path.task(accepted.task_id)).status is TaskStatus.RUNNING
    assert await attempts_of(stores.metadata, accepted.task_id) == 1
    await path.close()
    # A stop cancels any retry still waiting: the task is a committed row the next start resumes.
    restarted = WritePath(service, MailboxHost(reap_every_s=0), max_attempts=2, retry_delays_s=())
    assert await restarted.resume() == 1
    await asyncio.wait_for(restarted.drain(), GUARD_S)
    assert engine.calls == 4 and await ops(stores.metadata) == []
    await restarted.close()


async def test_a_rescan_queues_what_no_mailbox_holds_and_nothing_twice(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    path = WritePath(service, MailboxHost(reap_every_s=0))
    # Acknowledged by an incarnation of the shard that was already replaced: no mailbox holds it.
    orphan = _task("u1", clock.now - timedelta(seconds=60))
    held = _task("u1", clock.now - timedelta(seconds=60))
    fresh = _task("u1", clock.now)  # being accepted right now: its own schedule is on the way
    elsewhere = _task("u2", clock.now - timedelta(seconds=60))  # another shard's user
    held.payload = add_request(FACTS[1]).model_dump(mode="json")
    async with stores.metadata.transaction() as tx:
        for task in (orphan, held, fresh, elsewhere):
            await tx.tasks.insert(task)
    release = asyncio.Event()
    path.host.submit_nowait("u1", release.wait)  # u1's mailbox is busy: ``held`` waits in it
    path.schedule("u1", held.task_id, held.kind)

    assert await path.rescan(owns=lambda user: user == "u1", settle_s=10) == 1
    release.set()
    await asyncio.wait_for(path.drain(), GUARD_S)
    assert (await path.task(orphan.task_id)).status is TaskStatus.DONE
    assert (await path.task(held.task_id)).status is TaskStatus.DONE
    assert await attempts_of(stores.metadata, held.task_id) == 1, "held was queued once, not twice"
    assert (await path.task(fresh.task_id)).status is TaskStatus.PENDING
    assert (await path.task(elsewhere.task_id)).status is TaskStatus.PENDING
    assert await path.rescan(owns=lambda user: user == "u1", settle_s=10) == 0

    clock.advance(seconds=11)  # settled, and still held by no mailbox: queued
    assert await path.rescan(owns=lambda user: user == "u1", settle_s=10) == 1
    await asyncio.wait_for(path.drain(), GUARD_S)
    assert (await path.task(fresh.task_id)).status is TaskStatus.DONE
    await path.close()


async def test_async_add_structured_completes_its_task(write_path: WritePath, stores: Stores) -> None:
    accepted = await write_path.accept_structured(structured("Collects vinyl records", sync=False))
    assert isinstance(accepted, TaskAccepted)
    await asyncio.wait_for(write_path.drain(), GUARD_S)
    view = await write_path.task(accepted.task_id)
    assert view.status is TaskStatus.DONE
    [decision] = view.decisions
    assert decision.op == "ADD" and decision.memory_id is not None
    async with stores.metadata.transaction() as tx:
        memory = await tx.memories.get("u1", decision.memory_id)
    assert memory is not None and memory.content == "Collects vinyl records"


async def test_a_task_finished_elsewhere_mid_way_rolls_the_late_commit_back(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    engine = GatedEngine(engine_from_settings(settings.engine))
    service = MemoryService(
        settings, stores.metadata, stores.vectors, stores.embedder, clock=clock, engine=engine
    )
    task = _task("u1", clock.now)
    async with stores.metadata.transaction() as tx:
        await tx.tasks.insert(task)
    request = AddRequest.model_validate(task.payload)
    late = asyncio.ensure_future(service.ingestor.process(request, task_id=task.task_id))
    await asyncio.wait_for(engine.entered.wait(), GUARD_S)
    # Another process finishes the same task while this one is still extracting.
    first = {"op": "ADD", "memory_id": new_id(), "content": None, "reason": "other process"}
    async with stores.metadata.transaction() as tx:
        assert await tx.tasks.finish(
            task.task_id, TaskStatus.DONE, decisions=[first], error=None, at=clock.now
        )
    engine.gate.set()
    assert [d.model_dump() for d in await asyncio.wait_for(late, GUARD_S)] == [first]
    assert await ops(stores.metadata) == [] and await counters(stores.metadata) == {}
    assert await stores.vectors.count() == 0
    with pytest.raises(EngramError) as caught:
        await service.ingestor.process(request, task_id=new_id())
    assert caught.value.code is ErrorCode.NOT_FOUND
