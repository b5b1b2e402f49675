"""A shard: the per-user virtual actors of a range of users (DESIGN decision 1).

``Shard`` is plain asyncio — the stores it owns, a MemoryService, the durable WritePath whose
mailboxes serialise each user's writes — and resumes unfinished tasks when it starts (decision 2).
``ShardActor`` is the thin Ray actor around it. With the embedded milvus-lite one shard owns the
vector file; with a Milvus server each shard opens its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import ray
from pydantic import BaseModel

from engram.actors.hit_buffer import RecallHits
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import build_archive
from engram.lifecycle.archive_vectors import ArchiveBackedVectors
from engram.lifecycle.plan import SweepCounts
from engram.lifecycle.reembed import ReembedCounts, reembed_user
from engram.lifecycle.sweeps import Sweeper, each_user, sweep_users
from engram.models.errors import EngramError, ErrorCode
from engram.models.rules.sharding import shard_name, shard_of
from engram.models.settings import Settings
from engram.serve.extraction import extraction_engine
from engram.serve.heap import freeze_long_lived
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import build_core
from engram.serve.metrics import install_ray_metrics
from engram.serve.operation_methods import OperationMethods
from engram.serve.operations import BY_NAME
from engram.serve.settings_update import apply_overrides
from engram.serve.tracing import continue_trace, sync_tracing
from engram.storage.stores import Stores, open_stores

log = logging.getLogger(__name__)


class Shard:
    """One shard's stores, memory service and write path."""

    def __init__(self, settings: Settings, index: int) -> None:
        self.settings = settings
        self.index = index
        self._started: asyncio.Task[LocalBackend] | None = None
        self._stores: Stores | None = None
        self._recall_vectors: ArchiveBackedVectors | None = None
        self._slots: asyncio.Semaphore | None = None
        self._rescans: asyncio.Task[None] | None = None

    async def backend(self) -> LocalBackend:
        """The shard's backend, opening the stores and resuming unfinished tasks on first use."""
        # One event loop: the check and the assignment happen with no await between them.
        if self._started is None:
            self._started = asyncio.create_task(self._start())
        return await self._started

    async def _start(self) -> LocalBackend:
        self._stores = await open_stores(self.settings)
        stores = self._stores
        archive = build_archive(self.settings)
        self._recall_vectors = ArchiveBackedVectors(stores.vectors, archive, stores.metadata)
        # Built before resuming: it registers the task kinds (export) that resumed tasks may have.
        core = build_core(
            self.settings,
            stores,
            engine=extraction_engine(self.settings) if self.settings.serve.extraction_replicas else None,
            recall_vectors=self._recall_vectors,
            archive=archive,
            shard=self.index,
        )
        backend = LocalBackend(core)
        write_path = core.write_path
        await write_path.resume(owns=self._owns)
        if self.settings.serve.task_rescan_s > 0:
            self._rescans = asyncio.create_task(self._rescan_forever(write_path))
        return backend

    def _owns(self, user_id: str) -> bool:
        return shard_of(user_id, self.settings.serve.shard_count) == self.index

    async def _rescan_forever(self, write_path: WritePath) -> None:
        """Queue what no mailbox holds, every ``serve.task_rescan_s`` (``WritePath.rescan``)."""
        while True:
            await asyncio.sleep(self.settings.serve.task_rescan_s)
            try:
                await write_path.rescan(owns=self._owns)
            except Exception as exc:  # the next round tries again; a store may be busy
                log.warning("shard %d: the task rescan failed: %s", self.index, type(exc).__name__)

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors (archived ones from the cold archive), for snapshots built in other processes."""
        await self.backend()
        assert self._recall_vectors is not None
        return await self._recall_vectors.get_vectors(memory_ids)

    async def sweep_users(self, user_ids: Sequence[str], now: datetime, dry_run: bool) -> SweepCounts:
        """The lifecycle sweeps of these users (all owned by this shard), each on its own mailbox."""
        backend = await self.backend()
        return await sweep_users(
            # The profiles (L7) are rebuilt in the same mailbox turn as the sweeps.
            Sweeper(backend.lifecycle, after_user=backend.profiles.sweep),
            user_ids,
            now,
            backend.write_path.host.submit,
            dry_run=dry_run,
            slots=self._sweep_slots(),
        )

    async def reembed_users(self, user_ids: Sequence[str]) -> ReembedCounts:
        """Move these users' memories to this shard's embedding model, each on its own mailbox."""
        backend = await self.backend()
        return await each_user(
            user_ids,
            lambda user_id: reembed_user(backend.lifecycle, user_id),
            backend.write_path.host.submit,
            ReembedCounts(),
            what="reembed",
            slots=self._sweep_slots(),
        )

    def _sweep_slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            # One bound for every job task calling this shard at once: SQLite takes one writer.
            self._slots = asyncio.Semaphore(self.settings.lifecycle.user_concurrency)
        return self._slots

    async def record_recall_hit_batch(self, batch: Sequence[RecallHits]) -> None:
        """R4 bookkeeping of many recalls (sent in batches by recall replicas), each on its user's mailbox."""
        write_path = (await self.backend()).write_path
        for hits in batch:
            write_path.record_recall_hits(hits.user_id, hits.memory_ids, hits.at)

    def reconfigure(self, overrides: dict[str, Any]) -> None:
        """Apply run-time settings (O1) to this shard's live Settings object."""
        apply_overrides(self.settings, overrides)

    async def close(self) -> None:
        """Finish queued work for up to ``serve.stop_grace_s``, then close the stores.

        Succeeds whatever state the start reached (never started, failed, still resuming). Work
        left when the grace runs out is cancelled: its tasks are durable and resume on the next start.
        """
        started = self._started
        if started is not None:
            try:
                backend = await started
            except Exception as exc:  # a start that failed left nothing to finish
                log.warning("shard %d closing after a failed start: %s", self.index, type(exc).__name__)
            else:
                await self._stop_rescans()
                closing = asyncio.ensure_future(backend.write_path.close())
                done, _ = await asyncio.wait({closing}, timeout=self.settings.serve.stop_grace_s)
                if not done:
                    log.warning(
                        "shard %d: queued writes unfinished after %.0f s; they resume on the next start",
                        self.index,
                        self.settings.serve.stop_grace_s,
                    )
                    await backend.write_path.abandon()
                    closing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await closing
                elif closing.exception() is not None:
                    log.warning(
                        "shard %d: finishing queued writes failed: %s",
                        self.index,
                        type(closing.exception()).__name__,
                    )
        if self._stores is not None:
            stores, self._stores = self._stores, None
            await stores.close()

    async def _stop_rescans(self) -> None:
        if self._rescans is not None:
            self._rescans.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rescans


@ray.remote(max_restarts=-1, max_task_retries=0)
class ShardActor(OperationMethods):
    """The Ray actor hosting a ``Shard``; restarted by Ray after a crash, then it resumes its tasks.

    Every table operation is a method (``OperationMethods``): ``shard.add.remote(request)``.
    """

    def __init__(self, settings: Settings, index: int) -> None:
        install_ray_metrics()
        sync_tracing(settings.tracing, f"shard-{index}")
        self._shard = Shard(settings, index)
        self._frozen = False

    async def ready(self) -> int:
        await self.operation_backend()
        return self._shard.index

    async def operation_backend(self) -> LocalBackend:
        backend = await self._shard.backend()
        if not self._frozen:
            # Started (also after a restart, which no ready() call follows): the stores, the
            # embedder and the resumed tasks are in. A full collection of that heap stalled every
            # acknowledgement ~120 ms, about every 30 s under writes.
            self._frozen = True
            freeze_long_lived()
        return backend

    async def traced(self, op_name: str, request: BaseModel, carrier: dict[str, str]) -> Any:
        """Operation ``op_name`` of the table under the caller's trace (``ray_backend.sent``)."""
        if op_name not in BY_NAME:
            raise EngramError(ErrorCode.NOT_FOUND, f"no operation {op_name!r}")
        attributes: dict[str, str | int] = {"engram.op": op_name, "engram.shard": self._shard.index}
        method = getattr(self, op_name)
        return await continue_trace(carrier, f"engram.shard.{op_name}", attributes, lambda: method(request))

    async def get_vectors(self, memory_ids: list[str]) -> dict[str, np.ndarray]:
        return await self._shard.get_vectors(memory_ids)

    async def sweep_users(self, user_ids: list[str], now: datetime, dry_run: bool) -> SweepCounts:
        return await self._shard.sweep_users(user_ids, now, dry_run)

    async def reembed_users(self, user_ids: list[str]) -> ReembedCounts:
        return await self._shard.reembed_users(user_ids)

    async def record_recall_hit_batch(self, batch: list[RecallHits]) -> None:
        await self._shard.record_recall_hit_batch(batch)

    async def drain(self) -> None:
        await (await self._shard.backend()).write_path.drain()

    async def write_stats(self) -> dict[str, Any]:
        """Counts of the write path, and the ids of the tasks this incarnation resumed at start
        (crash tests prove with them that the crash landed while tasks were unfinished)."""
        write_path = (await self.operation_backend()).write_path
        return {
            **write_path.host.stats(),
            **write_path.recorder.stats(),
            **write_path.hits.stats(),
            "resumed_task_ids": list(write_path.resumed_task_ids),
            "frozen_objects": gc.get_freeze_count(),
        }

    async def coroutine_stacks(self) -> list[str]:
        """Where each coroutine of this shard is waiting (function names and lines, never values):
        for diagnosing a stall from outside (``ray.get(shard.coroutine_stacks.remote())``)."""
        return [
            f"{task.get_name()}: {' -> '.join(_await_chain(task.get_coro()))}" for task in asyncio.all_tasks()
        ]

    def reconfigure(self, overrides: dict[str, Any]) -> None:
        self._shard.reconfigure(overrides)
        sync_tracing(self._shard.settings.tracing, f"shard-{self._shard.index}")

    async def close(self) -> None:
        await self._shard.close()


def _await_chain(coro: Any) -> list[str]:
    """The functions a coroutine is suspended in, outermost first (``cr_await`` down to a future)."""
    chain: list[str] = []
    while coro is not None and len(chain) < 40:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            chain.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return chain


def shard_options(settings: Settings, index: int) -> dict[str, Any]:
    """Ray options of shard ``index``: named and detached (it outlives an ingress restart), placed by
    ``serve.shard_scheduling`` and ``serve.shard_resources``; the app and the sweep job share them."""
    return {
        "name": shard_name(settings.serve.app_name, index),
        "namespace": "serve",
        "get_if_exists": True,
        "lifetime": "detached",
        "scheduling_strategy": settings.serve.shard_scheduling,
        "resources": dict(settings.serve.shard_resources),
    }
