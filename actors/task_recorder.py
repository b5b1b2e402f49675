"""Group commit of accepted writes (#11): the tasks accepted while one commit runs go in the next.

An acknowledgement leaves only once its task's row is committed. Many concurrent accepts used to
mean as many write transactions queueing for SQLite's single write lock (and for the connection
pool); now one writer commits everything that arrived during the previous commit. There is no
window to wait out: under light load a group is one task, under load it is what queued meanwhile.
A group whose commit fails is retried one task at a time, so a bad task fails alone and nothing is
half-written. Order is kept: tasks are committed, and their callers resumed, in arrival order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from engram.models.domain import WriteTask

log = logging.getLogger(__name__)


class TaskInserter(Protocol):
    """The part of a metadata transaction the recorder uses."""

    async def insert_tasks(self, tasks: Sequence[WriteTask]) -> None:
        """Insert the task rows."""
        ...


Transaction = Callable[[], AbstractAsyncContextManager[TaskInserter]]


class TaskRecorder:
    """Commits accepted tasks in groups; ``record`` returns once its task is durable."""

    def __init__(self, transaction: Transaction, *, max_group: int = 256) -> None:
        self._transaction = transaction
        self._max_group = max_group
        self._queue: list[tuple[WriteTask, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._inflight: list[tuple[WriteTask, asyncio.Future[None]]] = []
        self.groups = 0
        self.recorded = 0

    async def record(self, task: WriteTask) -> None:
        """Commit ``task`` (with whatever else is waiting); raises what its own insert raised."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((task, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        # Shielded: a caller that goes away does not cancel the commit of the others' tasks.
        await asyncio.shield(done)

    async def idle(self) -> None:
        """Wait until every task handed to ``record`` has been committed or refused."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def settled(self) -> None:
        """Wait for the tasks handed in so far (not for those that come later): what another
        writer awaits before taking SQLite's write lock, so acknowledgements go first without
        starving it under a steady stream of them."""
        waiting = [done for _, done in (*self._inflight, *self._queue)]
        if waiting:
            await asyncio.wait(waiting)

    @property
    def waiting(self) -> bool:
        """Whether any accepted task is waiting for its commit now."""
        return bool(self._queue) or any(not done.done() for _, done in self._inflight)

    def stats(self) -> dict[str, int]:
        """Groups committed and tasks recorded (counts only)."""
        return {"groups": self.groups, "recorded": self.recorded}

    async def _write(self) -> None:
        group: list[tuple[WriteTask, asyncio.Future[None]]] = []
        try:
            while self._queue:
                group, self._queue = self._queue[: self._max_group], self._queue[self._max_group :]
                self._inflight = group
                try:
                    await self._commit([task for task, _ in group])
                except Exception as exc:
                    log.warning(
                        "group commit of %d tasks failed (%s); committing them one by one",
                        len(group),
                        type(exc).__name__,
                    )
                    await self._one_by_one(group)
                    continue
                self.groups += 1
                self.recorded += len(group)
                for _, done in group:
                    settle(done, None)
        finally:
            # Cancelled (the loop is closing): nobody waits forever; an unanswered accept was
            # never acknowledged, whether or not its row made it.
            waiting, self._queue = [*group, *self._queue], []
            for _, done in waiting:
                settle(done, ConnectionAbortedError("the write path stopped before the task was recorded"))

    async def _commit(self, tasks: Sequence[WriteTask]) -> None:
        async with self._transaction() as tx:
            await tx.insert_tasks(tasks)

    async def _one_by_one(self, group: Sequence[tuple[WriteTask, asyncio.Future[None]]]) -> None:
        for task, done in group:
            try:
                await self._commit([task])
            except Exception as exc:
                settle(done, exc)
                continue
            self.groups += 1
            self.recorded += 1
            settle(done, None)


def settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    """Answer a waiting caller once: its result, or the error its work raised."""
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
