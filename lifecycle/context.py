"""What the lifecycle operations work on: the stores of one shard and the cold archive."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engram.lifecycle.archive import ColdArchive
from engram.models.domain import Memory
from engram.models.settings import Settings
from engram.storage.embedders import Embedder
from engram.storage.metadata import MetadataStore
from engram.storage.vectors import VectorStore

Summarize = Callable[[Sequence[Memory]], Awaitable[str | None]]
"""Writes the summary of a compression group (an LLM engine); None leaves it to the rules' merge."""


@dataclass
class LifecycleStores:
    """Everything a sweep touches; the same objects the shard's MemoryService uses.

    ``summarize`` is the engine's summary of a compression group (L5), set by whoever holds the
    engine (the serve layer); without it compression writes the deterministic merge.
    """

    settings: Settings
    metadata: MetadataStore
    vectors: VectorStore
    embedder: Embedder
    archive: ColdArchive
    summarize: Summarize | None = None


async def vectors_for(stores: LifecycleStores, memories: Sequence[Memory]) -> dict[str, np.ndarray]:
    """The memories' stored vectors; any the index lacks are embedded again from the content."""
    found = await stores.vectors.get_vectors([m.memory_id for m in memories])
    missing = [m for m in memories if m.memory_id not in found]
    if missing:
        fresh = await stores.embedder.embed([m.content or "" for m in missing])
        found.update({m.memory_id: fresh[i] for i, m in enumerate(missing)})
    return found
