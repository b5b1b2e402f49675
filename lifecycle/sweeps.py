"""The daily sweeps of one user (L1-L5): decay, archive faded and expired memories, purge, compress.

``Sweeper.sweep_user`` is the unit of work and must run on that user's mailbox (the caller passes
the mailbox's ``submit``), so it never overlaps the user's other writes. Crash safety follows
DESIGN decision 3: archive objects are written before the metadata commit that archives their
memory, vectors and objects are removed after the commit that drops their memory, and every
metadata write is conditioned on the state it was decided from. An interrupted run therefore leaves
at most a spare object or vector, which reconcile removes, and a rerun does nothing twice.
Switches (P1) are not consulted: lifecycle keeps running for switched-off users (L4).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Protocol, Self, TypeVar

from engram.lifecycle.archive import ArchivedItem
from engram.lifecycle.compression import Compressor
from engram.lifecycle.context import LifecycleStores, vectors_for
from engram.lifecycle.plan import Action, SweepCounts, Verdict, count, decide
from engram.lifecycle.reconcile import reconcile_user
from engram.models.domain import Memory
from engram.models.enums import OpSource, OpType, Status
from engram.models.metrics import METRICS
from engram.models.rules.capacity import counter_deltas
from engram.storage.database import checkpoint_wal
from engram.storage.export_files import EXPORT_KIND, export_root, remove_exports
from engram.storage.metadata import MetadataTx
from engram.storage.privacy_queries import expire_tasks
from engram.storage.sweep_queries import (
    add_purge_entries,
    archive_active,
    delete_rows,
    sanitize_changes,
    store_weights,
    sweep_rows,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Submit = Callable[[str, Callable[[], Awaitable[T]]], Awaitable[T]]

_ARCHIVE = (Action.ARCHIVE_FADED, Action.ARCHIVE_EXPIRED)
_REASONS = {
    Action.ARCHIVE_FADED: "lifecycle: weight decayed below the archive threshold",
    Action.ARCHIVE_EXPIRED: "lifecycle: expire_at passed",
    Action.PURGE_ARCHIVED: "lifecycle: archived past retention",
    Action.PURGE_DELETED: "lifecycle: deleted past retention",
}


# The SweepCounts fields the sweep itself changes (engram_sweep_actions_total's action label).
SWEEP_ACTIONS = (
    "decayed",
    "archived_faded",
    "archived_expired",
    "purged_archived",
    "purged_deleted",
    "sanitized_changes",
)


class Sweeper:
    """Runs the sweeps of one user at a time; ``reconcile`` runs after them when configured."""

    def __init__(
        self, stores: LifecycleStores, after_user: Callable[[str], Awaitable[int]] | None = None
    ) -> None:
        """``after_user``: more work of one user after the sweeps, on the same mailbox turn (the
        profile refresh, L7, which lives above this layer); it returns how many profiles it stored."""
        self.stores = stores
        self.after_user = after_user

    async def sweep_user(self, user_id: str, now: datetime, *, dry_run: bool = False) -> SweepCounts:
        """Decay, archive, expire and purge one user's memories as of ``now``; returns the counts."""
        started = time.perf_counter()
        result = "failed"
        try:
            counts = await self._sweep_user(user_id, now, dry_run=dry_run)
            result = "ok"
            return counts
        finally:
            METRICS.sweep_duration.observe((time.perf_counter() - started) * 1000, {"result": result})

    async def _sweep_user(self, user_id: str, now: datetime, *, dry_run: bool) -> SweepCounts:
        stores = self.stores
        async with stores.metadata.transaction(readonly=True) as tx:
            # Never a new key: a purged user's rows wait here for deletion with theirs shredded.
            rows = await sweep_rows(tx, user_id, await tx.keys.existing(user_id))
        verdicts = {r.memory_id: decide(r, now, stores.settings) for r in rows}
        counts = SweepCounts(users=1)
        for verdict in verdicts.values():
            count(counts, verdict.action)
        if not dry_run:
            counts.expired_tasks = await self._expire_tasks(user_id, now)
        if not dry_run and any(v.action is not Action.KEEP for v in verdicts.values()):
            counts.sanitized_changes = await self._apply(user_id, verdicts, now)
            METRICS.counts(METRICS.sweep_actions, "action", {a: getattr(counts, a) for a in SWEEP_ACTIONS})
        if stores.settings.lifecycle.compression.enabled:
            # After decay and archival: what faded is gone, the weights compared are current (L5).
            counts.add(await Compressor(stores).compress_user(user_id, now, dry_run=dry_run))
        if stores.settings.lifecycle.reconcile:
            counts.add(await reconcile_user(stores, user_id, dry_run=dry_run))
        if self.after_user is not None and not dry_run:
            counts.profiles_refreshed += await self.after_user(user_id)
        return counts

    async def _expire_tasks(self, user_id: str, now: datetime) -> int:
        """Delete the user's tasks finished longer ago than the retention, and their export files."""
        settings = self.stores.settings
        before = now - timedelta(hours=settings.privacy.task_retention_hours)
        async with self.stores.metadata.transaction() as tx:
            expired = await expire_tasks(tx, user_id, before)
        remove_exports(export_root(settings), [task_id for task_id, kind in expired if kind == EXPORT_KIND])
        return len(expired)

    async def _apply(self, user_id: str, verdicts: dict[str, Verdict], now: datetime) -> int:
        stores = self.stores
        archive_ids = [mid for mid, v in verdicts.items() if v.action in _ARCHIVE]
        if archive_ids:
            await self._store_in_archive(user_id, archive_ids)
        purged: dict[Action, list[str]] = {Action.PURGE_ARCHIVED: [], Action.PURGE_DELETED: []}
        async with stores.metadata.transaction() as tx:
            await store_weights(
                tx,
                user_id,
                {
                    mid: v.weight
                    for mid, v in verdicts.items()
                    if v.action is Action.DECAY and v.weight is not None
                },
                now,
            )
            if archive_ids:
                await self._archive(tx, user_id, {mid: verdicts[mid] for mid in archive_ids}, now)
            for action, status in (
                (Action.PURGE_ARCHIVED, Status.ARCHIVED),
                (Action.PURGE_DELETED, Status.DELETED),
            ):
                purged[action] = await self._purge(
                    tx,
                    user_id,
                    [mid for mid, v in verdicts.items() if v.action is action],
                    status,
                    action,
                    now,
                )
            sanitized = await sanitize_changes(
                tx, user_id, purged[Action.PURGE_ARCHIVED] + purged[Action.PURGE_DELETED]
            )
            if archive_ids or any(purged.values()):
                await tx.versions.bump(user_id)
        gone = archive_ids + purged[Action.PURGE_ARCHIVED] + purged[Action.PURGE_DELETED]
        if gone:
            await stores.vectors.delete(gone)
        await stores.archive.delete(user_id, purged[Action.PURGE_ARCHIVED])
        return sanitized

    async def _store_in_archive(self, user_id: str, memory_ids: list[str]) -> None:
        async with self.stores.metadata.transaction(readonly=True) as tx:
            memories = [
                m for m in (await tx.memories.get_many(user_id, memory_ids)).values() if m.content is not None
            ]
            cipher = await tx.keys.cipher(user_id)
        vectors = await vectors_for(self.stores, memories)
        for memory in memories:
            item = ArchivedItem(memory.memory_id, memory.content or "", vectors[memory.memory_id])
            await self.stores.archive.put(cipher, user_id, item)

    async def _archive(
        self, tx: MetadataTx, user_id: str, verdicts: dict[str, Verdict], now: datetime
    ) -> None:
        found = await tx.memories.get_many(user_id, list(verdicts))
        moved: list[Memory] = []
        for memory_id, verdict in verdicts.items():
            memory = found.get(memory_id)
            if memory is None or not await archive_active(tx, user_id, memory_id, verdict.weight, now):
                continue
            await tx.changes.add(memory, OpType.ARCHIVE, OpSource.SYSTEM, _REASONS[verdict.action], now)
            moved.append(memory)
        await tx.counters.add(user_id, counter_deltas(moved, -1))

    async def _purge(
        self,
        tx: MetadataTx,
        user_id: str,
        memory_ids: list[str],
        status: Status,
        action: Action,
        now: datetime,
    ) -> list[str]:
        if not memory_ids:
            return []
        found = await tx.memories.get_many(user_id, memory_ids)
        doomed = [m for m in found.values() if m.status is status]
        if not doomed:
            return []
        await delete_rows(tx, user_id, [m.memory_id for m in doomed], status)
        apps = [(m.memory_id, m.app_id) for m in doomed]
        await add_purge_entries(tx, user_id, apps, OpSource.SYSTEM, _REASONS[action], now)
        return [m.memory_id for m in doomed]


async def sweep_users(
    sweeper: Sweeper,
    user_ids: Iterable[str],
    now: datetime,
    submit: Submit[SweepCounts],
    *,
    dry_run: bool = False,
    concurrency: int = 4,
    slots: asyncio.Semaphore | None = None,
    attempts: int = 3,
    retry_delay_s: float = 1.0,
) -> SweepCounts:
    """Sweep many users, each on its own mailbox via ``submit``; a failing user is counted, not fatal
    (``each_user``: bounds, retries). A run that erased anything then settles the disk."""
    counts = await each_user(
        user_ids,
        lambda user_id: sweeper.sweep_user(user_id, now, dry_run=dry_run),
        submit,
        SweepCounts(),
        what="lifecycle sweep",
        concurrency=concurrency,
        slots=slots,
        attempts=attempts,
        retry_delay_s=retry_delay_s,
    )
    if not dry_run and any(getattr(counts, name) for name in _ERASING):
        await settle_disk(sweeper.stores)
    return counts


# The counts of a sweep that removed something from the stores (the disk still holds its bytes).
_ERASING = ("purged_deleted", "purged_archived", "sanitized_changes", "expired_tasks")


async def settle_disk(stores: LifecycleStores) -> None:
    """Make what the sweep erased leave the files (P8): deleted vectors out of the vector store's
    segments, the WAL copied back (its pages zeroed by secure delete) and truncated."""
    compact = getattr(stores.vectors, "compact", None)
    if callable(compact):
        await compact()
    if not await checkpoint_wal(stores.metadata.engine):
        log.warning("WAL checkpoint after the sweep was partial (a reader held it); the next one finishes it")


class Tally(Protocol):
    """Counts of a run over users: added up per user, with the users that failed."""

    failed_users: int
    failures: list[str]

    def add(self, other: Self) -> Self:
        """Add ``other``'s counts into this one (returns self)."""
        ...


C = TypeVar("C", bound=Tally)


async def each_user(
    user_ids: Iterable[str],
    work: Callable[[str], Awaitable[C]],
    submit: Submit[C],
    total: C,
    *,
    what: str,
    concurrency: int = 4,
    slots: asyncio.Semaphore | None = None,
    attempts: int = 3,
    retry_delay_s: float = 1.0,
) -> C:
    """``work(user)`` for many users, each on its own mailbox via ``submit``, added into ``total``.

    ``slots`` bounds the users in flight across every call that shares it (a shard serving several
    job tasks at once); without it, ``concurrency`` bounds this call alone. A failed user is tried
    again (the work must be idempotent) up to ``attempts`` times: SQLite refuses a writer that
    waited past its busy timeout, which a loaded machine can reach. Then it is counted, not fatal.
    """
    slots = slots or asyncio.Semaphore(concurrency)

    async def one(user_id: str) -> None:
        for attempt in range(1, attempts + 1):
            async with slots:
                try:
                    total.add(await submit(user_id, lambda: work(user_id)))
                    return
                except Exception as exc:  # one user's failure must not stop everyone else's run
                    failure = type(exc).__name__
            log.warning("%s of user %s failed (attempt %d): %s", what, user_id, attempt, failure)
            if attempt < attempts:
                await asyncio.sleep(retry_delay_s * attempt)
        total.failed_users += 1
        total.failures.append(f"{user_id}: {failure}")

    # A TaskGroup, not gather: if the process is being torn down (a BaseException), the other
    # users' work is cancelled with it instead of running on unobserved.
    async with asyncio.TaskGroup() as group:
        for user_id in user_ids:
            group.create_task(one(user_id))
    return total


async def run_inline(user_id: str, work: Callable[[], Awaitable[T]]) -> T:
    """A ``Submit`` that runs the work at once: only where nothing else writes (tests, offline tools)."""
    del user_id
    return await work()
