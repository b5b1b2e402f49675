"""Vectors for recall with ``include_archived`` (R1): the active index first, then the cold archive.

Archived memories left the active collection; a recall snapshot asks for them by id, and this
source answers from the archive objects instead of embedding their content again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram.lifecycle.archive import ColdArchive
from engram.storage.metadata import MetadataStore
from engram.storage.sweep_queries import archived_owners
from engram.storage.vectors import VectorStore


class ArchiveBackedVectors:
    """A recall ``VectorSource``: stored vectors, completed from the archive for archived memories."""

    def __init__(self, vectors: VectorStore, archive: ColdArchive, metadata: MetadataStore) -> None:
        self._vectors = vectors
        self._archive = archive
        self._metadata = metadata

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors by memory id; ids found in neither place are left out."""
        found = await self._vectors.get_vectors(memory_ids)
        missing = [mid for mid in memory_ids if mid not in found]
        if not missing:
            return found
        async with self._metadata.transaction(readonly=True) as tx:
            owners = await archived_owners(tx, missing)
            # A read never makes a key: a user without one has no readable archive object.
            ciphers = {user_id: await tx.keys.existing(user_id) for user_id in owners}
        for user_id, ids in owners.items():
            cipher = ciphers[user_id]
            if cipher is None:
                continue
            for memory_id in ids:
                item = await self._archive.get(cipher, user_id, memory_id)
                if item is not None:
                    found[memory_id] = item.vector
        return found
