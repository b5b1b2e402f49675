"""Per-user virtual actors (DESIGN decision 1) as plain asyncio: one mailbox per active user.

A mailbox is a FIFO queue drained by exactly one consumer task, so one user's work never overlaps
and runs in the order it was submitted, while different users' mailboxes run concurrently. That
single consumer is the whole serialisation mechanism: nothing here (or in the write path) locks.
An idle mailbox is passivated (its consumer ends, the mailbox is dropped) and re-created on the
next submit; user state lives in the stores, so re-activation needs nothing but a new queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

Work = Callable[[], Awaitable[Any]]


class MailboxClosedError(RuntimeError):
    """Work was submitted to a host that is closing or closed."""


@dataclass(eq=False, slots=True)
class _Item:
    work: Work
    # None for fire-and-forget work: its failure is logged, not returned.
    reply: asyncio.Future[Any] | None


@dataclass(eq=False, slots=True)
class _Mailbox:
    user_id: str
    queue: asyncio.Queue[_Item | None]
    last_used: float
    # Submitted and not yet finished (queued or running); 0 means the consumer waits on an empty queue.
    pending: int = 0
    consumer: asyncio.Task[None] | None = None


class MailboxHost:
    """Hosts the mailboxes of many users on one event loop (one shard's user actors)."""

    def __init__(
        self,
        *,
        idle_s: float = 300.0,
        reap_every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_passivate: Callable[[str], None] | None = None,
    ) -> None:
        """``idle_s``: idle time before passivation; ``reap_every_s``: period of the automatic
        passivation pass (default ``idle_s``; 0 disables it, leaving ``passivate_idle`` to the owner);
        ``on_passivate`` is called with each passivated user id (metrics, tests)."""
        self.idle_s = idle_s
        self._reap_every_s = idle_s if reap_every_s is None else reap_every_s
        self._clock = clock
        self._on_passivate = on_passivate
        self._mailboxes: dict[str, _Mailbox] = {}
        self._consumers: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._pending = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._closed = False
        self.processed = 0
        self.failed = 0
        self.passivated = 0

    # --- metrics (counts only) ----------------------------------------------------------------

    @property
    def active_mailboxes(self) -> int:
        """Mailboxes alive now (users with a consumer task)."""
        return len(self._mailboxes)

    @property
    def closed(self) -> bool:
        """Whether the host is closing or closed (it takes no more work)."""
        return self._closed

    @property
    def pending(self) -> int:
        """Work items submitted and not yet finished, over all users."""
        return self._pending

    def stats(self) -> dict[str, int]:
        """The counters as one mapping (for metrics endpoints)."""
        return {
            "active_mailboxes": self.active_mailboxes,
            "pending": self._pending,
            "processed": self.processed,
            "failed": self.failed,
            "passivated": self.passivated,
        }

    # --- submitting ---------------------------------------------------------------------------

    async def submit(self, user_id: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` on the user's mailbox and return its result (or raise its exception).

        The work is queued when this coroutine starts running (``submit_nowait`` queues at once).
        Cancelling the caller before the work starts skips it; once started it runs to the end.
        """
        reply: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(user_id, _Item(work, reply))
        return await reply

    def submit_nowait(self, user_id: str, work: Callable[[], Awaitable[object]]) -> None:
        """Queue ``work`` on the user's mailbox without waiting; a failure is logged by type."""
        self._enqueue(user_id, _Item(work, None))

    def _enqueue(self, user_id: str, item: _Item) -> None:
        if self._closed:
            raise MailboxClosedError("the mailbox host is closed")
        # No await between finding the mailbox and queueing: passivation cannot slip in between.
        mailbox = self._mailboxes.get(user_id)
        if mailbox is None:
            mailbox = self._activate(user_id)
        mailbox.pending += 1
        self._pending += 1
        self._quiet.clear()
        mailbox.queue.put_nowait(item)

    def _activate(self, user_id: str) -> _Mailbox:
        mailbox = _Mailbox(user_id, asyncio.Queue(), self._clock())
        consumer = asyncio.create_task(self._consume(mailbox), name="mailbox-consumer")
        mailbox.consumer = consumer
        self._consumers.add(consumer)
        consumer.add_done_callback(self._consumers.discard)
        self._mailboxes[user_id] = mailbox
        if self._reaper is None and self._reap_every_s > 0:
            self._reaper = asyncio.create_task(self._reap(), name="mailbox-reaper")
        return mailbox

    # --- the consumer: the only code that runs a user's work ----------------------------------

    async def _consume(self, mailbox: _Mailbox) -> None:
        while True:
            item = await mailbox.queue.get()
            if item is None:
                return
            try:
                await self._run(mailbox, item)
            finally:
                mailbox.pending -= 1
                mailbox.last_used = self._clock()
                self._pending -= 1
                if self._pending == 0:
                    self._quiet.set()

    async def _run(self, mailbox: _Mailbox, item: _Item) -> None:
        reply = item.reply
        if reply is not None and reply.done():
            return  # the submitter gave up before the work started
        try:
            result = await item.work()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                if reply is not None and not reply.done():
                    reply.cancel()
                raise
            self._failed(mailbox, item, asyncio.CancelledError())
        except Exception as exc:
            self._failed(mailbox, item, exc)
        else:
            self.processed += 1
            if reply is not None and not reply.done():
                reply.set_result(result)

    def _failed(self, mailbox: _Mailbox, item: _Item, exc: BaseException) -> None:
        self.failed += 1
        if item.reply is None:
            log.warning("background work failed for user %s: %s", mailbox.user_id, type(exc).__name__)
        elif not item.reply.done():
            item.reply.set_exception(exc)

    # --- passivation, drain, close ------------------------------------------------------------

    async def passivate_idle(self, now: float | None = None) -> int:
        """End the consumers of mailboxes idle for ``idle_s`` at ``now``; returns how many ended."""
        cutoff = (self._clock() if now is None else now) - self.idle_s
        idle = [m for m in self._mailboxes.values() if m.pending == 0 and m.last_used <= cutoff]
        # Dropped before any await, so a submit from here on starts a fresh mailbox.
        for mailbox in idle:
            del self._mailboxes[mailbox.user_id]
            mailbox.queue.put_nowait(None)
        await asyncio.gather(*(m.consumer for m in idle if m.consumer is not None), return_exceptions=True)
        self.passivated += len(idle)
        if self._on_passivate is not None:
            for mailbox in idle:
                self._on_passivate(mailbox.user_id)
        return len(idle)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(self._reap_every_s)
            try:
                await self.passivate_idle()
            except Exception as exc:  # the reaper must outlive a faulty on_passivate hook
                log.warning("mailbox passivation pass failed: %s", type(exc).__name__)

    async def drain(self) -> None:
        """Wait until every mailbox is empty and idle (never call it from inside mailbox work)."""
        while self._pending:
            await self._quiet.wait()

    async def close(self) -> None:
        """Refuse new work, finish what is queued, then end every consumer and the reaper."""
        self._closed = True
        await self.drain()
        await self._stop_reaper()
        mailboxes = list(self._mailboxes.values())
        self._mailboxes.clear()
        for mailbox in mailboxes:
            mailbox.queue.put_nowait(None)
        await asyncio.gather(
            *(m.consumer for m in mailboxes if m.consumer is not None), return_exceptions=True
        )

    async def abort(self) -> int:
        """Refuse new work and stop every consumer now, running work included; returns how many
        items were dropped. For shutdown past its grace: the caller's work must be durable elsewhere."""
        self._closed = True
        await self._stop_reaper()
        mailboxes = list(self._mailboxes.values())
        self._mailboxes.clear()
        dropped = 0
        for mailbox in mailboxes:
            while not mailbox.queue.empty():
                item = mailbox.queue.get_nowait()
                if item is None:
                    continue
                dropped += 1
                mailbox.pending -= 1
                self._pending -= 1
                if item.reply is not None and not item.reply.done():
                    item.reply.cancel()
            if mailbox.consumer is not None:
                mailbox.consumer.cancel()
        await asyncio.gather(
            *(m.consumer for m in mailboxes if m.consumer is not None), return_exceptions=True
        )
        if self._pending <= 0:
            self._quiet.set()
        return dropped

    async def _stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
