"""Recall-hit bookkeeping (R4) of many users in one transaction (#11).

At 60 recalls/s every recall's hits were a transaction of their own on the user's mailbox: ~40%
of a core in the shard, beside the writes whose acknowledgements waited for it. Each user's
bookkeeping still runs from that user's mailbox turn (the turn waits for it, so per-user order
holds), but every turn handed in while one transaction is written goes into the next one. A group
whose transaction fails is retried one user at a time, so one bad row fails alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.actors.task_recorder import settle

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HitTurn:
    """One user's hits of one recall-hit message (one mailbox turn)."""

    user_id: str
    memory_ids: list[str]
    at: datetime


_Waiting = tuple[HitTurn, asyncio.Future[None]]


# Writes the turns in one transaction (MemoryService.record_recall_hit_groups).
GroupWrite = Callable[[Sequence[HitTurn]], Awaitable[None]]


class HitWriter:
    """Commits the recall hits of many users' mailbox turns together; ``record`` returns once its
    own are committed (or raises what writing them alone raised)."""

    def __init__(self, write: GroupWrite, *, max_group: int = 256) -> None:
        self._write_group = write
        self._max_group = max_group
        self._queue: list[_Waiting] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0
        self.turns = 0

    async def record(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Store this user's hits with whatever other turns are waiting (called on their mailbox)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((HitTurn(user_id, list(memory_ids), at), done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        # Shielded: a turn that goes away does not cancel the commit of the others' hits.
        await asyncio.shield(done)

    def stats(self) -> dict[str, int]:
        """Transactions written and mailbox turns they held (counts only)."""
        return {"hit_groups": self.groups, "hit_turns": self.turns}

    async def _write(self) -> None:
        group: list[_Waiting] = []
        try:
            while self._queue:
                group, self._queue = self._queue[: self._max_group], self._queue[self._max_group :]
                try:
                    await self._write_group([turn for turn, _ in group])
                    self._count(len(group))
                except Exception as exc:
                    if len(group) > 1:
                        log.warning(
                            "recall hits of %d turns failed together (%s); one by one",
                            len(group),
                            type(exc).__name__,
                        )
                        await self._one_by_one(group)
                        continue
                    settle(group[0][1], exc)
                    continue
                for _, done in group:
                    settle(done, None)
        finally:
            waiting, self._queue = [*group, *self._queue], []
            for _, done in waiting:
                settle(done, ConnectionAbortedError("the write path stopped before the hits were stored"))

    async def _one_by_one(self, group: Sequence[_Waiting]) -> None:
        for turn, done in group:
            try:
                await self._write_group([turn])
            except Exception as exc:
                settle(done, exc)
                continue
            self._count(1)
            settle(done, None)

    def _count(self, turns: int) -> None:
        self.groups += 1
        self.turns += turns
