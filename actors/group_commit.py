"""Group commit: what callers hand in while one group is written goes into the next (#11).

There is no window to wait out: under light load a group is one item, under load it is what
queued meanwhile. A caller returns once its own item is written. A group whose write fails is
written again one item at a time, so a bad item fails alone and nothing is half-written; items
are written, and their callers resumed, in the order they came. The task recorder (accepted
writes) and the hit writer (recall-hit bookkeeping) are two uses of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupCommit(Generic[T]):
    """Writes handed-in items in groups with ``write``; ``submit`` returns once its item is written."""

    def __init__(self, write: Callable[[Sequence[T]], Awaitable[None]], *, what: str, max_group: int) -> None:
        """``what``: the items' name in the log line of a failed group."""
        self._write_group = write
        self._what = what
        self._max_group = max_group
        self._queue: list[tuple[T, asyncio.Future[None]]] = []
        self._inflight: list[tuple[T, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0
        self.items = 0

    async def submit(self, item: T) -> None:
        """Write ``item`` (with whatever else is waiting); raises what writing it alone raised."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        # Shielded: a caller that goes away does not cancel the write of the others' items.
        await asyncio.shield(done)

    async def idle(self) -> None:
        """Wait until every item handed in has been written or refused."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def settled(self) -> None:
        """Wait for the items handed in so far (not for those that come later)."""
        waiting = [done for _, done in (*self._inflight, *self._queue)]
        if waiting:
            await asyncio.wait(waiting)

    @property
    def waiting(self) -> bool:
        """Whether any item handed in is waiting for its write now."""
        return bool(self._queue) or any(not done.done() for _, done in self._inflight)

    async def _write(self) -> None:
        group: list[tuple[T, asyncio.Future[None]]] = []
        try:
            while self._queue:
                group, self._queue = self._queue[: self._max_group], self._queue[self._max_group :]
                self._inflight = group
                try:
                    await self._write_group([item for item, _ in group])
                except Exception as exc:
                    log.warning(
                        "group commit of %d %s failed (%s); writing them one by one",
                        len(group),
                        self._what,
                        type(exc).__name__,
                    )
                    await self._one_by_one(group)
                    continue
                self._count(len(group))
                for _, done in group:
                    settle(done, None)
        finally:
            # Cancelled (the loop is closing): nobody waits forever; an unanswered caller's item
            # was never acknowledged, whether or not it was written.
            waiting, self._queue = [*group, *self._queue], []
            for _, done in waiting:
                settle(done, ConnectionAbortedError(f"stopped before the {self._what} were written"))

    async def _one_by_one(self, group: Sequence[tuple[T, asyncio.Future[None]]]) -> None:
        for item, done in group:
            try:
                await self._write_group([item])
            except Exception as exc:
                settle(done, exc)
                continue
            self._count(1)
            settle(done, None)

    def _count(self, items: int) -> None:
        self.groups += 1
        self.items += items


def settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    """Answer a waiting caller once: its result, or the error its work raised."""
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
