"""Bulk seeding for load tests: N users x M memories written straight into the stores, offline.

Far faster than the API (one transaction per user, embeddings and vector upserts in batches); the
app must not be running on the same data directory (milvus-lite has one owner).
"""

from __future__ import annotations

import asyncio
import random
import sys
from datetime import timedelta

import numpy as np

from engram.models.domain import utcnow
from engram.models.enums import Level, MemType, OpSource, Ownership
from engram.models.hashing import content_hash
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.records import new_memory
from engram.models.settings import Settings
from engram.storage.embedders import Embedder
from engram.storage.stores import open_stores
from engram.storage.vectors import VectorRecord, vector_record

# Vectors written to the index per upsert (several users' at once).
_VECTOR_BATCH = 5_000

_SUBJECTS = [
    "pizza",
    "sushi",
    "tennis",
    "jazz",
    "Lisbon",
    "Kyoto",
    "hiking",
    "chess",
    "tea",
    "cycling",
    "Python",
    "painting",
    "the violin",
    "peanuts",
    "Berlin",
    "yoga",
    "tacos",
    "opera",
    "sailing",
    "Go",
]
_TEMPLATES = [
    "Likes {s}",
    "Travelled to {s} in spring",
    "Is learning {s}",
    "Avoids {s}",
    "Talks often about {s}",
    "Went to a {s} event with friends",
    "Wants to try more {s}",
    "Has a book about {s}",
]


def fact(rng: random.Random, n: int) -> str:
    """A synthetic, varied memory text."""
    return f"{rng.choice(_TEMPLATES).format(s=rng.choice(_SUBJECTS))} (note {n})"


async def seed(
    settings: Settings, users: int, memories: int, *, progress: bool = True, embedder: Embedder | None = None
) -> int:
    """Write ``users`` x ``memories`` memories for users lt-0 .. lt-(users-1); returns the count
    (``embedder``: one already loaded, else the settings' own)."""
    stores = await open_stores(settings, embedder=embedder)
    rng = random.Random(7)
    written = 0
    # The texts repeat across users (templates x subjects x note number), and a text's vector is
    # the same whoever holds it: 10,000 users of 100 embed 16,000 texts, not a million.
    known: dict[str, np.ndarray] = {}
    pending: list[VectorRecord] = []
    try:
        for u in range(users):
            user_id = f"lt-{u}"
            texts = [fact(rng, n) for n in range(memories)]
            new = [t for t in dict.fromkeys(texts) if t not in known]
            if new:
                known.update(zip(new, await stores.embedder.embed(new), strict=True))
            now = utcnow()
            async with stores.metadata.transaction() as tx:
                key = (await tx.keys.cipher(user_id)).hash_key
                rows = [
                    new_memory(
                        settings.weights,
                        user_id=user_id,
                        app_id="",
                        level=Level.GLOBAL,
                        session_id=None,
                        ownership=Ownership.USER,
                        mem_type=MemType.SEMANTIC,
                        content=text,
                        content_hash=content_hash(text, key),
                        embedding_model=stores.embedder.model_name,
                        now=now - timedelta(days=rng.randrange(60)),
                    )
                    for text in texts
                ]
                await tx.memories.insert_many(rows)
                await tx.changes.add_new_memories(rows, OpSource.SYSTEM, "load-test seed", now)
                await tx.counters.add(user_id, counter_deltas(rows, +1))
                await tx.versions.bump(user_id)
            pending.extend(vector_record(row, known[row.content or ""]) for row in rows)
            written += len(rows)
            if len(pending) >= _VECTOR_BATCH or u + 1 == users:
                await stores.vectors.upsert(pending)
                pending = []
            if progress and (u + 1) % 50 == 0:
                print(f"seeded {u + 1}/{users} users ({written} memories)", file=sys.stderr, flush=True)
    finally:
        await stores.close()
    return written


def main() -> None:
    """``python -m engram.loadtest.seed DATA_DIR USERS MEMORIES``: seed in a process of its own.

    milvus-lite keeps its file lock for the life of the process that opened it, so seeding must not
    happen in the process that later starts the app.
    """
    data_dir, users, memories = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    settings = Settings(storage={"data_dir": data_dir})
    print(asyncio.run(seed(settings, users, memories)))


if __name__ == "__main__":
    main()
