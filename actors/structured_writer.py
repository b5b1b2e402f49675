"""Asynchronous ``add_structured`` tasks of all users, processed in groups (#11).

Each task still runs from its user's mailbox (per-user order holds: a mailbox waits for its task
before taking the next), but the work of every task handed in while a group is being written goes
into the next group: one transaction that starts them all, one embedding call, one transaction
that stores every memory and marks its task DONE in the same savepoint (a task's effect and its
DONE stay atomic; a refused one, 42901 or 42902, is rolled back alone and ends FAILED), one vector
upsert. A group whose transaction fails is retried one task at a time; a task that fails alone
stays unfinished for the next ``resume``, as every write task does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from pydantic import ValidationError

from engram.actors.memory_service import MemoryService
from engram.models.api import AddStructuredRequest, Decision
from engram.models.domain import Memory
from engram.models.enums import TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.storage.metadata import MetadataTx
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)

REASON = "add_structured"


class _AlreadyFinishedError(Exception):
    """Another finisher ended the task first: undo this run of it."""


@dataclass
class _Item:
    task_id: str
    done: asyncio.Future[None]
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
    ) -> None:
        self.service = service
        self.max_attempts = max_attempts
        self.max_group = max_group
        self._clock = clock or service.clock
        self._queue: list[_Item] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0
        self.tasks = 0

    async def run(self, task_id: str) -> None:
        """Process the task (from its user's mailbox); raises what its own processing raised."""
        item = _Item(task_id, asyncio.get_running_loop().create_future())
        self._queue.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        await asyncio.shield(item.done)

    def stats(self) -> dict[str, int]:
        """Groups written and tasks processed (counts only)."""
        return {"structured_groups": self.groups, "structured_tasks": self.tasks}

    async def _write(self) -> None:
        group: list[_Item] = []
        try:
            while self._queue:
                group, self._queue = self._queue[: self.max_group], self._queue[self.max_group :]
                try:
                    await self._group(group)
                except Exception as exc:
                    if len(group) == 1:
                        _settle(group[0].done, exc)
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
                            _settle(item.done, alone)
                for item in group:
                    _settle(item.done, None)
        finally:
            waiting, self._queue = [*group, *self._queue], []
            for item in waiting:
                _settle(item.done, ConnectionAbortedError("the write path stopped; the task resumes later"))

    async def _group(self, group: Sequence[_Item]) -> None:
        now = self._clock()
        failed: dict[str, str] = {}
        runnable: list[_Item] = []
        async with self.service.metadata.transaction() as tx:
            for item in group:
                task = await tx.get_task(item.task_id)
                attempts = await tx.start_task(item.task_id, now) if task is not None else 0
                if task is None or attempts == 0:
                    continue  # unknown, or already DONE / FAILED: a replay changes nothing
                if attempts > self.max_attempts:
                    failed[item.task_id] = (
                        f"{ErrorCode.DEPENDENCY_UNAVAILABLE.value} gave up after {attempts - 1} attempts"
                    )
                    continue
                try:
                    item.request = AddStructuredRequest.model_validate(task.payload)
                except ValidationError:
                    failed[item.task_id] = (
                        f"{ErrorCode.BAD_PARAMETER.value} the task's payload cannot be read"
                    )
                    continue
                runnable.append(item)
        requests = [item.request for item in runnable if item.request is not None]
        vectors = list(await self.service.embedder.embed([r.content for r in requests])) if requests else []
        stored: list[tuple[Memory, np.ndarray]] = []
        evicted: list[str] = []
        users: set[str] = set()
        async with self.service.metadata.transaction() as tx:
            # Users' keys first, outside every savepoint: a key made inside one that rolls back
            # would stay cached and seal the user's later items with a key never stored.
            for user_id in sorted({r.user_id for r in requests}):
                await tx.cipher(user_id)
            for task_id, error in failed.items():
                await tx.finish_task(task_id, TaskStatus.FAILED, decisions=None, error=error, at=now)
            for item, request, vector in zip(runnable, requests, vectors, strict=True):
                try:
                    async with tx.savepoint():
                        memory_id, memory, gone = await self.service.admit_structured(tx, request, now)
                        await _finish(tx, item.task_id, request, memory_id, now)
                except EngramError as exc:
                    await tx.finish_task(
                        item.task_id,
                        TaskStatus.FAILED,
                        decisions=None,
                        error=f"{exc.code.value} {exc.message}",
                        at=now,
                    )
                    continue
                except _AlreadyFinishedError:
                    continue
                evicted.extend(gone)
                if memory is not None:
                    stored.append((memory, vector))
                    users.add(memory.user_id)
            for user_id in sorted(users):
                await tx.bump_version(user_id)
        if evicted:
            await self.service.vectors.delete(evicted)
        gone_ids = set(evicted)
        records = [vector_record(m, v) for m, v in stored if m.memory_id not in gone_ids]
        if records:
            await self.service.vectors.upsert(records)
        self.groups += 1
        self.tasks += len(group)


async def _finish(
    tx: MetadataTx, task_id: str, request: AddStructuredRequest, memory_id: str, at: datetime
) -> None:
    decision = Decision(op="ADD", memory_id=memory_id, content=request.content, reason=REASON)
    finished = await tx.finish_task(
        task_id, TaskStatus.DONE, decisions=[decision.model_dump(mode="json")], error=None, at=at
    )
    if not finished:
        raise _AlreadyFinishedError


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
