"""``engram reembed``: every memory onto the configured embedding model (docs/operations.md).

Without a running app the command opens the stores itself and works in this process (it must be the
only one: milvus-lite has one owner). With ``--address`` it drives a running app's shard actors,
which do each user's work on that user's mailbox while writes, recalls and sweeps go on. Either way
it prints one JSON line of progress per batch of users, and a rerun after an interruption picks up
the users left (``lifecycle.reembed``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from engram.lifecycle.archive import build_archive
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.reembed import ReembedCounts, reembed_all
from engram.lifecycle.sweeps import run_inline
from engram.models.rules.sharding import shard_name, shard_of
from engram.models.settings import Settings
from engram.storage.stores import open_stores
from engram.storage.sweep_queries import memories_left, read_once, users_to_reembed


def print_progress(done: int, total: int, counts: ReembedCounts) -> None:
    """One progress line: users done of all, and the counts so far."""
    print(json.dumps({"users_done": done, "users_total": total, **counts.as_dict()}), flush=True)


def reembed_here(settings: Settings, *, batch_users: int) -> ReembedCounts:
    """The whole run in this process, over stores it opens (no app may be running on them)."""

    async def run() -> ReembedCounts:
        stores = await open_stores(settings)
        try:
            lifecycle = LifecycleStores(
                settings, stores.metadata, stores.vectors, stores.embedder, build_archive(settings)
            )
            return await reembed_all(lifecycle, run_inline, batch_users=batch_users, on_batch=print_progress)
        finally:
            await stores.close()

    return asyncio.run(run())


def reembed_through_shards(
    settings: Settings, *, batch_users: int, get_actor: Callable[[str], Any], get: Callable[[Any], Any]
) -> ReembedCounts:
    """The run through a running app's shards (``get_actor``/``get``: ``ray.get_actor``/``ray.get``)."""
    users = asyncio.run(_users(settings))
    count = settings.serve.shard_count
    by_shard: dict[int, list[str]] = {}
    for user_id in users:
        by_shard.setdefault(shard_of(user_id, count), []).append(user_id)
    total = ReembedCounts()
    done = 0
    for index, owned in sorted(by_shard.items()):
        shard = get_actor(shard_name(settings.serve.app_name, index))
        for start in range(0, len(owned), batch_users):
            batch = owned[start : start + batch_users]
            total.add(get(shard.reembed_users.remote(batch)))
            done += len(batch)
            print_progress(done, len(users), total)
    return total


def left(settings: Settings) -> int:
    """Memories with a vector still on another model than ``embedder.model``."""
    return asyncio.run(_left(settings))


async def _users(settings: Settings) -> list[str]:
    return await read_once(settings.storage, lambda conn: users_to_reembed(conn, settings.embedder.model))


async def _left(settings: Settings) -> int:
    return await read_once(settings.storage, lambda conn: memories_left(conn, settings.embedder.model))
