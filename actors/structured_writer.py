"""Asynchronous ``add_structured`` tasks of all users, processed in groups (#11).

Each task still runs from its user's mailbox (per-user order holds: a mailbox waits for its task
before taking the next), but the work of every task handed in while a group is being written goes
into the next group: one transaction that starts them all, one embedding call, one transaction
that stores every user's memories (bulk where the limits leave room, ``stage_structured``) and
marks each task DONE with them (a task's effect and its DONE commit together; a refused one,
42901 or 42902, writes nothing and ends FAILED), then the vectors. While acknowledgements wait for
SQLite's write lock, that transaction is cut into parts of about ``STAGE_BUDGET_S`` (whole users
each), so an acknowledgement never waits for a whole group. A group whose transaction fails is
retried one task at a time (tasks of parts already committed are skipped); a task that fails
alone stays unfinished for the next ``resume``, as every write task does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from pydantic import ValidationError

from engram.actors.group_commit import settle
from engram.actors.memory_service import MemoryService
from engram.actors.sensitive import screened_request
from engram.actors.structured_writes import StagedMemories
from engram.models.api import AddStructuredRequest, BatchItemResult, Decision
from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS
from engram.storage.repositories.tasks import TaskOutcome

log = logging.getLogger(__name__)

REASON = "add_structured"
# How long one transaction of a group stages memories while acknowledgements wait for the write
# lock (#11). A whole group (up to 128 tasks) held it for ~100 ms: at 50 writes/s offered the
# shard's own ack p99 was 109 ms in one process; with 10 ms transactions it is 37 ms.
STAGE_BUDGET_S = 0.01


class _AlreadyFinishedError(Exception):
    """Another finisher ended the task first: undo this run of it."""


@dataclass
class _Item:
    task_id: str
    done: asyncio.Future[None]
    spend_attempt: bool = True
    request: AddStructuredRequest | None = None


class StructuredWriter:
    """Runs ``add_structured`` tasks in groups; ``run`` returns once its task is finished or left."""

    def __init__(
        self,
        service: MemoryService,
        *,
        max_attempts: int,
        max_group: int = 128,
        clock: Callable[[], datetime] | None = None,
        yield_to: Callable[[], Awaitable[None]] | None = None,
        pressure: Callable[[], bool] | None = None,
        stage_budget_s: float = STAGE_BUDGET_S,
    ) -> None:
        """``pressure``: whether acknowledgements are waiting now (``TaskRecorder.waiting``)."""
        self.service = service
        self._pressure = pressure
        self.stage_budget_s = stage_budget_s
        # Awaited before each write transaction: acknowledgements waiting for their commit go
        # first, so an ack never queues behind a group for SQLite's one write lock.
        self._yield_to = yield_to
        self.max_attempts = max_attempts
        self.max_group = max_group
        self._clock = clock or service.clock
        self._queue: list[_Item] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0
        self.commits = 0
        self.tasks = 0

    async def run(self, task_id: str, *, spend_attempt: bool = True) -> None:
        """Process the task (from its user's mailbox); raises what its own processing raised.
        ``spend_attempt=False``: an in-process retry (``TaskRepository.start``)."""
        item = _Item(task_id, asyncio.get_running_loop().create_future(), spend_attempt)
        self._queue.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        await asyncio.shield(item.done)

    def stats(self) -> dict[str, int]:
        """Groups written and tasks processed (counts only)."""
        return {
            "structured_groups": self.groups,
            "structured_commits": self.commits,
            "structured_tasks": self.tasks,
        }

    async def _write(self) -> None:
        group: list[_Item] = []
        try:
            while self._queue:
                group, self._queue = self._queue[: self.max_group], self._queue[self.max_group :]
                try:
                    await self._group(group)
                except Exception as exc:
                    if len(group) == 1:
                        settle(group[0].done, exc)
                        continue
                    log.warning(
                        "a group of %d structured tasks failed (%s); one by one",
                        len(group),
                        type(exc).__name__,
                    )
                    for item in group:
                        try:
                            await self._group([item])
                        except Exception as alone:
                            settle(item.done, alone)
                for item in group:
                    settle(item.done, None)
        finally:
            waiting, self._queue = [*group, *self._queue], []
            for item in waiting:
                settle(item.done, ConnectionAbortedError("the write path stopped; the task resumes later"))

    async def _group(self, group: Sequence[_Item]) -> None:
        now = self._clock()
        if self._yield_to is not None:
            await self._yield_to()
        failed: dict[str, tuple[str, str]] = {}  # task id -> (user id, error)
        runnable: list[_Item] = []
        async with self.service.metadata.transaction() as tx:
            ids = [item.task_id for item in group]
            tasks = await tx.tasks.get_many(ids)
            spending = [item.task_id for item in group if item.spend_attempt]
            started = await tx.tasks.start_many(ids, now, spending=spending)
            for item in group:
                task, attempts = tasks.get(item.task_id), started[item.task_id]
                if task is None or attempts == 0:
                    continue  # unknown, or already DONE / FAILED: a replay changes nothing
                if attempts > self.max_attempts:
                    code = ErrorCode.DEPENDENCY_UNAVAILABLE.value
                    failed[item.task_id] = (task.user_id, f"{code} gave up after {attempts - 1} attempts")
                    continue
                try:
                    request = AddStructuredRequest.model_validate(task.payload)
                except ValidationError:
                    code = ErrorCode.BAD_PARAMETER.value
                    failed[item.task_id] = (task.user_id, f"{code} the task's payload cannot be read")
                    continue
                try:
                    # Secrets and PII redacted before hashing and embedding (P5).
                    item.request = screened_request(request, self.service.settings.privacy.sensitive)
                except EngramError as exc:
                    failed[item.task_id] = (task.user_id, f"{exc.code.value} {exc.message}")
                    continue
                runnable.append(item)
        by_user: dict[str, list[_Item]] = {}
        for item in runnable:
            assert item.request is not None
            by_user.setdefault(item.request.user_id, []).append(item)
        # One embedding call for the group; each user's items in their order.
        ordered = [item for items in by_user.values() for item in items]
        texts = [item.request.content for item in ordered if item.request is not None]
        vectors = await self.service.embedder.embed(texts) if texts else None
        row_of = {id(item): row for row, item in enumerate(ordered)}
        if self._yield_to is not None:
            await self._yield_to()
        # Under waiting acknowledgements the users' memories commit in several transactions of
        # about STAGE_BUDGET_S each (a user's items always in one): the write lock is never held
        # long enough to queue an acknowledgement behind a whole group. Otherwise one transaction.
        remaining = list(by_user.items())
        await self._commit_users(remaining, list(failed.items()), tasks, now, vectors, row_of)
        while remaining:
            if self._yield_to is not None:
                await self._yield_to()
            await self._commit_users(remaining, [], tasks, now, vectors, row_of)
        self.groups += 1
        self.tasks += len(group)

    async def _commit_users(
        self,
        remaining: list[tuple[str, list[_Item]]],
        failed: list[tuple[str, tuple[str, str]]],
        tasks: Mapping[str, WriteTask],
        now: datetime,
        vectors: np.ndarray | None,
        row_of: Mapping[int, int],
    ) -> None:
        """Stage users from the front of ``remaining`` (taking them off it) and finish their tasks,
        with ``failed`` ones, in one transaction; then write their vectors."""
        staged_all: list[tuple[StagedMemories, list[int]]] = []
        async with self.service.metadata.transaction() as tx:
            await tx.keys.prefetch(user_id for user_id, _ in remaining)
            outcomes = [
                TaskOutcome(task_id, user_id, TaskStatus.FAILED, None, error)
                for task_id, (user_id, error) in failed
            ]
            began = time.perf_counter()
            while remaining:
                _, items = remaining.pop(0)
                requests = [item.request for item in items if item.request is not None]
                staged = await self.service.stage_structured(tx, requests, now)
                outcomes += [
                    _outcome(item.task_id, request, result)
                    for item, request, result in zip(items, requests, staged.results, strict=True)
                ]
                staged_all.append((staged, [row_of[id(item)] for item in items]))
                pressed = self._pressure is not None and self._pressure()
                if pressed and time.perf_counter() - began >= self.stage_budget_s:
                    break
            ending = [o.task_id for o in outcomes]
            if await tx.tasks.unfinished_among(ending) != set(ending):
                # Another finisher ended one meanwhile: undo the group; retried one by one, it is skipped.
                raise _AlreadyFinishedError("a task of the group was finished elsewhere")
            # Stamped with the moment they end, not the group's start (a task's finished_at).
            await tx.tasks.finish_many(outcomes, self._clock())
        self.commits += 1
        ended = self._clock()
        for outcome in outcomes:
            if (task := tasks.get(outcome.task_id)) is not None:
                METRICS.task_ended(task.kind, outcome.status, task.created_at, ended)
        if vectors is not None and staged_all:
            # Right after their commit: a later transaction of the group that fails leaves these
            # tasks DONE, and their retry skips them.
            await self.service.write_vectors(
                [b for b, _ in staged_all], [vectors[rows] for _, rows in staged_all]
            )


def _outcome(task_id: str, request: AddStructuredRequest, result: BatchItemResult) -> TaskOutcome:
    if result.code:
        return TaskOutcome(task_id, request.user_id, TaskStatus.FAILED, None, f"{result.code} {result.msg}")
    decision = Decision(op="ADD", memory_id=result.memory_id, content=request.content, reason=REASON)
    return TaskOutcome(task_id, request.user_id, TaskStatus.DONE, [decision.model_dump(mode="json")], None)
