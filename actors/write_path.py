"""The serialized, durable write path (SPEC W1, W2, R4, M2; DESIGN decisions 1 and 2).

Every write of a user runs on that user's mailbox (``actors.mailbox``), so one user's writes never
overlap and no lock exists. ``add`` is durable before it is acknowledged: the task row (payload
encrypted) commits first, then the work is queued; ``resume`` re-queues whatever a crash left
unfinished. Processing is idempotent: an ``add`` task is marked DONE in the transaction that commits
its memories, and a finished task is never processed again.

Task ids are never logged: a task id is the handle that reads the task (P9).

Failure policy: an ``EngramError`` (extraction failed, capacity full, ...) is the request's own
fault or a verdict, so the task ends FAILED with ``"<code> <message>"`` and nothing written. Any
other exception (a database or vector store hiccup, a replica lost with its node, a bug) leaves the
task unfinished: marking it FAILED would lose an accepted write, retrying at once could spin, so it
is retried after the waits of ``retry_delays_s`` (growing; a retry counts no attempt) and
after those waits for the next ``resume``. ``max_attempts`` ends a task that keeps dying (a process
death mid-task spends an attempt; it then FAILS with 50301). One run of a task, by kind, is
``actors.task_runner``'s.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from engram.actors.hit_writer import HitWriter
from engram.actors.mailbox import MailboxClosedError, MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.structured_writer import StructuredWriter
from engram.actors.task_recorder import TaskRecorder
from engram.actors.task_runner import KIND_ADD, KIND_ADD_STRUCTURED, KIND_ADD_STRUCTURED_BATCH, TaskRunner
from engram.models.absent import NO_TASK, not_found
from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchAddResult,
    BatchAddStructuredRequest,
    BatchDeleteRequest,
    Decision,
    DeleteRequest,
    DeleteResult,
    MemoryCreated,
    MemoryView,
    TaskAccepted,
    TaskView,
    UpdateRequest,
)
from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.ids import new_id
from engram.models.metrics import METRICS, app_label
from engram.models.tracing import TRACING

log = logging.getLogger(__name__)

RESUMED_IDS_KEPT = 10_000
# The waits before each in-process retry of a task that failed for a passing reason: about three
# minutes in all, longer than Ray takes to restart the replicas of a lost node.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 60.0, 60.0)
T = TypeVar("T")


class WritePath:
    """Accepts writes durably and runs them, one user at a time, on that user's mailbox."""

    def __init__(
        self,
        service: MemoryService,
        host: MailboxHost | None = None,
        *,
        max_attempts: int = 5,
        resume_page: int = 1000,
        shard: int = 0,
        retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
    ) -> None:
        """``shard``: the shard this write path serves (the label of its pending-task gauge)."""
        self.service = service
        self.host = host or MailboxHost()
        self.max_attempts = max_attempts
        self.retry_delays_s = tuple(retry_delays_s)
        self._retries: dict[str, int] = {}  # task id -> in-process retries so far
        self._queued: set[str] = set()  # task ids on a mailbox here, from schedule to their run's end
        self._retry_timers: set[asyncio.TimerHandle] = set()
        self._resume_page = resume_page
        # Task kinds added by other layers (export): the handler runs on the mailbox and finishes the task.
        self.handlers: dict[str, Callable[[WriteTask], Awaitable[None]]] = {}
        self.runner = TaskRunner(service, self.handlers, max_attempts, self._spends_attempt)
        # Accepted tasks are committed in groups (an acknowledgement still waits for its commit).
        # Urgent: an acknowledgement waits for each of its commits (storage.write_gate).
        self.recorder = TaskRecorder(functools.partial(service.metadata.transaction, urgent=True))
        # add_structured tasks of all users are processed in groups (each from its user's mailbox).
        self.structured = StructuredWriter(
            service,
            max_attempts=max_attempts,
            yield_to=self.recorder.settled,
            pressure=lambda: self.recorder.waiting,
        )
        # Recall-hit bookkeeping of all users in grouped transactions (each from its user's mailbox).
        self.hits = HitWriter(service.record_recall_hit_turns)
        # The ids the last ``resume`` queued (the first RESUMED_IDS_KEPT): what a crash left unfinished.
        self.resumed_task_ids: list[str] = []
        # Tasks queued or running on the mailboxes (engram_tasks_pending).
        self.pending_tasks = 0
        self._shard_tags = {"shard": str(shard)}
        # Told the user id after each write of theirs committed (the profile refresher, L7).
        self.on_change: Callable[[str], None] | None = None

    # --- accepting ----------------------------------------------------------------------------

    async def accept_add(self, request: AddRequest) -> TaskAccepted:
        """Record the request as a PENDING task (committed), queue it and answer at once (W1)."""
        with TRACING.span("engram.task.record", {"engram.task.kind": KIND_ADD}):
            task_id = await self._record(request.user_id, KIND_ADD, request.model_dump(mode="json"))
        self.schedule(request.user_id, task_id, KIND_ADD)
        return TaskAccepted(task_id=task_id)

    async def accept_structured(self, request: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        """``sync``: store it on the mailbox and return the memory id; else accept it as a task (W6)."""
        if request.sync:
            return await self.submit_write(request.user_id, lambda: self.service.add_structured(request))
        task_id = await self._record(request.user_id, KIND_ADD_STRUCTURED, request.model_dump(mode="json"))
        self.schedule(request.user_id, task_id, KIND_ADD_STRUCTURED)
        return TaskAccepted(task_id=task_id)

    async def accept_structured_batch(
        self, request: BatchAddStructuredRequest
    ) -> BatchAddResult | TaskAccepted:
        """``sync``: store the items on the mailbox and answer each one's outcome; else one task."""
        if request.sync:
            items = request.item_requests()
            results = await self.submit_write(
                request.user_id, lambda: self.service.add_structured_batch(items)
            )
            return BatchAddResult(items=results)
        payload = request.model_dump(mode="json")
        task_id = await self._record(request.user_id, KIND_ADD_STRUCTURED_BATCH, payload)
        self.schedule(request.user_id, task_id, KIND_ADD_STRUCTURED_BATCH)
        return TaskAccepted(task_id=task_id)

    async def accept(self, user_id: str, kind: str, payload: dict[str, Any]) -> TaskAccepted:
        """Record a task of a registered ``kind`` durably, queue it on the user's mailbox, answer at once."""
        if kind not in self.handlers:
            raise ValueError(f"no handler for task kind {kind!r}")
        task_id = await self._record(user_id, kind, payload)
        self.schedule(user_id, task_id, kind)
        return TaskAccepted(task_id=task_id)

    def schedule(self, user_id: str, task_id: str, kind: str) -> None:
        """Queue a recorded task on its user's mailbox (also the entry for tasks recorded elsewhere)."""
        work = self._process_structured if kind == KIND_ADD_STRUCTURED else self._process
        # The trace of the request that accepted the task goes with it onto the mailbox (tracing on).
        accepted_in = TRACING.captured()
        queued_ns = time.time_ns()

        async def traced_work() -> bool:
            with TRACING.within(accepted_in):
                kind_tag = {"engram.task.kind": kind}
                with TRACING.span("engram.task.mailbox_wait", kind_tag, start_ns=queued_ns):
                    pass
                with TRACING.span("engram.task.run", kind_tag):
                    return await work(task_id)

        async def run() -> None:
            try:
                passing_failure = await (traced_work() if accepted_in is not None else work(task_id))
            except ConnectionAbortedError:
                raise  # the write path stopped: the next start resumes the task
            except Exception as exc:
                # The store refused the task's start or its end (a writer waited past the write
                # gate's limit on a busy machine): the row is unfinished, so it is tried again.
                log.warning("a %s task of user %s could not run: %s", kind, user_id, type(exc).__name__)
                passing_failure = True
            finally:
                self._count_pending(-1)
                self._queued.discard(task_id)
                self.changed(user_id)
            if passing_failure:
                await self._retry_later(user_id, task_id, kind)
            else:
                self._retries.pop(task_id, None)

        self._count_pending(+1)
        self._queued.add(task_id)
        try:
            self.host.submit_nowait(user_id, run)
        except MailboxClosedError:
            self._count_pending(-1)
            self._queued.discard(task_id)
            # The task is committed, so it is not lost: the next start's resume() picks it up.
            log.info("a write task of kind %s recorded while shutting down resumes on the next start", kind)

    async def submit_write(self, user_id: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run a write on the user's mailbox and answer its result; ``on_change`` hears of it."""
        try:
            return await self.host.submit(user_id, work)
        finally:
            self.changed(user_id)

    def changed(self, user_id: str) -> None:
        """Tell ``on_change`` that a write of ``user_id`` ended (a failed one too: it is cheap)."""
        if self.on_change is not None:
            self.on_change(user_id)

    def _count_pending(self, delta: int) -> None:
        self.pending_tasks += delta
        METRICS.tasks_pending.set(self.pending_tasks, dict(self._shard_tags))

    async def _record(self, user_id: str, kind: str, payload: dict[str, Any]) -> str:
        started = time.perf_counter()
        now = self.service.clock()
        task = WriteTask(
            task_id=new_id(),
            user_id=user_id,
            kind=kind,
            status=TaskStatus.PENDING,
            payload=payload,
            created_at=now,
            updated_at=now,
        )
        await self.recorder.record(task)
        app = app_label(self.service.settings.metrics, payload.get("app_id"))
        METRICS.write_ack.observe((time.perf_counter() - started) * 1000, {"kind": kind, "app": app})
        return task.task_id

    # --- processing (always on the task's user mailbox) ---------------------------------------

    async def _process(self, task_id: str) -> bool:
        """Run the task; True when it is left unfinished by a passing failure (to retry)."""
        return await self.runner.run(task_id)

    def _spends_attempt(self, task_id: str) -> bool:
        """Whether running ``task_id`` now counts an attempt: not for an in-process retry."""
        return task_id not in self._retries

    async def _process_structured(self, task_id: str) -> bool:
        try:
            await self.structured.run(task_id, spend_attempt=self._spends_attempt(task_id))
        except ConnectionAbortedError:
            return False  # the write path stopped: the next start resumes it
        except Exception as exc:
            log.warning("a structured write task left unfinished: %s", type(exc).__name__)
            return True
        return False

    async def _retry_later(self, user_id: str, task_id: str, kind: str) -> None:
        """Queue the task again after its next wait (``retry_delays_s``), as a retry that counts no
        attempt; past the last wait it is left for the next ``rescan`` or ``resume``."""
        done = self._retries.get(task_id, 0)
        if done >= len(self.retry_delays_s) or self.host.closed:
            self._retries.pop(task_id, None)
            log.warning("a %s task of user %s left unfinished for the next rescan", kind, user_id)
            return
        # The retry spends no attempt (``_spends_attempt``): no write here, so a store that refuses
        # writes on a busy machine cannot turn passing failures into a crash loop's FAILED.
        self._retries[task_id] = done + 1

        def retry() -> None:
            self._retry_timers.discard(timer)
            self.schedule(user_id, task_id, kind)

        timer = asyncio.get_running_loop().call_later(self.retry_delays_s[done], retry)
        self._retry_timers.add(timer)

    def _cancel_retries(self) -> None:
        # Each task waiting for a retry is a committed, unfinished row: the next start resumes it.
        for timer in self._retry_timers:
            timer.cancel()
        self._retry_timers.clear()
        self._retries.clear()

    # --- reading tasks ------------------------------------------------------------------------

    async def task(self, task_id: str, user_id: str | None = None) -> TaskView:
        """The state of an accepted write (W2); 40401 when the id is unknown (or not ``user_id``'s)."""
        async with self.service.metadata.transaction(readonly=True) as tx:
            task = await tx.tasks.get(task_id, with_payload=False)
        if task is None or (user_id is not None and task.user_id != user_id):
            raise not_found(NO_TASK, task_id)
        return TaskView(
            task_id=task.task_id,
            status=task.status,
            decisions=[Decision.model_validate(d) for d in task.decisions],
            error=task.error,
            accepted_at=task.created_at,
            finished_at=task.updated_at if task.status in (TaskStatus.DONE, TaskStatus.FAILED) else None,
        )

    # --- other writes of a user, on their mailbox ---------------------------------------------

    async def update(self, request: UpdateRequest) -> MemoryView:
        """``update`` (M1), serialized with the user's other writes."""
        return await self.submit_write(request.user_id, lambda: self.service.update(request))

    async def delete(self, request: DeleteRequest) -> DeleteResult:
        """``delete`` (M2), serialized with the user's other writes."""
        return await self.submit_write(request.user_id, lambda: self.service.delete(request))

    async def batch_delete(self, request: BatchDeleteRequest) -> DeleteResult:
        """``batch_delete`` (M2), serialized with the user's other writes."""
        return await self.submit_write(request.user_id, lambda: self.service.batch_delete(request))

    def record_recall_hits(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Queue recall-hit bookkeeping (R4) on the user's mailbox; never blocks the recall."""
        ids = list(memory_ids)
        self.host.submit_nowait(user_id, lambda: self.hits.record(user_id, ids, at))

    # --- recovery and shutdown ----------------------------------------------------------------

    async def resume(self, owns: Callable[[str], bool] | None = None) -> int:
        """Re-queue every unfinished task (of the users ``owns`` accepts); returns how many."""
        queued = 0
        self.resumed_task_ids = []
        after: tuple[datetime, str] | None = None
        while True:
            async with self.service.metadata.transaction() as tx:
                page = await tx.tasks.unfinished(self._resume_page, after=after)
            for task in page:
                if owns is None or owns(task.user_id):
                    self.schedule(task.user_id, task.task_id, task.kind)
                    queued += 1
                    if len(self.resumed_task_ids) < RESUMED_IDS_KEPT:
                        self.resumed_task_ids.append(task.task_id)
            if len(page) < self._resume_page:
                break
            after = (page[-1].created_at, page[-1].task_id)
        log.info("resumed %d unfinished write tasks", queued)
        return queued

    async def rescan(self, owns: Callable[[str], bool] | None = None, settle_s: float = 10.0) -> int:
        """Queue every unfinished task (of the users ``owns`` accepts) that no mailbox here holds and
        no retry waits for, created over ``settle_s`` ago; returns how many. What this finds was
        acknowledged and then missed: by an incarnation of the shard that was already replaced when
        it acknowledged (a lost node), or left past its last in-process retry."""
        before = self.service.clock() - timedelta(seconds=settle_s)
        queued = 0
        after: tuple[datetime, str] | None = None
        while True:
            async with self.service.metadata.transaction() as tx:
                page = await tx.tasks.unfinished_refs(before, self._resume_page, after=after)
            for ref in page:
                known = ref.task_id in self._queued or ref.task_id in self._retries
                if not known and (owns is None or owns(ref.user_id)):
                    self.schedule(ref.user_id, ref.task_id, ref.kind)
                    queued += 1
            if len(page) < self._resume_page:
                break
            after = (page[-1].created_at, page[-1].task_id)
        if queued:
            log.warning("re-queued %d unfinished write tasks that no mailbox held", queued)
        return queued

    async def drain(self) -> None:
        """Wait until every queued write and the service's background bookkeeping have finished."""
        await self.recorder.idle()
        await self.host.drain()
        await self.service.drain()

    async def close(self) -> None:
        """Finish queued work and stop the mailboxes (the service's stores stay open)."""
        self._cancel_retries()
        await self.recorder.idle()
        await self.host.close()
        await self.service.drain()

    async def abandon(self) -> None:
        """Stop the mailboxes now, work in progress included (shutdown past its grace): every
        accepted task is a committed row, so what is dropped here resumes on the next start."""
        self._cancel_retries()
        dropped = await self.host.abort()
        log.info("write path stopped with %d queued items left for the next start", dropped)
