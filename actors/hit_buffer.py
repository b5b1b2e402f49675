"""Recall-hit bookkeeping (R4) collected in a recall process and sent on in batches.

A recall answers first and counts its hits afterwards; sending each recall's hits as a message of
its own cost a remote call per recall on the busiest path. The buffer sends at most one batch per
``flush_after_s`` (or sooner when ``max_batch`` hits are waiting). Hits still buffered when the
process dies are lost: they only move weights, never content.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecallHits:
    """The memories one recall returned to one user, at the time it answered."""

    user_id: str
    memory_ids: tuple[str, ...]
    at: datetime


class HitBuffer:
    """Collects ``RecallHits`` and hands them to ``send`` in batches, in arrival order."""

    def __init__(
        self,
        send: Callable[[list[RecallHits]], Awaitable[None]],
        *,
        flush_after_s: float,
        max_batch: int,
    ) -> None:
        self._send = send
        self._flush_after_s = flush_after_s
        self._max_batch = max_batch
        self._pending: list[RecallHits] = []
        self._timer: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def add(self, user_id: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Queue one recall's hits; never waits."""
        if not memory_ids:
            return
        self._pending.append(RecallHits(user_id, tuple(memory_ids), at))
        if len(self._pending) >= self._max_batch:
            self._start(self._flush_now())
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._flush_later())

    @property
    def pending(self) -> int:
        """Hits waiting to be sent."""
        return len(self._pending)

    async def flush(self) -> None:
        """Send everything queued now and wait for every batch in flight."""
        await self._flush_now()
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    def _start(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_after_s)
        self._timer = None
        await self._flush_now()

    async def _flush_now(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            await self._send(batch)
        except Exception as exc:  # bookkeeping must never fail a recall
            log.warning("dropped %d recall hits: sending failed (%s)", len(batch), type(exc).__name__)
