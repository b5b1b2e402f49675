"""Stored vectors for a recall replica's snapshots, read through whichever shard answers.

Every shard reaches the same vectors (the one milvus-lite owner, or each its own connection to the
Milvus server). A snapshot asks only for memories without a sealed copy, which a write leaves for
a moment (and a shard that dies mid-write leaves until reconcile), so a shard that is restarting
after its node was lost must not hold recall until it is back: each shard gets a bounded wait, then
the next one is asked, and when none answers the snapshot embeds what it lacks (``actors.snapshot``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)

# A healthy shard answers in milliseconds (a Milvus `get` at Session consistency, or a copy read);
# a restarting one may not answer for minutes.
SHARD_WAIT_S = 2.0

VectorRead = Callable[[list[str]], Awaitable[dict[str, np.ndarray]]]


class ShardVectors:
    """A ``VectorSource`` over the shards' ``get_vectors``: the shard that answered last is asked
    first, the others in turn after it; no answer at all is an empty result, never an error."""

    def __init__(self, reads: Sequence[VectorRead], wait_s: float = SHARD_WAIT_S) -> None:
        self._reads = list(reads)
        self._wait_s = wait_s
        self._first = 0

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by memory id from the first shard to answer within its wait."""
        ids = list(memory_ids)
        for step in range(len(self._reads)):
            index = (self._first + step) % len(self._reads)
            try:
                found = await asyncio.wait_for(_awaited(self._reads[index](ids)), self._wait_s)
            except Exception as exc:  # a dead, restarting or overloaded shard: ask the next one
                log.warning("shard %d gave no vectors for a snapshot: %s", index, type(exc).__name__)
                continue
            self._first = index
            return found
        return {}


async def _awaited(pending: Awaitable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    # A Ray ObjectRef is awaitable but not a coroutine; wait_for wants something it can cancel.
    return await pending
