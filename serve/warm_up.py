"""A Recall replica's start-up warm-up, apart from its Ray class: the snapshots of the most recently
active users, loaded once the database is at the schema this release reads, then frozen."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from engram.actors.snapshot import SnapshotCache
from engram.serve.heap import freeze_long_lived, space_full_collections

log = logging.getLogger(__name__)

Ready = Callable[[], Awaitable[object]]


async def warm_when_ready(ready: Ready, snapshots: SnapshotCache, limit: int) -> int:
    """Await ``ready`` (the shards open the stores, migrating the database), then warm up to
    ``limit`` users; how many are held. Read before the migration, an upgrade that adds a column
    the reads select failed the whole warm-up: the replica started with no user warm."""
    await ready()
    return await snapshots.warm(limit)


async def warm_up(ready: Ready, snapshots: SnapshotCache, limit: int) -> dict[str, float]:
    """``warm_when_ready``, then the long-lived heap frozen and full collections spaced
    (``heap.space_full_collections``); the replica's warm-up state (done, users, seconds,
    frozen_objects). A failed warm-up only means slower first recalls."""
    started = time.monotonic()
    users = 0
    try:
        users = await warm_when_ready(ready, snapshots, limit)
    except Exception as exc:
        log.warning("snapshot warm-up stopped: %s", type(exc).__name__)
    # A thousand warm snapshots are a million long-lived objects, and every full collection
    # walked them all: ~170 ms with the replica stalled, every ~12 s under load.
    frozen = freeze_long_lived()
    space_full_collections()
    return {
        "done": 1.0,
        "users": float(users),
        "seconds": time.monotonic() - started,
        "frozen_objects": float(frozen),
    }
