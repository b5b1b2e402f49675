"""One SQLite write transaction at a time in this process, handed over in order, acks first (#11).

SQLite has one write lock. Left to itself, a writer that finds it taken sleeps in SQLite's busy
handler (1, 2, 5 ... 100 ms between tries) and may lose the race again when it wakes: under the
shard's mixed load a ``BEGIN IMMEDIATE`` waited up to 2.3 s, an acknowledgement's commit up to
0.4 s, while the lock itself was held for a few milliseconds at a time. Queued here instead, the
next writer starts the moment the previous one commits. A writer marked ``urgent`` (the commit an
acknowledgement waits for) goes ahead of the others, but never twice in a row while another
waits, so the processing behind the acknowledgements is never starved. The busy handler still
arbitrates between processes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class WriteGateTimeoutError(TimeoutError):
    """A writer waited longer than the gate's limit (as SQLite's busy timeout would have failed)."""


class WriteGate:
    """An asyncio lock with two queues: ``urgent`` waiters first, alternating while both wait."""

    def __init__(self, limit_s: float | None = None) -> None:
        """``limit_s``: the longest a writer waits (None: no limit)."""
        self._limit_s = limit_s
        self._held = False
        self._last_urgent = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._normal: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Writers queued now."""
        return sum(not f.done() for f in (*self._urgent, *self._normal))

    @asynccontextmanager
    async def held(self, *, urgent: bool = False) -> AsyncIterator[None]:
        """Hold the gate for the block."""
        await self._acquire(urgent)
        self._last_urgent = urgent
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, urgent: bool) -> None:
        # Free means nobody waits: a release with writers queued hands the gate straight on.
        if not self._held:
            self._held = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._urgent if urgent else self._normal).append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self._limit_s)
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._release()  # handed the gate as this waiter gave up: pass it on
            else:
                turn.cancel()
            if isinstance(exc, TimeoutError):
                raise WriteGateTimeoutError(
                    f"waited over {self._limit_s:g} s for this process's SQLite write turn"
                ) from None
            raise

    def _release(self) -> None:
        # Urgent first, unless the gate just served an urgent writer and others wait.
        queues = (self._normal, self._urgent) if self._last_urgent else (self._urgent, self._normal)
        for queue in queues:
            while queue:
                turn = queue.popleft()
                if not turn.done():
                    turn.set_result(None)  # the gate stays held: ownership passes to that waiter
                    return
        self._held = False
